"""MaSC itself: CP (Eq. 1) and PF (Eq. 2), the columns every evaluation has.

Not a plug-in like the baselines: the run always scores it, and its
details (the stripped prompt, per-view CPs, why a score is undefined, the
mask shares) are fields of every record. Listed in the registry so its
columns come first and are compared with the human ratings like any other.
"""

from __future__ import annotations

from ...metric.scores import ImageScore
from ...scoring.batch import score_images
from ...scoring.subject_scoring import score_subjects
from ...metric.subjects import Subject
from .base import ChunkInputs, Column, GroupInputs, Models

SEVERAL_SUBJECTS = "subjects"
"""The aspect of the columns only several-subject rows have: summarised, never compared with a human rating."""
COLUMNS = (
    Column("cp", "cp"),
    Column("pf", "pf"),
    Column("cp_mean", SEVERAL_SUBJECTS),
    Column("blend", SEVERAL_SUBJECTS),
)
"""With several subjects per image ``cp`` is their cp_min (the weakest subject), ``cp_mean`` their mean CP, and
``blend`` 1 when the image has a blend warning, 0 when not (undefined without output masks): its mean over
rows is the blend rate."""


def score_chunk(
    models: Models, group: GroupInputs, chunk: ChunkInputs, min_foreground: float
) -> tuple[list[ImageScore], list[float]]:
    """MaSC scores of the chunk's rows (features come from the encoder's cache) and the reference masks' shares.

    ``score_images`` takes masks for all outputs or for none, so rows with
    and without an output mask are scored in two calls.
    """
    if group.views_per_subject:
        return _several_subjects(models, group, chunk, min_foreground)
    scores: list[ImageScore | None] = [None] * len(chunk.outs)
    ref_fractions: list[float] = []
    with_mask = [i for i, m in enumerate(chunk.masks) if m is not None]
    without = [i for i, m in enumerate(chunk.masks) if m is None]
    for members in (with_mask, without):
        if not members:
            continue
        batch = score_images(
            models.encoder,
            [chunk.outs[i] for i in members],
            reference=group.refs,
            reference_mask=group.ref_masks,
            mask=[chunk.masks[i] for i in members] if members is with_mask else None,
            prompt=[chunk.prompts[i] for i in members],
            subject=[chunk.subjects[i] for i in members],
            min_foreground=min_foreground,
        )
        ref_fractions = [r.foreground_fraction for r in batch.references]
        for i, score in zip(members, batch.scores):
            scores[i] = score
    return scores, ref_fractions


def _several_subjects(
    models: Models, group: GroupInputs, chunk: ChunkInputs, min_foreground: float
) -> tuple[list[ImageScore], list[float]]:
    """``score_subjects`` on the chunk's rows: CP = cp_min, each subject's figures and the blends in ``ImageScore``.

    The group's views are every subject's in subject order (``views_per_subject``). Rows sharing their names
    and whether they have output masks are scored in one call; features come from the encoder's cache.
    """
    views, start = [], 0
    for count in group.views_per_subject:
        views.append((group.refs[start : start + count], group.ref_masks[start : start + count]))
        start += count
    calls: dict[tuple, list[int]] = {}
    for i, names in enumerate(chunk.subject_names):
        calls.setdefault((tuple(names), chunk.subject_masks[i] is None), []).append(i)
    scores: list[ImageScore | None] = [None] * len(chunk.outs)
    ref_fractions: list[float] = []
    for (names, unmasked), members in calls.items():
        subjects = [Subject(name, refs, masks) for name, (refs, masks) in zip(names, views)]
        output_masks = (
            None if unmasked else [[chunk.subject_masks[i][k] for i in members] for k in range(len(subjects))]
        )
        batch = score_subjects(
            models.encoder,
            [chunk.outs[i] for i in members],
            subjects=subjects,
            output_masks=output_masks,
            prompt=[chunk.prompts[i] for i in members],
            min_foreground=min_foreground,
        )
        ref_fractions = [r.foreground_fraction for info in batch.subjects for r in info.references]
        for i, score in zip(members, batch.image_scores()):
            scores[i] = score
    return scores, ref_fractions
