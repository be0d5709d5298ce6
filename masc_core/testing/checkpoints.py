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
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
             for i, t in enumerate(SPECIAL_TOKENS)}
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
        dims, vocab_size=vocab_size, max_position_embeddings=text_length, projection_size=dims["hidden_size"],
        pad_token_id=0, eos_token_id=1, bos_token_id=2,
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
        json.dump({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}, handle, indent=2)
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
            image_processor_type="Siglip2ImageProcessorFast", max_num_patches=256, patch_size=patch_size,
            processor_class="Siglip2Processor",
        )
    else:
        preprocessor.update(
            image_processor_type="SiglipImageProcessor", size={"height": image_size, "width": image_size},
            processor_class="SiglipProcessor",
        )
    with open(os.path.join(folder, "preprocessor_config.json"), "w", encoding="utf-8") as handle:
        json.dump(preprocessor, handle, indent=2)
    return folder


# ---------------------------------------------------------------------- CLIPSeg

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
    specials = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    config = dict(
        specials, add_prefix_space=False, clean_up_tokenization_spaces=False, do_lower_case=True, errors="replace",
        model_max_length=text_length, processor_class=processor_class, tokenizer_class="CLIPTokenizer",
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
        vocab_size=tokenizer.get_vocab_size(), hidden_size=512 if base else 32, intermediate_size=2048 if base else 64,
        num_hidden_layers=12 if base else 2, num_attention_heads=8 if base else 2, max_position_embeddings=text_length,
        bos_token_id=0, eos_token_id=2, pad_token_id=1,
    )
    vision_config = dict(
        hidden_size=768 if base else 32, intermediate_size=3072 if base else 64, num_hidden_layers=12 if base else 4,
        num_attention_heads=12 if base else 2, image_size=224, patch_size=16,
    )
    config = transformers.CLIPSegConfig(
        text_config=text_config, vision_config=vision_config, projection_dim=512 if base else 32,
        extract_layers=[3, 6, 9] if base else [0, 1, 2], reduce_dim=64 if base else 16,
        decoder_num_attention_heads=4 if base else 2, decoder_intermediate_size=2048 if base else 32, conditional_layer=0,
        use_complex_transposed_convolution=True,
    )
    torch.manual_seed(seed)
    model = transformers.CLIPSegForImageSegmentation(config).eval()
    _initialise_clipseg(model, image_size)
    model.save_pretrained(folder, safe_serialization=True)
    _clip_tokenizer_files(folder, tokenizer, text_length)
    _write_clipseg_preprocessor(folder, image_size)
    return folder

