"""A MaSC Sweep run: every cell sampled at the same (prompt, seed) pairs, scored as it goes, raced if asked.

``run_sweep`` is what the MaSC Sweep node calls with its converted inputs. Racing, a round is one seed over every
prompt for the cells still live; without it the whole grid is one round. The host's ``SweepSampler`` samples each
image (only the host can run core's sampler and apply a LoRA), cell after cell; a cell's images of one prompt are
scored together (``CandidateScoring``, the path Sample Until's candidates take:
masks from the segmenter, then CP and PF), and with racing on, ``selection.sweep.SweepRace`` says which cells the
next round samples. Every check runs before the first image is sampled. The verdict is ``selection.sweep``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from ..errors import MascInputError
from ..metric.scores import ScoreBatch, ScoreContext
from ..selection.acceptance import RunRules
from ..selection.contact_sheet import thumbnail
from ..selection.sweep import Pair, SweepCell, SweepRace, SweepRule, SweepVerdict, cell_status, sweep_verdict
from ..selection.sweep_figures import MAX_GRID_COLUMNS
from .candidates import CandidateScoring

MAX_SWEEP_PROMPTS = 64
MAX_SWEEP_SEEDS = 64
MAX_SWEEP_CELLS = 32
MAX_SWEEP_GRID = 512
"""Images one sweep samples at most (cells x prompts x seeds), checked before the first."""
GRID_TILE = 192


class SweepSampler(Protocol):
    """What the host fills: one image of a cell at a (prompt, seed), with the graph's own generator."""

    def sample(self, cell: SweepCell, prompt: str, seed: int) -> np.ndarray:
        """The cell's image at ``prompt`` and ``seed``: RGB uint8 [H, W, 3]."""

    def progress(self, done: int, total: int, picture: np.ndarray | None) -> None:
        """``done`` of ``total`` images sampled; ``picture`` the newest one (the node shows it)."""

    def check_interrupt(self) -> None:
        """Raise if the user cancelled the run (checked between images)."""


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep samples: its ``cells`` (weakest first, one baseline), ``prompts`` and ``seeds``, and whether
    it races (stops sampling the cells that cannot win after each round)."""

    cells: Sequence[SweepCell]
    prompts: Sequence[str]
    seeds: Sequence[int]
    race: bool = False

    @property
    def pairs(self) -> list[Pair]:
        """Every (prompt, seed), prompt by prompt."""
        return [(prompt, seed) for prompt in self.prompts for seed in self.seeds]

    @property
    def images(self) -> int:
        """Images the full grid holds."""
        return len(self.cells) * len(self.prompts) * len(self.seeds)

    def check(self) -> "SweepPlan":
        """This plan, or one line naming what to change."""
        if not 1 <= len(self.prompts) <= MAX_SWEEP_PROMPTS:
            raise MascInputError(f"prompts has {len(self.prompts)} lines: give 1 to {MAX_SWEEP_PROMPTS}, one per line")
        repeated = [p for k, p in enumerate(self.prompts) if p in self.prompts[:k]]
        if repeated:
            raise MascInputError(f"prompts repeats '{repeated[0][:60]}': give each prompt once")
        if not 1 <= len(self.seeds) <= MAX_SWEEP_SEEDS or len(set(self.seeds)) != len(self.seeds):
            raise MascInputError(f"the sweep's seeds must be 1 to {MAX_SWEEP_SEEDS} different seeds")
        if not 2 <= len(self.cells) <= MAX_SWEEP_CELLS:
            raise MascInputError(
                f"the sweep has {len(self.cells)} cells: give the baseline and 1 to {MAX_SWEEP_CELLS - 1} more "
                "(connect MaSC Sweep LoRA)"
            )
        if self.images > MAX_SWEEP_GRID:
            raise MascInputError(
                f"the sweep is {len(self.cells)} cells x {len(self.prompts)} prompts x {len(self.seeds)} seeds = "
                f"{self.images} images, over the {MAX_SWEEP_GRID} one run samples: use fewer seeds, prompts or cells"
            )
        return self


@dataclass
class SweepOutcome:
    """What a sweep gives back: the verdict, every cell's (cp, pf) per pair, which images were sampled (cell name,
    pair) in grid order (cell by cell, pair by pair; the host keeps the images), the grid's thumbnails, how many
    images the full grid would have held, and ``batch``: every sampled image's scores in grid order, each with its
    cell, seed and its cell's status (what the PNG metadata and the score log record)."""

    verdict: SweepVerdict
    scores: dict
    sampled: list = field(default_factory=list)
    pictures: dict = field(default_factory=dict)
    planned: int = 0
    batch: ScoreBatch | None = None


def run_sweep(sampler: SweepSampler, plan: SweepPlan, scoring: CandidateScoring, rule: SweepRule) -> SweepOutcome:
    """Sample, score and decide a sweep (every check first; ``scoring.segmenter`` is required: PF needs masks)."""
    plan.check()
    rule.check()
    if scoring.segmenter is None:
        raise MascInputError(
            "MaSC Sweep needs each image's subject mask for PF: connect Load MaSC Auto Mask Model or Load MaSC SAM3 "
            "Model to 'segmenter'"
        )
    scoring.check(RunRules())
    # Racing decides after each seed; a full grid is one round. Within a round each cell samples all its images
    # before the next cell is patched (a LoRA is applied once per cell and round, not once per image).
    rounds = [[seed] for seed in plan.seeds] if plan.race else [list(plan.seeds)]
    race = SweepRace(plan.cells, rule, rounds=len(rounds)) if plan.race else None
    live = {c.name for c in plan.cells}
    scores: dict[str, dict] = {c.name: {} for c in plan.cells}
    items: dict = {}  # (cell name, pair) -> its ImageScore
    references: list = []
    shown = set(plan.pairs[:MAX_GRID_COLUMNS])
    pictures: dict[str, dict] = {c.name: {} for c in plan.cells}
    done = 0
    for round_index, seeds in enumerate(rounds, start=1):
        round_scores: dict[str, dict] = {}
        for cell in [c for c in plan.cells if c.name in (race.live if race else live)]:
            round_scores[cell.name] = {}
            for prompt in plan.prompts:
                images = []
                for seed in seeds:
                    sampler.check_interrupt()
                    images.append(np.ascontiguousarray(sampler.sample(cell, prompt, seed), dtype=np.uint8))
                    done += 1
                    sampler.progress(done, plan.images, images[-1])
                batch, _ = dataclasses.replace(scoring, prompt=prompt).score_round(RunRules(), images)
                references = batch.references
                for seed, image, item in zip(seeds, images, batch.scores):
                    round_scores[cell.name][(prompt, seed)] = (item.cp, item.pf)
                    items[(cell.name, (prompt, seed))] = item
                    if (prompt, seed) in shown:
                        pictures[cell.name][(prompt, seed)] = thumbnail(image, GRID_TILE)
        if race:
            race.observe(round_index, round_scores)
        else:
            for name, given in round_scores.items():
                scores[name].update(given)
    if race:
        scores, verdict = race.scores, race.verdict()
    else:
        verdict = sweep_verdict(plan.cells, scores, rule)
    sampled = [(cell.name, pair) for cell in plan.cells for pair in plan.pairs if pair in scores[cell.name]]
    status = {summary.cell.name: cell_status(summary, verdict, why=True) or "sampled" for summary in verdict.cells}
    batch = ScoreBatch(
        scores=[dataclasses.replace(items[key], index=k) for k, key in enumerate(sampled)],
        references=references,
        context=ScoreContext(
            seeds=[seed for _, (_, seed) in sampled],
            verdicts=[status[name] for name, _ in sampled],
            cells=[name for name, _ in sampled],
        ),
    )
    return SweepOutcome(verdict, scores, sampled, pictures, planned=plan.images, batch=batch)
