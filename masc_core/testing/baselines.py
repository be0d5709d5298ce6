"""Tiny random-weight CLIP and DINO checkpoints in Hugging Face layout, for the baseline tests.

Saved with ``save_pretrained`` (safetensors) plus an image processor config
and, for CLIP, a byte-level BPE tokenizer trained here, then loaded through
the real loading code (``masc_core.models.embedders``). No network.
"""

from __future__ import annotations

import os

CLIP_IMAGE_SIZE = 32
DINO_IMAGE_SIZE = 32
_CORPUS = [
    "a photo of a dog on the beach",
    "a dog in the snow",
    "a cat with a city in the background",
    "a teapot on top of a wooden floor",
    "a red cartoon in the jungle",
    "a backpack on a cobblestone street",
]


def _clip_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|startoftext|>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", 0), ("<|endoftext|>", 1)]
    )
    return tokenizer


def build_clip(folder: str, seed: int = 0) -> str:
    """A tiny CLIPModel (2 layers, 32 wide, 32 px images) with its tokenizer and image processor."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, PreTrainedTokenizerFast

    os.makedirs(folder, exist_ok=True)
    tokenizer = _clip_tokenizer()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=16,
    ).save_pretrained(folder)
    tower = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    config = CLIPConfig(
        text_config=dict(
            tower,
            vocab_size=tokenizer.get_vocab_size(),
            max_position_embeddings=16,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        ),
        vision_config=dict(tower, image_size=CLIP_IMAGE_SIZE, patch_size=8),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    CLIPModel(config).eval().save_pretrained(folder, safe_serialization=True)
    CLIPImageProcessor(
        size={"shortest_edge": CLIP_IMAGE_SIZE}, crop_size={"height": CLIP_IMAGE_SIZE, "width": CLIP_IMAGE_SIZE}
    ).save_pretrained(folder)
    return folder


def build_dino(folder: str, seed: int = 0) -> str:
    """A tiny ViTModel without pooler (the layout of facebook/dino-vits16) and its image processor."""
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(seed)
    config = ViTConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=DINO_IMAGE_SIZE,
        patch_size=8,
    )
    ViTModel(config, add_pooling_layer=False).eval().save_pretrained(folder, safe_serialization=True)
    ViTImageProcessor(size={"height": DINO_IMAGE_SIZE, "width": DINO_IMAGE_SIZE}).save_pretrained(folder)
    return folder
