"""Foreground masks: validation, the patch grid, and the paper's thresholds.

A mask marks the subject (foreground). It may have any size (it is resized,
never refused for its size) and be bool, uint8 0..255, or float 0..1.
Following the paper and its package, a mask whose largest value exceeds 1
is read on the 0..255 scale (so a uint8 mask holding only 0 and 1 is read as
binary, not as almost-black).

Each mask is brought to the image's patch grid by bilinear interpolation
(align_corners=False, no antialiasing) and then thresholded at 0.5:

- CP keeps the reference patches whose weight is > 0.5;
- PF hides the output patches whose weight is >= 0.5.

The two comparisons differ on purpose: they are the paper's (and its
package's) conventions, and a patch weighing exactly 0.5 counts as neither
concept for CP nor background for PF.

Predicted masks (CLIPSeg's probabilities) are thresholded per pixel and
may be grown (dilated) so PF hides the subject's soft edges.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import MascInputError
from ..defaults import DEFAULT_MASK_THRESHOLD, FOREGROUND_THRESHOLD
from ..io.images import tensor_to_numpy


def mask_to_float(mask: Any, name: str = "mask") -> np.ndarray:
    """A mask as a float32 [H, W] array in 0..1."""
    if hasattr(mask, "convert") and hasattr(mask, "size"):  # a PIL image
        mask = mask.convert("L")
    array = np.asarray(tensor_to_numpy(mask))
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim != 2:
        raise MascInputError(
            f"{name} has shape {tuple(array.shape)}: a mask is one channel [H,W] (or [1,H,W]); convert it to grayscale"
        )
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise MascInputError(f"{name} is empty (shape {tuple(array.shape)}): pass a mask with pixels")
    if not (array.dtype == np.bool_ or np.issubdtype(array.dtype, np.number)):
        raise MascInputError(f"{name} has dtype {array.dtype}: pass bool, uint8 or float values")
    values = array.astype(np.float32)
    if not np.all(np.isfinite(values)):
        raise MascInputError(f"{name} contains NaN or infinite values: check what produced it")
    low = float(values.min())
    if low < 0.0:
        raise MascInputError(f"{name} has negative values (min {low:.3g}): masks are 0..1 or 0..255")
    if float(values.max()) > 1.0 + 1e-6:
        values = values / 255.0
        if float(values.max()) > 1.0 + 1e-6:
            raise MascInputError(f"{name} has values above 255: masks are 0..1 or 0..255")
    return values


def masks_for_batch(masks: Any, count: int, name: str) -> list[np.ndarray]:
    """Expand a mask, a list of masks or a [B,H,W] stack to ``count`` float masks.

    A single mask (or a batch of one) broadcasts over the ``count`` images, as
    ComfyUI does with masks; any other count that differs is an error.
    """
    if isinstance(masks, (list, tuple)):
        items = [mask_to_float(m, f"{name}[{i}]") for i, m in enumerate(masks)]
    elif (hasattr(masks, "detach") or isinstance(masks, np.ndarray)) and len(masks.shape) in (3, 4):
        shape = tuple(masks.shape)
        if len(shape) == 3 and shape[2] in (3, 4):
            raise MascInputError(
                f"{name} has shape {shape}, which looks like a color image: masks are one channel, "
                "[H,W] or a [B,H,W] batch; convert it to grayscale"
            )
        if len(shape) == 3 and shape[2] == 1:
            items = [mask_to_float(masks, name)]
        else:
            items = [mask_to_float(masks[i], f"{name}[{i}]") for i in range(shape[0])]
    else:
        items = [mask_to_float(masks, name)]
    if not items:
        raise MascInputError(f"{name} is empty: give one mask per image, or a single mask for all")
    if len(items) == 1 and count > 1:
        return items * count
    if len(items) != count:
        raise MascInputError(
            f"{name} has {len(items)} masks for {count} images: give one mask per image, or a single mask for all"
        )
    return items


def grid_weights(mask: np.ndarray, grid: tuple[int, int]) -> torch.Tensor:
    """Per-patch foreground weight, [Hp * Wp] float32 on CPU, row-major.

    Bilinear resize of the whole mask straight to the grid, values clamped to
    0..1, exactly as the paper's package does.
    """
    tensor = torch.from_numpy(np.ascontiguousarray(mask, dtype=np.float32))[None, None]
    resized = F.interpolate(tensor, size=grid, mode="bilinear", align_corners=False)
    return resized[0, 0].clamp(0.0, 1.0).flatten()


def concept_patches(weights: torch.Tensor) -> torch.Tensor:
    """Reference patches CP averages over (weight > 0.5)."""
    return weights > FOREGROUND_THRESHOLD


def hidden_patches(weights: torch.Tensor) -> torch.Tensor:
    """Output patches PF hides from the pooler (weight >= 0.5)."""
    return weights >= FOREGROUND_THRESHOLD


def foreground_fraction(mask: np.ndarray) -> float:
    """Share of the image's pixels that are foreground (mask >= 0.5)."""
    return float(np.count_nonzero(mask >= FOREGROUND_THRESHOLD)) / float(mask.size)


# ---------------------------------------------------------------- predicted masks


def check_threshold(threshold: Any, name: str = "threshold") -> float:
    """A probability threshold in 0..1, or a one-line MascInputError naming ``name``."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(float(threshold)):
        raise MascInputError(
            f"{name} {threshold!r} is not a number: pass a probability in 0..1 such as {DEFAULT_MASK_THRESHOLD}"
        )
    if not 0.0 <= float(threshold) <= 1.0:
        raise MascInputError(
            f"{name} {threshold!r} is outside 0..1: pass a probability such as {DEFAULT_MASK_THRESHOLD} "
            "(higher keeps fewer pixels)"
        )
    return float(threshold)


def check_dilation(dilation: Any, name: str = "dilation") -> int:
    """A dilation in whole pixels >= 0, or a one-line MascInputError naming ``name``."""
    if isinstance(dilation, bool) or not isinstance(dilation, numbers.Real) or not float(dilation).is_integer():
        raise MascInputError(
            f"{name} {dilation!r} is not a whole number of pixels: pass 0 (none) or a positive integer"
        )
    if dilation < 0:
        raise MascInputError(f"{name} {dilation!r} is negative: pass 0 (none) or a positive number of pixels")
    return int(dilation)


def threshold_mask(probabilities: torch.Tensor, threshold: float) -> torch.Tensor:
    """0/1 float mask: 1 where the probability is >= ``threshold`` (0 keeps every pixel)."""
    return (probabilities >= threshold).to(torch.float32)


def dilate_mask(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """Grow a 0/1 [H, W] mask by ``pixels`` in every direction (a square of side 2 * pixels + 1).

    A max-pool, done as two 1-D passes (rows, then columns) so the cost grows
    with ``pixels`` rather than its square.
    """
    if pixels <= 0:
        return mask
    radius = min(int(pixels), max(mask.shape))  # any larger radius gives the same mask
    size = 2 * radius + 1
    grown = F.max_pool2d(mask[None, None], kernel_size=(1, size), stride=1, padding=(0, radius))
    grown = F.max_pool2d(grown, kernel_size=(size, 1), stride=1, padding=(radius, 0))
    return grown[0, 0]
