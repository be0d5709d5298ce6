"""The numpy heatmap renderer the package shipped before rendering moved to torch: the test's reference.

Kept verbatim (only the HeatmapImages container is a tuple here), so the
torch renderer can be held to within one grey level per channel of it.
Not part of the package: nothing but the tests imports it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from masc_core.metric.report import caption, format_score

# Viridis, sampled at 9 points (perceptually uniform, readable in grayscale).
_VIRIDIS = np.array(
    [
        [68, 1, 84],
        [71, 44, 122],
        [59, 81, 139],
        [44, 113, 142],
        [33, 144, 141],
        [39, 173, 129],
        [92, 200, 99],
        [170, 220, 50],
        [253, 231, 37],
    ],
    dtype=np.float32,
)
COSINE_RANGE = (0.0, 1.0)
MASK_TINT = np.array([255, 64, 64], dtype=np.float32)
"""Red: the colour a predicted mask is painted with in previews."""


def upsample(grid: np.ndarray, size: tuple[int, int], *, mode: str = "bilinear") -> np.ndarray:
    """A [rows, cols] grid resized to (height, width); non-finite cells become 0 first."""
    values = np.nan_to_num(np.asarray(grid, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    tensor = torch.from_numpy(values)[None, None]
    if mode == "nearest":
        out = F.interpolate(tensor, size=size, mode="nearest")
    else:
        out = F.interpolate(tensor, size=size, mode="bilinear", align_corners=False)
    return out[0, 0].numpy()


def colorize(values: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """Map values to viridis RGB uint8 (values clipped to [vmin, vmax])."""
    span = max(vmax - vmin, 1e-12)
    t = np.clip((np.asarray(values, dtype=np.float32) - vmin) / span, 0.0, 1.0) * (len(_VIRIDIS) - 1)
    low = np.floor(t).astype(np.int64)
    high = np.minimum(low + 1, len(_VIRIDIS) - 1)
    frac = (t - low)[..., None]
    rgb = _VIRIDIS[low] * (1.0 - frac) + _VIRIDIS[high] * frac
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def overlay(
    image: np.ndarray,
    grid: np.ndarray,
    *,
    vmin: float,
    vmax: float,
    muted: np.ndarray | None = None,
    alpha: float = 0.6,
) -> np.ndarray:
    """Paint ``grid`` (patch values) over an RGB uint8 image; ``muted`` patches are greyed instead."""
    height, width = image.shape[:2]
    heat = colorize(upsample(grid, (height, width)), vmin, vmax).astype(np.float32)
    base = image.astype(np.float32)
    blended = base * (1.0 - alpha) + heat * alpha
    if muted is not None:
        weight = upsample(np.asarray(muted, dtype=np.float32), (height, width), mode="nearest")[..., None]
        gray = base.mean(axis=2, keepdims=True) * 0.5 + 64.0
        blended = blended * (1.0 - weight) + gray * weight
    return np.clip(np.rint(blended), 0, 255).astype(np.uint8)


def reference_overlay(reference: np.ndarray, match: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Which parts of the concept survived: best-match cosine per reference patch, on the reference."""
    return overlay(reference, match, vmin=COSINE_RANGE[0], vmax=COSINE_RANGE[1], muted=~np.asarray(keep, bool))


def presence_overlay(output: np.ndarray, presence: np.ndarray) -> np.ndarray:
    """Where the concept appears: best cosine against the reference foreground, on the output."""
    return overlay(output, presence, vmin=COSINE_RANGE[0], vmax=COSINE_RANGE[1])


def attention_overlay(output: np.ndarray, attention: np.ndarray | None, hidden: np.ndarray | None) -> np.ndarray:
    """What drives PF: the pooler's attention over the background (relative to its maximum)."""
    if attention is None:
        muted = np.ones((1, 1), bool) if hidden is None else np.asarray(hidden, bool)
        return overlay(output, np.zeros_like(muted, dtype=np.float32), vmin=0.0, vmax=1.0, muted=muted)
    peak = float(np.max(attention)) if np.size(attention) else 0.0
    return overlay(output, attention, vmin=0.0, vmax=max(peak, 1e-12), muted=hidden)


def with_caption(image: np.ndarray, text: str) -> np.ndarray:
    """The image with ``text`` on a dark band along its top (for previews that show scores)."""
    from PIL import Image, ImageDraw, ImageFont

    height, width = image.shape[:2]
    size = max(10, min(48, width // 22))
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        font = ImageFont.load_default()
    canvas = Image.fromarray(image)
    draw = ImageDraw.Draw(canvas, "RGBA")
    band = int(size * 1.5)
    draw.rectangle([0, 0, width, band], fill=(0, 0, 0, 170))
    draw.text((max(2, size // 3), max(1, size // 5)), text, fill=(255, 255, 255, 255), font=font)
    return np.asarray(canvas)


def mask_overlay(image: np.ndarray, mask: np.ndarray, label: str | None = None) -> np.ndarray:
    """The image with the (0..1) mask tinted red, captioned with ``label`` when given."""
    weight = np.asarray(mask, dtype=np.float32)[..., None] * 0.55
    tinted = np.clip(np.rint(image.astype(np.float32) * (1.0 - weight) + MASK_TINT * weight), 0, 255).astype(np.uint8)
    return with_caption(tinted, label) if label is not None else tinted


def render_heatmaps(
    batch,
    references: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    *,
    captions: bool = True,
    reference: bool = True,
    presence: bool = True,
    attention: bool = True,
):
    """Paint the heatmaps of ``batch`` (scored with ``heatmaps=True``) over its images.

    ``references`` and ``outputs`` are the RGB uint8 images that were
    scored. With ``captions`` each picture carries its scores. Maps not
    asked for come back as empty lists.
    """
    maps = batch.heatmaps
    if maps is None:
        raise ValueError("the batch was scored without heatmaps=True")
    reference_images, presence_images, attention_images = [], [], []
    for n, score in enumerate(batch.scores):
        if reference:
            for k, view in enumerate(references):
                image = reference_overlay(view, maps.reference_match[n][k], maps.reference_keep[k])
                label = f"#{n} view {k}  CP {format_score(score.cp_per_reference[k])}"
                reference_images.append(with_caption(image, label) if captions else image)
        if presence:
            image = presence_overlay(outputs[n], maps.output_presence[n])
            presence_images.append(with_caption(image, caption(score)) if captions else image)
        if attention:
            image = attention_overlay(outputs[n], maps.background_attention[n], maps.output_hidden[n])
            attention_images.append(with_caption(image, caption(score)) if captions else image)
    return reference_images, presence_images, attention_images
