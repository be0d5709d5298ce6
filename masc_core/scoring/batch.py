"""Scoring a batch of outputs against a reference: MaSC's CP and PF.

``score_images`` is the batch API behind the CLI and the ComfyUI nodes:
one reference (or several views of one subject) against N outputs, with one
vision forward per distinct image, one text forward per distinct stripped
prompt, and the CP/PF arithmetic batched over the outputs. It runs in four
steps, one function each:

1. ``_read_inputs``: convert and check what the caller gave;
2. ``_concept_preservation``: Eq. 1, one pass per reference view;
3. ``_prompt_following``: Eq. 2, the background-only pool against the
   stripped prompt;
4. ``_image_scores``: one ``ImageScore`` per output, with the reason for
   every undefined score.

Undefined scores are explicit: ``None`` with a one-line reason, never NaN
and never an exception.

``masc_core.scoring.subject_scoring.score_subjects`` (several subjects per output)
composes steps 2 and 3 with other search masks: they are this package's
shared steps, private to it, not public API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from ..errors import MascInputError
from ..io.images import to_rgb_uint8_list
from ..defaults import MIN_FOREGROUND_FRACTION
from ..metric.masks import (
    concept_patches,
    foreground_fraction,
    grid_weights,
    hidden_patches,
    masks_for_batch,
)
from ..metric.equations import best_matches, concept_preservation, pad_tokens, prompt_following
from ..models.encoder import ImageTokens, MascEncoder
from ..progress import ProgressCallback
from ..metric.scores import Heatmaps, ImageScore, ReferenceInfo, ScoreBatch, defined_number, mean_of_defined
from .mask_bands import VARIANTS, band, cp_variants, pf_variants
from ..metric.stripping import strip_each, subject_found

NO_OUTPUT_MASK = "no output mask given: PF pools the background, which needs the output's foreground mask"
NO_BACKGROUND = "the output mask covers the whole image: no background patch is left for PF to pool"


@dataclass
class _Inputs:
    """The caller's inputs, converted and checked."""

    outputs: list[np.ndarray]
    references: list[np.ndarray]
    reference_masks: list[np.ndarray]
    output_masks: list[np.ndarray] | None
    prompts: list[str | None]
    subjects: list[str | None]
    want_cp: bool
    want_pf: bool


@dataclass
class _ConceptResult:
    """Eq. 1 for every (reference view, output) pair, plus what the heatmaps need."""

    references: list[ReferenceInfo] = field(default_factory=list)
    keep: list[torch.Tensor] = field(default_factory=list)
    """[k]: the reference patches CP averages over."""
    values: list[list[float]] = field(default_factory=list)
    """[k][n]: CP of output n against view k (NaN where undefined)."""
    per_reference_maps: list[torch.Tensor] = field(default_factory=list)
    presence: torch.Tensor | None = None


@dataclass
class _PromptResult:
    """Eq. 2 for the outputs that have a background, plus what the heatmaps need."""

    encoded_prompts: list[str | None]
    values: dict[int, float] = field(default_factory=dict)
    """Output index -> PF, for the outputs with background patches."""
    visible: list[int] | None = None
    """Background patches per output; None without output masks."""
    hidden_rows: list[torch.Tensor] | None = None
    attention: dict[int, np.ndarray] = field(default_factory=dict)
    pooled_rows: list[int] = field(default_factory=list)
    """The outputs the pooler ran on (those with a background), in order."""
    texts: torch.Tensor | None = None
    """Their stripped prompts' embeddings, in ``pooled_rows`` order."""


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


def _read_inputs(images, reference, reference_mask, mask, prompt, subject, cp, pf, min_foreground) -> _Inputs:
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
            raise MascInputError(
                "reference_image is missing: CP compares the output with a reference view of the subject"
            )
        if reference_mask is None:
            raise MascInputError(
                "reference_mask is missing: CP averages over the reference's foreground, give its mask"
            )
        references = to_rgb_uint8_list(reference, "reference_image")
        reference_masks = masks_for_batch(reference_mask, len(references), "reference_mask")
    output_masks = masks_for_batch(mask, count, "mask") if mask is not None else None
    prompts = _per_image(prompt, count, "prompt") if want_pf else [None] * count
    if want_pf and any(p is None for p in prompts):
        raise MascInputError("prompt is missing: PF compares the background with the prompt")
    subjects = _per_image(subject, count, "subject")
    return _Inputs(
        outputs=outputs,
        references=references,
        reference_masks=reference_masks,
        output_masks=output_masks,
        prompts=prompts,
        subjects=subjects,
        want_cp=want_cp,
        want_pf=want_pf,
    )


def _concept_preservation(
    ref_tokens: Sequence[ImageTokens],
    reference_masks,
    out_padded,
    out_valid,
    *,
    heatmaps: bool,
    min_foreground: float,
    keep_matches: bool = False,
) -> _ConceptResult:
    """Eq. 1, one pass per reference view, batched over the outputs; one host copy for all values.

    ``keep_matches``: keep each view's best matches per reference patch (as heatmaps do), for the mask bands."""
    result = _ConceptResult()
    rows = []
    for k, (tokens, mask) in enumerate(zip(ref_tokens, reference_masks)):
        keep = concept_patches(grid_weights(mask, tokens.grid))
        fraction = foreground_fraction(mask)
        result.references.append(ReferenceInfo(k, tokens.grid, fraction, int(keep.sum()), fraction < min_foreground))
        result.keep.append(keep)
        per_ref, per_out = best_matches(tokens.tokens, out_padded, out_valid, keep if heatmaps else None)
        rows.append(concept_preservation(per_ref, keep))
        if heatmaps or keep_matches:
            result.per_reference_maps.append(per_ref)
        if heatmaps:
            result.presence = per_out if result.presence is None else torch.maximum(result.presence, per_out)
    result.values = torch.stack(rows).cpu().tolist() if rows else []
    return result


def _prompt_following(
    encoder: MascEncoder, out_tokens: Sequence[ImageTokens], out_padded, inputs: _Inputs, *, heatmaps: bool
) -> _PromptResult:
    """Eq. 2: SigLIP2's pooler over each output's background vs its stripped prompt."""
    result = _PromptResult(strip_each(inputs.prompts, inputs.subjects))
    if inputs.output_masks is None:
        return result
    count = len(out_tokens)
    result.hidden_rows = [hidden_patches(grid_weights(m, t.grid)) for m, t in zip(inputs.output_masks, out_tokens)]
    hide = torch.nn.utils.rnn.pad_sequence(result.hidden_rows, batch_first=True, padding_value=True)
    if hide.shape[1] < out_padded.shape[1]:
        pad = torch.ones(count, out_padded.shape[1] - hide.shape[1], dtype=torch.bool)
        hide = torch.cat([hide, pad], dim=1)
    result.visible = (~hide).sum(dim=1).tolist()
    rows = [i for i in range(count) if result.visible[i] > 0]
    if not rows:
        return result
    index = torch.tensor(rows, device=out_padded.device)
    pooled, weights = encoder.pool(out_padded.index_select(0, index), hide[rows], need_weights=heatmaps)
    texts = encoder.encode_texts([result.encoded_prompts[i] for i in rows])
    result.values = dict(zip(rows, prompt_following(pooled, texts).cpu().tolist()))
    result.pooled_rows, result.texts = rows, texts
    if weights is not None:
        host = weights.cpu().numpy()
        result.attention = {row: host[j] for j, row in enumerate(rows)}
    return result


def _reference_reason(reference: ReferenceInfo, count: int) -> str | None:
    if reference.concept_patches:
        return None
    which = "reference_mask" if count == 1 else f"reference_mask[{reference.index}]"
    if reference.foreground_fraction == 0.0:
        return f"{which} is empty (no foreground pixel)"
    rows, cols = reference.grid
    return f"{which} covers no patch of the {rows}x{cols} grid by more than half: the subject is too small to score"


def _image_scores(
    inputs: _Inputs,
    out_tokens: Sequence[ImageTokens],
    concept: _ConceptResult,
    prompt: _PromptResult | None,
    min_foreground: float,
) -> list[ImageScore]:
    """One ImageScore per output, with a one-line reason for every undefined score."""
    scores = []
    views = len(inputs.references)
    for i, tokens in enumerate(out_tokens):
        item = ImageScore(index=i, grid=tokens.grid)
        if inputs.output_masks is not None:
            item.foreground_fraction = foreground_fraction(inputs.output_masks[i])
            item.small_foreground = item.foreground_fraction < min_foreground
        if inputs.want_cp:
            item.cp_per_reference = [defined_number(concept.values[k][i]) for k in range(views)]
            item.cp = mean_of_defined(item.cp_per_reference)
            if item.cp is None:
                reasons = [_reference_reason(r, views) for r in concept.references]
                item.cp_undefined = "; ".join(r for r in reasons if r)
        if prompt is not None:
            item.prompt = inputs.prompts[i]
            item.encoded_prompt = prompt.encoded_prompts[i]
            item.subject_found = subject_found(item.prompt, item.encoded_prompt)
            if prompt.visible is None:
                item.pf_undefined = NO_OUTPUT_MASK
            else:
                item.background_patches = int(prompt.visible[i])
                if i in prompt.values:
                    item.pf = float(prompt.values[i])
                else:
                    item.pf_undefined = NO_BACKGROUND
        scores.append(item)
    return scores


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
    cache_outputs: bool = True,
    bands: bool = False,
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
    cache_outputs: keep the outputs' features in the encoder's cache (the
        references always are); False for images scored once, such as a
        sampling loop's candidates, so the cache keeps the reference.
    bands: also give each score its mask-sensitivity band (``ImageScore.cp_band`` / ``pf_band``): the
        score again with the masks eroded and dilated by one patch (``masc_core.scoring.mask_bands``), from the
        cached tokens: no extra vision or text forward.
    """
    inputs = _read_inputs(images, reference, reference_mask, mask, prompt, subject, cp, pf, min_foreground)
    remember = [True] * len(inputs.references) + [bool(cache_outputs)] * len(inputs.outputs)
    encoded = encoder.encode_images(inputs.references + inputs.outputs, progress=progress, remember=remember)
    ref_tokens, out_tokens = encoded[: len(inputs.references)], encoded[len(inputs.references) :]
    out_padded, out_valid = pad_tokens([t.tokens for t in out_tokens])
    concept = _concept_preservation(
        ref_tokens,
        inputs.reference_masks,
        out_padded,
        out_valid,
        heatmaps=heatmaps,
        min_foreground=min_foreground,
        keep_matches=bands,
    )
    prompt_result = (
        _prompt_following(encoder, out_tokens, out_padded, inputs, heatmaps=heatmaps) if inputs.want_pf else None
    )
    scores = _image_scores(inputs, out_tokens, concept, prompt_result, min_foreground)
    if bands:
        _add_bands(encoder, scores, ref_tokens, out_tokens, out_padded, concept, prompt_result)
    maps = _heatmaps(out_tokens, ref_tokens, concept, prompt_result) if heatmaps else None
    return ScoreBatch(scores=scores, references=concept.references, heatmaps=maps, min_foreground=min_foreground)


def _add_bands(
    encoder, scores, ref_tokens, out_tokens, out_padded, concept: _ConceptResult, prompt: _PromptResult | None
) -> None:
    """Each score's band over itself and its eroded- and dilated-mask variants (``mask_bands``), with notes."""
    if concept.per_reference_maps:
        cp = cp_variants(concept.per_reference_maps, concept.keep, [t.grid for t in ref_tokens])
        for n, item in enumerate(scores):
            item.cp_band = band(item.cp, [cp[v][n] for v in VARIANTS])
            if item.cp is not None and cp["eroded"][n] is None:
                item.band_notes.append(
                    "CP: the reference mask eroded by one patch keeps no patch; the band is its dilated side"
                )
    if prompt is not None and prompt.hidden_rows is not None and prompt.pooled_rows:
        grids = [t.grid for t in out_tokens]
        pf = pf_variants(
            encoder=encoder,
            out_padded=out_padded,
            hidden_rows=prompt.hidden_rows,
            grids=grids,
            texts=prompt.texts,
            rows=prompt.pooled_rows,
        )
        for n, item in enumerate(scores):
            item.pf_band = band(item.pf, [pf[v].get(n) for v in VARIANTS])
            if item.pf is not None and n not in pf["dilated"]:
                item.band_notes.append(
                    "PF: the output mask dilated by one patch hides every patch; the band is its eroded side"
                )


def _heatmaps(out_tokens, ref_tokens, concept: _ConceptResult, prompt: _PromptResult | None) -> Heatmaps:
    """The per-patch values as grids (one host transfer per tensor)."""
    ref_grids = [t.grid for t in ref_tokens]
    per_reference_host = [m.cpu().numpy() for m in concept.per_reference_maps]
    presence_host = concept.presence.cpu().numpy() if concept.presence is not None else None
    attention = prompt.attention if prompt is not None else {}
    hidden_rows = prompt.hidden_rows if prompt is not None else None
    reference_match, output_presence, background, hidden = [], [], [], []
    for i, tokens in enumerate(out_tokens):
        rows, cols = tokens.grid
        length = rows * cols
        reference_match.append(
            [per_reference_host[k][i].reshape(grid).astype(np.float32) for k, grid in enumerate(ref_grids)]
        )
        if presence_host is not None:
            output_presence.append(presence_host[i, :length].reshape(rows, cols).astype(np.float32))
        else:
            output_presence.append(np.full((rows, cols), -np.inf, dtype=np.float32))
        background.append(attention[i][:length].reshape(rows, cols).astype(np.float32) if i in attention else None)
        hidden.append(hidden_rows[i].numpy().reshape(rows, cols) if hidden_rows is not None else None)
    return Heatmaps(
        reference_match=reference_match,
        reference_keep=[keep.numpy().reshape(t.grid) for keep, t in zip(concept.keep, ref_tokens)],
        output_presence=output_presence,
        background_attention=background,
        output_hidden=hidden,
    )
