"""A random-weight CLIPSeg checkpoint in Hugging Face layout (transformers ``CLIPSegForImageSegmentation``), for tests
and benchmarks, and the small CLIP tokenizer it and SAM3's checkpoint share.

The layout and shape conventions are CIDAS/clipseg-rd64-refined's (see ``build_clipseg_checkpoint``); the weights are
random but scaled so the masks are neither empty nor full and depend on the image and the prompt.
"""

from __future__ import annotations

import json
import os

from .checkpoints import _CORPUS

CLIPSEG_IMAGE_SIZE = 352
"""Input size of the CIDAS CLIPSeg checkpoints' processor (the vision tower was trained at 224)."""


def train_clip_tokenizer(vocab_size: int = 700, extra_text: str = ""):
    """A small CLIP-style byte-level BPE tokenizer (``tokenizers.Tokenizer``).

    Vocabulary layout as CLIP's: the 256 byte characters, the same with the
    end-of-word mark "</w>", the learned merges, then <|startoftext|> and
    <|endoftext|> as the two highest ids (CLIPSeg configs with the legacy
    ``eos_token_id=2`` pool at the highest id of each row).
    """
    from tokenizers import models, pre_tokenizers, trainers

    from ..models.tokenizers import END_OF_WORD, build_clip_tokenizer

    corpus = (_CORPUS + "\n" + extra_text).strip()
    lines = [line for line in corpus.splitlines() if line.strip()]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer_tokenizer = build_clip_tokenizer({"<|startoftext|>": 0, "<|endoftext|>": 1}, [])
    trainer_tokenizer.model = models.BPE(continuing_subword_prefix="", end_of_word_suffix=END_OF_WORD)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=alphabet, end_of_word_suffix=END_OF_WORD, show_progress=False
    )
    trainer_tokenizer.train_from_iterator(lines, trainer=trainer)
    learned = json.loads(trainer_tokenizer.to_str())["model"]["merges"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned]

    base = sorted(alphabet, key=ord)
    vocab: dict[str, int] = {}
    for token in base + [c + END_OF_WORD for c in base] + ["".join(pair) for pair in merges]:
        vocab.setdefault(token, len(vocab))
    for token in ("<|startoftext|>", "<|endoftext|>"):
        vocab[token] = len(vocab)
    return build_clip_tokenizer(vocab, merges)


def _clip_tokenizer_files(folder: str, tokenizer, text_length: int, processor_class: str = "CLIPSegProcessor") -> None:
    """tokenizer.json, vocab.json, merges.txt, tokenizer_config.json and special_tokens_map.json, as CLIP ships them."""
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    model = json.loads(tokenizer.to_str())["model"]
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as handle:
        json.dump(model["vocab"], handle, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as handle:
        handle.write("#version: 0.2\n")
        for merge in model["merges"]:
            handle.write((merge if isinstance(merge, str) else " ".join(merge)) + "\n")
    specials = {
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
    }
    config = dict(
        specials,
        add_prefix_space=False,
        clean_up_tokenization_spaces=False,
        do_lower_case=True,
        errors="replace",
        model_max_length=text_length,
        processor_class=processor_class,
        tokenizer_class="CLIPTokenizer",
    )
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as handle:
        json.dump(specials, handle, indent=2)


def _calibrate_clipseg_head(model, image_size: int) -> None:
    """Scale and shift the last layer so the logits of random inputs have std 2.5 and median 0.

    Then a fair share of an image's pixels pass 0.5 and some do not, whatever
    the random draw.
    """
    import torch

    generator = torch.Generator().manual_seed(0)
    pixels = torch.randn(4, 3, image_size, image_size, generator=generator)
    input_ids = torch.randint(0, model.config.text_config.vocab_size - 2, (4, 6), generator=generator)
    input_ids[:, -1] = model.config.text_config.vocab_size - 1  # <|endoftext|>, the highest id
    logits = model(input_ids=input_ids, pixel_values=pixels).logits
    last = model.decoder.transposed_convolution[-1]
    scale = 2.5 / float(logits.std())
    last.weight.mul_(scale)
    last.bias.copy_(last.bias * scale - float(logits.median()) * scale)


def _initialise_clipseg(model, image_size: int) -> None:
    """Random weights at explicit scales, so the masks depend on the image and the prompt.

    transformers' default initialisation differs between versions and gives
    masks that ignore the prompt: distinct prompts get distinct embeddings
    here, and the decoder's first, prompt-modulated path (reduces.0)
    outweighs the later image-only ones. Biases are zeroed; the head is
    calibrated last.
    """
    import torch

    rules = [
        ("clip.vision_model.embeddings.", 0.5),
        ("clip.text_model.embeddings.", 0.3),
        ("clip.text_model.encoder.", 0.3),
        ("decoder.film_", 1.0),
        ("decoder.reduces.0.", 1.0),
        ("decoder.reduces.", 0.1),
        ("decoder.transposed_convolution.", 0.35),
    ]
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            std = next((value for prefix, value in rules if name.startswith(prefix)), None)
            if std is None or "layer_norm" in name:
                continue
            if name.endswith("bias"):
                parameter.zero_()
            else:
                parameter.normal_(0.0, std)
        for module in model.decoder.transposed_convolution.modules():
            if isinstance(module, torch.nn.ConvTranspose2d):
                # One value per kernel, so each patch upsamples to a flat
                # block: masks smooth at patch scale, as CLIPSeg's are,
                # rather than a random texture of 4-pixel period.
                weight = module.weight
                weight.copy_(torch.randn(weight.shape[:2])[:, :, None, None].expand_as(weight) * 0.35)
        _calibrate_clipseg_head(model, image_size)


def _write_clipseg_preprocessor(folder: str, image_size: int) -> None:
    """preprocessor_config.json as CIDAS ships it (ViTImageProcessor, ImageNet mean/std), at ``image_size``."""
    preprocessor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "image_processor_type": "ViTImageProcessor",
        "processor_class": "CLIPSegProcessor",
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": image_size, "width": image_size},
    }
    with open(os.path.join(folder, "preprocessor_config.json"), "w", encoding="utf-8") as handle:
        json.dump(preprocessor, handle, indent=2)


def build_clipseg_checkpoint(
    folder: str | os.PathLike,
    *,
    seed: int = 0,
    image_size: int = CLIPSEG_IMAGE_SIZE,
    tokenizer=None,
    size: str = "tiny",
) -> str:
    """Write a tiny random-weight CLIPSeg checkpoint to ``folder`` and return its path.

    The layout and the shape conventions are those of CIDAS/clipseg-rd64-refined
    (``CLIPSegForImageSegmentation``; vision tower trained at 224 px with
    16 px patches and run at ``image_size`` = 352 px with interpolated
    positions; the refined decoder's two transposed convolutions; the legacy
    ``eos_token_id=2`` of its text config; ImageNet mean/std), with tiny
    widths and depths. The last vision layer is not among ``extract_layers``,
    as in the real checkpoint, where layers 10-12 feed nothing.

    The weights are random but scaled so the masks are not trivial: the
    probabilities spread over 0..1 and depend on the image and the prompt.
    ``size`` "base" has CIDAS's own widths and depths (ViT-B/16, 12 + 12
    layers, decoder of 64 channels reading layers 3, 6, 9): for benchmarks.
    """
    import torch
    import transformers

    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    tokenizer = tokenizer or train_clip_tokenizer()
    text_length = 77
    base = size == "base"
    text_config = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=512 if base else 32,
        intermediate_size=2048 if base else 64,
        num_hidden_layers=12 if base else 2,
        num_attention_heads=8 if base else 2,
        max_position_embeddings=text_length,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
    )
    vision_config = dict(
        hidden_size=768 if base else 32,
        intermediate_size=3072 if base else 64,
        num_hidden_layers=12 if base else 4,
        num_attention_heads=12 if base else 2,
        image_size=224,
        patch_size=16,
    )
    config = transformers.CLIPSegConfig(
        text_config=text_config,
        vision_config=vision_config,
        projection_dim=512 if base else 32,
        extract_layers=[3, 6, 9] if base else [0, 1, 2],
        reduce_dim=64 if base else 16,
        decoder_num_attention_heads=4 if base else 2,
        decoder_intermediate_size=2048 if base else 32,
        conditional_layer=0,
        use_complex_transposed_convolution=True,
    )
    torch.manual_seed(seed)
    model = transformers.CLIPSegForImageSegmentation(config).eval()
    _initialise_clipseg(model, image_size)
    model.save_pretrained(folder, safe_serialization=True)
    _clip_tokenizer_files(folder, tokenizer, text_length)
    _write_clipseg_preprocessor(folder, image_size)
    return folder
