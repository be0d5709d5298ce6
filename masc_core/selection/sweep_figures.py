"""What a person sees of a sweep: the CP-PF chart, the annotated grid (pure numpy and PIL, the captions' font) and
the table (``verdict_table``).

**Chart** (``sweep_chart``): one point per cell at its mean PF (x) and mean CP (y), with the bootstrap interval of
each mean as a cross; the baseline a square; the Pareto frontier (cells no other cell beats on both) a line; the
PF margin a dashed vertical line, cells left of it outside the margin (grey); the cells tied with the best orange,
the recommended one ringed green; the verdict under the plot. A chart 1024 pixels wide has 18-pixel labels, legible
at the size a README or a node's preview shows it.

**Grid** (``sweep_grid``): one row per cell, one column per (prompt, seed) pair, each tile captioned with its CP and
PF; the row header names the cell with its means; the recommended row framed green, the tied ones orange. The
same inputs give the same bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import MascInputError
from .contact_sheet import BACKGROUND, FRAME, KEPT_COLOUR, MAX_SHEET_SIDE, _cut, _font, fit
from .sweep import Pair, SweepVerdict, cell_status

TIED_COLOUR = (240, 160, 40)
CELL_COLOUR = (90, 150, 235)
OUTSIDE_COLOUR = (130, 130, 130)
TEXT_COLOUR = (235, 235, 235)
AXIS_COLOUR = (170, 170, 170)
MIN_CHART_WIDTH, MAX_CHART_WIDTH = 512, 4096
MIN_GRID_TILE, MAX_GRID_TILE = 64, 512
MAX_GRID_COLUMNS = 16
"""Pairs a grid shows at most (the first in (prompt, seed) order); the chart and the verdict use every pair."""


def _colour(summary, recommended: str) -> tuple:
    if summary.cell.name == recommended:
        return KEPT_COLOUR
    if summary.tied:
        return TIED_COLOUR
    return CELL_COLOUR if summary.eligible else OUTSIDE_COLOUR


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten."""
    raw = (high - low) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [round(first + k * step, 10) for k in range(int((high - first) / step + 1e-9) + 1)]


def _span(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = max((high - low) * 0.12, 0.005)
    return low - pad, high + pad


def _frontier(points: list[tuple[float, float, str]]) -> list[tuple[float, float]]:
    """The (pf, cp) of the cells no other cell beats on both PF and CP, by PF."""
    kept = [
        (pf, cp)
        for pf, cp, name in points
        if not any(opf >= pf and ocp >= cp and (opf, ocp) != (pf, cp) for opf, ocp, _ in points)
    ]
    return sorted(set(kept))


@dataclass(frozen=True)
class _Plot:
    """Where the plot sits in the picture (pixels) and what it spans (PF on x, CP on y)."""

    left: int
    top: int
    width: int
    height: int
    x0: float
    x1: float
    y0: float
    y1: float

    def at(self, pf: float, cp: float) -> tuple[float, float]:
        """The pixel of (pf, cp)."""
        x = self.left + (pf - self.x0) / (self.x1 - self.x0) * self.width
        return x, self.top + (1 - (cp - self.y0) / (self.y1 - self.y0)) * self.height


def _axes(image, draw, plot: _Plot, font, small, scale: float) -> None:
    """Grid lines, ticks, the frame and both axis names."""
    from PIL import Image, ImageDraw

    left, top, plot_w, plot_h = plot.left, plot.top, plot.width, plot.height
    for tick in _ticks(plot.x0, plot.x1):
        x, _ = plot.at(tick, plot.y0)
        draw.line([(x, top), (x, top + plot_h)], fill=(44, 44, 44), width=1)
        text = f"{tick:.3f}".rstrip("0").rstrip(".")
        draw.text((x, top + plot_h + 6 * scale), text, fill=AXIS_COLOUR, font=small, anchor="mt")
    for tick in _ticks(plot.y0, plot.y1):
        _, y = plot.at(plot.x0, tick)
        draw.line([(left, y), (left + plot_w, y)], fill=(44, 44, 44), width=1)
        text = f"{tick:.3f}".rstrip("0").rstrip(".")
        draw.text((left - 8 * scale, y), text, fill=AXIS_COLOUR, font=small, anchor="rm")
    draw.rectangle([left, top, left + plot_w, top + plot_h], outline=AXIS_COLOUR, width=1)
    name = "PF, prompt following (mean)"
    draw.text((left + plot_w / 2, top + plot_h + 30 * scale), name, fill=TEXT_COLOUR, font=font, anchor="mt")
    axis_label = Image.new("RGB", (plot_h, round(26 * scale)), BACKGROUND)
    ImageDraw.Draw(axis_label).text(
        (plot_h / 2, 0), "CP, concept preservation (mean)", fill=TEXT_COLOUR, font=font, anchor="mt"
    )
    image.paste(axis_label.rotate(90, expand=True), (round(6 * scale), top))


def sweep_chart(verdict: SweepVerdict, pf_margin: float, *, width: int = 1024, title: str = "") -> np.ndarray:
    """The CP-PF chart of ``verdict`` as RGB uint8 (``width`` x three quarters of it)."""
    from PIL import Image, ImageDraw

    if not MIN_CHART_WIDTH <= int(width) <= MAX_CHART_WIDTH:
        raise MascInputError(f"chart width is {width}: give {MIN_CHART_WIDTH} to {MAX_CHART_WIDTH} pixels")
    width = int(width)
    height = width * 3 // 4
    scale = width / 1024
    font, small = _font(max(12, round(18 * scale))), _font(max(11, round(16 * scale)))
    shown = [s for s in verdict.cells if s.cp is not None and s.pf is not None]
    if not shown:
        raise MascInputError("no cell has both a CP and a PF to chart: give the outputs' masks (PF needs them)")
    baseline = next((s for s in verdict.cells if s.cell.baseline), None)
    margin_x = baseline.pf - pf_margin if baseline is not None and baseline.pf is not None else None
    xs = [v for s in shown for v in (s.pf_interval or [s.pf])] + ([margin_x] if margin_x is not None else [])
    ys = [v for s in shown for v in (s.cp_interval or [s.cp])]
    left, right, top, bottom = round(96 * scale), round(32 * scale), round(56 * scale), round(150 * scale)
    plot = _Plot(left, top, width - left - right, height - top - bottom, *_span(xs), *_span(ys))
    plot_w, plot_h, at = plot.width, plot.height, plot.at
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    line = max(1, round(2 * scale))
    _axes(image, draw, plot, font, small, scale)
    draw.text(
        (left, 14 * scale),
        title or f"MaSC Sweep: {len(verdict.cells)} cells, {verdict.images} images",
        fill=TEXT_COLOUR,
        font=font,
    )
    if margin_x is not None and plot.x0 < margin_x < plot.x1:
        x, _ = at(margin_x, plot.y0)
        for y in range(top, top + plot_h, round(12 * scale)):
            draw.line([(x, y), (x, min(y + 6 * scale, top + plot_h))], fill=OUTSIDE_COLOUR, width=line)
        label = f"PF margin {pf_margin:g}"
        left_of_line = x - 6 * scale - draw.textlength(label, font=small) >= left  # else right of it, inside the plot
        corner = (x - 6 * scale if left_of_line else x + 6 * scale, top + 6 * scale)
        draw.text(corner, label, fill=OUTSIDE_COLOUR, font=small, anchor="rt" if left_of_line else "lt")
    frontier = _frontier([(s.pf, s.cp, s.cell.name) for s in shown])
    if len(frontier) > 1:
        draw.line([at(pf, cp) for pf, cp in frontier], fill=(110, 110, 160), width=line)
    radius = 7 * scale
    boxes: list[tuple[float, float, float, float]] = []
    for summary in shown:
        colour = _colour(summary, verdict.recommended)
        x, y = at(summary.pf, summary.cp)
        if summary.pf_interval:
            draw.line(
                [at(summary.pf_interval[0], summary.cp), at(summary.pf_interval[1], summary.cp)],
                fill=colour,
                width=line,
            )
        if summary.cp_interval:
            draw.line(
                [at(summary.pf, summary.cp_interval[0]), at(summary.pf, summary.cp_interval[1])],
                fill=colour,
                width=line,
            )
        shape = [x - radius, y - radius, x + radius, y + radius]
        (draw.rectangle if summary.cell.baseline else draw.ellipse)(shape, fill=colour)
        if summary.cell.name == verdict.recommended:
            ring = 2.2 * radius
            draw.ellipse([x - ring, y - ring, x + ring, y + ring], outline=KEPT_COLOUR, width=max(2, line))
        boxes.append((x - radius, y - radius, x + radius, y + radius))  # no label over another cell's point
    for summary in shown:  # labels last, each on a patch of background: no bar runs through a name
        point = at(summary.pf, summary.cp)
        colour = _colour(summary, verdict.recommended)
        area = (left, top, plot_w, plot_h)
        boxes.append(_place_label(draw, summary.cell.name, point, radius * 2.4, font, boxes, area, colour))
    _legend(draw, (left + 10 * scale, top + plot_h - 10 * scale), small, scale)
    text_top = top + plot_h + 62 * scale
    for k, text in enumerate(_wrap(draw, "verdict: " + verdict.text, font, width - 2 * left // 2)[:3]):
        draw.text((left // 2, text_top + k * 24 * scale), text, fill=TEXT_COLOUR, font=font)
    return np.asarray(image)


LABEL_REACHES = (1.0, 2.0, 3.0, 4.5, 6.0, 8.0, 10.0)
"""How far out (in ``gap``s) a label is tried: a sweep's cells often sit within a few pixels of each other."""


def label_positions(point, gap, size) -> list[tuple[float, float]]:
    """The top-left corners a label of ``size`` (w, h) is tried at around ``point``, nearest first: right, left, above,
    below, then the four diagonals, at each reach of ``LABEL_REACHES``."""
    x, y = point
    w, h = size
    return [
        corner
        for reach in LABEL_REACHES
        for corner in (
            (x + gap * reach, y - h / 2),
            (x - gap * reach - w, y - h / 2),
            (x - w / 2, y - gap * reach - h),
            (x - w / 2, y + gap * reach),
            (x + gap * reach * 0.7, y - gap * reach * 0.7 - h),
            (x - gap * reach * 0.7 - w, y - gap * reach * 0.7 - h),
            (x + gap * reach * 0.7, y + gap * reach * 0.7),
            (x - gap * reach * 0.7 - w, y + gap * reach * 0.7),
        )
    ]


def label_box(point, gap, size, boxes, area) -> tuple[tuple, bool]:
    """Where a label of ``size`` goes beside ``point``: the first of ``label_positions`` inside the plot ``area``
    (left, top, width, height) that overlaps none of ``boxes``, and whether it is that far from its point that a leader
    line must join them; when none is free (too crowded), right of the point, kept inside the plot."""
    left, top, plot_w, plot_h = area
    w, h = size
    for index, (bx, by) in enumerate(label_positions(point, gap, size)):
        box = (bx, by, bx + w, by + h)
        inside = left <= bx and bx + w <= left + plot_w and top <= by and by + h <= top + plot_h
        if inside and not any(_overlap(box, other) for other in boxes):
            return box, index >= 4  # beyond the first reach's four sides
    bx = min(max(left, point[0] + gap), left + plot_w - w)
    by = min(max(top, point[1] - h / 2), top + plot_h - h)
    return (bx, by, bx + w, by + h), False


def _place_label(draw, text, point, gap, font, boxes, area, colour):
    """Draw ``text`` beside ``point`` where it overlaps no label or point drawn before (``label_box``), joined to
    its point by a thin line when it had to go further out; returns its box."""
    size = (draw.textlength(text, font=font), getattr(font, "size", 12))
    box, leader = label_box(point, gap, size, boxes, area)
    bx, by, right, bottom = box
    if leader:  # from the point to the nearest point of the label's box
        nearest = (min(max(point[0], bx), right), min(max(point[1], by), bottom))
        draw.line([point, nearest], fill=colour, width=1)
    draw.rectangle([bx - 3, by - 2, right + 3, bottom + 3], fill=BACKGROUND)
    draw.text((bx, by), text, fill=colour, font=font)
    return box


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _legend(draw, origin, font, scale) -> None:
    x, y = origin
    entries = (
        ("recommended", KEPT_COLOUR),
        ("tied with the best", TIED_COLOUR),
        ("below the best", CELL_COLOUR),
        ("outside the PF margin", OUTSIDE_COLOUR),
        ("square: baseline", AXIS_COLOUR),
    )
    step = 22 * scale
    y -= step * len(entries)
    for k, (text, colour) in enumerate(entries):
        r = 5 * scale
        cy = y + k * step + step / 2
        (draw.rectangle if text.startswith("square") else draw.ellipse)([x, cy - r, x + 2 * r, cy + r], fill=colour)
        draw.text((x + 4 * r, cy), text, fill=AXIS_COLOUR, font=font, anchor="lm")


def _wrap(draw, text: str, font, width: float) -> list[str]:
    lines, current = [], ""
    for word in text.split():
        trial = f"{current} {word}".strip()
        if current and draw.textlength(trial, font=font) > width:
            lines.append(current)
            current = word
        else:
            current = trial
    return lines + ([current] if current else [])


def _row_name(summary) -> str:
    """A cell's name, the baseline said so when its name does not say it."""
    name = summary.cell.name
    return name + " (baseline)" if summary.cell.baseline and "baseline" not in name.lower() else name


def check_grid(cells: int, pairs: int, tile: int) -> tuple[int, int]:
    """(columns, header width) of a grid of ``cells`` rows and ``pairs`` pairs at ``tile`` pixels, or one line."""
    if not MIN_GRID_TILE <= int(tile) <= MAX_GRID_TILE:
        raise MascInputError(f"grid tile is {tile}: give {MIN_GRID_TILE} to {MAX_GRID_TILE} pixels")
    columns = min(pairs, MAX_GRID_COLUMNS)
    header = max(160, tile)
    width, height = header + columns * tile, grid_height(cells, tile)
    if columns < 1 or max(width, height) > MAX_SHEET_SIDE:
        raise MascInputError(
            f"a grid of {cells} cells x {columns} pairs at {tile} px is {width}x{height} px, over the "
            f"{MAX_SHEET_SIDE} px written: lower the grid tile"
        )
    return columns, header


def grid_height(cells: int, tile: int) -> int:
    """A grid's height: the column headers (prompt, seed) and a row per cell."""
    return 2 * _grid_line(tile) + 8 + cells * _grid_row(tile)


def _grid_row(tile: int) -> int:
    return tile + 2 * _grid_line(tile)


def _grid_line(tile: int) -> int:
    return int(max(12, tile // 14) * 1.35)


def sweep_grid(
    verdict: SweepVerdict,
    pairs: Sequence[Pair],
    images: Mapping[str, Mapping[Pair, np.ndarray]],
    scores: Mapping[str, Mapping[Pair, tuple]],
    *,
    tile: int = 192,
) -> np.ndarray:
    """The annotated grid as RGB uint8: a row per cell of ``verdict`` (grid order), a column per pair of ``pairs``
    (the first ``MAX_GRID_COLUMNS``), ``images[cell][pair]`` captioned with ``scores[cell][pair]``; a pair a race did
    not sample is left empty."""
    from PIL import Image, ImageDraw

    columns, header = check_grid(len(verdict.cells), len(pairs), tile)
    shown = list(pairs)[:columns]
    row, line = _grid_row(tile), _grid_line(tile)
    font = _font(max(12, tile // 14))
    head = 2 * line + 8
    sheet = Image.new("RGB", (header + columns * tile, grid_height(len(verdict.cells), tile)), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    for c, (prompt, seed) in enumerate(shown):
        x = header + c * tile + FRAME + 2
        draw.text((x, 4), _cut(draw, prompt, font, tile - 2 * FRAME - 4), fill=AXIS_COLOUR, font=font)
        draw.text((x, 4 + line), f"seed {seed}", fill=AXIS_COLOUR, font=font)
    for r, summary in enumerate(verdict.cells):
        top = head + r * row
        colour = _colour(summary, verdict.recommended)
        name = _row_name(summary)
        draw.text((FRAME + 2, top + FRAME + 2), _cut(draw, name, font, header - 2 * FRAME - 4), fill=colour, font=font)
        means = [f"CP {summary.cp:+.3f}" if summary.cp is not None else "CP -"]
        means.append(f"PF {summary.pf:+.3f}" if summary.pf is not None else "PF -")
        for k, text in enumerate(means):
            draw.text((FRAME + 2, top + FRAME + 2 + (k + 1) * line), text, fill=TEXT_COLOUR, font=font)
        status = cell_status(summary, verdict)
        draw.text((FRAME + 2, top + FRAME + 2 + 3 * line), status, fill=colour, font=font)
        for c, pair in enumerate(shown):
            left = header + c * tile
            picture = images.get(summary.cell.name, {}).get(pair)
            if picture is None:
                continue
            fitted = fit(np.asarray(picture, dtype=np.uint8), tile - 2 * FRAME - 4)
            dy = FRAME + 2 + (tile - 2 * FRAME - 4 - fitted.shape[0]) // 2
            dx = FRAME + 2 + (tile - 2 * FRAME - 4 - fitted.shape[1]) // 2
            sheet.paste(Image.fromarray(fitted), (left + dx, top + dy))
            cp, pf = scores[summary.cell.name][pair]
            text = f"CP {cp:+.3f}  PF {pf:+.3f}" if cp is not None and pf is not None else "undefined"
            draw.text(
                (left + FRAME + 2, top + tile), _cut(draw, text, font, tile - 2 * FRAME), fill=TEXT_COLOUR, font=font
            )
        if summary.cell.name == verdict.recommended or summary.tied:
            draw.rectangle([0, top, sheet.width - 1, top + row - 1], outline=colour, width=FRAME)
    return np.asarray(sheet)


def verdict_table(verdict: SweepVerdict) -> str:
    """The verdict as text: a row per cell (images, means, the paired intervals, what was decided), then the verdict's
    sentence (the command line's table and the node's report)."""

    # Three decimals: a row of a 20-character cell name, both intervals and "recommended" fits the node's report box
    # (96 columns) unwrapped; the --json output keeps every digit.
    def interval(values) -> str:
        return f"[{values[0]:+.3f}, {values[1]:+.3f}]" if values else "-"

    def number(value) -> str:
        return f"{value:+.3f}" if value is not None else "-"

    rows = [("cell", "images", "CP", "PF", "CP - best", "PF - baseline", "")]
    for s in verdict.cells:
        status = cell_status(s, verdict, why=True)
        name = _row_name(s)
        rows.append(
            (name, str(s.pairs), number(s.cp), number(s.pf), interval(s.cp_vs_best), interval(s.pf_vs_baseline), status)
        )
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines) + "\nverdict: " + verdict.text
