"""Rendering MaSC's patch-level heatmaps over images, with torch on the scoring device.

The numbers come from ``scores.Heatmaps`` (one value per patch); this
module upsamples them to the image's size and paints them over the image:

- reference match: each reference patch's best cosine with the output
  (which parts of the concept survived); patches outside the reference mask
  are greyed out, since CP ignores them;
- output presence: each output patch's best cosine with the reference's
  foreground (where the concept appears);
- background attention: the PF pooler's attention over the output's
  background (what drives PF); hidden foreground patches are greyed out.

Cosines are drawn on a fixed 0..1 scale, so colours compare across images
and runs; attention is drawn relative to its maximum in each image.

``render_heatmaps`` paints all three for a scored batch (every output, every
reference view): the one place the CLI and the nodes get their pictures.

How it stays cheap (a 1024 px map costs a few milliseconds on a CPU), on
the device the encoder runs on:

- the patch grid is scaled to colour-table positions before it is
  upsampled (bilinear interpolation commutes with the affine scaling), so
  the full-size work is one clamp, one table lookup (a precomputed viridis
  table of ``COLOUR_STEPS`` entries, already weighted for the blend), one
  add and one conversion to uint8;
- the image's share of the blend, and its grey for muted patches, are
  computed once per image, not once per map;
- muted patches are grey rectangles copied over (nearest upsampling makes
  each run of muted cells one rectangle), and only the rectangle that holds
  coloured pixels is coloured (most of a reference outside its mask is grey);
- every map of a batch is written into one uint8 buffer, copied to the host
  once; captions are drawn there, on the band they cover.

The patch grids themselves (``scores.Heatmaps``) stay numpy: a few KiB each,
handed to the device map by map.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .captions import draw_caption
from .report import caption, format_score
from .scores import ScoreBatch

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
COLOUR_STEPS = 1024
"""Entries of the colour table. Viridis' steepest channel rises 83 levels over
an eighth of the scale: with 1024 steps a value moves at most a third of a
level when it snaps to its entry, so a blended pixel stays within one grey
level of the exact colour (with 256 steps it could move 1.3 levels, 2 after
rounding)."""
COSINE_RANGE = (0.0, 1.0)
ALPHA = 0.6
"""Weight of the heat colour in the blend (the image keeps 1 - ALPHA)."""
MASK_TINT = np.array([255, 64, 64], dtype=np.float32)
"""Red: the colour a predicted mask is painted with in previews."""


def colour_table(steps: int = COLOUR_STEPS) -> np.ndarray:
    """Viridis at ``steps`` evenly spaced values of 0..1, as RGB uint8 [steps, 3]."""
    t = np.linspace(0.0, 1.0, steps, dtype=np.float64) * (len(_VIRIDIS) - 1)
    low = np.minimum(np.floor(t).astype(np.int64), len(_VIRIDIS) - 2)
    frac = (t - low)[:, None]
    rgb = _VIRIDIS[low] * (1.0 - frac) + _VIRIDIS[low + 1] * frac
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


_TABLE = colour_table()


def _grid_tensor(grid, device: torch.device) -> torch.Tensor:
    """A patch grid as float32 [1, 1, rows, cols] on ``device``; non-finite cells become 0."""
    values = torch.as_tensor(np.asarray(grid, dtype=np.float32)).to(device)
    return torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)[None, None]


def _upsample(grid: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    if mode == "nearest":
        return F.interpolate(grid, size=size, mode="nearest")[0, 0]
    return F.interpolate(grid, size=size, mode="bilinear", align_corners=False)[0, 0]


def upsample(grid: np.ndarray, size: tuple[int, int], *, mode: str = "bilinear") -> np.ndarray:
    """A [rows, cols] grid resized to (height, width); non-finite cells become 0 first."""
    return _upsample(_grid_tensor(grid, torch.device("cpu")), size, mode).numpy()


@lru_cache(maxsize=64)
def _nearest_sources(cells: int, length: int) -> np.ndarray:
    """The cell each of ``length`` pixels shows when ``cells`` cells are upsampled (torch's nearest rule)."""
    positions = torch.arange(cells, dtype=torch.float32).view(1, 1, cells, 1)
    return F.interpolate(positions, size=(length, 1), mode="nearest")[0, 0, :, 0].to(torch.int64).numpy()


@dataclass(frozen=True)
class Muting:
    """Which pixels of a map are grey (muted patches) and which are coloured, as rectangles (top, bottom, left,
    right)."""

    blocks: list[tuple[int, int, int, int]]
    """Rectangles covering exactly the muted pixels."""
    coloured: tuple[int, int, int, int] | None
    """The smallest rectangle holding every pixel that is not muted; None when all are."""


def muting(muted, size: tuple[int, int]) -> Muting:
    """Where the set cells of a patch grid land when it is upsampled (nearest) to ``size``.

    Nearest upsampling turns each run of set cells in a row of the grid into one
    rectangle of pixels; rows of the grid that are alike share one.
    """
    if muted is None:
        return Muting([], (0, size[0], 0, size[1]))
    cells = np.asarray(muted, dtype=bool)
    rows, cols = cells.shape
    row_edges = np.searchsorted(_nearest_sources(rows, size[0]), np.arange(rows + 1))
    col_edges = np.searchsorted(_nearest_sources(cols, size[1]), np.arange(cols + 1))
    blocks = []
    start = 0
    for row in range(1, rows + 1):
        if row < rows and np.array_equal(cells[row], cells[start]):
            continue
        flips = np.flatnonzero(np.diff(np.concatenate([[False], cells[start], [False]]).astype(np.int8)))
        top, bottom = int(row_edges[start]), int(row_edges[row])
        for first, stop in zip(flips[::2], flips[1::2]):
            left, right = int(col_edges[first]), int(col_edges[stop])
            if bottom > top and right > left:
                blocks.append((top, bottom, left, right))
        start = row
    shown_rows, shown_cols = np.flatnonzero((~cells).any(axis=1)), np.flatnonzero((~cells).any(axis=0))
    coloured = None
    if shown_rows.size:
        coloured = (
            int(row_edges[shown_rows[0]]),
            int(row_edges[shown_rows[-1] + 1]),
            int(col_edges[shown_cols[0]]),
            int(col_edges[shown_cols[-1] + 1]),
        )
        if coloured[1] <= coloured[0] or coloured[3] <= coloured[2]:
            coloured = None
    return Muting(blocks, coloured)


class _Canvas:
    """One image on the device, with what every map painted over it shares (computed once)."""

    def __init__(self, image: np.ndarray, device: torch.device):
        array = np.ascontiguousarray(image, dtype=np.uint8)
        if not array.flags.writeable:  # torch warns about read-only arrays (PIL's), though nothing writes here
            array = array.copy()
        self.pixels = torch.from_numpy(array).to(device)
        self.size = (array.shape[0], array.shape[1])
        # The image's share of the blend; + 0.5 since the blend is rounded by truncating to uint8.
        self.weighted = self.pixels.float().mul_(1.0 - ALPHA).add_(0.5)
        self._grey: torch.Tensor | None = None

    @property
    def grey(self) -> torch.Tensor:
        """What muted patches show: each pixel's mean, halved, lifted by 64 (uint8 [H, W, 3])."""
        if self._grey is None:
            # Summed by channel slices: a reduction over a last dimension of 3 is several times slower.
            channels = self.pixels.float()
            mean = (channels[..., 0:1] + channels[..., 1:2]).add_(channels[..., 2:3]).div_(3.0)
            grey = mean.mul_(0.5).add_(64.0).round_().to(torch.uint8)
            self._grey = grey.expand(*self.size, 3).contiguous()
        return self._grey


class _Painter:
    """Paints patch grids in viridis over canvases, into uint8 views."""

    def __init__(self, device: torch.device, steps: int = COLOUR_STEPS):
        self.device = device
        self.steps = steps
        # The heat's share of the blend, per table entry.
        table = _TABLE if steps == COLOUR_STEPS else colour_table(steps)
        self.table = torch.from_numpy(table.astype(np.float32) * np.float32(ALPHA)).to(device)

    def paint(self, canvas: _Canvas, grid, vmin: float, vmax: float, muted: Muting, out: torch.Tensor) -> None:
        """``out`` (uint8 [H, W, 3]) = ``grid`` coloured on [vmin, vmax] over the canvas, grey where ``muted``."""
        height, width = out.shape[:2]
        if muted.coloured is not None:
            top, bottom, left, right = muted.coloured  # only where some pixel is coloured
            scale = (self.steps - 1) / max(vmax - vmin, 1e-12)
            # Scaled to table positions (+ 0.5 to round by truncation) before upsampling: the
            # interpolation is affine, so this is the upsampled grid's position, at patch cost.
            positions = _grid_tensor(grid, self.device).sub_(vmin).mul_(scale).add_(0.5)
            position = _upsample(positions, (height, width), "bilinear")[top:bottom, left:right]
            index = position.clamp(0.5, self.steps - 0.5).to(torch.int32).reshape(-1)
            heat = self.table.index_select(0, index).view(bottom - top, right - left, 3)
            out[top:bottom, left:right].copy_(heat.add_(canvas.weighted[top:bottom, left:right]))
        # Muted pixels are the image's grey alone: copied over, block by block (a per-pixel
        # select over 3 channels costs more than the whole blend).
        for top, bottom, left, right in muted.blocks:
            out[top:bottom, left:right] = canvas.grey[top:bottom, left:right]


def _single(image: np.ndarray, grid, *, vmin: float, vmax: float, muted=None) -> np.ndarray:
    canvas = _Canvas(image, torch.device("cpu"))
    out = torch.empty(*canvas.size, 3, dtype=torch.uint8)
    _Painter(canvas.pixels.device).paint(
        canvas=canvas, grid=grid, vmin=vmin, vmax=vmax, muted=muting(muted, canvas.size), out=out
    )
    return out.numpy()


def colorize(values: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """Map values to viridis RGB uint8 (values clipped to [vmin, vmax]), through the colour table."""
    span = max(vmax - vmin, 1e-12)
    position = np.clip((np.asarray(values, dtype=np.float32) - vmin) / span, 0.0, 1.0) * (COLOUR_STEPS - 1)
    return _TABLE[np.rint(position).astype(np.int64)]


def reference_overlay(reference: np.ndarray, match: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Which parts of the concept survived: best-match cosine per reference patch, on the reference."""
    return _single(reference, match, vmin=COSINE_RANGE[0], vmax=COSINE_RANGE[1], muted=~np.asarray(keep, bool))


def presence_overlay(output: np.ndarray, presence: np.ndarray) -> np.ndarray:
    """Where the concept appears: best cosine against the reference foreground, on the output."""
    return _single(output, presence, vmin=COSINE_RANGE[0], vmax=COSINE_RANGE[1])


def _attention_scale(attention, hidden) -> tuple[np.ndarray, float, np.ndarray | None]:
    """(grid, vmax, muted) of an attention map; all muted when PF is undefined (no attention)."""
    if attention is None:
        muted = np.ones((1, 1), bool) if hidden is None else np.asarray(hidden, bool)
        return np.zeros(muted.shape, np.float32), 1.0, muted
    peak = float(np.max(attention)) if np.size(attention) else 0.0
    return attention, max(peak, 1e-12), hidden


def attention_overlay(output: np.ndarray, attention: np.ndarray | None, hidden: np.ndarray | None) -> np.ndarray:
    """What drives PF: the pooler's attention over the background (relative to its maximum)."""
    grid, vmax, muted = _attention_scale(attention, hidden)
    return _single(output, grid, vmin=0.0, vmax=vmax, muted=muted)


def mask_overlay(image: np.ndarray, mask: np.ndarray, label: str | None = None) -> np.ndarray:
    """The image with the (0..1) mask tinted red, captioned with ``label`` when given."""
    weight = np.asarray(mask, dtype=np.float32)[..., None] * 0.55
    tinted = np.clip(np.rint(image.astype(np.float32) * (1.0 - weight) + MASK_TINT * weight), 0, 255).astype(np.uint8)
    return draw_caption(tinted, label) if label is not None else tinted


@dataclass
class HeatmapImages:
    """The three heatmaps of a scored batch, as RGB uint8 images."""

    reference: list[np.ndarray]
    """Per output n, per reference view k (index n * K + k): which parts of the concept survived."""
    presence: list[np.ndarray]
    """Per output: where the concept appears."""
    attention: list[np.ndarray]
    """Per output: what drives PF (the pooler's attention over the background)."""
    views: int
    """K, the number of reference views."""


def render_heatmaps(
    batch: ScoreBatch,
    references: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    *,
    captions: bool = True,
    reference: bool = True,
    presence: bool = True,
    attention: bool = True,
    device: str | torch.device | None = None,
) -> HeatmapImages:
    """Paint the heatmaps of ``batch`` (scored with ``heatmaps=True``) over its images.

    ``references`` and ``outputs`` are the RGB uint8 images that were
    scored. With ``captions`` each picture carries its scores. Maps not
    asked for come back as empty lists. ``device`` is where the pixels are
    computed (the encoder's device; default the CPU): the pictures come back
    to the host in one copy.
    """
    maps = batch.heatmaps
    if maps is None:
        raise ValueError("the batch was scored without heatmaps=True")
    device = torch.device(device) if device is not None else torch.device("cpu")
    count, views = len(batch.scores), len(references)
    sizes = {
        "reference": [references[k].shape[:2] for _ in range(count) for k in range(views)] if reference else [],
        "presence": [outputs[n].shape[:2] for n in range(count)] if presence else [],
        "attention": [outputs[n].shape[:2] for n in range(count)] if attention else [],
    }
    places, offset = {}, 0  # kind -> [(start, (height, width, 3))] in one flat buffer
    for kind, shapes in sizes.items():
        places[kind] = []
        for height, width in shapes:
            places[kind].append((offset, (int(height), int(width), 3)))
            offset += int(height) * int(width) * 3
    host = torch.empty(offset, dtype=torch.uint8)
    buffer = host if device.type == "cpu" else torch.empty(offset, dtype=torch.uint8, device=device)
    slots = {kind: [_cut(buffer, start, shape) for start, shape in spots] for kind, spots in places.items()}
    _paint_batch(painter=_Painter(device), maps=maps, references=references, outputs=outputs, slots=slots, count=count)
    if buffer is not host:
        host.copy_(buffer)  # the one device-to-host copy
    host = host.numpy()
    pictures = {kind: [_cut(host, start, shape) for start, shape in spots] for kind, spots in places.items()}
    if captions:
        _draw_captions(batch, pictures, views)
    return HeatmapImages(pictures["reference"], pictures["presence"], pictures["attention"], views)


def _cut(flat, start: int, shape: tuple[int, int, int]):
    """The picture of ``shape`` stored at ``start`` in a flat buffer (a view, tensor or array)."""
    return flat[start : start + shape[0] * shape[1] * shape[2]].reshape(shape)


def _paint_batch(painter: _Painter, maps, references, outputs, slots: dict, count: int) -> None:
    """Every asked-for map into its slot: one canvas per image, a view's muting found once."""
    low, high = COSINE_RANGE
    views = len(references)
    for k in range(views if slots["reference"] else 0):
        canvas = _Canvas(references[k], painter.device)
        muted = muting(~np.asarray(maps.reference_keep[k], bool), canvas.size)
        for n in range(count):
            painter.paint(
                canvas=canvas,
                grid=maps.reference_match[n][k],
                vmin=low,
                vmax=high,
                muted=muted,
                out=slots["reference"][n * views + k],
            )
    for n in range(count if slots["presence"] or slots["attention"] else 0):
        canvas = _Canvas(outputs[n], painter.device)
        if slots["presence"]:
            painter.paint(
                canvas=canvas,
                grid=maps.output_presence[n],
                vmin=low,
                vmax=high,
                muted=muting(None, canvas.size),
                out=slots["presence"][n],
            )
        if slots["attention"]:
            grid, vmax, hidden = _attention_scale(maps.background_attention[n], maps.output_hidden[n])
            muted = muting(hidden, canvas.size)
            painter.paint(canvas=canvas, grid=grid, vmin=0.0, vmax=vmax, muted=muted, out=slots["attention"][n])


def _draw_captions(batch: ScoreBatch, pictures: dict, views: int) -> None:
    """Each picture's scores on its top band (in place, on the host)."""
    for index, image in enumerate(pictures["reference"]):
        score = batch.scores[index // views]
        k = index % views
        draw_caption(image, f"#{score.index} view {k}  CP {format_score(score.cp_per_reference[k])}")
    for kind in ("presence", "attention"):
        for score, image in zip(batch.scores, pictures[kind]):
            draw_caption(image, caption(score))
