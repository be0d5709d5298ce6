"""MaSC itself: CP (Eq. 1) and PF (Eq. 2), the columns every evaluation has.

Not a plug-in like the baselines: the run always scores it, and its
details (the stripped prompt, per-view CPs, why a score is undefined, the
mask shares) are fields of every record. Listed in the registry so its
columns come first and are compared with the human ratings like any other.
"""

from __future__ import annotations

from ...scores import ImageScore
from ...scoring import score_images
from .base import ChunkInputs, Column, GroupInputs, Models

COLUMNS = (Column("cp", "cp"), Column("pf", "pf"))


def score_chunk(models: Models, group: GroupInputs, chunk: ChunkInputs, min_foreground: float) -> tuple[list[ImageScore], list[float]]:
    """MaSC scores of the chunk's rows (features come from the encoder's cache) and the reference masks' shares.

    ``score_images`` takes masks for all outputs or for none, so rows with
    and without an output mask are scored in two calls.
    """
    scores: list[ImageScore | None] = [None] * len(chunk.outs)
    ref_fractions: list[float] = []
    with_mask = [i for i, m in enumerate(chunk.masks) if m is not None]
    without = [i for i, m in enumerate(chunk.masks) if m is None]
    for members in (with_mask, without):
        if not members:
            continue
        batch = score_images(
            models.encoder, [chunk.outs[i] for i in members], reference=group.refs, reference_mask=group.ref_masks,
            mask=[chunk.masks[i] for i in members] if members is with_mask else None,
            prompt=[chunk.prompts[i] for i in members], subject=[chunk.subjects[i] for i in members],
            min_foreground=min_foreground,
        )
        ref_fractions = [r.foreground_fraction for r in batch.references]
        for i, score in zip(members, batch.scores):
            scores[i] = score
    return scores, ref_fractions
