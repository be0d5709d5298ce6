"""A random-weight SAM3 checkpoint in Hugging Face layout (transformers ``Sam3Model``), for tests and benchmarks.

The layout is facebook/sam3's (config.json with model_type "sam3", model.safetensors, the CLIP tokenizer files,
preprocessor_config.json), built with transformers 5's own classes and a CLIP tokenizer trained here; the heads
are scaled so the masks are neither empty nor full and depend on the image and the prompt.
"""

from __future__ import annotations

import json
import os

from .clipseg_checkpoint import _clip_tokenizer_files, train_clip_tokenizer

SAM3_SIZES = {
    # width, layers, heads of the ViT; image size; FPN and DETR width; queries
    "tiny": dict(vit=(64, 2, 2), image_size=224, width=32, queries=16),
    # The real model's vision tower (ViT-L-sized, 32 layers, 1008 px) with smaller DETR heads: for the benchmark.
    "base": dict(vit=(1024, 32, 16), image_size=1008, width=256, queries=200),
}


def _calibrate_sam3(model, image_size: int, seed: int) -> None:
    """Scale the random heads so masks are not trivial: presence near 1, instance scores spread around 0.5, mask
    logits of std 2.5 shifted so one instance covers about a sixth of an image (their union more), all
    depending on the image and the prompt."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        presence = model.detr_decoder.presence_head.layer3
        presence.weight.mul_(0.01)
        presence.bias.fill_(6.0)  # every image "has" the concept: the queries decide where
        pixels = torch.randn(2, 3, image_size, image_size, generator=generator)
        ids = torch.randint(0, model.config.text_config.vocab_size - 2, (2, 32), generator=generator)
        attention = torch.zeros(2, 32, dtype=torch.long)
        attention[:, :6] = 1

        def run():
            return model(pixel_values=pixels, input_ids=ids, attention_mask=attention)

        output = run()
        scoring = model.dot_product_scoring
        factor = (2.0 / (float(output.pred_logits.std()) or 1.0)) ** 0.5
        scoring.text_proj.weight.mul_(factor)
        scoring.query_proj.weight.mul_(factor)
        decoder = model.mask_decoder
        last = decoder.mask_embedder.layers[-1]
        scale = 2.5 / (float(output.pred_masks.std()) or 1.0)
        last.weight.mul_(scale)
        last.bias.mul_(scale)
        # One constant channel: instance_projection's channel 0 is 1 everywhere, and the embedder's row 0 its
        # weight, so every mask logit moves by one number (a random network has no other way to shift them).
        decoder.instance_projection.weight[0].zero_()
        decoder.instance_projection.bias[0] = 1.0
        last.weight[0].zero_()
        last.bias[0] = 0.0
        logits = run().pred_masks
        last.bias[0] = -float(torch.quantile(logits.flatten()[::7], 0.85))


def build_sam3_checkpoint(folder: str | os.PathLike, *, seed: int = 0, size: str = "tiny", tokenizer=None) -> str:
    """Write a random-weight SAM3 checkpoint (transformers ``Sam3Model``, Hugging Face layout) to ``folder``.

    The layout is facebook/sam3's: config.json (model_type "sam3"), model.safetensors, the CLIP tokenizer files
    (32 tokens) and preprocessor_config.json (Sam3ImageProcessor: square resize, mean = std = 0.5). ``size``
    "tiny" is a 224 px, two-layer model for tests; "base" has the real vision tower (1008 px, 32 layers) for
    the mask benchmark. Needs transformers >= 5 (no 4.x has SAM3).
    """
    import torch
    import transformers

    if SAM3_SIZES.get(size) is None:
        raise ValueError(f"size {size!r} is not one of {', '.join(SAM3_SIZES)}")
    dims = SAM3_SIZES[size]
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    tokenizer = tokenizer or train_clip_tokenizer()
    hidden, layers, heads = dims["vit"]
    image_size, width = dims["image_size"], dims["width"]
    grid = image_size // 14
    small = dict(hidden_size=width, num_attention_heads=2 if size == "tiny" else 8, intermediate_size=2 * width)
    config = transformers.Sam3Config(
        vision_config=dict(
            backbone_config=dict(
                model_type="sam3_vit_model",
                hidden_size=hidden,
                intermediate_size=2 * hidden,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                image_size=image_size,
                patch_size=14,
                window_size=8 if size == "tiny" else 24,
                global_attn_indexes=[layers - 1],
                pretrain_image_size=224 if size == "tiny" else 336,
            ),
            fpn_hidden_size=width,
            backbone_feature_sizes=[[4 * grid] * 2, [2 * grid] * 2, [grid] * 2],
        ),
        text_config=dict(
            vocab_size=tokenizer.get_vocab_size(),
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
            projection_dim=width,
            bos_token_id=tokenizer.get_vocab_size() - 2,
            eos_token_id=tokenizer.get_vocab_size() - 1,
            pad_token_id=tokenizer.get_vocab_size() - 1,
        ),
        geometry_encoder_config=dict(small, num_layers=1),
        detr_encoder_config=dict(small, num_layers=1),
        detr_decoder_config=dict(small, num_layers=1, num_queries=dims["queries"]),
        mask_decoder_config=dict(hidden_size=width, num_attention_heads=small["num_attention_heads"]),
    )
    torch.manual_seed(seed)
    model = transformers.Sam3Model(config).eval()
    _calibrate_sam3(model, image_size, seed)
    model.save_pretrained(folder, safe_serialization=True)
    _clip_tokenizer_files(folder, tokenizer, 32, processor_class="Sam3Processor")
    preprocessor = {
        "image_processor_type": "Sam3ImageProcessor",
        "processor_class": "Sam3Processor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "resample": 2,
        "rescale_factor": 1 / 255,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "size": {"height": image_size, "width": image_size},
        "mask_size": {"height": 4 * grid, "width": 4 * grid},
    }
    with open(os.path.join(folder, "preprocessor_config.json"), "w", encoding="utf-8") as handle:
        json.dump(preprocessor, handle, indent=2)
    return folder
