"""How much a score hangs on its masks: CP and PF again with every mask eroded and dilated by one patch.

A verdict is only as good as its masks: CLIPSeg at threshold 0.4 can move a mask edge by a patch, and
near a threshold that flips accept/reject. The paper reports MaSC robust to the segmenter on average
(its Appendix 6.1, Table 6: CP alpha moves by at most 0.012 across four segmenters) and names mask failures a main
limit; a decision on one image needs that image's own sensitivity.

The band of a score is [min, max] of the score and its two variants:

- CP (Eq. 1) with the reference mask's kept patches eroded, then dilated, by one patch of its grid
  (3 x 3 neighbourhood; patches outside the grid count as background). No forward pass: Eq. 1's best
  matches per reference patch are the ones CP already computed, only the mean is taken over other
  patches.
- PF (Eq. 2) with the output mask's hidden patches eroded, then dilated, by one patch: the pooler runs
  twice more over the cached output tokens, against the same (cached) text embedding. No vision or
  text forward.

A variant that leaves nothing to average (a reference mask one patch wide eroded to nothing, a mask
dilated over the whole image) is left out of the band, and ``band_notes`` says so. Used by
``score_images(bands=True)``; scoring-layer code (it calls the encoder's pooler).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from ..metric.equations import concept_preservation, prompt_following
from ..metric.scores import defined_number, mean_of_defined

VARIANTS = ("eroded", "dilated")


def morph(keep: torch.Tensor, grid: tuple[int, int], *, dilate: bool) -> torch.Tensor:
    """A flat bool row of ``grid`` patches grown (``dilate``) or shrunk by one patch in every direction."""
    rows, cols = grid
    cells = keep[: rows * cols].reshape(1, 1, rows, cols).float()
    if dilate:
        grown = F.max_pool2d(cells, 3, stride=1, padding=1) > 0
    else:  # erosion = the complement of the background grown; outside the grid is background
        background = F.pad(1.0 - cells, (1, 1, 1, 1), value=1.0)
        grown = ~(F.max_pool2d(background, 3, stride=1) > 0)
    out = keep.clone()
    out[: rows * cols] = grown.reshape(-1)
    return out


def band(value: float | None, variants: Sequence[float | None]) -> list[float] | None:
    """[low, high] over the score and its defined variants; None when the score itself is undefined."""
    if value is None:
        return None
    defined = [value] + [v for v in (defined_number(x) for x in variants) if v is not None]
    return [float(min(defined)), float(max(defined))]


def cp_variants(
    per_reference: Sequence[torch.Tensor], keeps: Sequence[torch.Tensor], grids: Sequence[tuple[int, int]]
) -> dict[str, list[float | None]]:
    """Per variant, each output's CP (mean over views of the defined per-view values) with the reference masks changed.

    ``per_reference[k]`` [N, P_k]: Eq. 1's best match of each patch of view k (as CP computed them).
    """
    count = per_reference[0].shape[0] if per_reference else 0
    found: dict[str, list[float | None]] = {}
    for variant in VARIANTS:
        rows = [
            concept_preservation(matches, morph(keep, grid, dilate=variant == "dilated")).cpu().tolist()
            for matches, keep, grid in zip(per_reference, keeps, grids)
        ]
        found[variant] = [mean_of_defined(row[n] for row in rows) for n in range(count)]
    return found


def pf_variants(
    encoder,
    out_padded: torch.Tensor,
    hidden_rows: Sequence[torch.Tensor],
    grids: Sequence[tuple[int, int]],
    texts: torch.Tensor,
    rows: Sequence[int],
) -> dict[str, dict[int, float]]:
    """Per variant, PF of the outputs ``rows`` (those with a background) with their hidden patches changed.

    ``texts`` [len(rows), D]: the stripped prompts' embeddings, in ``rows`` order. An output whose variant
    leaves no visible patch is left out.
    """
    found: dict[str, dict[int, float]] = {}
    length = out_padded.shape[1]
    for variant in VARIANTS:
        hide = torch.ones(len(rows), length, dtype=torch.bool)
        for j, n in enumerate(rows):
            changed = morph(hidden_rows[n], grids[n], dilate=variant == "dilated")
            hide[j, : changed.shape[0]] = changed
        visible = [j for j in range(len(rows)) if not bool(hide[j].all())]
        values: dict[int, float] = {}
        if visible:
            index = torch.tensor([rows[j] for j in visible], device=out_padded.device)
            pooled, _ = encoder.pool(out_padded.index_select(0, index), hide[visible].to(out_padded.device))
            scores = prompt_following(pooled, texts[visible]).cpu().tolist()
            values = {rows[j]: s for j, s in zip(visible, scores)}
        found[variant] = values
    return found
