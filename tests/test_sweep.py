"""MaSC Sweep's decisions (masc_core.selection.sweep): the verdict, its ties, the PF margin and racing."""

from __future__ import annotations

import math

import pytest

from benchmarks.sweep_racing import GRIDS, cells_of, run_grid, stand_in_scores
from masc_core.errors import MascInputError
from masc_core.selection.sweep import SweepCell, SweepRace, SweepRule, sweep_verdict, t_quantile

PAIRS = [(f"p{p}", s) for p in range(4) for s in range(6)]
CELLS = [
    SweepCell("base", baseline=True, weakness=(0.0,)),
    SweepCell("weak", weakness=(0.5,)),
    SweepCell("strong", weakness=(1.0,)),
]


def _scores(cp: dict, pf: dict, jitter: float = 0.01) -> dict:
    """Each cell's (cp, pf) at every pair: its mean, a per-pair effect shared by every cell, a small own one."""
    out = {}
    for k, name in enumerate(cp):
        out[name] = {
            pair: (cp[name] + 0.05 * math.sin(i) + jitter * math.cos(3 * i + k), pf[name] + 0.01 * math.sin(i))
            for i, pair in enumerate(PAIRS)
        }
    return out


def test_a_clear_best_is_recommended_alone():
    verdict = sweep_verdict(
        CELLS, _scores({"base": 0.3, "weak": 0.35, "strong": 0.5}, dict.fromkeys(["base", "weak", "strong"], 0.2))
    )
    assert verdict.best == verdict.recommended == "strong" and verdict.tied == ["strong"]
    assert verdict.images == 3 * len(PAIRS) and "strong" in verdict.text and "tie" not in verdict.text


def test_cells_the_data_cannot_separate_tie_and_the_weakest_is_named():
    verdict = sweep_verdict(
        CELLS,
        _scores(
            {"base": 0.3, "weak": 0.5, "strong": 0.501}, dict.fromkeys(["base", "weak", "strong"], 0.2), jitter=0.05
        ),
    )
    assert verdict.best in ("weak", "strong") and set(verdict.tied) == {"weak", "strong"}
    assert verdict.recommended == "weak" and verdict.text.startswith("tie: weak, strong")


def test_a_cell_that_gives_up_more_pf_than_the_margin_is_not_recommended():
    scores = _scores({"base": 0.3, "weak": 0.4, "strong": 0.6}, {"base": 0.2, "weak": 0.19, "strong": 0.1})
    verdict = sweep_verdict(CELLS, scores, SweepRule(pf_margin=0.02))
    summaries = {s.cell.name: s for s in verdict.cells}
    assert not summaries["strong"].eligible and verdict.recommended == "weak"
    assert summaries["strong"].pf_vs_baseline[1] < -0.05  # the paired interval says how much PF it lost
    assert sweep_verdict(CELLS, scores, SweepRule(pf_margin=0.2)).recommended == "strong"


@pytest.mark.parametrize(
    "cells, words",
    [
        ([SweepCell("a", baseline=True), SweepCell("a")], "appear twice"),
        ([SweepCell("a"), SweepCell("b")], "exactly one baseline"),
    ],
)
def test_a_grid_that_cannot_be_judged_is_one_line(cells, words):
    with pytest.raises(MascInputError, match=words):
        sweep_verdict(cells, {})


@pytest.mark.parametrize("rule", [SweepRule(pf_margin=float("nan")), SweepRule(confidence=1.0), SweepRule(bootstrap=5)])
def test_rules_that_cannot_work_are_refused(rule):
    with pytest.raises(MascInputError):
        rule.check()


def test_the_verdict_is_the_same_from_the_same_scores():
    scores = _scores(
        {"base": 0.3, "weak": 0.5, "strong": 0.501}, dict.fromkeys(["base", "weak", "strong"], 0.2), jitter=0.05
    )
    assert sweep_verdict(CELLS, scores).to_dict() == sweep_verdict(CELLS, scores).to_dict()


def test_the_t_quantile_is_close_to_the_exact_one():
    assert t_quantile(0.975, 10) == pytest.approx(2.228, abs=0.01)
    assert t_quantile(0.995, 30) == pytest.approx(2.750, abs=0.01)
    assert t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=0.001)


def test_racing_stops_the_losers_and_reaches_the_full_grids_verdict():
    result = run_grid("clear", prompts=4, seeds=8, seed=0)
    assert result["agree"] and result["race_recommended"] == "epoch08 @ 1.0"
    assert result["race_images"] <= result["full_images"] / 2
    assert all(why.startswith("round ") for why in result["stopped"].values()) and len(result["stopped"]) >= 4


def test_racing_spends_the_whole_grid_when_every_cell_ties():
    result = run_grid("ties", prompts=4, seeds=8, seed=0)
    assert result["race_images"] == result["full_images"] and not result["stopped"]
    assert len(result["race_tied"]) >= 2


def test_a_race_refuses_scores_for_a_stopped_cell():
    means = GRIDS["clear"]
    race = SweepRace(cells_of(means), rounds=8)
    scores = stand_in_scores(means, 4, 8, 0)
    for round_index in range(3):
        race.observe(round_index, {c: {p: v for p, v in scores[c].items() if p[1] == round_index} for c in race.live})
    stopped = next(iter(race.stopped))
    with pytest.raises(MascInputError, match="not live"):
        race.observe(3, {stopped: {("prompt 0", 3): (0.5, 0.2)}})
