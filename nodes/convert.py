"""Conversions between ComfyUI's types and masc_core's, and node-side formatting."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..masc_core.errors import MascInputError
from ..masc_core.images import tensor_to_numpy, to_rgb_uint8_list

_LOADIMAGE_EMPTY_MASK = (64, 64)


def comfy_images(images: torch.Tensor, name: str) -> list[np.ndarray]:
    """ComfyUI IMAGE [B,H,W,C] float 0..1 (any device, float16 too) -> list of RGB uint8 arrays (alpha dropped)."""
    return to_rgb_uint8_list(images, name)


def comfy_masks(masks: torch.Tensor | None) -> torch.Tensor | None:
    """ComfyUI MASK ([B,H,W] or [H,W], any device, float16 too) as [B,H,W] float32 on the CPU."""
    if masks is None:
        return None
    masks = torch.from_numpy(np.asarray(tensor_to_numpy(masks), dtype=np.float32))
    return masks[None] if masks.ndim == 2 else masks


def check_mask_not_empty(mask: torch.Tensor, images: list[np.ndarray], name: str, why: str) -> None:
    """Refuse an all-empty mask with advice: it is nearly always a wiring mistake.

    LoadImage's MASK output is an all-zero 64x64 when the file has no alpha
    channel: the usual way this happens.
    """
    if float(mask.max()) > 0.0:
        return
    hint = "draw the subject's mask or load it with Load Image (as Mask), channel red"
    if tuple(mask.shape[-2:]) == _LOADIMAGE_EMPTY_MASK and images[0].shape[:2] != _LOADIMAGE_EMPTY_MASK:
        hint = (
            "it is the empty 64x64 mask Load Image gives for a picture without alpha: load the subject's mask "
            "with Load Image (as Mask), channel red, or make one with MaSC Auto Mask"
        )
    raise MascInputError(f"{name} is empty (all zero): {why}; {hint}")


def check_reference_mask(mask: torch.Tensor, images: list[np.ndarray]) -> None:
    """Refuse an all-empty reference mask with advice, since CP cannot be computed from it."""
    check_mask_not_empty(mask, images, "reference_mask", "CP averages over the subject's patches")


def to_comfy_image_batch(images: Sequence[np.ndarray]) -> torch.Tensor:
    """RGB uint8 arrays of one size -> ComfyUI IMAGE [B,H,W,3] float 0..1.

    Each picture is cast straight into the batch (no stacked uint8 copy, no
    float copy of it), then the batch is divided in place.
    """
    first = np.asarray(images[0])
    batch = torch.empty(len(images), *first.shape[:2], 3, dtype=torch.float32)
    rows = batch.numpy()
    for row, image in enumerate(images):
        rows[row] = image  # numpy casts uint8 to float32 (and takes read-only arrays, which torch warns about)
    return batch.div_(255.0)


def batch_value(values: list[float | None]) -> float:
    """The FLOAT output: the value for a batch of one, the mean of the defined values otherwise.

    NaN when nothing is defined (the report says why).
    """
    defined = [v for v in values if v is not None]
    if not defined:
        return float("nan")
    return float(defined[0]) if len(values) == 1 else float(sum(defined) / len(defined))


def image_output(overlays: Sequence[np.ndarray]) -> torch.Tensor:
    """Overlays as an IMAGE batch; a 64x64 black IMAGE when heatmaps are switched off (no overlays)."""
    return to_comfy_image_batch(overlays) if overlays else torch.zeros(1, 64, 64, 3)
