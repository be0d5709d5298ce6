"""MaSC Sweep's decisions: which generator variant (a LoRA file, a strength, a checkpoint) keeps the subject.

A sweep samples every **cell** (one variant; one of them the no-LoRA baseline) at the same (prompt, seed) pairs: a
paired design, so two cells are compared on the differences of their scores pair by pair, which cancels what a
prompt or a seed does to every cell alike. From those scores:

- **per cell**: mean CP and PF over its pairs;
- **eligible**: the cells whose mean PF stays within ``pf_margin`` of the baseline's, the baseline always (the paper
  scores personalization on two axes, CP and PF, Sec. 1 and 3; that a stronger or longer-trained LoRA buys CP with
  PF is personalization work's overfitting, docs/sweep.md; the margin says how much PF a user gives up);
- **best**: the eligible cell with the highest mean CP;
- **tied**: an eligible cell whose paired bootstrap interval of (its CP - the best's CP) holds 0: the data cannot
  tell it from the best. The recommendation is the weakest of the tied (``SweepCell.weakness``: a lower strength,
  an earlier epoch), never a winner the data cannot separate.

**Racing** (``SweepRace``): after each round of seeds, a cell that is worse than the leader on CP at the chosen
confidence (a one-sided paired t-test on the pairs both have, Bonferroni over the cells, the rounds and the two
scores), or whose PF is below the baseline's by more than the margin at that confidence, stops being sampled; the
baseline too, once its CP is below the leader's (the PF margin is then measured on the pairs it has). This is the
racing idea of Maron and Moore (Hoeffding races, 1994) on a blocked design as in Birattari et al.'s F-race (2002),
with a t-test instead of Hoeffding's worst-case bound (cosine differences span [-2, 2], for which Hoeffding's bound
would stop nothing at the sample sizes a sweep has); the t quantile is Abramowitz and Stegun's 26.7.5 expansion. A
race spends the full grid when every cell ties. The verdict's intervals are Bonferroni-corrected over the cells
compared with the best, so a tie is called whenever any of them cannot be separated. Pure numpy; no model code.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Mapping, Sequence

import numpy as np

from ..errors import MascInputError

Pair = tuple[str, int]
"""One (prompt, seed) at which every cell is sampled."""

DEFAULT_PF_MARGIN = 0.02
"""How much mean PF a recommended cell may lose against the baseline's (PF's cosines; see docs/sweep.md)."""
DEFAULT_CONFIDENCE = 0.95
DEFAULT_BOOTSTRAP = 2000
MIN_PAIRS_TO_STOP = 8
"""Pairs two cells must share before the race stops either (the z-test's normal approximation needs a few)."""


@dataclass(frozen=True)
class SweepCell:
    """One generator variant: its ``name`` (as reports show it), whether it is the no-LoRA ``baseline``, and its
    ``weakness``: a sortable value, lower = weaker or cheaper (strength, then epoch), the tie-breaker."""

    name: str
    baseline: bool = False
    weakness: tuple = ()


@dataclass(frozen=True)
class SweepRule:
    """How a sweep decides: ``pf_margin`` (PF a recommendation may lose against the baseline), ``confidence`` of the
    intervals and of the race's stops, ``bootstrap`` resamples drawn from ``seed``."""

    pf_margin: float = DEFAULT_PF_MARGIN
    confidence: float = DEFAULT_CONFIDENCE
    bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = 0

    def check(self) -> "SweepRule":
        """These settings, or a one-line error naming the one that cannot work."""
        if not (math.isfinite(self.pf_margin) and 0.0 <= self.pf_margin <= 2.0):
            raise MascInputError(f"pf_margin is {self.pf_margin}: give a number from 0 to 2 (PF is a cosine)")
        if not (0.5 <= self.confidence < 1.0):
            raise MascInputError(f"confidence is {self.confidence}: give a number from 0.5 to below 1, e.g. 0.95")
        if not (100 <= self.bootstrap <= 100_000):
            raise MascInputError(f"bootstrap is {self.bootstrap}: give 100 to 100,000 resamples")
        return self


@dataclass
class CellSummary:
    """One cell's figures: its means over ``pairs`` scored, its paired interval against the best (CP) and the
    baseline (PF), and what was decided of it."""

    cell: SweepCell
    pairs: int
    cp: float | None
    pf: float | None
    cp_vs_best: list[float] | None = None
    """The 95% (``confidence``) paired bootstrap interval of this cell's CP minus the best cell's."""
    pf_vs_baseline: list[float] | None = None
    cp_interval: list[float] | None = None
    """The bootstrap interval of this cell's mean CP (its own pairs, at ``confidence``): the chart's error bar."""
    pf_interval: list[float] | None = None
    eligible: bool = True
    tied: bool = False
    stopped: str = ""
    """Why the race stopped sampling it (empty: it ran every round)."""

    def to_dict(self) -> dict:
        return {
            "cell": self.cell.name,
            "baseline": self.cell.baseline,
            "images": self.pairs,
            "cp": self.cp,
            "pf": self.pf,
            "cp_vs_best": self.cp_vs_best,
            "pf_vs_baseline": self.pf_vs_baseline,
            "cp_interval": self.cp_interval,
            "pf_interval": self.pf_interval,
            "eligible": self.eligible,
            "tied": self.tied,
            "stopped": self.stopped,
        }


@dataclass
class SweepVerdict:
    """The sweep's answer: every cell's summary (grid order), the ``best`` cell, the ``recommended`` one (the weakest
    of those tied with the best) and the sentence that says so."""

    cells: list[CellSummary]
    best: str
    recommended: str
    tied: list[str]
    text: str
    images: int = 0

    def to_dict(self) -> dict:
        return {
            "best": self.best,
            "recommended": self.recommended,
            "tied": self.tied,
            "verdict": self.text,
            "images": self.images,
            "cells": [c.to_dict() for c in self.cells],
        }


def cell_status(summary: CellSummary, verdict: "SweepVerdict", *, why: bool = False) -> str:
    """What the verdict says of one cell, in a word or two (the table's and the grid's last column): recommended,
    best, tied, stopped (``why``: the race's reason), outside the PF margin, or empty."""
    name = summary.cell.name
    if name == verdict.recommended:
        return "recommended"
    if name == verdict.best:
        return "best, tied"
    if summary.tied:
        return "tied"
    if summary.stopped:
        return summary.stopped if why else "stopped"
    return "" if summary.eligible else "PF outside the margin"


def _stable_rng(seed: int, *labels: str) -> np.random.Generator:
    digest = hashlib.sha256("\x1f".join((str(seed),) + labels).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _check_cells(cells: Sequence[SweepCell]) -> None:
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise MascInputError(f"cells {repeated} appear twice: give each cell once")
    if sum(c.baseline for c in cells) != 1:
        raise MascInputError("a sweep needs exactly one baseline cell (no LoRA): the PF margin is measured against it")


def _column(scores: Mapping[Pair, tuple], pairs: Sequence[Pair], which: int) -> np.ndarray:
    values = np.array([np.nan if scores[p][which] is None else scores[p][which] for p in pairs], dtype=np.float64)
    if np.isinf(values).any():
        raise MascInputError("a score is infinite: scores are cosines from -1 to 1")
    return values


def _paired_interval(
    a: np.ndarray, b: np.ndarray | None, rule: SweepRule, label: str, tests: int = 1
) -> list[float] | None:
    """The bootstrap percentile interval of mean(a - b) over the pairs where both are defined (``b`` None: of
    mean(a)), at the rule's confidence shared by ``tests`` comparisons (Bonferroni)."""
    b = np.zeros_like(a) if b is None else b
    difference = (a - b)[~(np.isnan(a) | np.isnan(b))]
    if difference.size < 2:
        return None
    draws = _stable_rng(rule.seed, label).integers(0, difference.size, size=(rule.bootstrap, difference.size))
    means = difference[draws].mean(axis=1)
    tail = (1.0 - rule.confidence) / (2.0 * tests)
    return [float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))]


def t_quantile(p: float, freedom: int) -> float:
    """Student's t quantile at ``p`` for ``freedom`` degrees of freedom, from the normal one (Abramowitz and Stegun,
    Handbook of Mathematical Functions, 26.7.5: within about 0.4 of the exact value at 7 degrees and p = 0.9992,
    closer from there on, which the race's minimum of pairs keeps it above)."""
    z, v = NormalDist().inv_cdf(p), float(freedom)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def _mean(values: np.ndarray) -> float | None:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else None


def sweep_verdict(
    cells: Sequence[SweepCell],
    scores: Mapping[str, Mapping[Pair, tuple]],
    rule: SweepRule = SweepRule(),
    stopped: Mapping[str, str] | None = None,
) -> SweepVerdict:
    """The verdict of a sweep from every cell's (cp, pf) at each (prompt, seed) it was sampled at (``scores``: cell
    name -> pair -> (cp, pf), None where undefined). ``stopped``: cells a race stopped, with why (they are compared
    on the pairs they have and cannot be recommended)."""
    _check_cells(cells)
    rule.check()
    stopped = dict(stopped or {})
    baseline = next(c for c in cells if c.baseline)
    summaries = {}
    for cell in cells:
        given = scores.get(cell.name) or {}
        pairs = sorted(given)
        cp, pf = (_column(given, pairs, 0), _column(given, pairs, 1)) if pairs else (None, None)
        summaries[cell.name] = CellSummary(
            cell,
            len(pairs),
            _mean(cp) if pairs else None,
            _mean(pf) if pairs else None,
            cp_interval=_paired_interval(cp, None, rule, f"cp of {cell.name}") if pairs else None,
            pf_interval=_paired_interval(pf, None, rule, f"pf of {cell.name}") if pairs else None,
            stopped=stopped.get(cell.name, ""),
        )
    base_scores = scores.get(baseline.name) or {}
    for summary in summaries.values():
        summary.eligible = summary.cp is not None and not (summary.stopped and not summary.cell.baseline)
        if summary.cell.baseline:
            continue
        given = scores.get(summary.cell.name) or {}
        shared = sorted(set(given) & set(base_scores))  # paired: PF against the baseline's at the same pairs
        lost = _mean(_column(base_scores, shared, 1) - _column(given, shared, 1)) if shared else None
        summary.eligible = summary.eligible and (lost is None or lost <= rule.pf_margin)
    candidates = [s for s in summaries.values() if s.eligible and s.cp is not None]
    if not candidates:
        raise MascInputError("no cell has a CP: every image's CP is undefined (check the reference masks)")
    best = max(candidates, key=lambda s: s.cp)  # equal means: the first in grid order
    best_scores = scores[best.cell.name]
    for summary in summaries.values():
        given = scores.get(summary.cell.name) or {}
        shared = sorted(set(given) & set(best_scores))
        if summary is not best and shared:
            summary.cp_vs_best = _paired_interval(
                _column(given, shared, 0),
                _column(best_scores, shared, 0),
                rule,
                f"cp {summary.cell.name}",
                tests=len(cells) - 1,
            )
        with_base = sorted(set(given) & set(base_scores))
        if not summary.cell.baseline and with_base:
            summary.pf_vs_baseline = _paired_interval(
                _column(given, with_base, 1), _column(base_scores, with_base, 1), rule, f"pf {summary.cell.name}"
            )
        summary.tied = summary is best or (  # a stopped cell was found worse at the race's confidence
            summary.eligible and not summary.stopped and summary.cp_vs_best is not None and summary.cp_vs_best[1] >= 0.0
        )
    tied = sorted((s for s in summaries.values() if s.tied), key=lambda s: s.cell.weakness)
    recommended = tied[0]
    ordered = [summaries[c.name] for c in cells]
    return SweepVerdict(
        ordered,
        best.cell.name,
        recommended.cell.name,
        [s.cell.name for s in tied],
        _verdict_text(best, recommended, tied, rule),
        images=sum(s.pairs for s in ordered),
    )


def _verdict_text(best: CellSummary, recommended: CellSummary, tied: list[CellSummary], rule: SweepRule) -> str:
    level = f"{100 * rule.confidence:g}%"
    if len(tied) == 1:
        return (
            f"{best.cell.name}: the highest CP ({best.cp:.4f}) with PF within {rule.pf_margin:g} of the baseline's; "
            f"every other eligible cell is below it at {level}"
        )
    names = ", ".join(s.cell.name for s in tied)
    return (
        f"tie: {names} cannot be told apart on CP at {level} (paired intervals hold 0); "
        f"take {recommended.cell.name}, the weakest of them (highest mean CP: {best.cell.name})"
    )


@dataclass
class SweepRace:
    """Successive elimination over a sweep's cells: ``observe`` each round's scores, ``live`` the cells to sample in
    the next round; ``verdict`` once the rounds are done. ``rounds``: how many rounds at most (the union bound)."""

    cells: Sequence[SweepCell]
    rule: SweepRule = SweepRule()
    rounds: int = 1
    scores: dict = field(default_factory=dict)
    stopped: dict = field(default_factory=dict)

    def __post_init__(self):
        _check_cells(self.cells)
        self.rule.check()
        if not 1 <= self.rounds <= 10_000:
            raise MascInputError(f"rounds is {self.rounds}: give 1 to 10,000")
        self.scores = {c.name: {} for c in self.cells}

    @property
    def live(self) -> list[str]:
        """The cells the next round samples, in grid order."""
        return [c.name for c in self.cells if c.name not in self.stopped]

    def observe(self, round_index: int, round_scores: Mapping[str, Mapping[Pair, tuple]]) -> list[str]:
        """One round's scores (cell -> pair -> (cp, pf)) added; returns the cells stopped after it, each with why in
        ``stopped``."""
        for name, given in round_scores.items():
            if name in self.stopped or name not in self.scores:
                raise MascInputError(f"round {round_index} scored cell '{name}', which is not live in this race")
            self.scores[name].update(given)
        return self._eliminate(round_index)

    def _alpha(self) -> float:
        """Each test's share of the race's error: every cell, every round, CP and PF (Bonferroni)."""
        return (1.0 - self.rule.confidence) / (max(1, len(self.cells) - 1) * self.rounds * 2)

    def _eliminate(self, round_index: int) -> list[str]:
        baseline = next(c for c in self.cells if c.baseline)
        live = [c for c in self.cells if c.name not in self.stopped]
        means = {c.name: self._means(c) for c in live}
        base_pf = self._means(baseline)[1]  # what the baseline has, sampled still or stopped

        def eligible(cell) -> bool:  # by its means so far: the leader must be a cell the verdict could recommend
            cp, pf = means[cell.name]
            return cp is not None and (base_pf is None or pf is None or pf >= base_pf - self.rule.pf_margin)

        leader = max((c for c in live if eligible(c)), key=lambda c: means[c.name][0], default=None)
        if leader is None:
            return []
        alpha, now = self._alpha(), []
        for cell in live:
            if cell is leader:
                continue
            why = self._worse_than(cell, leader, 0, alpha, "CP below {other}'s")
            if not why and not cell.baseline:
                why = self._worse_than(
                    cell, baseline, 1, alpha, "PF below the baseline's by more than the margin", self.rule.pf_margin
                )
            if why:
                self.stopped[cell.name] = f"round {round_index}: {why}"
                now.append(cell.name)
        return now

    def _means(self, cell) -> tuple:
        given = self.scores[cell.name]
        pairs = sorted(given)
        return (_mean(_column(given, pairs, 0)), _mean(_column(given, pairs, 1))) if pairs else (None, None)

    def _worse_than(self, cell, other, which: int, alpha: float, words: str, margin: float = 0.0) -> str:
        """Non-empty when ``cell`` is below ``other`` (by more than ``margin``) at the race's confidence."""
        mine, theirs = self.scores[cell.name], self.scores[other.name]
        shared = sorted(set(mine) & set(theirs))
        if len(shared) < MIN_PAIRS_TO_STOP:
            return ""
        difference = _column(theirs, shared, which) - _column(mine, shared, which) - margin
        difference = difference[~np.isnan(difference)]
        if difference.size < MIN_PAIRS_TO_STOP:
            return ""
        spread = float(difference.std(ddof=1)) / math.sqrt(difference.size)
        if float(difference.mean()) - t_quantile(1.0 - alpha, difference.size - 1) * spread > 0.0:
            return words.format(other=other.name)
        return ""

    def verdict(self) -> SweepVerdict:
        """The verdict on what was sampled (``sweep_verdict``), the stopped cells said so."""
        return sweep_verdict(self.cells, self.scores, self.rule, self.stopped)
