"""Scoring several subjects in each output: ``score_subjects``, composed of ``score_images``' own steps.

One encoder call for every distinct reference view of every subject and every output (the encoder's
cache dedupes repeated views). Then:

1. each subject's CP is ``scoring._concept_preservation`` (Eq. 1), with the output patches inside the
   other subjects' regions marked unsearchable;
2. the region matrix is the same pass restricted to one subject's region at a time (no forward);
3. PF is ``scoring._prompt_following`` with the union of the subjects' masks and every name stripped.

With one subject there is no other region: step 1 is ``score_images``' CP exactly, and step 3 its
PF (the union of one mask is that mask).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..errors import MascInputError
from ..io.images import to_rgb_uint8_list
from ..defaults import MIN_FOREGROUND_FRACTION
from ..metric.masks import foreground_fraction, grid_weights, hidden_patches, masks_for_batch
from ..metric.equations import pad_tokens
from ..models.encoder import MascEncoder
from ..progress import ProgressCallback
from ..metric.scores import defined_number, mean_of_defined
from .batch import (
    NO_BACKGROUND,
    NO_OUTPUT_MASK,
    _concept_preservation,
    _heatmaps,
    _Inputs,
    _per_image,
    _prompt_following,
    _reference_reason,
)
from ..metric.subjects import (
    OVERLAP_WARNING_SHARE,
    MultiSubjectScore,
    Subject,
    SubjectBatch,
    SubjectInfo,
    SubjectScore,
    all_names,
    blend_warnings,
    check_subjects,
    every_or_none,
    summarize,
)

NOTHING_SEARCHABLE = "the other subjects' output masks cover the whole image: no output patch is left to search"
NO_EXCLUSIVITY = "no output masks: each subject's CP searched the whole image (exclusivity needs one mask per subject)"


def _output_masks(output_masks, subjects: Sequence[Subject], count: int) -> list[list[np.ndarray]] | None:
    """[k][n] float masks in subject order, from a list in subject order or a mapping keyed by a subject's name."""
    if output_masks is None:
        return None
    if isinstance(output_masks, Mapping):
        by_name = {str(key).strip().lower(): value for key, value in output_masks.items()}
        known = {name.lower() for s in subjects for name in s.name_list}
        unknown = sorted(key for key in by_name if key not in known)
        if unknown:
            raise MascInputError(
                f"output_masks names {unknown[0]!r}, which is no subject's name: key the masks by a subject's name"
            )
        ordered = []
        for subject in subjects:
            found = [by_name[n.lower()] for n in subject.name_list if n.lower() in by_name]
            if len(found) != 1:
                raise MascInputError(
                    f"output_masks has {len(found)} entries for the {subject.label}: give exactly one per subject"
                )
            ordered.append(found[0])
    else:
        ordered = list(output_masks)
        if len(ordered) != len(subjects):
            raise MascInputError(
                f"output_masks has {len(ordered)} entries for {len(subjects)} subjects: give one per subject, in order"
            )
        ordered = every_or_none(subjects, ordered)
        if ordered is None:
            return None
    return [masks_for_batch(m, count, f"output_masks[{s.label}]") for m, s in zip(ordered, subjects)]


def _regions(masks: list[list[np.ndarray]], grids: Sequence[tuple[int, int]], length: int) -> torch.Tensor:
    """[K, N, L] bool: the output patches inside each subject's region (PF's hiding rule, weight >= 0.5)."""
    regions = torch.zeros(len(masks), len(grids), length, dtype=torch.bool)
    for k, per_output in enumerate(masks):
        for n, (mask, grid) in enumerate(zip(per_output, grids)):
            row = hidden_patches(grid_weights(mask, grid))
            regions[k, n, : row.shape[0]] = row
    return regions


def score_subjects(
    encoder: MascEncoder,
    images: Any,
    *,
    subjects: Sequence[Subject],
    output_masks: Sequence[Any] | Mapping[str, Any] | None = None,
    prompt: str | Sequence[str] | None = None,
    min_foreground: float = MIN_FOREGROUND_FRACTION,
    heatmaps: bool = False,
    progress: ProgressCallback | None = None,
    cache_outputs: bool = True,
) -> SubjectBatch:
    """MaSC for K subjects in each of N outputs.

    images: the outputs (as ``score_images`` takes them).
    subjects: ``Subject(names, references, reference_masks)`` per subject, K of them.
    output_masks: each subject's output masks (one per output, or one for all), a list in subject order (None
        for every subject, or for none: ``every_or_none``) or a mapping keyed by one of the subject's names. Without
        them CP_k searches the whole output (no
        exclusivity, said in ``notes``), there is no region matrix, and PF is undefined.
    prompt: the generation prompt (one for all or one per output); every subject's names are stripped.
    heatmaps: also return each subject's patch maps (``SubjectBatch.heatmaps[k]``): which parts of its
        reference survived, and where it appears outside the other subjects' regions (grey inside them);
        ``SubjectBatch.subject_view(k)`` hands them to ``render_heatmaps``.
    Returns per output: each subject's CP (and per view), ``cp_min``, ``cp_mean``, the region matrix, blend
    warnings, PF, the stripped prompt, each subject's mask share, and a reason for every undefined score.
    """
    subjects = check_subjects(subjects)
    if not 0.0 <= float(min_foreground) <= 1.0:
        raise MascInputError(f"min_foreground is {min_foreground}: give a share of the image between 0 and 1")
    outputs = to_rgb_uint8_list(images, "image")
    count = len(outputs)
    views = [to_rgb_uint8_list(s.references, f"references of the {s.label}") for s in subjects]
    view_masks = [
        masks_for_batch(s.reference_masks, len(v), f"reference_masks of the {s.label}") for s, v in zip(subjects, views)
    ]
    masks = _output_masks(output_masks, subjects, count)
    prompts = _per_image(prompt, count, "prompt") if prompt is not None else [None] * count

    flat_views = [view for per_subject in views for view in per_subject]
    remember = [True] * len(flat_views) + [bool(cache_outputs)] * count
    encoded = encoder.encode_images(flat_views + outputs, progress=progress, remember=remember)
    out_tokens = encoded[len(flat_views) :]
    out_padded, out_valid = pad_tokens([t.tokens for t in out_tokens])
    grids = [t.grid for t in out_tokens]
    regions = _regions(masks, grids, out_valid.shape[1]).to(out_valid.device) if masks is not None else None

    concept, infos = _subjects_concept(
        subjects,
        encoded,
        views,
        view_masks,
        out_padded,
        out_valid,
        regions,
        heatmaps=heatmaps,
        min_foreground=min_foreground,
    )

    pf = None
    if prompt is not None:
        union = None if masks is None else [np.maximum.reduce([m[n] for m in masks]) for n in range(count)]
        inputs = _Inputs(outputs, [], [], union, prompts, [all_names(subjects)] * count, False, True)
        pf = _prompt_following(encoder, out_tokens, out_padded, inputs, heatmaps=heatmaps)
    scores = [
        _output_score(n, subjects, concept, masks, regions, pf, prompts, grids[n], min_foreground) for n in range(count)
    ]
    maps = [_heatmaps(out_tokens, ref_tokens, result, pf) for ref_tokens, result, _ in concept] if heatmaps else None
    return SubjectBatch(scores=scores, subjects=infos, min_foreground=min_foreground, heatmaps=maps)


def _subjects_concept(
    subjects, encoded, views, view_masks, out_padded, out_valid, regions, *, heatmaps: bool, min_foreground: float
):
    """Per subject: (its reference tokens, its CP over the output outside the other subjects' regions, its row of
    the region matrix or None), and its ``SubjectInfo``."""
    concept, infos, start = [], [], 0
    for k, subject in enumerate(subjects):
        ref_tokens = encoded[start : start + len(views[k])]
        start += len(views[k])
        searchable = out_valid
        if regions is not None and len(subjects) > 1:  # own region wins where regions overlap
            others = torch.stack([regions[l] for l in range(len(subjects)) if l != k]).any(dim=0)
            searchable = out_valid & ~(others & ~regions[k])
        result = _concept_preservation(
            ref_tokens, view_masks[k], out_padded, searchable, heatmaps=heatmaps, min_foreground=min_foreground
        )
        matrix_row = None
        if regions is not None:
            matrix_row = [
                _concept_preservation(
                    ref_tokens,
                    view_masks[k],
                    out_padded,
                    out_valid & regions[l],
                    heatmaps=False,
                    min_foreground=min_foreground,
                ).values
                for l in range(len(subjects))
            ]
        concept.append((ref_tokens, result, matrix_row))
        infos.append(SubjectInfo(subject.label, subject.name_list, result.references))
    return concept, infos


def _output_score(n, subjects, concept, masks, regions, pf, prompts, grid, min_foreground) -> MultiSubjectScore:
    """One output's MultiSubjectScore from the batched results."""
    labels = [s.label for s in subjects]
    per_subject = []
    for k, (ref_tokens, result, _) in enumerate(concept):
        entry = SubjectScore(subject=labels[k], cp_per_reference=[defined_number(row[n]) for row in result.values])
        entry.cp = mean_of_defined(row[n] for row in result.values)
        if entry.cp is None:
            reasons = [_reference_reason(r, len(result.references)) for r in result.references]
            entry.cp_undefined = "; ".join(r for r in reasons if r) or NOTHING_SEARCHABLE
        if masks is not None:
            entry.foreground_fraction = foreground_fraction(masks[k][n])
            entry.small_foreground = entry.foreground_fraction < min_foreground
            entry.region_patches = int(regions[k, n].sum())
        per_subject.append(entry)
    cp_min, cp_mean = summarize([s.cp for s in per_subject])
    item = MultiSubjectScore(index=n, subjects=per_subject, cp_min=cp_min, cp_mean=cp_mean, grid=grid)
    if masks is None:
        item.notes.append(NO_EXCLUSIVITY)
    else:
        item.exclusive = len(subjects) > 1
        item.region_matrix = [
            [mean_of_defined(view[n] for view in row) for row in matrix_row] for (_, _, matrix_row) in concept
        ]
        item.blends = blend_warnings(labels, item.region_matrix)
        item.notes += _overlap_notes(labels, regions[:, n])
    if pf is not None:
        item.prompt, item.encoded_prompt = prompts[n], pf.encoded_prompts[n]
        if pf.visible is None:
            item.pf_undefined = NO_OUTPUT_MASK
        else:
            item.background_patches = int(pf.visible[n])
            item.pf = float(pf.values[n]) if n in pf.values else None
            item.pf_undefined = None if n in pf.values else NO_BACKGROUND
    return item


def _overlap_notes(labels: Sequence[str], regions: torch.Tensor) -> list[str]:
    """A line for each pair of regions sharing more than OVERLAP_WARNING_SHARE of the smaller one."""
    notes = []
    for k in range(len(labels)):
        for l in range(k + 1, len(labels)):
            shared = int((regions[k] & regions[l]).sum())
            smaller = min(int(regions[k].sum()), int(regions[l].sum()))
            if smaller and shared > OVERLAP_WARNING_SHARE * smaller:
                notes.append(
                    f"the {labels[k]}'s and the {labels[l]}'s masks share {shared} of {smaller} patches: there each "
                    "subject keeps its own region searchable, so exclusivity is weak"
                )
    return notes
