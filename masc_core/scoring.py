"""Scoring a batch of outputs against a reference: MaSC's CP and PF.

``score_images`` is the batch API behind the CLI and the ComfyUI nodes:
one reference (or several views of one subject) against N outputs, with one
vision forward per distinct image, one text forward per distinct stripped
prompt, and the CP/PF arithmetic batched over the outputs.

Undefined scores are explicit: ``None`` with a one-line reason, never NaN
and never an exception.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from .encoder import MascEncoder, ProgressCallback
from .errors import MascInputError
from .images import to_rgb_uint8_list
from .masks import (
    MIN_FOREGROUND_FRACTION,
    concept_patches,
    foreground_fraction,
    grid_weights,
    hidden_patches,
    masks_for_batch,
)
from .metric import best_matches, concept_preservation, pad_tokens, prompt_following
from .stripping import strip_subject, subject_found


def _number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


@dataclass
class ReferenceInfo:
    """What CP sees of one reference view."""

    index: int
    grid: tuple[int, int]
    foreground_fraction: float
    """Share of the reference's pixels under its mask (>= 0.5)."""
    concept_patches: int
    """Reference patches CP averages over (patch weight > 0.5)."""
    small_foreground: bool
    """Mask below the paper's filter threshold (``min_foreground``)."""


@dataclass
class ImageScore:
    """MaSC scores of one output image."""

    index: int
    cp: float | None = None
    """Concept preservation, mean over the references; None if undefined or not asked for."""
    pf: float | None = None
    """Prompt following; None if undefined or not asked for."""
    cp_per_reference: list[float | None] = field(default_factory=list)
    cp_undefined: str | None = None
    """Why ``cp`` is None (one line), else None."""
    pf_undefined: str | None = None
    """Why ``pf`` is None (one line), else None."""
    prompt: str | None = None
    encoded_prompt: str | None = None
    """The prompt after subject stripping: the text PF compares with."""
    subject_found: bool | None = None
    """Whether stripping removed anything from the prompt."""
    foreground_fraction: float | None = None
    """Share of the output's pixels under its mask (>= 0.5); None without a mask."""
    small_foreground: bool = False
    """Output mask below the paper's filter threshold: the subject was probably not rendered."""
    background_patches: int | None = None
    """Output patches the PF pool attends to (patch weight < 0.5)."""
    grid: tuple[int, int] = (0, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN never appears; undefined is null)."""
        data = asdict(self)
        data["grid"] = list(self.grid)
        data["cp"] = _number(self.cp)
        data["pf"] = _number(self.pf)
        data["cp_per_reference"] = [_number(v) for v in self.cp_per_reference]
        return data


@dataclass
class Heatmaps:
    """Where the scores come from, at patch resolution (float32 numpy grids).

    Index ``[n]`` is the n-th output, ``[n][k]`` the k-th reference for it.
    """

    reference_match: list[list[np.ndarray]]
    """[n][k]: per reference patch, its best cosine with any patch of output n:
    which parts of the concept survived (Eq. 1's s_i)."""
    reference_keep: list[np.ndarray]
    """[k]: bool grid of the reference patches CP averages over."""
    output_presence: list[np.ndarray]
    """[n]: per output patch, its best cosine with any reference foreground
    patch (max over references): where the concept appears. -inf where no
    reference patch is kept."""
    background_attention: list[np.ndarray | None]
    """[n]: the PF pooler's attention over output n's patches (sums to 1 over
    the background; 0 on hidden patches); None where PF is undefined."""
    output_hidden: list[np.ndarray | None]
    """[n]: bool grid of the output patches hidden from the pooler; None without a mask."""


@dataclass
class ScoreBatch:
    """The result of one ``score_images`` call."""

    scores: list[ImageScore]
    references: list[ReferenceInfo]
    heatmaps: Heatmaps | None = None
    min_foreground: float = MIN_FOREGROUND_FRACTION

    @property
    def cp(self) -> list[float | None]:
        return [s.cp for s in self.scores]

    @property
    def pf(self) -> list[float | None]:
        return [s.pf for s in self.scores]

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [s.to_dict() for s in self.scores],
            "references": [dict(asdict(r), grid=list(r.grid)) for r in self.references],
            "min_foreground": self.min_foreground,
        }


def _per_image(value: str | Sequence[str] | None, count: int, name: str) -> list[str | None]:
    """One value for all images, or exactly one per image."""
    if value is None or isinstance(value, str):
        return [value] * count
    values = list(value)
    if len(values) == 1:
        return values * count
    if len(values) != count:
        raise MascInputError(f"{name} has {len(values)} entries for {count} images: give one for all, or one per image")
    return [None if v is None else str(v) for v in values]


def _reference_reason(fraction: float, keep: int, grid: tuple[int, int], index: int, count: int) -> str | None:
    if keep:
        return None
    which = "reference_mask" if count == 1 else f"reference_mask[{index}]"
    if fraction == 0.0:
        return f"{which} is empty (no foreground pixel)"
    return f"{which} covers no patch of the {grid[0]}x{grid[1]} grid by more than half: the subject is too small to score"


def score_images(
    encoder: MascEncoder,
    images: Any,
    *,
    reference: Any = None,
    reference_mask: Any = None,
    mask: Any = None,
    prompt: str | Sequence[str] | None = None,
    subject: str | Sequence[str] | None = None,
    cp: bool | None = None,
    pf: bool | None = None,
    heatmaps: bool = False,
    min_foreground: float = MIN_FOREGROUND_FRACTION,
    progress: ProgressCallback | None = None,
) -> ScoreBatch:
    """MaSC CP and PF for N output images in one call.

    images: the outputs: one image, a list, or a [N,H,W,C] batch (uint8 or
        float 0..1; RGBA and grayscale accepted).
    reference, reference_mask: the subject's reference view(s) and their
        foreground masks; K views (a list or [K,H,W,C]) give CP = mean of the
        K per-reference CPs. One mask may serve all views.
    mask: the outputs' foreground masks, one per image or one for all. PF
        needs it (the background is what PF pools); CP never does (the output
        is searched in full).
    prompt: the generation prompt, one for all or one per image ("" is a
        valid, empty prompt).
    subject: the subject's name(s) to strip from the prompt: "sks dog, dog"
        (comma-separated) for all images, or one such string per image.
    cp, pf: which scores to compute; by default CP when a reference is
        given and PF when a prompt is given.
    heatmaps: also return patch-level heatmaps (``ScoreBatch.heatmaps``).
    min_foreground: the paper's filter; masks covering less than this share
        of their image are flagged (``small_foreground``), not dropped.
    progress: ``progress(done, total)`` after each batch of encoded images.
    """
    want_cp = reference is not None if cp is None else bool(cp)
    want_pf = prompt is not None if pf is None else bool(pf)
    if not (want_cp or want_pf):
        raise MascInputError("nothing to score: give a reference (for CP) and/or a prompt (for PF)")
    if not 0.0 <= float(min_foreground) <= 1.0:
        raise MascInputError(f"min_foreground is {min_foreground}: give a share of the image between 0 and 1")
    outputs = to_rgb_uint8_list(images, "image")
    count = len(outputs)

    references: list[np.ndarray] = []
    reference_masks: list[np.ndarray] = []
    if want_cp:
        if reference is None:
            raise MascInputError("reference_image is missing: CP compares the output with a reference view of the subject")
        if reference_mask is None:
            raise MascInputError("reference_mask is missing: CP averages over the reference's foreground, give its mask")
        references = to_rgb_uint8_list(reference, "reference_image")
        reference_masks = masks_for_batch(reference_mask, len(references), "reference_mask")
    output_masks = masks_for_batch(mask, count, "mask") if mask is not None else None
    prompts = _per_image(prompt, count, "prompt") if want_pf else [None] * count
    if want_pf and any(p is None for p in prompts):
        raise MascInputError("prompt is missing: PF compares the background with the prompt")
    subjects = _per_image(subject, count, "subject")

    encoded = encoder.encode_images(references + outputs, progress=progress)
    ref_tokens, out_tokens = encoded[: len(references)], encoded[len(references) :]
    out_padded, out_valid = pad_tokens([t.tokens for t in out_tokens])
    device = out_padded.device

    scores = [ImageScore(index=i, grid=out_tokens[i].grid) for i in range(count)]
    if output_masks is not None:
        for item, m in zip(scores, output_masks):
            item.foreground_fraction = foreground_fraction(m)
            item.small_foreground = item.foreground_fraction < min_foreground

    # ---- CP (Eq. 1), one pass per reference view, batched over the outputs.
    reference_infos: list[ReferenceInfo] = []
    reference_keep: list[torch.Tensor] = []
    cp_rows: list[torch.Tensor] = []
    per_reference_maps: list[torch.Tensor] = []
    presence: torch.Tensor | None = None
    for k, (tokens, m) in enumerate(zip(ref_tokens, reference_masks)):
        keep = concept_patches(grid_weights(m, tokens.grid))
        fraction = foreground_fraction(m)
        reference_infos.append(
            ReferenceInfo(k, tokens.grid, fraction, int(keep.sum()), fraction < min_foreground)
        )
        reference_keep.append(keep)
        per_ref, per_out = best_matches(tokens.tokens, out_padded, out_valid, keep if heatmaps else None)
        cp_rows.append(concept_preservation(per_ref, keep))
        if heatmaps:
            per_reference_maps.append(per_ref)
            presence = per_out if presence is None else torch.maximum(presence, per_out)

    # ---- PF (Eq. 2): background-only pool vs the stripped prompt.
    pf_values = None
    attention = None
    visible_counts: list[int] = [0] * count
    hidden_rows: list[torch.Tensor] | None = None
    encoded_prompts: list[str | None] = [None] * count
    if want_pf:
        encoded_prompts = [strip_subject(p, s) for p, s in zip(prompts, subjects)]
        if output_masks is not None:
            hidden_rows = [hidden_patches(grid_weights(m, t.grid)) for m, t in zip(output_masks, out_tokens)]
            hide = torch.nn.utils.rnn.pad_sequence(hidden_rows, batch_first=True, padding_value=True)
            if hide.shape[1] < out_padded.shape[1]:
                pad = torch.ones(count, out_padded.shape[1] - hide.shape[1], dtype=torch.bool)
                hide = torch.cat([hide, pad], dim=1)
            visible_counts = (~hide).sum(dim=1).tolist()
            rows = [i for i in range(count) if visible_counts[i] > 0]
            if rows:
                index = torch.tensor(rows, device=device)
                pooled, weights = encoder.pool(out_padded.index_select(0, index), hide[rows], need_weights=heatmaps)
                texts = encoder.encode_texts([encoded_prompts[i] for i in rows])
                pf_values = (rows, prompt_following(pooled, texts))
                attention = (rows, weights)

    # ---- One transfer to the host for all the numbers.
    cp_matrix = torch.stack(cp_rows).cpu().tolist() if cp_rows else []
    pf_list = pf_values[1].cpu().tolist() if pf_values else []
    pf_by_row = dict(zip(pf_values[0], pf_list)) if pf_values else {}

    for i, item in enumerate(scores):
        if want_cp:
            values = [_number(cp_matrix[k][i]) for k in range(len(references))]
            item.cp_per_reference = values
            defined = [v for v in values if v is not None]
            if defined:
                item.cp = float(sum(defined) / len(defined))
            else:
                reasons = [
                    _reference_reason(r.foreground_fraction, r.concept_patches, r.grid, r.index, len(references))
                    for r in reference_infos
                ]
                item.cp_undefined = "; ".join(r for r in reasons if r)
        if want_pf:
            item.prompt = prompts[i]
            item.encoded_prompt = encoded_prompts[i]
            item.subject_found = subject_found(prompts[i], encoded_prompts[i])
            if output_masks is None:
                item.pf_undefined = "no output mask given: PF pools the background, which needs the output's foreground mask"
            else:
                item.background_patches = int(visible_counts[i])
                if i in pf_by_row:
                    item.pf = float(pf_by_row[i])
                else:
                    item.pf_undefined = (
                        "the output mask covers the whole image: no background patch is left for PF to pool"
                    )

    heatmap_data = None
    if heatmaps:
        heatmap_data = _collect_heatmaps(
            out_tokens, ref_tokens, reference_keep, per_reference_maps, presence, attention, hidden_rows, count
        )
    return ScoreBatch(scores=scores, references=reference_infos, heatmaps=heatmap_data, min_foreground=min_foreground)


def _collect_heatmaps(out_tokens, ref_tokens, reference_keep, per_reference_maps, presence, attention, hidden_rows, count):
    """Reshape the per-patch values into grids (one host transfer per tensor)."""
    ref_grids = [t.grid for t in ref_tokens]
    per_reference_host = [m.cpu().numpy() for m in per_reference_maps]
    presence_host = presence.cpu().numpy() if presence is not None else None
    attention_host = {}
    if attention is not None and attention[1] is not None:
        weights = attention[1].cpu().numpy()
        attention_host = {row: weights[j] for j, row in enumerate(attention[0])}
    reference_match, output_presence, background, hidden = [], [], [], []
    for i in range(count):
        rows, cols = out_tokens[i].grid
        length = rows * cols
        reference_match.append(
            [per_reference_host[k][i].reshape(ref_grids[k]).astype(np.float32) for k in range(len(ref_grids))]
        )
        if presence_host is not None:
            output_presence.append(presence_host[i, :length].reshape(rows, cols).astype(np.float32))
        else:
            output_presence.append(np.full((rows, cols), -np.inf, dtype=np.float32))
        if i in attention_host:
            background.append(attention_host[i][:length].reshape(rows, cols).astype(np.float32))
        else:
            background.append(None)
        hidden.append(hidden_rows[i].numpy().reshape(rows, cols) if hidden_rows is not None else None)
    return Heatmaps(
        reference_match=reference_match,
        reference_keep=[keep.numpy().reshape(t.grid) for keep, t in zip(reference_keep, ref_tokens)],
        output_presence=output_presence,
        background_attention=background,
        output_hidden=hidden,
    )
