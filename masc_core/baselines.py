"""The metrics MaSC is compared with, computed in the same evaluation run.

Same backbone (the SigLIP2 checkpoint MaSC itself uses; the paper's
ablations, Sec. 4.1 and 4.3, Table 4):

- ``global_cp``: cosine of the globally pooled image embeddings (SigLIP2's
  attention pooler over all patches) of reference and output; mean over
  reference views. MaSC's CP with the masked max-cosine replaced by a
  global pool.
- ``global_pf``: cosine of the output's globally pooled embedding with the
  text embedding of the full prompt: no mask, no subject stripping.
- PF ablation cells (pool region x prompt): ``pf_full_stripped`` (global
  pool, stripped prompt), ``pf_bg_unstripped`` (background pool, full
  prompt), ``pf_fg_unstripped`` (foreground-only pool, full prompt: the
  paper's control that goes negative). MaSC's PF is background x stripped.

DreamBench protocol (Ruiz et al.; the ``dreambench-customization-eval``
recipe), with any Hugging Face checkpoint folder:

- ``clip_i``: cosine of the CLIP image embeddings (projected) of output and
  reference; mean over reference views.
- ``clip_t``: cosine of the output's CLIP image embedding with the CLIP text
  embedding of the prompt as given (not stripped).
- ``dino_i``: cosine of the DINO embeddings (the CLS token of the last
  layer, after its layer norm) of output and reference; mean over views.

CLIP and DINO images go through the checkpoint's own image processor
(``preprocessor_config.json``, loaded by transformers). Checkpoints are
folders in Hugging Face layout; only safetensors weights are read and
remote code never runs (the model class comes from ``config.json``'s
``model_type``, from a fixed list).

The cosine is ``masc_core.metric.global_cosine`` and the regions come from
``masc_core.masks``, so the baselines and MaSC share their conventions.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from .cache import content_key
from .checkpoint import first_line, load_pretrained, quiet_transformers
from .encoder import ImageTokens, MascEncoder
from .errors import MascModelError
from .masks import grid_weights, hidden_patches, mask_to_float
from .metric import global_cosine, pad_tokens

SAME_BACKBONE_GROUPS = {
    "global": ("global_cp", "global_pf"),
    "pf-ablations": ("pf_full_stripped", "pf_bg_unstripped", "pf_fg_unstripped"),
}
"""``--baselines`` names and the metrics each adds."""
CLIP_METRICS = ("clip_i", "clip_t")
DINO_METRICS = ("dino_i",)

CP_METRICS = ("cp", "global_cp", "clip_i", "dino_i")
"""Metrics compared with human concept-preservation ratings, MaSC first."""
PF_METRICS = ("pf", "global_pf", "pf_full_stripped", "pf_bg_unstripped", "pf_fg_unstripped", "clip_t")
"""Metrics compared with human prompt-following ratings, MaSC first."""
METRIC_ORDER = CP_METRICS + PF_METRICS
ASPECT_METRICS = {"cp": CP_METRICS, "pf": PF_METRICS}

# config.json model_type -> transformers class (never remote code).
DINO_MODEL_TYPES = {
    "vit": "ViTModel",
    "dinov2": "Dinov2Model",
    "dinov2_with_registers": "Dinov2WithRegistersModel",
    "dinov3_vit": "DINOv3ViTModel",
}


# ---------------------------------------------------------------- same backbone


def pooled_embeddings(encoder: MascEncoder, tokens: Sequence[ImageTokens], hidden: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """SigLIP2's attention pool of each token set with ``hidden`` patches excluded ([D] float32, or None if nothing is visible).

    ``hidden[i]`` is a [L_i] bool tensor (True = excluded) or None for a
    global pool over every patch.
    """
    padded, valid = pad_tokens([t.tokens for t in tokens])
    exclude = ~valid
    for i, mask in enumerate(hidden):
        if mask is not None:
            exclude[i, : mask.shape[0]] |= mask.to(exclude.device)
    visible = [i for i in range(len(tokens)) if not bool(exclude[i].all())]
    result: list[torch.Tensor | None] = [None] * len(tokens)
    if visible:
        index = torch.tensor(visible, device=padded.device)
        pooled, _ = encoder.pool(padded.index_select(0, index), exclude[visible])
        for row, i in enumerate(visible):
            result[i] = pooled[row]
    return result


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(global_cosine(a[None].float(), b[None].to(a.device).float())[0])


def mean_cosine_to_references(outputs: torch.Tensor, references: torch.Tensor) -> list[float]:
    """For each output embedding [N, D], the mean cosine with the reference embeddings [K, D] (the protocol's multi-view mean)."""
    n, k = outputs.shape[0], references.shape[0]
    sims = global_cosine(
        outputs[:, None, :].expand(n, k, -1).reshape(n * k, -1).float(),
        references[None, :, :].expand(n, k, -1).reshape(n * k, -1).to(outputs.device).float(),
    ).reshape(n, k)
    return [float(v) for v in sims.mean(dim=1).cpu().tolist()]


def same_backbone_scores(
    encoder: MascEncoder,
    names: Sequence[str],
    *,
    reference_pooled: torch.Tensor,
    outputs: Sequence[ImageTokens],
    masks: Sequence[np.ndarray | None],
    prompts: Sequence[str],
    stripped_prompts: Sequence[str],
) -> tuple[list[dict[str, float | None]], list[dict[str, str]]]:
    """The same-backbone baselines ``names`` for each output: (values, reasons for the undefined ones).

    ``reference_pooled`` [K, D]: the globally pooled reference views.
    ``masks``: the outputs' foreground masks in any form ``score_images``
    takes (uint8 0..255, float 0..1, bool), or None. The encoder's text
    embeddings come from its cache when already encoded.
    """
    wanted = set(names)
    count = len(outputs)
    values: list[dict[str, float | None]] = [{} for _ in range(count)]
    reasons: list[dict[str, str]] = [{} for _ in range(count)]
    full = pooled_embeddings(encoder, outputs, [None] * count)
    if "global_cp" in wanted:
        stacked = torch.stack([f for f in full])
        for i, value in enumerate(mean_cosine_to_references(stacked, reference_pooled)):
            values[i]["global_cp"] = value
    needs_text = wanted & {"global_pf", "pf_full_stripped", "pf_bg_unstripped", "pf_fg_unstripped"}
    if not needs_text:
        return values, reasons
    prompt_embeddings = encoder.encode_texts(list(prompts))
    stripped_embeddings = encoder.encode_texts(list(stripped_prompts))
    for i in range(count):
        if "global_pf" in wanted:
            values[i]["global_pf"] = _cosine(full[i], prompt_embeddings[i])
        if "pf_full_stripped" in wanted:
            values[i]["pf_full_stripped"] = _cosine(full[i], stripped_embeddings[i])
    regional = [name for name in ("pf_bg_unstripped", "pf_fg_unstripped") if name in wanted]
    if not regional:
        return values, reasons
    foreground = [
        hidden_patches(grid_weights(mask_to_float(m, f"mask[{i}]"), t.grid)) if m is not None else None
        for i, (m, t) in enumerate(zip(masks, outputs))
    ]
    with_mask = [i for i in range(count) if foreground[i] is not None]
    for name in regional:
        background_pool = name == "pf_bg_unstripped"
        pools = pooled_embeddings(
            encoder,
            [outputs[i] for i in with_mask],
            [foreground[i] if background_pool else ~foreground[i] for i in with_mask],
        ) if with_mask else []
        by_row = dict(zip(with_mask, pools))
        for i in range(count):
            if foreground[i] is None:
                values[i][name] = None
                reasons[i][name] = "no output mask given: a regional pool needs the output's foreground mask"
            elif by_row[i] is None:
                values[i][name] = None
                reasons[i][name] = (
                    "the output mask covers the whole image: no background patch to pool" if background_pool
                    else "the output mask covers no patch: no foreground patch to pool"
                )
            else:
                values[i][name] = _cosine(by_row[i], prompt_embeddings[i])
    return values, reasons


# ---------------------------------------------------------------- CLIP and DINO checkpoints


def inspect_folder(folder: str, option: str, model_types: Sequence[str]) -> dict:
    """Check a baseline checkpoint folder without loading weights; return its config."""
    import json

    if not folder or not os.path.isdir(folder):
        raise MascModelError(f"{option} '{folder}' is not a folder: pass a checkpoint folder in Hugging Face layout")
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise MascModelError(f"{option} '{folder}' has no config.json: pass the folder that holds config.json and model.safetensors")
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise MascModelError(f"{option} '{folder}': config.json could not be read ({exc})") from None
    model_type = str(config.get("model_type") or "unknown")
    if model_type not in model_types:
        raise MascModelError(
            f"{option} '{folder}' holds a '{model_type}' model: expected {' or '.join(model_types)}"
        )
    names = os.listdir(folder)
    if not any(n.endswith(".safetensors") for n in names):
        raise MascModelError(f"{option} '{folder}' has no .safetensors weights: only safetensors are loaded")
    if "preprocessor_config.json" not in names:
        raise MascModelError(f"{option} '{folder}' has no preprocessor_config.json: its image preprocessing is unknown")
    return config


def _load(model_class, folder: str, option: str, ignore_missing: Sequence[str] = (), **kwargs):
    return load_pretrained(
        model_class, folder, label=f"{option} '{folder}'", incomplete_hint="the checkpoint is incomplete",
        unused=lambda key: any(key.startswith(prefix) for prefix in ignore_missing), **kwargs,
    )


def _image_processor(folder: str, option: str):
    import transformers

    try:
        with quiet_transformers():
            return transformers.AutoImageProcessor.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        raise MascModelError(f"{option} '{folder}': its image processor could not be loaded ({first_line(exc)})") from None


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
                tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        except Exception as exc:
                raise MascModelError(f"--clip '{folder}': its tokenizer could not be loaded ({first_line(exc)})") from None
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
            tokens = self.tokenizer(chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
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
            raise MascModelError(f"--dino '{folder}': transformers {transformers.__version__} cannot load '{config['model_type']}' models")
        processor = _image_processor(folder, cls.option)
        # DINO checkpoints carry no pooler: the embedding is the CLS token.
        extra = {"add_pooling_layer": False} if config["model_type"] == "vit" else {}
        model = _load(model_class, folder, cls.option, ignore_missing=("pooler.",), **extra)
        return cls(model, processor, device, dtype, batch_size)

    def _embed_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixels).last_hidden_state[:, 0]
