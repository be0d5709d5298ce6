"""A contact sheet: every candidate side by side, each tile captioned with its number, seed, scores and verdict.

For the artist who ran 16 candidates and wants to see why two were kept: one picture, one tile per
candidate, in rank or seed order, the kept ones framed. Pure numpy and PIL (the captions module's
font), so the same inputs give the same bytes.

Tile layout (``tile`` pixels wide): the candidate resized to fit a square ``PAD`` pixels inside the
tile (aspect kept, PIL's bicubic, centred), then three caption lines under it, each cut to the tile's
width:

    #3  seed 1003  mask 26%
    CP +0.724  PF +0.090
    accepted

Kept candidates get a green frame ``FRAME`` pixels wide around their tile (in the padding, never over
the picture); the others none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..errors import MascInputError
from ..metric.report import format_score

MIN_TILE, MAX_TILE = 64, 1024
"""Tile widths the sheet takes."""
MAX_SHEET_SIDE = 16384
"""Widest or tallest sheet made (PNG viewers and browsers struggle past it; 16384 x 16384 RGB is 768 MiB)."""
FRAME = 4
PAD = FRAME + 2
"""Margin around each tile's picture: room for the frame."""
BACKGROUND = (24, 24, 24)
KEPT_COLOUR = (64, 200, 96)
CAPTION_LINES = 3
ORDERS = ("rank", "seed", "index")


@dataclass(frozen=True)
class Tile:
    """What one tile says about its candidate."""

    index: int
    seed: int | None = None
    cp: float | None = None
    pf: float | None = None
    mask: float | None = None
    verdict: str = "scored"
    kept: bool = False
    key: float | None = None
    """What rank order sorts by (CP, PF or their weighted sum); None sorts last."""
    label: str | None = None
    """Shown instead of the seed (e.g. the file name, from the command line)."""
    frame: tuple[int, int, int] | None = None
    """A frame of this colour around the tile instead of the kept one's green (a clip's worst frame: red)."""

    def lines(self) -> list[str]:
        seed = self.label if self.label is not None else "seed ?" if self.seed is None else f"seed {self.seed}"
        mask = "" if self.mask is None else f"  mask {100 * self.mask:.0f}%"
        return [
            f"#{self.index}  {seed}{mask}",
            f"CP {format_score(self.cp, 3)}  PF {format_score(self.pf, 3)}",
            self.verdict,
        ]


@lru_cache(maxsize=8)
def _font(size: int):
    from ..metric.captions import _font as caption_font

    return caption_font(size)


def check_tile(tile: int, count: int, columns: int) -> tuple[int, int]:
    """(columns, rows) of a sheet of ``count`` tiles ``tile`` wide, or one line saying which input to change."""
    if not MIN_TILE <= int(tile) <= MAX_TILE:
        raise MascInputError(f"tile_size is {tile}: give {MIN_TILE} to {MAX_TILE} pixels")
    if count < 1:
        raise MascInputError("there are no candidates to put on a contact sheet: connect images with their scores")
    columns = int(columns) if columns else math.ceil(math.sqrt(count))
    if columns < 1:
        raise MascInputError(f"columns is {columns}: give 1 or more (0 = about square)")
    columns = min(columns, count)
    rows = math.ceil(count / columns)
    width, height = columns * tile, rows * tile_height(tile)
    if max(width, height) > MAX_SHEET_SIDE:
        raise MascInputError(
            f"a sheet of {count} tiles {tile} px wide in {columns} columns is {width}x{height} px, over the "
            f"{MAX_SHEET_SIDE} px this node makes: lower tile_size, or set columns nearer the square root of the count"
        )
    return columns, rows


def _caption_size(tile: int) -> int:
    return max(10, tile // 18)


def tile_height(tile: int) -> int:
    """A tile's height: the picture square plus its caption lines."""
    return tile + CAPTION_LINES * int(_caption_size(tile) * 1.35) + PAD


def ordered(tiles: Sequence[Tile], order: str) -> list[int]:
    """Positions of ``tiles`` in sheet order: rank (kept first, in the order given, then by key, undefined last),
    seed, or index (as scored)."""
    if order not in ORDERS:
        raise MascInputError(f"order '{order}' is unknown: use {', '.join(ORDERS)}")
    positions = list(range(len(tiles)))
    if order == "index":
        return positions
    if order == "seed":
        return sorted(positions, key=lambda p: (tiles[p].seed is None, tiles[p].seed or 0, p))
    return sorted(positions, key=lambda p: (not tiles[p].kept, tiles[p].key is None, -(tiles[p].key or 0.0), p))


def fit(image: np.ndarray, tile: int) -> np.ndarray:
    """``image`` (RGB uint8) resized to fit ``tile`` x ``tile``, aspect kept (PIL bicubic)."""
    from PIL import Image

    height, width = image.shape[:2]
    scale = tile / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize(size, Image.BICUBIC))


def tile_picture(image: np.ndarray, tile: int) -> tuple[np.ndarray, tuple[int, int]]:
    """The candidate fitted to its square inside the tile, and where it sits in the tile (top, left)."""
    side = tile - 2 * PAD
    fitted = fit(image, side)
    return fitted, (PAD + (side - fitted.shape[0]) // 2, PAD + (side - fitted.shape[1]) // 2)


def _cut(draw, text: str, font, width: int) -> str:
    """``text``, shortened with an ellipsis to fit ``width`` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


def contact_sheet(
    images: Sequence[np.ndarray], tiles: Sequence[Tile], *, tile: int = 256, columns: int = 0, order: str = "rank"
) -> np.ndarray:
    """One RGB uint8 picture: a captioned tile per image, in ``order``, kept ones framed."""
    from PIL import Image, ImageDraw

    if len(images) != len(tiles):
        raise MascInputError(f"{len(images)} images for {len(tiles)} scores: give the images the scores were made for")
    columns, rows = check_tile(tile, len(images), columns)
    height = tile_height(tile)
    sheet = np.zeros((rows * height, columns * tile, 3), dtype=np.uint8)
    sheet[:] = BACKGROUND
    font = _font(_caption_size(tile))
    line = int(_caption_size(tile) * 1.35)
    for slot, position in enumerate(ordered(tiles, order)):
        top, left = (slot // columns) * height, (slot % columns) * tile
        picture, (dy, dx) = tile_picture(np.asarray(images[position], dtype=np.uint8), tile)
        sheet[top + dy : top + dy + picture.shape[0], left + dx : left + dx + picture.shape[1]] = picture
        caption = Image.fromarray(sheet[top + tile : top + height, left : left + tile])
        draw = ImageDraw.Draw(caption)
        for k, text in enumerate(tiles[position].lines()):
            draw.text((PAD, k * line), _cut(draw, text, font, tile - 2 * PAD), fill=(235, 235, 235), font=font)
        sheet[top + tile : top + height, left : left + tile] = np.asarray(caption)
        colour = tiles[position].frame or (KEPT_COLOUR if tiles[position].kept else None)
        if colour is not None:
            frame = sheet[top : top + height, left : left + tile]
            frame[:FRAME], frame[-FRAME:], frame[:, :FRAME], frame[:, -FRAME:] = (colour,) * 4
    return sheet


def tiles_from(batch, *, by: str = "cp", cp_weight: float = 1.0, pf_weight: float = 1.0) -> list[Tile]:
    """One Tile per scored image of a ``ScoreBatch``: its seed, scores, verdict and kept flag from the batch's
    context."""
    from .ranking import rank

    count = len(batch.scores)
    verdicts, seeds, outputs = batch.context.per_image(count)
    keys = {item.index: item.key for item in rank(batch.scores, by=by, cp_weight=cp_weight, pf_weight=pf_weight).items}
    kept = set(batch.context.kept or [])
    return [
        Tile(
            index=s.index,
            seed=seeds[p],
            cp=s.cp,
            pf=s.pf,
            mask=s.foreground_fraction,
            verdict=verdicts[p],
            kept=p in kept or outputs[p] is not None,
            key=keys.get(s.index),
        )
        for p, s in enumerate(batch.scores)
    ]


THUMBNAIL = 256
"""Longest side of the candidates MaSC Sample Until keeps for a contact sheet (every candidate, rejected ones too),
when its budget is at most ``CANDIDATE_PIXELS``' worth (32 candidates); see ``thumbnail_side``."""

CANDIDATE_PIXELS = 32 * THUMBNAIL * THUMBNAIL
"""The most pixels a run's candidate thumbnails hold together: 6 MiB as kept while sampling (RGB uint8), 24 MiB as
the ``candidates`` output (ComfyUI's float IMAGE), however many candidates the budget allows."""


def thumbnail_side(budget: int) -> int:
    """The longest side of the thumbnails of a run that may sample ``budget`` candidates: ``THUMBNAIL`` up to 32
    candidates, smaller beyond (181 px for 64, 128 for 128, 22 for 4,096), so memory stays flat in the budget."""
    return max(16, min(THUMBNAIL, math.isqrt(CANDIDATE_PIXELS // max(1, int(budget)))))


def thumbnail(image: np.ndarray, side: int = THUMBNAIL) -> np.ndarray:
    """``image`` (RGB uint8) shrunk to fit ``side`` x ``side`` (never enlarged): at most side*side*3 bytes kept."""
    height, width = image.shape[:2]
    return np.array(image, dtype=np.uint8, copy=True) if max(height, width) <= side else fit(image, side)
