"""What pruning cost: the ``Ledger`` of a run's model evaluations, and the previews each candidate was judged on.

The ``Ledger`` counts model evaluations (calls of the diffusion model, each one denoising a batch of one; counted
where the sampler calls the model, not from a formula) spent against what the same candidates would have cost
sampled in full. ``preview_record`` is a judged preview as the score log and the PNG entry keep it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..metric.scores import ImageScore, defined_number


@dataclass
class CandidateLedger:
    """One candidate's sampling: its previews (step, scores), model evaluations spent, and whether it finished."""

    index: int
    previews: list[dict[str, Any]] = field(default_factory=list)
    evaluations: int = 0
    finished: bool = True
    pruned_at: int | None = None
    replayed: int = 0
    """Of ``evaluations``, those of the judged steps a replayed survivor sampled again (``resumes_at_split``)."""


@dataclass
class Ledger:
    """A run's model evaluations: spent, and what sampling every started candidate in full would have cost."""

    steps: int
    candidates: list[CandidateLedger] = field(default_factory=list)
    full_cost: dict[int, int] = field(default_factory=dict)
    """Per candidate: evaluations it would have taken in full (a finished one's own count less what it replayed; a
    pruned one's measured from its round's finished candidates, which ran the same schedule)."""

    def add_round(self, entries: list[CandidateLedger]) -> None:
        finished = [e.evaluations - e.replayed for e in entries if e.finished]
        typical = max(finished) if finished else None
        for entry in entries:
            self.candidates.append(entry)
            self.full_cost[entry.index] = (
                entry.evaluations - entry.replayed if entry.finished or typical is None else typical
            )

    @property
    def spent(self) -> int:
        return sum(e.evaluations for e in self.candidates)

    @property
    def in_full(self) -> int:
        return sum(self.full_cost.values())

    @property
    def replayed(self) -> int:
        return sum(e.replayed for e in self.candidates)

    @property
    def pruned(self) -> int:
        return sum(not e.finished for e in self.candidates)

    def summary(self) -> str:
        """E.g. "152 of 320 model evaluations, 2.1x fewer (12 of 16 candidates pruned)", and what replays cost."""
        spent, full = self.spent, self.in_full
        ratio = f", {full / spent:.1f}x fewer" if spent and full > spent else ""
        replayed = f"; {self.replayed} evaluations replayed" if self.replayed else ""
        return (
            f"{spent} of {full} model evaluations{ratio} ({self.pruned} of {len(self.candidates)} candidates "
            f"pruned{replayed})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready totals, and each candidate's evaluations in sampling order (the log's ``evaluations``)."""
        return {
            "steps": self.steps,
            "spent": self.spent,
            "in_full": self.in_full,
            "pruned": self.pruned,
            "candidates": len(self.candidates),
            "replayed": self.replayed,
            "per_candidate": [e.evaluations for e in self.candidates],
        }


def preview_record(step: int, steps: int, score: ImageScore, round_index: int) -> dict[str, Any]:
    """A preview as the log and the PNG entry keep it."""
    return {
        "round": round_index,
        "step": step,
        "steps": steps,
        "cp": defined_number(score.cp),
        "pf": defined_number(score.pf),
    }
