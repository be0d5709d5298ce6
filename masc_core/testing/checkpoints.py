"""Random-weight SigLIP2 checkpoints in Hugging Face layout, for tests and benchmarks.

No real SigLIP2 weights are needed to exercise every code path: these
builders make a checkpoint folder with the files a real one has
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
preprocessor_config.json, special_tokens_map.json), with:

- a small Gemma-style BPE tokenizer trained here with ``tokenizers``
  (byte fallback, "▁" for spaces, <pad>/<eos>/<bos>/<unk>/<mask> = 0..4),
  configured as SigLIP2's (EOS appended, right padding, 64 tokens);
- randomly initialised weights of a tiny or of the real architecture
  ("base", "so400m"): random weights give meaningless scores but real
  shapes, real code paths and real compute cost.

Folder names matter to one consumer only: the paper's package decides NaFlex
by looking for "naflex" in the name, so NaFlex builds carry it.

``build_clipseg_checkpoint`` does the same for CLIPSeg (the built-in masks; SAM3's builder is in ``sam3_checkpoint``).
"""

from __future__ import annotations

import json
import os

# SigLIP2 sizes (vision and text towers share them).
ARCHITECTURES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2),
    "base": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12),
    "so400m": dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16),
}
REAL_VOCAB_SIZE = 256_000
SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]

_CORPUS = """
a photo of a dog on the beach. a sks dog in the jungle. a cat in the snow. a backpack on a cobblestone street.
a teapot on top of pink fabric. a duck toy on top of a wooden floor. a red cartoon with a city in the background.
a colorful sneaker with a mountain in the background. a bear plushie with a blue house in the background.
a dog on top of a purple rug in a forest. a cat with a wheat field in the background.
a backpack with a tree and autumn leaves in the background. a teapot with the Eiffel Tower in the background.
a duck toy floating on top of water. a sneaker floating in an ocean of milk.
a cat on top of green grass with sunflowers around it. a dog on top of a mirror.
a toy on top of the sidewalk in a crowded street. a plushie on top of a dirt road. a vase on top of a white rug.
a red dog. a shiny sneaker. a wet dog. a cube shaped teapot. a purple backpack. a dog wearing a santa hat.
a cat wearing a rainbow scarf. a dog in a chef outfit. a dog in a firefighter outfit. a dog in a police outfit.
a dog wearing pink glasses. a dog wearing a yellow shirt. a dog in a purple wizard outfit.
photo of a kitten chasing a butterfly in a sunny garden. two vintage motorcycles parked on a lonely desert road.
""".strip()


def train_tokenizer(vocab_size: int = 800, extra_text: str = ""):
    """A small Gemma-style BPE tokenizer (``tokenizers.Tokenizer``).

    Vocabulary layout as Gemma's: the five special tokens first, then the
    256 byte tokens <0x00>..<0xFF> used by byte fallback, then learned pieces.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    corpus = (_CORPUS + "\n" + extra_text).strip()
    lines = [line for line in corpus.splitlines() if line.strip()]
    lines += [line.lower() for line in lines] + [line.upper() for line in lines]
    trainer_tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tokenizer.normalizer = normalizers.Replace(" ", "▁")
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    trainer_tokenizer.train_from_iterator(lines, trainer=trainer)
    learned = json.loads(trainer_tokenizer.to_str())["model"]

    vocab: dict[str, int] = {}
    for token in SPECIAL_TOKENS + [f"<0x{i:02X}>" for i in range(256)]:
        vocab[token] = len(vocab)
    for token, _ in sorted(learned["vocab"].items(), key=lambda item: item[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]

    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    # As in SigLIP2's tokenizer.json: no BOS, EOS appended (what the text tower was trained with).
    tokenizer.post_processor = processors.TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", 1)])
    return tokenizer


def _tokenizer_config(text_length: int, *, lowercase_class: bool = False) -> dict:
    added = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "add_bos_token": False,
        "add_eos_token": True,
        "added_tokens_decoder": added,
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "clean_up_tokenization_spaces": False,
        "do_lower_case": True,
        "model_input_names": ["input_ids"],
        "model_max_length": text_length,
        "padding_side": "right",
        "processor_class": "Siglip2Processor",
        "spaces_between_special_tokens": False,
        "tokenizer_class": "Siglip2Tokenizer" if lowercase_class else "GemmaTokenizer",
    }


def build_checkpoint(
    folder: str | os.PathLike,
    *,
    naflex: bool = True,
    size: str = "tiny",
    image_size: int = 224,
    patch_size: int = 16,
    resample: int = 2,
    vocab_size: int | None = None,
    seed: int = 0,
    tokenizer=None,
) -> str:
    """Write a random-weight SigLIP2 checkpoint to ``folder`` and return its path.

    ``naflex``: a ``siglip2`` (NaFlex) checkpoint, else a fixed-size
    ``siglip`` one at ``image_size``. ``size``: "tiny", "base" or "so400m".
    ``vocab_size``: text vocabulary (default: the tokenizer's for "tiny",
    SigLIP2's 256,000 for the real sizes).
    """
    import torch
    import transformers

    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    dims = ARCHITECTURES[size]
    tokenizer = tokenizer or train_tokenizer()
    if vocab_size is None:
        vocab_size = tokenizer.get_vocab_size() if size == "tiny" else REAL_VOCAB_SIZE
    text_length = 64
    text_config = dict(
        dims,
        vocab_size=vocab_size,
        max_position_embeddings=text_length,
        projection_size=dims["hidden_size"],
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    vision_config = dict(dims, num_channels=3, patch_size=patch_size)
    torch.manual_seed(seed)
    if naflex:
        vision_config["num_patches"] = 256
        config = transformers.Siglip2Config(text_config=text_config, vision_config=vision_config)
        model = transformers.Siglip2Model(config)
    else:
        vision_config["image_size"] = image_size
        config = transformers.SiglipConfig(text_config=text_config, vision_config=vision_config)
        model = transformers.SiglipModel(config)
    with torch.no_grad():
        # Small random positional and patch structure so that patches differ
        # from each other clearly (transformers' init is near-uniform here).
        for name, parameter in model.named_parameters():
            if "position_embedding" in name or "probe" in name:
                parameter.normal_(0.0, 0.5)
    model.eval().save_pretrained(folder, safe_serialization=True)

    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump(_tokenizer_config(text_length), handle, indent=2)
    with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as handle:
        json.dump(
            {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}, handle, indent=2
        )
    _write_preprocessor(folder, naflex=naflex, image_size=image_size, patch_size=patch_size, resample=resample)
    return folder


def _write_preprocessor(folder: str, *, naflex: bool, image_size: int, patch_size: int, resample: int) -> None:
    """preprocessor_config.json as transformers saves SigLIP2's (NaFlex: a patch budget; fixed-size: a square size)."""
    preprocessor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": resample,
        "rescale_factor": 1 / 255,
    }
    if naflex:
        preprocessor.update(
            image_processor_type="Siglip2ImageProcessorFast",
            max_num_patches=256,
            patch_size=patch_size,
            processor_class="Siglip2Processor",
        )
    else:
        preprocessor.update(
            image_processor_type="SiglipImageProcessor",
            size={"height": image_size, "width": image_size},
            processor_class="SiglipProcessor",
        )
    with open(os.path.join(folder, "preprocessor_config.json"), "w", encoding="utf-8") as handle:
        json.dump(preprocessor, handle, indent=2)
