"""MaSC Sweep's pictures (masc_core.selection.sweep_figures): the CP-PF chart and the grid say what the verdict says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from masc_core.errors import MascInputError
from masc_core.selection.contact_sheet import KEPT_COLOUR
from masc_core.selection.sweep import SweepCell, SweepRule, sweep_verdict
from masc_core.selection.sweep_figures import (
    OUTSIDE_COLOUR,
    TIED_COLOUR,
    grid_height,
    label_box,
    sweep_chart,
    sweep_grid,
)

PAIRS = [(f"prompt {p}", s) for p in range(2) for s in range(8)]
CELLS = [
    SweepCell("baseline", baseline=True, weakness=(0,)),
    SweepCell("too strong", weakness=(1,)),
    SweepCell("lora a", weakness=(2,)),
    SweepCell("lora b", weakness=(3,)),
]
MEANS = {"baseline": (0.30, 0.20), "too strong": (0.70, 0.10), "lora a": (0.55, 0.195), "lora b": (0.551, 0.19)}


def _scores() -> dict:
    return {
        name: {pair: (cp + 0.04 * math.sin(3 * i + k), pf + 0.01 * math.cos(i)) for i, pair in enumerate(PAIRS)}
        for k, (name, (cp, pf)) in enumerate(MEANS.items())
    }


def _has(picture: np.ndarray, colour) -> int:
    return int((picture.reshape(-1, 3) == np.array(colour, dtype=np.uint8)).all(axis=1).sum())


def test_the_chart_marks_the_recommended_the_tied_and_the_outside_cells():
    verdict = sweep_verdict(CELLS, _scores(), SweepRule(pf_margin=0.02))
    assert verdict.recommended == "lora a" and "lora b" in verdict.tied
    chart = sweep_chart(verdict, 0.02)
    assert chart.shape == (768, 1024, 3) and chart.dtype == np.uint8
    assert _has(chart, KEPT_COLOUR) > 200  # the recommended point, its ring, its bars and its label
    legend_only = _has(_chart_without_tie(), TIED_COLOUR)  # the legend's swatch
    assert _has(chart, TIED_COLOUR) > legend_only + 200  # lora b's point, bars and label
    assert _has(chart, OUTSIDE_COLOUR) > 100  # "too strong" gave up PF beyond the margin
    assert np.array_equal(chart, sweep_chart(verdict, 0.02))  # the same verdict gives the same bytes
    wide = sweep_chart(verdict, 0.02, width=2048)
    assert wide.shape == (1536, 2048, 3)


def _chart_without_tie() -> np.ndarray:
    scores = _scores()
    scores["lora b"] = {pair: (cp - 0.2, pf) for pair, (cp, pf) in scores["lora b"].items()}
    verdict = sweep_verdict(CELLS, scores, SweepRule(pf_margin=0.02))
    assert verdict.tied == ["lora a"]
    return sweep_chart(verdict, 0.02)


def test_the_grid_has_a_row_per_cell_and_frames_the_recommended_one():
    scores = _scores()
    verdict = sweep_verdict(CELLS, scores)
    images = {c.name: {p: np.full((40, 60, 3), 30 * k, np.uint8) for p in PAIRS} for k, c in enumerate(CELLS)}
    grid = sweep_grid(verdict, PAIRS, images, scores, tile=96)
    assert grid.shape == (grid_height(4, 96), 160 + 16 * 96, 3)
    assert _has(grid, KEPT_COLOUR) > 1000  # the recommended row's frame
    # A pair a race did not sample is an empty tile, not an error.
    del images["too strong"][PAIRS[0]]
    assert sweep_grid(verdict, PAIRS, images, scores, tile=96).shape == grid.shape


@pytest.mark.parametrize("width", [100, 5000])
def test_a_chart_width_out_of_range_is_one_line(width):
    verdict = sweep_verdict(CELLS, _scores())
    with pytest.raises(MascInputError, match="chart width"):
        sweep_chart(verdict, 0.02, width=width)


def test_eight_labels_of_cells_a_few_pixels_apart_do_not_overlap():
    """A sweep's cells often sit within a few pixels (the host suite's Flux sweep: 8 cells within 0.01 PF): each
    label finds a free place, nearest first, and none covers another label or a point."""
    points = [(500 + 6 * (k % 3), 300 + 5 * (k // 3)) for k in range(8)]
    boxes = [(x - 9, y - 9, x + 9, y + 9) for x, y in points]
    area, placed = (80, 50, 900, 600), []
    for k, point in enumerate(points):
        box, _ = label_box(point, 21.6, (250, 18), boxes, area)
        assert not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in boxes), k
        boxes.append(box)
        placed.append(box)
    assert all(80 <= b[0] and b[2] <= 980 and 50 <= b[1] and b[3] <= 650 for b in placed)
    assert len(set(placed)) == 8
