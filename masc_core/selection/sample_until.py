"""A whole Sample Until run: seeds, rounds, pruning's judged steps, who survives, acceptance, the ledger, the report.

Both MaSC Sample Until nodes convert their inputs, build a ``SampleUntilRun`` and call ``run()``; what differs between
them is only how a round is sampled, which the host supplies behind ``CandidateSampler`` (ComfyUI's core sampling for
KSampler's inputs or for a GUIDER; the tests' stand-in). Scoring a round's decoded candidates is a ``RoundScorer``
(``masc_core.scoring.candidates`` builds one). Decisions live here and in the pure modules this drives:
``acceptance`` (seeds, verdicts, what is kept), ``pruning`` (judged steps, survivors, the ledger).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

from ..metric.scores import ImageScore, ScoreBatch, ScoreContext
from ..metric.report import format_score, format_share
from ..resources import release_freed_memory
from .clip import candidate_arrays, picture_of, preview_clips
from .acceptance import AcceptanceLoop, Candidate, Outcome, RunRules, best_first, outcome_report, pace_line
from .contact_sheet import thumbnail, thumbnail_side
from .ledger import CandidateLedger, Ledger, preview_record
from .pruning import PruneRules, RoundResult, pruned_reason, survivors
from .samplers import samples_one_by_one, split_note


class CandidateSampler(Protocol):
    """How the candidates are sampled: what the host fills (core's sampling in ComfyUI, the tests' stand-in)."""

    steps: int
    label: str
    """The sampler's name (core's), or what it is when it is none of core's."""
    known: bool
    """Whether ``label`` is one of core's sampler names (what pruning's tables describe)."""
    batches: bool
    """Whether a plain round may sample the round as one batch (the sampler drawing no noise of its own)."""
    denoise: float
    clips: bool
    """Whether each candidate decodes to a video clip (the latent has frames): known before anything is sampled, so
    what the scorer cannot do for a clip is refused first."""

    def sample_round(
        self, seeds: list[int], *, done: int, stops: Sequence[int], judge: Callable | None, prunes: bool
    ) -> RoundResult:
        """Sample candidates ``seeds`` (``done`` sampled before them) through ``pruning.run_round``: to each of
        ``stops`` first, where ``judge(step, previews, alive)`` says who goes on; a plain round has no stop."""

    def decode(self, samples) -> Any:
        """Latents -> IMAGE [B,H,W,C] float 0..1 (the pixels the node returns)."""

    def start(self, budget: int) -> None:
        """The run begins and samples at most ``budget`` candidates (the length of a progress bar)."""

    def show_round(self, news: "RoundNews") -> None:
        """A round is finished: show ``news`` while the run goes on (a host's node text and preview)."""

    def check_interrupt(self) -> None:
        """Raise the host's own exception when the user has cancelled the run (checked before every round)."""


RoundScorer = Callable[[list], tuple]
"""A round's decoded candidates (RGB uint8 arrays) -> (ScoreBatch, their masks [B,H,W] or None)."""


@dataclass
class Kept:
    """A retained candidate's tensors, copied out of its round (a view would keep the whole round alive)."""

    image: Any
    latent: Any
    mask: Any


@dataclass
class RunResult:
    """What a run gives: the loop's outcome, the first round's scores (their references), pruning's ledger, one
    small picture per candidate (its final image, or its last preview when pruned) and the seconds it took."""

    outcome: Outcome
    first_batch: Any
    ledger: Ledger | None
    thumbnails: list = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class SampledRound:
    """A round's candidates as the run keeps them: their scores in seed order (pruned ones marked), ``take(j)`` to copy
    a kept one's tensors out, who was pruned and why, a thumbnail each, and the round's ``ScoreBatch``."""

    scores: list
    take: Callable[[int], Kept]
    pruned: dict
    thumbnails: list
    batch: Any


@dataclass
class RoundNews:
    """What a finished round shows on the running node, while the run goes on."""

    text: str
    """The pace so far, then a line per candidate of the round: number, seed, scores and how it fared."""
    picture: Any = None
    """The round's best finished candidate, small (RGB uint8), or None when every one was pruned."""


def round_news(candidates: list[Candidate], thumbnails: list, pace: str) -> RoundNews:
    """The news of a round: its candidates (in sampling order, as the loop judged them) and their thumbnails."""
    lines = [pace]
    for c in candidates:
        fared = c.pruned or ("passes" if c.passed else "fails: " + "; ".join(c.reasons))
        scores = f"CP {format_score(c.score.cp)}, PF {format_score(c.score.pf)}"
        if c.score.foreground_fraction is not None:
            scores += f", mask {format_share(c.score.foreground_fraction).strip()}"
        lines.append(f"#{c.index} seed {c.seed}: {scores}: {fared}")
    finished = [j for j, c in enumerate(candidates) if c.pruned is None]
    best = min(finished, key=lambda j: best_first(candidates[j]), default=None)  # the order the loop keeps them in
    return RoundNews("\n".join(lines), None if best is None else thumbnails[best])


class CandidateRound:
    """One round: sample (with pruning, to each judged step first: score the previews, finish the survivors), score."""

    def __init__(
        self,
        sampler: CandidateSampler,
        score_round: RoundScorer,
        rules: RunRules,
        pruning: PruneRules,
        round_index: int,
    ):
        self.sampler, self.score_round, self.rules, self.pruning = sampler, score_round, rules, pruning
        self.steps, self.round_index = sampler.steps, round_index
        self.thumbnail_side = thumbnail_side(rules.max_candidates)  # the whole budget's thumbnails stay bounded
        self.previews: dict[int, list[dict]] = {}
        self.last_preview: dict[int, tuple] = {}
        self.pruned: dict[int, str] = {}

    def judge(self, step: int, previews, alive: list[int]) -> list[int]:
        """Score the previews at ``step`` of the candidates still sampling; the positions that go on."""
        arrays = preview_clips(candidate_arrays(self.sampler.decode(previews), "decoded previews"))
        batch, _ = self.score_round(arrays)
        for position, j in enumerate(alive):
            score = batch.scores[position]
            self.previews.setdefault(j, []).append(preview_record(step, self.steps, score, self.round_index))
            self.last_preview[j] = (score, thumbnail(picture_of(arrays[position], score), self.thumbnail_side), step)
        if self.pruning.study:
            return list(alive)
        passing = self.rules.passing
        chosen = [alive[p] for p in survivors(batch.scores, self.pruning.keep_at(step, self.steps), passing)]
        for position, j in enumerate(alive):
            if j not in chosen:
                self.pruned[j] = pruned_reason(step, self.steps, batch.scores[position], passing)
        return chosen

    def run(self, seeds: list[int], done: int, ledger: Ledger | None) -> SampledRound:
        """Sample, decode and score candidates ``seeds`` (``done`` sampled before them), pruning as the rules say."""
        import torch

        judged = self.pruning.active
        result = self.sampler.sample_round(
            seeds,
            done=done,
            stops=self.pruning.stops(self.steps) if judged else (),
            judge=self.judge if judged else None,
            prunes=not self.pruning.study,
        )
        positions = result.positions
        samples = torch.cat(result.samples) if result.samples else None
        images = self.sampler.decode(samples)
        arrays = candidate_arrays(images, "decoded candidates")
        batch, masks = self.score_round(arrays)
        round_scores, thumbnails = [], []
        for j in range(len(seeds)):
            if j in positions:
                position = positions.index(j)
                round_scores.append(replace(batch.scores[position], previews=self.previews.get(j)))
                picture = picture_of(arrays[position], batch.scores[position])
                thumbnails.append(thumbnail(picture, self.thumbnail_side))
            else:
                preview, picture, _ = self.last_preview[j]
                round_scores.append(self._pruned_score(preview, self.pruned[j], self.previews.get(j)))
                thumbnails.append(picture)  # its last preview: the contact sheet shows what was judged
        if ledger is not None:
            ledger.add_round(self._ledger_entries(seeds, done, result))

        def take(j):
            p = positions.index(j)
            return Kept(
                images[p : p + 1].clone(),
                samples[p : p + 1].clone(),
                None if masks is None else masks[p : p + 1].clone(),
            )

        return SampledRound(round_scores, take, dict(self.pruned), thumbnails, batch)

    @staticmethod
    def _pruned_score(preview: ImageScore, why: str, previews) -> ImageScore:
        return replace(
            preview,
            cp=None,
            pf=None,
            cp_per_reference=[],
            cp_band=None,
            pf_band=None,
            band_notes=[],
            cp_undefined=why,
            pf_undefined=why,
            previews=previews,
        )

    def _ledger_entries(self, seeds: list[int], done: int, result: RoundResult) -> list[CandidateLedger]:
        return [
            CandidateLedger(
                index=done + j,
                previews=self.previews.get(j, []),
                evaluations=result.evaluations[j],
                finished=j in result.positions,
                pruned_at=None if j in result.positions else self.last_preview[j][2],
                replayed=result.replayed[j],
            )
            for j in range(len(seeds))
        ]


class SampleUntilRun:
    """Rounds until ``rules`` are met or the budget is spent: ``run()`` once, then ``report(...)``."""

    def __init__(
        self,
        rules: RunRules,
        pruning: PruneRules,
        sampler: CandidateSampler,
        score_round: RoundScorer,
    ):
        self.rules, self.sampler, self.score_round = rules, sampler, score_round
        self.pruning = pruning

    def run(self) -> RunResult:
        """Sample, score and judge round after round; every candidate's thumbnail kept small enough that the budget's
        thumbnails together stay within ``contact_sheet.CANDIDATE_PIXELS`` (memory flat in the budget)."""
        rules, pruning = self.rules, self.pruning
        loop = AcceptanceLoop(rules)
        result = RunResult(
            outcome=None, first_batch=None, ledger=Ledger(steps=self.sampler.steps) if pruning.active else None
        )
        started = time.monotonic()
        self.sampler.start(rules.max_candidates)
        while seeds := loop.next_seeds():
            self.sampler.check_interrupt()
            candidate_round = CandidateRound(
                self.sampler, self.score_round, rules, pruning, len(loop.candidates) // rules.batch_size
            )
            sampled = candidate_round.run(seeds, loop.used, result.ledger)
            result.thumbnails += sampled.thumbnails
            result.first_batch = result.first_batch or sampled.batch
            loop.add_round(sampled.scores, sampled.take, sampled.pruned)
            thumbnails = sampled.thumbnails
            del candidate_round, sampled
            # What a candidate costs on this machine, so far (on a CPU a first run shows at once what the budget
            # means), and the round's candidates with their scores, on the node while the run goes on.
            pace = pace_line(time.monotonic() - started, loop.used, rules.max_candidates)
            self.sampler.show_round(round_news(loop.candidates[-len(seeds) :], thumbnails, pace))
            del thumbnails
            release_freed_memory()  # the round's working buffers are gone: memory stays flat in the budget
        result.outcome = loop.outcome()
        result.seconds = time.monotonic() - started
        return result

    @staticmethod
    def scores(result: RunResult, context: ScoreContext) -> ScoreBatch:
        """Every candidate's scores in sampling order, with ``context`` (node, subject, encoder) completed by the run:
        seeds, verdicts, which were kept and pruning's ledger."""
        outcome = result.outcome
        return ScoreBatch(
            scores=[c.score for c in outcome.candidates],
            references=result.first_batch.references,
            min_foreground=result.first_batch.min_foreground,
            context=replace(
                context,
                seeds=[c.seed for c in outcome.candidates],
                verdicts=[c.verdict for c in outcome.candidates],
                kept=[c.index for c, _ in outcome.kept],
                ledger=None if result.ledger is None else result.ledger.to_dict(),
            ),
        )

    def report(self, result: RunResult, scores, *, has_segmenter: bool, saves_metadata: bool) -> str:
        """The loop's report, what the run cost (measured) and what the user should know about its setup."""
        rules, pruning, ledger, sampler = self.rules, self.pruning, result.ledger, self.sampler
        notes = [pace_line(result.seconds, result.outcome.used)]
        if ledger is not None:
            notes.append(f"{self._pruning_line(ledger)}: {ledger.summary()}")
            note = split_note(sampler.label, known=sampler.known)
            if note and not pruning.study:
                notes.append(note)
        if not has_segmenter:
            notes.append("no segmenter connected: PF undefined, CP only")
        if scores.scores[0].subjects is not None:
            labels = ", ".join(figure["subject"] for figure in scores.scores[0].subjects)
            notes.append(
                f"several subjects ({labels}): CP is cp_min, the weakest subject's; each candidate's subjects are "
                "under its line"
            )
        if rules.batch_size > 1 and sampler.batches and samples_one_by_one(sampler.label) and ledger is None:
            notes.append(
                f"{sampler.label} draws noise while sampling: each candidate of a round was sampled in its own call, "
                "so a KSampler with its seed reproduces it"
            )
        if not saves_metadata:
            notes.append(
                "ComfyUI passed no PNG metadata (an API prompt without extra_data.extra_pnginfo): scores are not saved "
                "in PNGs"
            )
        text = outcome_report(result.outcome, rules, scores.scores[0].encoded_prompt)
        return "\n".join([text] + notes)

    def _pruning_line(self, ledger: Ledger) -> str:
        stops = self.pruning.stops(ledger.steps)
        if self.pruning.study:
            judged = ", ".join(str(s) for s in stops)
            return f"study: every candidate judged at steps {judged} of {ledger.steps}, none pruned"
        return self.pruning.describe(ledger.steps, self.rules.batch_size)
