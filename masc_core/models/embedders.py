"""CLIP and DINO image (and CLIP text) embedders: the DreamBench protocol's models.

Any Hugging Face checkpoint folder of a CLIP model (CLIP-I, CLIP-T) or a
DINO model (ViT, DINOv2, DINOv3: DINO-I) loads here. Images go through the
checkpoint's own image processor (``preprocessor_config.json``, loaded by
transformers); only safetensors weights are read and remote code never runs
(the model class comes from ``config.json``'s ``model_type``, from a fixed
list). Embeddings come back as float32 CPU tensors; repeated images and
texts are embedded once.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..errors import MascModelError
from .cache import content_key
from .checkpoints import first_line, load_pretrained, quiet_transformers, read_folder

# config.json model_type -> transformers class (never remote code).
DINO_MODEL_TYPES = {
    "vit": "ViTModel",
    "dinov2": "Dinov2Model",
    "dinov2_with_registers": "Dinov2WithRegistersModel",
    "dinov3_vit": "DINOv3ViTModel",
}


def inspect_folder(folder: str, option: str, model_types: Sequence[str]) -> dict:
    """Check a baseline checkpoint folder without loading weights; return its config."""
    return read_folder(
        folder,
        None,
        label=option,
        model_types=tuple(model_types),
        wrong_type=f": expected {' or '.join(model_types)}",
        preprocessor_required=True,
    ).config


def _load(model_class, folder: str, option: str, ignore_missing: Sequence[str] = (), **kwargs):
    return load_pretrained(
        model_class,
        folder,
        label=f"{option} '{folder}'",
        incomplete_hint="the checkpoint is incomplete",
        unused=lambda key: any(key.startswith(prefix) for prefix in ignore_missing),
        **kwargs,
    )


def _image_processor(folder: str, option: str):
    import transformers

    try:
        with quiet_transformers():
            return transformers.AutoImageProcessor.from_pretrained(
                folder, local_files_only=True, trust_remote_code=False
            )
    except Exception as exc:
        raise MascModelError(
            f"{option} '{folder}': its image processor could not be loaded ({first_line(exc)})"
        ) from None


class _ImageEmbedder:
    """Shared image side of the CLIP and DINO baselines: processor, batching, de-duplication."""

    option = ""

    def __init__(self, model, processor, device: torch.device, dtype: torch.dtype, batch_size: int):
        self.model = model.to(device=device, dtype=dtype)
        self.processor = processor
        self.device = device
        self.dtype = dtype
        self.batch_size = max(1, int(batch_size))
        self.forwards = 0

    def _embed_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @torch.inference_mode()
    def images(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        """Embeddings [N, D] (float32, CPU) of RGB uint8 images; repeated images are embedded once.

        Distinct images are embedded in order of first appearance, in
        batches of ``batch_size``, so the result depends on the list only.
        """
        from PIL import Image

        keys = [content_key(img) for img in images]
        order = list(dict.fromkeys(keys))
        first = {key: keys.index(key) for key in order}
        rows: dict[str, torch.Tensor] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            batch = self.processor(images=[Image.fromarray(images[first[k]]) for k in chunk], return_tensors="pt")
            embedded = self._embed_pixels(batch["pixel_values"].to(self.device, self.dtype)).float().cpu()
            self.forwards += len(chunk)
            rows.update(zip(chunk, embedded))
        return torch.stack([rows[k] for k in keys])


class ClipEmbedder(_ImageEmbedder):
    """A CLIP checkpoint: projected image and text embeddings (CLIP-I, CLIP-T)."""

    option = "--clip"

    def __init__(self, model, processor, tokenizer, device, dtype, batch_size):
        super().__init__(model, processor, device, dtype, batch_size)
        self.tokenizer = tokenizer
        self.max_length = int(getattr(model.config.text_config, "max_position_embeddings", 77))
        self.text_forwards = 0

    @classmethod
    def load(cls, folder: str, *, device: torch.device, dtype: torch.dtype, batch_size: int = 8) -> "ClipEmbedder":
        import transformers

        inspect_folder(folder, cls.option, ("clip",))
        processor = _image_processor(folder, cls.option)
        try:
            with quiet_transformers():
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    folder, local_files_only=True, trust_remote_code=False
                )
        except Exception as exc:
            raise MascModelError(
                f"{cls.option} '{folder}': its tokenizer could not be loaded ({first_line(exc)})"
            ) from None
        model = _load(transformers.CLIPModel, folder, cls.option)
        return cls(model, processor, tokenizer, device, dtype, batch_size)

    def _embed_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        # vision_model + visual_projection, rather than get_image_features,
        # whose return type changed in transformers 5.
        return self.model.visual_projection(self.model.vision_model(pixel_values=pixels).pooler_output)

    @torch.inference_mode()
    def texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Projected text embeddings [N, D] (float32, CPU); distinct texts in one batch per ``batch_size``."""
        order = list(dict.fromkeys(texts))
        rows: dict[str, torch.Tensor] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            tokens = self.tokenizer(
                chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            pooled = self.model.text_model(
                input_ids=tokens["input_ids"].to(self.device), attention_mask=tokens["attention_mask"].to(self.device)
            ).pooler_output
            rows.update(zip(chunk, self.model.text_projection(pooled).float().cpu()))
            self.text_forwards += len(chunk)
        return torch.stack([rows[t] for t in texts])


class DinoEmbedder(_ImageEmbedder):
    """A DINO (ViT, DINOv2, DINOv3) checkpoint: the last layer's CLS token (DINO-I)."""

    option = "--dino"

    @classmethod
    def load(cls, folder: str, *, device: torch.device, dtype: torch.dtype, batch_size: int = 8) -> "DinoEmbedder":
        import transformers

        config = inspect_folder(folder, cls.option, tuple(DINO_MODEL_TYPES))
        model_class = getattr(transformers, DINO_MODEL_TYPES[config["model_type"]], None)
        if model_class is None:
            raise MascModelError(
                f"--dino '{folder}': transformers {transformers.__version__} cannot load '{config['model_type']}' "
                "models"
            )
        processor = _image_processor(folder, cls.option)
        # DINO checkpoints carry no pooler: the embedding is the CLS token.
        extra = {"add_pooling_layer": False} if config["model_type"] == "vit" else {}
        model = _load(model_class, folder, cls.option, ignore_missing=("pooler.",), **extra)
        return cls(model, processor, device, dtype, batch_size)

    def _embed_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixels).last_hidden_state[:, 0]
