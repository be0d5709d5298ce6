"""Conversions between ComfyUI's types and masc_core's, and node-side formatting."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..masc_core.errors import MascInputError
from ..masc_core.io.images import to_rgb_uint8_list

_LOADIMAGE_EMPTY_MASK = (64, 64)


def comfy_masks(masks: torch.Tensor | None) -> torch.Tensor | None:
    """ComfyUI MASK ([B,H,W] or [H,W], any device, float16 too) as [B,H,W] float32 on the CPU."""
    if masks is None:
        return None
    masks = torch.as_tensor(masks).detach().to(device="cpu", dtype=torch.float32)
    return masks[None] if masks.ndim == 2 else masks


LOAD_IMAGE_EMPTY_MASK_HINT = (
    "it is the empty 64x64 mask Load Image gives for a picture without alpha: load the subject's mask "
    "with Load Image (as Mask), channel red, or make one with MaSC Auto Mask"
)


def image_size(images) -> tuple[int, int]:
    """(height, width) of an IMAGE batch [B,H,W,C] or of the first of a list of [H,W,C] arrays."""
    return tuple(images.shape[1:3]) if isinstance(images, torch.Tensor) else tuple(images[0].shape[:2])


def is_load_image_empty_mask(mask: torch.Tensor, images) -> bool:
    """All zero, 64x64, for images (an IMAGE batch, or arrays) of another size: Load Image's MASK for a file without
    alpha."""
    return (
        tuple(mask.shape[-2:]) == _LOADIMAGE_EMPTY_MASK
        and image_size(images) != _LOADIMAGE_EMPTY_MASK
        and float(mask.max()) <= 0.0
    )


def check_mask_not_empty(mask: torch.Tensor, images, name: str, why: str) -> None:
    """Refuse an all-empty mask with advice: it is nearly always a wiring mistake.

    LoadImage's MASK output is an all-zero 64x64 when the file has no alpha
    channel: the usual way this happens.
    """
    if float(mask.max()) > 0.0:
        return
    hint = "draw the subject's mask or load it with Load Image (as Mask), channel red"
    if is_load_image_empty_mask(mask, images):
        hint = LOAD_IMAGE_EMPTY_MASK_HINT
    raise MascInputError(f"{name} is empty (all zero): {why}; {hint}")


def check_candidate_mask(mask: torch.Tensor | None, images: list[np.ndarray], name: str = "mask") -> None:
    """Refuse Load Image's empty 64x64 mask given for generated images.

    An all-zero mask of the images' own size is allowed: a segmenter gives
    one when the subject was not rendered, and the mask filter handles it.
    """
    if mask is not None and is_load_image_empty_mask(mask, images):
        raise MascInputError(
            f"{name} is empty (all zero): PF pools the background around the subject; {LOAD_IMAGE_EMPTY_MASK_HINT}"
        )


def check_single_latent(latent: dict, name: str = "latent_image") -> None:
    """One latent to start every candidate from: a batch of one, not nested."""
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if not isinstance(samples, torch.Tensor):
        raise MascInputError(f"{name} is not a LATENT: connect Empty Latent Image (or another LATENT output)")
    if getattr(samples, "is_nested", False):
        raise MascInputError(f"{name} is a nested (audio/video) latent: MaSC Sample Until takes one image latent")
    if samples.shape[0] != 1:
        raise MascInputError(
            f"{name} has a batch of {samples.shape[0]}: MaSC Sample Until starts every candidate from one latent "
            "(its batch_size sets candidates per round); set Empty Latent Image's batch_size to 1, or pick one with "
            "Latent From Batch"
        )


def reference_views(reference_image: torch.Tensor, reference_mask: torch.Tensor) -> tuple[list, torch.Tensor]:
    """The reference views as RGB arrays and their masks, an all-empty mask refused with advice (CP averages over
    the subject's patches): what every node that computes CP reads from reference_image and reference_mask."""
    masks = comfy_masks(reference_mask)
    check_mask_not_empty(masks, reference_image, "reference_mask", "CP averages over the subject's patches")
    return to_rgb_uint8_list(reference_image, "reference_image"), masks


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
