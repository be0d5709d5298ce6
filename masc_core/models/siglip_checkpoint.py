"""SigLIP2 checkpoint folders: what MaSC needs in them, and their weights as a ``SiglipModel``.

Which architecture a folder holds comes from config.json's ``model_type``,
never from its name:

- ``siglip2``: SigLIP2 NaFlex (``Siglip2Model``, variable resolution);
- ``siglip``:  fixed-resolution (``SiglipModel``), which is how SigLIP2's
  fixed-size checkpoints (e.g. siglip2-base-patch16-224) are published.

MaSC needs the full image-text model with its attention-pooling head and
SigLIP2's Gemma tokenizer.json; SigLIP (v1) checkpoints are refused. Only
safetensors weights are read and remote code is never run.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import MascModelError
from .checkpoints import (
    PAPER_MODEL_ID,
    CheckpointFolder,
    first_line,
    frozen,
    read_config,
    read_folder,
    read_safetensors,
)
from .weight_shapes import Size, check_heads, check_input_side, whole_number

SUPPORTED_MODEL_TYPES = ("siglip2", "siglip")


@dataclass
class CheckpointInfo(CheckpointFolder):
    """What a SigLIP/SigLIP2 checkpoint folder holds, checked before any weight is read."""

    @property
    def naflex(self) -> bool:
        """True for SigLIP2 NaFlex (variable resolution) checkpoints."""
        return self.model_type == "siglip2"

    @property
    def text_length(self) -> int:
        """Tokens per prompt: the text tower's trained length (64 for SigLIP2)."""
        return int(self.text_config.get("max_position_embeddings") or 64)


def inspect(folder: str, source: str | None = None) -> CheckpointInfo:
    """Check that ``folder`` is a usable SigLIP/SigLIP2 checkpoint, without loading weights."""
    info = read_folder(
        folder,
        source,
        label="model folder",
        model_types=SUPPORTED_MODEL_TYPES,
        wrong_type=f", not SigLIP2: MaSC needs a SigLIP2 checkpoint such as {PAPER_MODEL_ID}",
        preprocessor_required=False,
        cls=CheckpointInfo,
    )
    source = info.source
    if not isinstance(info.config.get("vision_config"), dict) or not isinstance(info.config.get("text_config"), dict):
        raise MascModelError(
            f"model folder '{source}' has a {info.model_type} config without both vision_config and text_config: "
            "MaSC needs the full image-text model, not a vision-only or text-only export"
        )
    names = os.listdir(folder)
    if "tokenizer.json" not in names:
        hint = " (it has spiece.model: a SigLIP v1 tokenizer)" if "spiece.model" in names else ""
        raise MascModelError(
            f"model folder '{source}' has no tokenizer.json{hint}: MaSC needs SigLIP2's Gemma tokenizer.json"
        )
    tokenizer_config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(tokenizer_config_path):
        declared = str(read_config(tokenizer_config_path, "tokenizer config").get("tokenizer_class") or "")
        if declared.startswith("SiglipTokenizer"):
            raise MascModelError(
                f"model folder '{source}' is a SigLIP (v1) checkpoint: MaSC is defined on SigLIP2; use e.g. "
                f"{PAPER_MODEL_ID}"
            )
    if info.vision_config.get("vision_use_head") is False:
        raise MascModelError(
            f"model folder '{source}' has no attention-pooling head (vision_use_head=false): PF needs SigLIP2's pooler"
        )
    info.check_sizes(siglip_sizes(info))
    return info


def siglip_sizes(info: CheckpointInfo) -> list[Size]:
    """The sizes config.json asks, with the defaults ``SiglipModel`` fills, and the weights that hold each."""
    vision, text = info.vision_config, info.text_config
    label = info.named
    sizes = []
    for tower, cfg, norm in (("vision", vision, "post_layernorm"), ("text", text, "final_layer_norm")):
        width, prefix = cfg.get("hidden_size", 768), f"{tower}_model."
        check_heads(
            label,
            f"{tower}_config",
            whole_number(label, f"{tower}_config.hidden_size", width),
            cfg.get("num_attention_heads", 12),
        )
        sizes += [
            Size(f"{tower}_config.hidden_size", width, prefix + norm + ".weight"),
            Size(
                f"{tower}_config.num_hidden_layers",
                cfg.get("num_hidden_layers", 12),
                prefix + "encoder.layers.",
                axis=None,
            ),
            Size(
                f"{tower}_config.intermediate_size",
                cfg.get("intermediate_size", 3072),
                prefix + "encoder.layers.0.mlp.fc1.weight",
            ),
        ]
    patch = whole_number(label, "vision_config.patch_size", vision.get("patch_size", 16))
    channels = whole_number(label, "vision_config.num_channels", vision.get("num_channels", 3))
    embedding, positions = (
        "vision_model.embeddings.patch_embedding.weight",
        "vision_model.embeddings.position_embedding.weight",
    )
    if info.naflex:
        count = whole_number(label, "vision_config.num_patches", vision.get("num_patches", 256))
        if math.isqrt(count) ** 2 != count:
            raise MascModelError(
                f"{label}: config.json's vision_config.num_patches ({count}) is not a square grid: re-download the "
                "checkpoint"
            )
        sizes += [
            Size("vision_config.patch_size", patch, embedding, 1, expected=channels * patch * patch),
            Size("vision_config.num_patches", count, positions),
        ]
    else:
        side = check_input_side(label, "vision_config.image_size", vision.get("image_size", 224))
        sizes += [
            Size("vision_config.patch_size", patch, embedding, 2),
            Size("vision_config.image_size", side, positions, expected=(side // patch) ** 2),
        ]
    sizes += [
        Size("text_config.vocab_size", text.get("vocab_size", 32000), "text_model.embeddings.token_embedding.weight"),
        Size(
            "text_config.max_position_embeddings",
            text.get("max_position_embeddings", 64),
            "text_model.embeddings.position_embedding.weight",
        ),
        Size(
            "text_config.projection_size",
            text.get("projection_size") or text.get("hidden_size", 768),
            "text_model.head.weight",
        ),
    ]
    return sizes


def load_model(info: CheckpointInfo):
    """The SigLIP/SigLIP2 model of a checked checkpoint (``masc_core.models.siglip``), float32, CPU, frozen.

    Built without random initialisation (on the meta device) and given the
    checkpoint's tensors. A checkpoint that lacks weights is refused;
    tensors the model does not use (e.g. buffers older exports saved) are
    ignored.
    """
    import torch

    from .siglip import SiglipModel

    label = f"model folder '{info.source}'"
    try:
        with torch.device("meta"):
            model = SiglipModel(info.config, naflex=info.naflex)
    except (ValueError, TypeError) as exc:
        raise MascModelError(
            f"{label} has a config this SigLIP2 implementation cannot build: {first_line(exc)}"
        ) from None
    tensors = read_safetensors(info.folder, info.weight_files, label)
    expected = model.state_dict().keys()
    missing = sorted(k for k in expected if k not in tensors)
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise MascModelError(
            f"{label} lacks {len(missing)} weights ({shown}): the checkpoint is incomplete or not a full SigLIP2 "
            "image-text model"
        )
    try:
        model.load_state_dict({k: tensors[k] for k in expected}, assign=True)
    except RuntimeError as exc:  # shapes that do not match config.json
        raise MascModelError(f"{label}: its weights do not match its config.json ({first_line(exc)})") from None
    return frozen(model.float())


def check_input_size(info: CheckpointInfo, spec) -> None:
    """A fixed-size checkpoint's processor size is the one its position table was trained for (no interpolation)."""
    if info.naflex:
        return
    side = int(info.vision_config.get("image_size", 224))
    if tuple(spec.image_size) != (side, side):
        height, width = spec.image_size
        raise MascModelError(
            f"{info.named}: preprocessor_config.json asks {height}x{width} inputs, but the vision tower takes "
            f"{side}x{side} (config.json's vision_config.image_size): re-download the checkpoint or set its size to "
            f"{side}"
        )
