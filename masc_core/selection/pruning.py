"""Deciding before the last step (MaSC Sample Until's pruning): which step to judge at, who goes on, what it cost.

A round's candidates are sampled up to step ``s`` of ``steps``; the model's
denoised prediction there (its *preview*) is decoded and scored like a
finished candidate, and only the best ``prune_keep`` of the round (by the
run's ranking key) are sampled on from step ``s``, on the same schedule. A
pruned candidate counts toward the budget (it was started) and is never
returned.

A *study* prunes nothing: every candidate is judged at each of
``STUDY_FRACTIONS`` of its steps and finished, so the score log holds each
candidate's previews beside its final scores, for ``prune-report``.

What pruning cost is counted in ``ledger`` (model evaluations spent against
sampling in full). Pure: no sampling, decoding or scoring here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..errors import MascInputError
from ..limits import BATCH_SIZE
from .ranking import PassRules
from .samplers import UNSPLITTABLE_SAMPLERS, resumes_at_split
from ..metric.scores import ImageScore

STUDY_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6)
"""Where a study judges every candidate, as shares of its steps."""
MAX_JUDGED_STEPS = BATCH_SIZE.high - 1
"""The most judged steps one run can chain: each keeps fewer than the one before, the first fewer than a round."""


@dataclass(frozen=True)
class PruneRules:
    """When to judge and how many go on: ``prune_at`` a share of the steps (0 = off), ``prune_keep`` per round."""

    prune_at: float = 0.0
    prune_keep: int = 1
    study: bool = False
    then: tuple[tuple[float, int], ...] = ()
    """Later judged steps, in order: (a share of the steps, how many of those still sampling go on), each later and
    keeping fewer than the one before (e.g. keep 4 of 8 at 0.1, then 1 at 0.3)."""

    @classmethod
    def from_widgets(cls, widgets: Mapping) -> "PruneRules":
        """One judged step from a node's ``prune_at``, ``prune_keep`` and ``prune_study`` widgets (absent or None in
        older graphs: no pruning). Checked against the run before anything is sampled (``check``)."""
        return cls(
            prune_at=float(widgets.get("prune_at") or 0.0),
            prune_keep=int(widgets.get("prune_keep") or 1),
            study=bool(widgets.get("prune_study")),
        )

    @property
    def active(self) -> bool:
        """Whether any step is judged (a prune or a study)."""
        return self.study or self.prune_at > 0

    @property
    def judged(self) -> tuple[tuple[float, int], ...]:
        """Every judged step that prunes, in order: (share of the steps, how many go on); none for a study."""
        return () if self.study or not self.prune_at > 0 else ((self.prune_at, self.prune_keep), *self.then)

    def followed_by(self, later: "PruneRules") -> "PruneRules":
        """These judged steps, then ``later``'s (MaSC Prune nodes chained): one that judges nothing adds nothing."""
        if later.study or self.study:
            if later.active and self.active:
                raise MascInputError(
                    "prune_study judges every candidate and prunes none: it cannot be chained with another MaSC "
                    "Prune; use one MaSC Prune with prune_study on"
                )
            return later if later.active else self
        if not later.active:
            return self
        if not self.active:
            return later
        return replace(self, then=(*self.then, (later.prune_at, later.prune_keep), *later.then))

    def keep_at(self, step: int, steps: int) -> int:
        """How many of those still sampling go on after judged ``step`` of ``steps``."""
        return next(keep for fraction, keep in self.judged if judged_step(fraction, steps) == step)

    def check(
        self, *, batch_size: int, steps: int, sampler_name: str, denoise: float, noise_mask: bool
    ) -> "PruneRules":
        """These rules, or one line naming the input that cannot work."""
        if not self.active:
            return self
        if not (
            isinstance(self.prune_at, (int, float)) and math.isfinite(self.prune_at) and 0.0 <= self.prune_at < 1.0
        ):
            raise MascInputError(
                f"prune_at {self.prune_at!r} must be at least 0 and below 1 (a share of the steps; 0 = off)"
            )
        self._check_later_steps(steps)
        if not self.study and not 1 <= self.prune_keep <= batch_size:
            raise MascInputError(
                f"prune_keep is {self.prune_keep} but a round has batch_size {batch_size} candidates: keep 1 to "
                f"{batch_size} "
                "(pruning chooses among a round's candidates: raise batch_size to prune)"
            )
        if not self.study and self.prune_keep == batch_size:
            raise MascInputError(
                f"prune_keep {self.prune_keep} keeps the whole round of batch_size {batch_size}: nothing would be "
                "pruned; "
                "lower prune_keep or raise batch_size (or set prune_at 0)"
            )
        if sampler_name in UNSPLITTABLE_SAMPLERS:
            raise MascInputError(
                f"sampler {sampler_name} chooses its own steps and cannot be stopped at a step: pick another sampler "
                "to prune"
            )
        # denoise below 1: KSampler runs the last `steps` steps of a longer schedule; the split counts the steps run.
        if noise_mask:
            raise MascInputError(
                "latent_image has a noise_mask (inpainting): pruning cannot split masked sampling; set prune_at 0"
            )
        if steps < 2:
            raise MascInputError(
                f"steps is {steps}: pruning needs at least 2 steps (one before the judgement, one after)"
            )
        return self

    def _check_later_steps(self, steps: int) -> None:
        """Each later judged step after the one before, on a later step of ``steps``, keeping fewer."""
        if not self.then:
            return
        if self.study:
            raise MascInputError(
                "prune_study judges every candidate and prunes none: it takes no later judged step; disconnect the "
                "earlier MaSC Prune or turn prune_study off"
            )
        for (before, kept), (fraction, keep) in zip(self.judged, self.judged[1:]):
            if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and before < fraction < 1.0):
                raise MascInputError(
                    f"a later judged step at {fraction!r} must come after the one before ({before:g}) and below 1: "
                    "chain MaSC Prune nodes in the order they judge"
                )
            if not 1 <= keep < kept:
                raise MascInputError(
                    f"the judged step at {fraction:g} keeps {keep}, but {kept} go on from the one before: a later step "
                    f"keeps 1 to {kept - 1}"
                )
            if judged_step(fraction, steps) <= judged_step(before, steps):
                raise MascInputError(
                    f"judged steps at {before:g} and {fraction:g} of {steps} steps both fall on step "
                    f"{judged_step(before, steps)}: set them further apart or sample more steps"
                )

    def stops(self, steps: int) -> list[int]:
        """The steps after which the round is judged, ascending, each in 1..steps-1."""
        fractions = STUDY_FRACTIONS if self.study else [fraction for fraction, _ in self.judged]
        return sorted({judged_step(f, steps) for f in fractions})

    def describe(self, steps: int, batch_size: int) -> str:
        """The judged steps in words, for the report: e.g. "pruning at step 1 of 10, 4 of each round of 8 go on;
        at step 3, 1 goes on"."""
        (first_at, first_keep), *later = self.judged
        text = (
            f"pruning at step {judged_step(first_at, steps)} of {steps}, {first_keep} of each round of {batch_size} "
            "go on"
        )
        for fraction, keep in later:
            text += f"; at step {judged_step(fraction, steps)}, {keep} {'goes' if keep == 1 else 'go'} on"
        return text


def judged_step(fraction: float, steps: int) -> int:
    """The step a share of ``steps`` stands for: rounded, at least 1, at most ``steps - 1``."""
    return min(steps - 1, max(1, int(math.floor(fraction * steps + 0.5))))


@dataclass(frozen=True)
class PhasePlan:
    """How a round's candidates are sampled (the host's sampling and the tests' stand-in follow the same plan).

    A sampler that ``resumes_at_split`` runs one call per phase, each ending at the next judged step (the last
    phase at ``last``) and starting where the previous one stopped. Any other sampler is replayed: every call
    starts at step 0, a pruning call stops at its judged step and a survivor's last call runs the whole
    schedule; a study (``prunes`` False) needs only that last call and takes every judged step's preview on the way.
    """

    judged: tuple[int, ...]
    last: int
    resume: bool
    prunes: bool

    @property
    def ends(self) -> list[int]:
        """Where each phase's calls end, in order."""
        return [*self.judged, self.last] if self.resume or self.prunes else [self.last]

    def judged_at(self, end: int) -> list[int]:
        """The steps whose previews a phase ending at ``end`` yields."""
        if end < self.last:
            return [end]
        return [] if self.resume or self.prunes else list(self.judged)

    def first_step(self, previous_end: int) -> int:
        """Where a call of the phase after ``previous_end`` starts sampling."""
        return previous_end if self.resume else 0


def phase_plan(stops: Sequence[int], last: int, sampler_name: str, prunes: bool) -> PhasePlan:
    """The plan for judging at ``stops`` (those inside 1..last-1) on a schedule of ``last`` steps."""
    return PhasePlan(
        judged=tuple(s for s in stops if 0 < s < last), last=last, resume=resumes_at_split(sampler_name), prunes=prunes
    )


@dataclass
class CandidateRun:
    """What one call of a ``RoundSampler`` gave for one candidate."""

    previews: dict[int, Any] = field(default_factory=dict)
    """The model's denoised prediction at each judged step the call was asked for (latent space, batch of one)."""
    final: Any = None
    """The finished sample (latent, batch of one) when the call ran to the schedule's end, else None."""
    evaluations: int = 0
    """Model evaluations the call spent."""


class RoundSampler(Protocol):
    """The one primitive a round needs from whoever samples (core's sampler in ComfyUI, the tests' stand-in)."""

    def sample(
        self, group: list[int], start: int, end: int, judged: list[int], stop_after: int | None
    ) -> list[CandidateRun]:
        """Sample the round's candidates ``group`` (positions) from step ``start`` to ``end``, with the previews at
        ``judged``; with ``stop_after``, the call may stop once that step is judged (its result is not an image)."""

    def drop(self, j: int) -> None:
        """Candidate ``j`` is pruned: forget what it left inside the sampler."""


@dataclass
class RoundResult:
    """A round's samples: the finished candidates (positions, their samples in that order), each candidate's model
    evaluations and, of those, the judged steps a replayed survivor sampled again."""

    positions: list[int]
    samples: list[Any]
    evaluations: list[int]
    replayed: list[int]


def run_round(
    plan: PhasePlan,
    count: int,
    sampler: RoundSampler,
    judge: Callable | None,
    check_interrupt: Callable[[], None],
    *,
    batch: bool = False,
    sampler_name: str = "the sampler",
) -> RoundResult:
    """Sample a round of ``count`` candidates on ``plan``: each phase's calls, its judged steps, who goes on, the rest.

    A plain round is a plan with no judged step: one call for the whole round when ``batch`` (the sampler draws no
    noise of its own), else one per candidate. With judged steps every call samples one candidate;
    ``judge(step, previews, alive)`` gets the previews at a step (one per candidate still sampling, in ``alive``'s
    order, concatenated) and returns the positions that go on.
    """
    import torch

    evaluations, replayed = [0] * count, [0] * count
    alive = list(range(count))
    finished: dict[int, Any] = {}
    start = 0
    for end in plan.ends:
        judged_here = plan.judged_at(end)
        groups = [list(alive)] if batch and not plan.judged else [[j] for j in alive]
        previews: dict[int, list] = {}
        for group in groups:
            check_interrupt()
            before = {j: evaluations[j] for j in group}
            stop_after = None if plan.resume or end == plan.last else end
            for j, run in zip(group, sampler.sample(group, plan.first_step(start), end, judged_here, stop_after)):
                evaluations[j] += run.evaluations
                for step in judged_here:
                    if step not in run.previews:
                        raise MascInputError(
                            f"sampler {sampler_name} did not report step {step} of {plan.last}: pick another sampler "
                            "to prune (or set prune_at 0)"
                        )
                    previews.setdefault(step, []).append(run.previews[step])
                if end == plan.last:
                    finished[j] = run.final
                    replayed[j] = 0 if plan.resume else before[j]  # what it spent before this whole run from step 0
        for step in sorted(previews):
            kept = set(judge(step, torch.cat(previews[step]), list(alive)))
            for j in alive:
                if j not in kept:
                    sampler.drop(j)
            alive = [j for j in alive if j in kept]
        start = end
    positions = sorted(finished)
    return RoundResult(positions, [finished[j] for j in positions], evaluations, replayed)


def survivors(previews: Sequence[ImageScore], keep: int, rules: PassRules) -> list[int]:
    """Positions (in the round) of the ``keep`` best previews by the run's key (``rules``' order; its thresholds do not
    prune: a preview is not the final image); undefined keys last, ties by position."""
    numbered = [
        ImageScore(index=j, cp=p.cp, pf=p.pf, foreground_fraction=p.foreground_fraction) for j, p in enumerate(previews)
    ]
    return sorted(rules.rank(numbered).order[:keep])


def pruned_reason(step: int, steps: int, preview: ImageScore, rules: PassRules) -> str:
    """Why a candidate stopped early, as its verdict and the report say it."""
    key = rules.key(preview)
    shown = "undefined" if key is None else f"{key:+.4f}"
    return f"pruned at step {step} of {steps} (preview {rules.key_label} {shown})"
