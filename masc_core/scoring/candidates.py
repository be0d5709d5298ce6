"""Scoring a round of sampled candidates (MaSC Sample Until): masks from a segmenter, then CP and PF.

``one_subject_scorer`` and ``subjects_scorer`` build the ``RoundScorer`` a ``selection.sample_until.SampleUntilRun``
calls on each round's decoded candidates (and on pruning's previews). The encoder and the segmenter are the host's
hosted models: ``ready()`` gives the model on its device (ComfyUI's memory management loads it there).
"""

from __future__ import annotations

from typing import Callable

import torch

from .batch import score_images
from .subject_scoring import score_subjects


def candidate_masks(segmenter, arrays: list, subject: str, threshold: float, progress=None):
    """The candidates' masks [B,H,W] from the segmenter, or None without one."""
    if segmenter is None:
        return None
    masks = segmenter.ready().masks(arrays, subject, threshold=float(threshold), progress=progress)
    return torch.stack(masks)


def one_subject_scorer(
    *,
    encoder,
    references: list,
    reference_masks,
    segmenter,
    mask_subject: str,
    mask_threshold: float,
    prompt: str,
    subject: str,
    min_foreground: float,
    progress: Callable | None = None,
) -> Callable:
    """Arrays -> (ScoreBatch, masks or None): one subject against its reference views, as MaSC Score scores it."""

    def score_round(arrays):
        masks = candidate_masks(segmenter, arrays, mask_subject, mask_threshold, progress)
        batch = score_images(
            encoder.ready(),
            arrays,
            reference=references,
            reference_mask=reference_masks,
            mask=masks,
            prompt=prompt,
            subject=subject,
            cp=True,
            pf=True,
            min_foreground=min_foreground,
            cache_outputs=False,
            progress=progress,
            bands=True,
        )
        return batch, masks

    return score_round


def subjects_scorer(
    *,
    encoder,
    subjects: list,
    segmenter,
    mask_threshold: float,
    prompt: str,
    min_foreground: float,
    reject_blends: bool,
    progress: Callable | None = None,
) -> Callable:
    """Arrays -> (ScoreBatch, the union of the subjects' masks or None): several subjects, as MaSC Score Subjects."""

    def score_round(arrays):
        per_subject = [candidate_masks(segmenter, arrays, s.names, mask_threshold, progress) for s in subjects]
        multi = score_subjects(
            encoder.ready(),
            arrays,
            subjects=subjects,
            output_masks=None if segmenter is None else per_subject,
            prompt=prompt,
            min_foreground=min_foreground,
            cache_outputs=False,
            progress=progress,
        )
        batch = multi.as_score_batch(reject_blends=reject_blends)
        union = None if segmenter is None else torch.stack(per_subject).amax(dim=0)
        return batch, union

    return score_round
