"""The decisions of a sample-until loop (MaSC Sample Until): which seeds next, what to keep, when to stop.

Candidate ``i`` is sampled with seed ``seed + i``, so a plain sampler run
with that seed reproduces it. Rounds of ``batch_size`` candidates (the last
one cut to what is left of the budget) are sampled until ``accept``
candidates pass or ``max_candidates`` are spent; a whole round is scored
before the loop decides, so a round may bring more passing candidates than
needed (the best are kept).

A candidate *passes* as in ``masc_core.selection.ranking``: its key (CP, PF or their
weighted sum) is defined, it clears ``min_cp`` / ``min_pf``, and with
``reject_small_masks`` its mask is not below ``min_foreground``.

Memory stays flat in ``max_candidates``: between rounds the loop holds the
payloads (the caller's pixels and latents) of at most ``accept``
candidates, the ones that can still be returned:

- ``on_shortfall="return best"``: the best ``accept`` so far, passing ones
  first, so a shortfall returns the best it saw;
- ``on_shortfall="block"``: passing candidates only (a shortfall returns
  nothing, so nothing else can be returned).

The caller hands each round's payloads over lazily (``take(j)``), so a
candidate that is not retained is never copied. This module is pure: it
never samples, decodes or scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import MascInputError
from ..limits import ACCEPT, BATCH_SIZE, MAX_CANDIDATES
from ..defaults import MIN_FOREGROUND_FRACTION
from .ranking import PassRules, uncertain_mark
from ..metric.report import key_columns, key_columns_header, subject_line
from ..metric.scores import ImageScore

RETURN_BEST = "return best"
BLOCK = "block"
SHORTFALL_CHOICES = (RETURN_BEST, BLOCK)
SEED_LIMIT = 0xFFFFFFFFFFFFFFFF
"""The largest seed ComfyUI's KSampler takes."""
_NOT_TAKEN = object()


@dataclass(frozen=True)
class RunRules:
    """A sample-until run's rules (MaSC Rules' value, and what both Sample Until nodes decide on): what passes and in
    which order (one ``PassRules``), how many to keep, the budget, and the first seed.

    Candidate ``i`` uses ``seed + i``. The seed comes from the sampler's side (a seed widget or a NOISE's seed), so
    MaSC Rules' value carries the default 0 and a Sample Until node sets the run's seed (``dataclasses.replace``).
    """

    passing: PassRules = PassRules()
    accept: int = 1
    max_candidates: int = 16
    batch_size: int = 1
    on_shortfall: str = RETURN_BEST
    seed: int = 0

    @classmethod
    def from_widgets(cls, widgets: Mapping) -> "RunRules":
        """The rules a node's widgets give, read by name: the pass rules (``PassRules.from_widgets``), ``accept``,
        ``max_candidates``, ``batch_size``, ``on_shortfall`` and ``seed`` (0 when the node has none: MaSC Rules).
        Not checked here: the run checks, before anything is sampled."""
        return cls(
            passing=PassRules.from_widgets(widgets),
            accept=int(widgets["accept"]),
            max_candidates=int(widgets["max_candidates"]),
            batch_size=int(widgets["batch_size"]),
            on_shortfall=widgets["on_shortfall"],
            seed=int(widgets.get("seed") or 0),
        )

    def check(self) -> "RunRules":
        """These rules, or a one-line error naming the setting that cannot work."""
        ACCEPT.check(self.accept)
        MAX_CANDIDATES.check(self.max_candidates)
        if self.accept > self.max_candidates:
            raise MascInputError(
                f"accept is {self.accept} but max_candidates is {self.max_candidates}: the budget cannot yield that "
                "many; "
                "raise max_candidates or lower accept"
            )
        BATCH_SIZE.check(self.batch_size)
        self.passing.check(by_name="rank_by")
        if self.on_shortfall not in SHORTFALL_CHOICES:
            raise MascInputError(f"on_shortfall '{self.on_shortfall}' is unknown: use '{RETURN_BEST}' or '{BLOCK}'")
        if not 0 <= self.seed <= SEED_LIMIT - (self.max_candidates - 1):
            raise MascInputError(
                f"seed {self.seed} is outside 0..{SEED_LIMIT - (self.max_candidates - 1)}: candidates use seed .. "
                "seed + max_candidates - 1, which must stay within the sampler's seed range"
            )
        return self

    def __post_init__(self):
        # A run judges every candidate's mask share itself: unset, it is the paper's 5% filter (said here, once).
        if self.passing.min_foreground is None:
            object.__setattr__(self, "passing", replace(self.passing, min_foreground=MIN_FOREGROUND_FRACTION))

    @property
    def min_foreground(self) -> float:
        """The mask share below which a candidate's mask counts as too small."""
        return self.passing.min_foreground

    @property
    def key_label(self) -> str:
        """What the key column holds (as in ranking tables)."""
        return self.passing.key_label

    def describe(self) -> str:
        """The rules in one line, for the report."""
        return self.passing.describe(
            f"; accept {self.accept} of at most {self.max_candidates}, {self.batch_size} per round; on shortfall: "
            f"{self.on_shortfall}"
        )


@dataclass
class Candidate:
    """One sampled candidate and what the loop made of it."""

    index: int
    """Its number in the run: it was sampled with seed ``seed + index``."""
    seed: int
    score: ImageScore
    """Its scores, ``index`` set to the candidate's number."""
    key: float | None
    passed: bool
    reasons: list[str] = field(default_factory=list)
    """Why it did not pass (empty when it did)."""
    uncertain: list[str] = field(default_factory=list)
    """The thresholds its mask-sensitivity bands straddle (the verdict says so)."""
    verdict: str = ""
    """Final word on it, set by ``AcceptanceLoop.outcome``."""
    output: int | None = None
    """Its position among the returned images (0 = best), or None if not returned."""
    pruned: str | None = None
    """Why it was not sampled to the end (pruning: "pruned at step 6 of 20"), else None."""


@dataclass
class Outcome:
    """How a run ended."""

    kept: list[tuple[Candidate, Any]]
    """The returned candidates and their payloads, best first (empty when blocked)."""
    candidates: list[Candidate]
    """Every sampled candidate, in sampling order."""
    accept: int
    max_candidates: int
    stopped_early: bool
    """Enough passed before the budget was spent."""
    shortfall: bool
    """Fewer than ``accept`` passed."""
    blocked: bool
    """Shortfall with on_shortfall="block": nothing is returned."""

    @property
    def used(self) -> int:
        return len(self.candidates)

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.candidates)

    @property
    def seeds(self) -> list[int]:
        """The returned candidates' seeds, best first."""
        return [candidate.seed for candidate, _ in self.kept]


def best_first(candidate: Candidate) -> tuple:
    """Sort key, best first: passing before failing, then by key (undefined last), then by sampling order."""
    return (
        not candidate.passed,
        candidate.key is None,
        -(candidate.key if candidate.key is not None else 0.0),
        candidate.index,
    )


class AcceptanceLoop:
    """Round after round: ``next_seeds()``, sample and score them, ``add_round(scores, take)``; then ``outcome()``."""

    def __init__(self, rules: RunRules):
        self.rules = rules.check()
        self.candidates: list[Candidate] = []
        self._retained: list[tuple[Candidate, Any]] = []
        self._pending: list[int] = []
        self.peak_retained = 0
        """Most payloads held at once between rounds (at most ``accept``)."""

    @property
    def used(self) -> int:
        return len(self.candidates)

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.candidates)

    @property
    def done(self) -> bool:
        return self.passed >= self.rules.accept or self.used >= self.rules.max_candidates

    @property
    def retained(self) -> int:
        return len(self._retained)

    def next_seeds(self) -> list[int]:
        """Seeds of the next round (empty when the run is over)."""
        if self.done:
            self._pending = []
        else:
            count = min(self.rules.batch_size, self.rules.max_candidates - self.used)
            self._pending = [self.rules.seed + self.used + j for j in range(count)]
        return list(self._pending)

    def add_round(
        self, scores: Sequence[ImageScore], take: Callable[[int], Any], pruned: dict[int, str] | None = None
    ) -> None:
        """Judge the round's scores (in ``next_seeds()`` order); ``take(j)`` gives round item j's payload if it is
        retained.

        ``pruned``: round item j -> why it was stopped before the last step. Such a candidate used the budget but
        never passes and is never kept (it has no final image).
        """
        if not self._pending or len(scores) != len(self._pending):
            raise ValueError(f"add_round got {len(scores)} scores for a round of {len(self._pending)} seeds")
        rules = self.rules
        first = self.used
        numbered = [replace(score, index=first + j) for j, score in enumerate(scores)]
        ranking = rules.passing.rank(numbered)
        judged = {item.index: item for item in ranking.items}
        new = []
        pruned = pruned or {}
        for j, (seed, score) in enumerate(zip(self._pending, numbered)):
            if j in pruned:
                new.append(
                    Candidate(
                        index=score.index,
                        seed=seed,
                        score=score,
                        key=None,
                        passed=False,
                        reasons=[pruned[j]],
                        pruned=pruned[j],
                    )
                )
                continue
            item = judged[score.index]
            new.append(
                Candidate(
                    index=score.index,
                    seed=seed,
                    score=score,
                    key=item.key,
                    passed=item.passed,
                    reasons=list(item.reasons),
                    uncertain=list(item.uncertain),
                )
            )
        self.candidates.extend(new)
        self._pending = []
        eligible = [
            (c, _NOT_TAKEN) for c in new if c.pruned is None and (c.passed or rules.on_shortfall == RETURN_BEST)
        ]
        contenders = sorted(self._retained + eligible, key=lambda pair: best_first(pair[0]))[: rules.accept]
        self._retained = [(c, take(c.index - first) if payload is _NOT_TAKEN else payload) for c, payload in contenders]
        self.peak_retained = max(self.peak_retained, len(self._retained))

    def outcome(self) -> Outcome:
        """The kept candidates best first, and a verdict on every candidate."""
        rules = self.rules
        passed = self.passed
        shortfall = passed < rules.accept
        blocked = shortfall and rules.on_shortfall == BLOCK
        kept = [] if blocked else list(self._retained)
        if blocked:
            self._retained = []
        returned = {c.index: position for position, (c, _) in enumerate(kept)}
        for candidate in self.candidates:
            candidate.output = returned.get(candidate.index)
            candidate.verdict = _verdict(candidate, blocked, passed, rules.accept) + uncertain_mark(candidate.uncertain)
        return Outcome(
            kept=kept,
            candidates=list(self.candidates),
            accept=rules.accept,
            max_candidates=rules.max_candidates,
            stopped_early=not shortfall and self.used < rules.max_candidates,
            shortfall=shortfall,
            blocked=blocked,
        )


def _verdict(candidate: Candidate, blocked: bool, passed: int, accept: int) -> str:
    if candidate.pruned is not None:
        return candidate.pruned
    reasons = "; ".join(candidate.reasons)
    if candidate.output is not None:
        return "accepted" if candidate.passed else f"kept below threshold: {reasons}"
    if not candidate.passed:
        return f"rejected: {reasons}"
    if blocked:
        return f"passed, blocked: only {passed} of {accept} passed"
    return "passed, not kept: better candidates filled accept"


def pace_line(seconds: float, used: int, budget: int | None = None) -> str:
    """The time a run took per candidate, measured: 'time: 12.3 s per candidate (49.2 s for 4 candidates)'; with
    ``budget``, what the rest of it would take at that pace (shown while it runs)."""
    per = seconds / max(1, used)
    text = f"time: {per:.1f} s per candidate ({seconds:.1f} s for {used} candidate{'s' if used != 1 else ''})"
    if budget is not None and budget > used:
        text += f"; at most {per * (budget - used):.0f} s more for the other {budget - used}"
    return text


def outcome_report(outcome: Outcome, rules: RunRules, pf_text: str | None = None) -> str:
    """The run as text: a summary line, the rules, one line per candidate in sampling order, the kept seeds."""
    head = (
        f"{min(outcome.passed, outcome.accept)} of {outcome.accept} accepted after {outcome.used} of "
        f"{outcome.max_candidates} candidates"
    )
    if outcome.stopped_early:
        head += " (stopped early)"
    elif outcome.blocked:
        head += "; shortfall: downstream nodes blocked"
    elif outcome.shortfall:
        head += "; shortfall: returning the best so far (below threshold)"
    lines = [head, rules.describe()]
    width = max(4, len(str(max((c.seed for c in outcome.candidates), default=0))))
    lines.append(f"cand  {'seed':>{width}}  {key_columns_header(rules.key_label)}  verdict")
    for c in outcome.candidates:
        lines.append(
            f"{c.index:>4}  "
            f"{c.seed:>{width}}  {key_columns(c.score.cp, c.score.pf, c.key, c.score.foreground_fraction)}  {c.verdict}"
        )
        if c.score.subjects is not None:  # several subjects: CP above is their cp_min
            lines += ["      " + part for part in subject_line(c.score.subjects, c.score.blends).split("\n")]
    if outcome.kept:
        lines.append("kept, best first: " + ", ".join(f"#{c.index} (seed {c.seed})" for c, _ in outcome.kept))
    if pf_text is not None:
        lines.append(f"PF text: {pf_text!r}")
    return "\n".join(lines)
