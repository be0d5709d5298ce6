"""The frozen SigLIP2 model and what MaSC asks of it.

``MascEncoder`` owns one loaded checkpoint and answers three questions:

- ``encode_images``: the patch tokens of each image (one vision forward per
  distinct image, batched; NaFlex images of different aspect ratios are
  padded into one batch under the attention mask);
- ``encode_texts``: the pooled text embedding of each prompt;
- ``pool``: SigLIP2's trained attention pooler run over given tokens with
  some positions hidden (MaSC's background-only pool).

Every encoded image and prompt is cached by content (bounded by bytes), so
scoring the same reference against many outputs, or the same outputs under
another prompt, does not run the model again.

The model is ``masc_core.models.siglip`` (transformers' SigLIP2 architecture and
weight names, in plain torch), so scoring never imports transformers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..metric.equations import pad_tokens
from ..progress import ProgressCallback, stages
from . import checkpoints, siglip_checkpoint
from .cache import DEFAULT_CACHE_BYTES, LRUCache, content_key
from .devices import ModelPlacement, place
from .preprocess import PreparedImage, PreprocessSpec, prepare_image
from .tokenizers import SiglipTextTokenizer

DEFAULT_BATCH_SIZE = 8


@dataclass
class ImageTokens:
    """The vision tower's output for one image (SigLIP2 has no CLS token)."""

    tokens: torch.Tensor
    """[Hp * Wp, D] patch tokens, row-major over the grid, in the model's dtype."""

    grid: tuple[int, int]
    """Patch grid (rows, columns)."""

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Positions grouped into vision-forward batches of at most ``batch_size``.

    Longest sequences first, so NaFlex images of similar size share a batch
    (less padding), and batches as even as the limit allows (9 images with a
    limit of 8 run as 5 + 4, not 8 + 1: a lone image wastes a batched forward).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if not order:
        return []
    size = math.ceil(len(order) / math.ceil(len(order) / max(1, batch_size)))
    return [order[start : start + size] for start in range(0, len(order), size)]


class MascEncoder(ModelPlacement):
    """A loaded SigLIP2 checkpoint, ready to encode images and prompts for MaSC.

    Build one with :meth:`load`. The model can be moved with :meth:`to` (ComfyUI
    moves it between GPU and CPU); inputs always follow the model's current
    device, and cached features stay on the CPU.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        info: siglip_checkpoint.CheckpointInfo,
        spec: PreprocessSpec,
        tokenizer: SiglipTextTokenizer,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        self.model = model
        self.info = info
        self.spec = spec
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.image_cache = LRUCache(cache_bytes)
        self.text_cache = LRUCache(min(cache_bytes, 64 * 1024 * 1024))
        self.forward_counts = {"images": 0, "texts": 0}

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        model: str | os.PathLike = checkpoints.PAPER_MODEL_ID,
        *,
        device: str | torch.device | None = "auto",
        precision: str | torch.dtype | None = "fp32",
        max_num_patches: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        batch_size: int = DEFAULT_BATCH_SIZE,
        cache_dir: str | None = None,
        download_dir: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> "MascEncoder":
        """Load a SigLIP2 checkpoint from a folder (HF layout) or a Hub id.

        ``device``: auto (cuda > mps > cpu), cpu, cuda[:N] or mps.
        ``precision``: fp32 (default; the paper's package numbers), bf16, fp16
        or auto (fp32 on CPU, bf16/fp16 on GPU).
        ``max_num_patches``: NaFlex patch budget (default 1024, as the paper).
        ``cache_bytes``: memory for cached image features (0 disables).
        ``batch_size``: images per vision forward.
        ``cache_dir`` / ``download_dir``: where a Hub id is downloaded (the
        Hugging Face cache layout, or a plain folder such as ComfyUI's models/masc/<name>).
        ``progress``: ``progress(done, total)`` after each loading stage; may raise to cancel.
        """
        step = stages(progress, 4)
        folder, source = checkpoints.resolve(model, cache_dir=cache_dir, local_dir=download_dir)
        info = siglip_checkpoint.inspect(folder, source)  # the config held against the weights' shapes
        spec = PreprocessSpec.from_configs(
            naflex=info.naflex,
            vision_config=info.vision_config,
            preprocessor_config=info.preprocessor_config,
            max_num_patches=max_num_patches,
        )
        siglip_checkpoint.check_input_size(info, spec)
        step()
        tokenizer = SiglipTextTokenizer.from_folder(folder, model_type=info.model_type, max_length=info.text_length)
        step()
        built = siglip_checkpoint.load_model(info)
        step()
        network = place(built, device, precision)
        step()
        return cls(network, info, spec, tokenizer, cache_bytes=cache_bytes, batch_size=batch_size)

    # ------------------------------------------------------------------ placement

    @property
    def embed_dim(self) -> int:
        return int(self.model.vision_model.post_layernorm.normalized_shape[0])

    def describe(self) -> dict:
        """Name, kind, patch budget, device and precision, for logs and reports."""
        return {
            "model": self.info.source,
            "kind": "naflex" if self.spec.naflex else "fixed",
            "max_num_patches": self.spec.max_num_patches if self.spec.naflex else None,
            "image_size": list(self.spec.image_size) if self.spec.image_size else None,
            "patch_size": self.spec.patch_size,
            "device": str(self.device),
            "precision": str(self.dtype).replace("torch.", ""),
        }

    def clear_cache(self) -> None:
        self.image_cache.clear()
        self.text_cache.clear()

    def reset_forward_counts(self) -> None:
        """Start counting forwards from zero (``forward_counts``: images and texts run through the towers)."""
        self.forward_counts = {"images": 0, "texts": 0}

    # ------------------------------------------------------------------ images

    def image_key(self, image: np.ndarray) -> str:
        """Cache key of an RGB uint8 image under this encoder's preprocessing."""
        return content_key(image)

    def encode_images(
        self,
        images: Sequence[np.ndarray],
        *,
        progress: ProgressCallback | None = None,
        remember: Sequence[bool] | None = None,
    ) -> list[ImageTokens]:
        """Patch tokens for each RGB uint8 [H, W, 3] image, on the model's device.

        Images already in the cache (same pixels) and repeated images within
        the call are not encoded again. ``remember[i]`` False keeps image i's
        new tokens out of the cache (images seen once, such as a sampling
        loop's candidates, would only push out what is reused).
        """
        device = self.device
        keys = [self.image_key(img) for img in images]
        found: dict[str, ImageTokens] = {}
        todo: list[int] = []
        queued: set[str] = set()
        for index, key in enumerate(keys):
            if key in found or key in queued:
                continue
            cached = self.image_cache.get(key)
            if cached is not None:
                found[key] = ImageTokens(cached.tokens.to(device, non_blocking=True), cached.grid)
            else:
                todo.append(index)
                queued.add(key)
        prepared = [self.prepare(images[i]) for i in todo]
        done = 0
        for batch in plan_batches([p.pixels.shape[0] for p in prepared], self.batch_size):
            items = [prepared[j] for j in batch]
            hidden = self.forward_images(items)
            # One device-to-host copy per batch for the cache, not one per image.
            hidden_host = hidden.to("cpu") if hidden.device.type != "cpu" else hidden
            for row, (j, item) in enumerate(zip(batch, items)):
                count = item.grid[0] * item.grid[1]
                key = keys[todo[j]]
                found[key] = ImageTokens(hidden[row, :count], item.grid)
                if remember is not None and not remember[todo[j]]:
                    continue
                stored = hidden_host[row, :count].clone()
                self.image_cache.put(key, ImageTokens(stored, item.grid), stored.numel() * stored.element_size())
            done += len(batch)
            if progress is not None:
                progress(done, len(todo))
        return [found[key] for key in keys]

    def prepare(self, image: np.ndarray) -> PreparedImage:
        """An RGB uint8 image resized, normalized and cut into patches as this checkpoint expects."""
        return prepare_image(image, self.spec)

    def forward_images(self, prepared: Sequence[PreparedImage]) -> torch.Tensor:
        """One vision forward, no cache: last hidden states [B, L, D] (post layer norm) of prepared images."""
        device = self.device
        self.forward_counts["images"] += len(prepared)
        if not self.spec.naflex:
            return self.model.encode_images(torch.stack([p.pixels for p in prepared]).to(device))
        lengths = [p.pixels.shape[0] for p in prepared]
        longest = max(lengths)
        pixels = torch.zeros(len(prepared), longest, prepared[0].pixels.shape[1], dtype=torch.float32)
        valid = torch.zeros(len(prepared), longest, dtype=torch.bool)
        for row, item in enumerate(prepared):
            pixels[row, : lengths[row]] = item.pixels
            valid[row, : lengths[row]] = True
        return self.model.encode_images(pixels.to(device), [p.grid for p in prepared], valid)

    # ------------------------------------------------------------------ text

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Pooled text embeddings [len(texts), D] (float32, model device), one forward per new text."""
        device = self.device
        rows: dict[str, torch.Tensor] = {}
        missing = []
        for text in texts:
            if text in rows or text in missing:
                continue
            cached = self.text_cache.get(text)
            if cached is not None:
                rows[text] = cached.to(device)
            else:
                missing.append(text)
        if missing:
            embedded = self.forward_texts(missing)
            for text, row in zip(missing, embedded):
                rows[text] = row
                stored = row.to("cpu", copy=True)
                self.text_cache.put(text, stored, stored.numel() * stored.element_size())
        return torch.stack([rows[text] for text in texts])

    def forward_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """One text forward, no cache: pooled embeddings [len(texts), D], float32."""
        self.forward_counts["texts"] += len(texts)
        return self.model.encode_texts(self.tokenizer(list(texts)).to(self.device)).float()

    # ------------------------------------------------------------------ pooler

    @torch.inference_mode()
    def pool(
        self,
        tokens: torch.Tensor,
        hidden: torch.Tensor,
        *,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """SigLIP2's attention pool over ``tokens`` [B, L, D] with ``hidden`` [B, L] (True = excluded).

        The trained probe, attention, layer norm and MLP are used unchanged;
        only the visibility of the tokens changes. Returns the pooled
        embeddings [B, D] (float32) and, with ``need_weights``, the probe's
        attention over the L positions averaged over heads [B, L].
        """
        head = self.model.vision_model.head
        tokens = tokens.to(self.dtype)
        probe = head.probe.expand(tokens.shape[0], -1, -1)
        attended, weights = head.attention(probe, tokens, hidden.to(tokens.device), need_weights=need_weights)
        pooled = attended + head.mlp(head.layernorm(attended))
        return pooled[:, 0].float(), (weights[:, 0].float() if weights is not None else None)

    def pool_regions(
        self, tokens: Sequence[ImageTokens], hidden: Sequence[torch.Tensor | None]
    ) -> list[torch.Tensor | None]:
        """The attention pool of each token set with its ``hidden`` patches excluded ([D] float32, or None if nothing is
        visible).

        ``hidden[i]`` is a [L_i] bool tensor (True = excluded) or None for a
        global pool over every patch: the same-backbone baselines' regions.
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
            pooled, _ = self.pool(padded.index_select(0, index), exclude[visible])
            for row, i in enumerate(visible):
                result[i] = pooled[row]
        return result
