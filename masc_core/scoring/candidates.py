"""A Sample Until run with its candidates scored: masks from a segmenter, then CP and PF, round after round.

``run_sample_until`` is what both MaSC Sample Until nodes call with their converted inputs: it checks the rules
against the scoring inputs and the sampler, gives the ``RoundScorer`` (``CandidateScoring.score_round`` under the
run's rules) that a ``selection.sample_until.SampleUntilRun`` calls on each round's decoded candidates (and on
pruning's previews), runs it and gives back the scores and the report. The encoder and the segmenter are the host's
hosted models: ``ready()`` gives the model on its device (ComfyUI's memory management loads it there).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..errors import MascInputError
from ..metric.masks import masks_for_batch
from ..metric.scores import ScoreBatch, ScoreContext
from ..selection.clip import ClipChoice
from ..metric.subjects import all_names
from ..selection.acceptance import RunRules
from ..selection.pruning import PruneRules
from ..selection.sample_until import CandidateSampler, RunResult, SampleUntilRun
from .batch import score_images
from .clip import score_clip
from .subject_scoring import score_subjects


@dataclass(frozen=True)
class CandidateScoring:
    """How a Sample Until run scores its candidates, from the inputs a node converted: one subject against its
    reference views (``references``, ``reference_masks``, ``subject``), or several (``subjects``: ``Subject``s), with
    each candidate's masks from ``segmenter`` when one is given (PF needs them)."""

    encoder: Any
    prompt: str
    segmenter: Any = None
    mask_threshold: float = 0.4
    references: list | None = None
    reference_masks: Any = None
    subject: str = ""
    mask_subject: str = ""
    """The words that prompt the segmenter for one subject (the subject's name when empty)."""
    subjects: list | None = None
    progress: Callable | None = None
    """Called as the encoder and the segmenter work (the host checks for a cancelled run there)."""
    clip: ClipChoice = ClipChoice()
    """Video candidates (clips): the frames scored (``selection.clip.frames_to_score``)."""

    @property
    def label(self) -> str:
        """The subject name(s) the scores record: one subject's as given, several subjects' names comma-separated."""
        return self.subject if self.subjects is None else ", ".join(all_names(self.subjects))

    def check(self, rules: RunRules, *, clips: bool = False) -> None:
        """A one-line error for rules these inputs cannot follow (PF without masks, blends without subjects), or for
        candidates they cannot score (``clips``: each candidate a video clip), or reference masks that do not fit
        the views."""
        if self.references is not None:
            masks_for_batch(self.reference_masks, len(self.references), "reference_mask")
        if clips and self.subjects is not None:
            raise MascInputError(
                "several subjects in a video are not scored yet: connect one subject's reference and mask instead of "
                "'subjects'"
            )
        if self.segmenter is None:
            uses_pf = [
                (rules.passing.by in ("pf", "both"), f"rank_by '{rules.passing.by}'"),
                (rules.passing.min_pf is not None, "min_pf"),
                (rules.passing.reject_small_masks, "reject_small_masks"),
            ]
            for used, name in uses_pf:
                if used:
                    raise MascInputError(
                        f"{name} needs the candidates' masks, and no segmenter is connected: connect Load MaSC Auto "
                        "Mask Model or Load MaSC SAM3 Model to 'segmenter', or rank by cp with min_pf off (-1) and "
                        "reject_small_masks off (CP only)"
                    )
        on_blend = rules.passing.on_blend
        if self.subjects is None and on_blend != "report":
            raise MascInputError(
                f"on_blend is '{on_blend}' but 'subjects' is not connected: blends exist between several subjects; set "
                "it to report"
            )
        if on_blend == "reject" and self.segmenter is None:
            raise MascInputError(
                "on_blend 'reject' needs each subject's region in the candidates: connect a segmenter, or set on_blend "
                "to report"
            )

    def round_scorer(self, rules: RunRules) -> Callable:
        """Arrays -> (ScoreBatch, masks or None), for the candidates of one round under ``rules``."""
        return functools.partial(self.score_round, rules)

    def score_round(self, rules: RunRules, arrays: list) -> tuple:
        """One round's decoded candidates (RGB uint8 images, or clips [T,H,W,C]) scored under ``rules``: (ScoreBatch,
        their masks [B,H,W] or None)."""
        if self.subjects is not None:
            return self._score_subjects(rules, arrays)
        if is_clip(arrays[0]):
            return self._score_clips(rules, arrays)
        masks = self._masks(arrays, self.mask_subject or self.subject)
        batch = score_images(
            self.encoder.ready(),
            arrays,
            reference=self.references,
            reference_mask=self.reference_masks,
            mask=masks,
            prompt=self.prompt,
            subject=self.subject,
            cp=True,
            pf=True,
            min_foreground=rules.min_foreground,
            cache_outputs=False,
            progress=self.progress,
            bands=True,
        )
        return batch, masks

    def _masks(self, arrays: list, words: str):
        """The candidates' masks [B,H,W] from the segmenter prompted with ``words``, or None without one."""
        if self.segmenter is None:
            return None
        found = self.segmenter.ready().masks(
            arrays, words, threshold=float(self.mask_threshold), progress=self.progress
        )
        return torch.stack(found)

    def _score_clips(self, rules: RunRules, clips: list) -> tuple:
        """Video candidates as MaSC Score Video scores a clip: one row per clip, its worst frame's CP and PF
        (``ClipScore.as_image_score``); no masks (a clip's frames have one each)."""
        words = self.mask_subject or self.subject
        rows = []
        for index, clip in enumerate(clips):
            scored = score_clip(
                self.encoder.ready(),
                clip,
                reference=self.references,
                reference_mask=self.reference_masks,
                mask_frames=None if self.segmenter is None else lambda pictures: self._masks(pictures, words),
                prompt=self.prompt,
                subject=self.subject,
                every_nth_frame=self.clip.every_nth_frame,
                max_frames=self.clip.max_frames,
                rules=rules.passing,
                progress=self.progress,
                min_foreground=rules.min_foreground,
                cache_outputs=False,
            )
            rows.append((scored.clip.as_image_score(index), scored.batch))
        first = rows[0][1]
        batch = ScoreBatch(
            scores=[row for row, _ in rows], references=first.references, min_foreground=first.min_foreground
        )
        return batch, None

    def _score_subjects(self, rules: RunRules, arrays: list) -> tuple:
        """Several subjects, as MaSC Score Subjects scores them: (ScoreBatch, the union of the subjects' masks or
        None)."""
        per_subject = [self._masks(arrays, s.names) for s in self.subjects]
        multi = score_subjects(
            self.encoder.ready(),
            arrays,
            subjects=self.subjects,
            output_masks=None if self.segmenter is None else per_subject,
            prompt=self.prompt,
            min_foreground=rules.min_foreground,
            cache_outputs=False,
            progress=self.progress,
        )
        batch = multi.as_score_batch(reject_blends=rules.passing.on_blend == "reject")
        union = None if self.segmenter is None else torch.stack(per_subject).amax(dim=0)
        return batch, union


@dataclass
class FinishedRun:
    """A Sample Until run's outcome and pictures (``result``), every candidate's scores and the report."""

    result: RunResult
    scores: ScoreBatch
    report: str


def run_sample_until(
    rules: RunRules,
    pruning: PruneRules,
    sampler: CandidateSampler,
    scoring: CandidateScoring,
    *,
    context: ScoreContext,
    noise_mask: bool = False,
    saves_metadata: bool = True,
) -> FinishedRun:
    """Check everything, then sample and score round after round until ``rules`` are met or the budget is spent.

    The rules' own errors come first, then what the scoring inputs and the sampler cannot do; no candidate is sampled
    before every check has passed. ``context`` names the node, subject and encoder the scores record; ``noise_mask``
    says the latent carries one (inpainting: pruning cannot split masked sampling).
    """
    rules = rules.check()
    scoring.check(rules, clips=sampler.clips)
    pruning = pruning.check(
        batch_size=rules.batch_size,
        steps=sampler.steps,
        sampler_name=sampler.label,
        denoise=sampler.denoise,
        noise_mask=noise_mask,
    )
    run = SampleUntilRun(rules, pruning, sampler, scoring.round_scorer(rules))
    result = run.run()
    scores = run.scores(result, context)
    report = run.report(result, scores, has_segmenter=scoring.segmenter is not None, saves_metadata=saves_metadata)
    return FinishedRun(result, scores, report)


def is_clip(candidate) -> bool:
    """Whether a decoded candidate is a video clip [T,H,W,C] rather than an image [H,W,C]."""
    return len(getattr(candidate, "shape", ())) == 4
