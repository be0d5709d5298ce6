"""One run of either MaSC Sample Until node: every input checked, rounds until the loop stops, the outputs.

MaSC Sample Until (KSampler's inputs) and MaSC Sample Until (Custom) (core's NOISE, GUIDER, SAMPLER, SIGMAS) differ
only in how one round is sampled (``SamplerSide.sample_round``); everything else is this one path: the candidates'
masks and scores (one subject with ``masc_core.score_images``, several with ``masc_core.score_subjects``), the
decisions (``masc_core.selection.acceptance``), pruning's rounds (``rounds.CandidateRound``), the report, the
``masc`` entry in saved PNGs and the outputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..masc_core.errors import MascInputError
from ..masc_core.metric.masks import masks_for_batch
from ..masc_core.metric.scores import ScoreBatch, ScoreContext
from ..masc_core.metric.subjects import SubjectBatch
from ..masc_core.scoring.batch import score_images
from ..masc_core.scoring.subject_scoring import score_subjects
from ..masc_core.selection.acceptance import AcceptanceLoop, Outcome, RunRules, outcome_report, pace_line
from ..masc_core.selection.pruning import Ledger, PruneRules
from ..masc_core.selection.samplers import samples_one_by_one, split_note
from . import host
from .convert import check_reference_mask, check_single_latent, comfy_images, comfy_masks, to_comfy_image_batch
from .metadata import encoder_identity, image_digests, record
from .rounds import CandidateRound
from .declarations import OFF
from .selection_nodes import blocked
from .subject_nodes import declared_subjects, subjects_label


@dataclass(frozen=True)
class SamplerSide:
    """How a Sample Until node samples its candidates, and what pruning and the report need to know of it."""

    sample_round: Callable
    """``(seeds, latent, *, progress, done, stops, judge, prunes) -> RoundResult``: one round, the backend's one
    path."""
    steps: int
    label: str
    """The sampler's name (core's), or what it is when it is none of core's."""
    known: bool
    """Whether ``label`` is one of core's sampler names (what pruning's tables describe)."""
    batches: bool
    """Whether a plain round may sample the round as one batch (the sampler drawing no noise of its own)."""
    denoise: float = 1.0


def sample_until(
    node: str,
    side: SamplerSide,
    rules: RunRules,
    pruning: PruneRules,
    *,
    vae,
    latent_image,
    encoder,
    prompt,
    subject,
    mask_subject,
    mask_threshold,
    reference_image,
    reference_mask,
    subjects,
    segmenter,
    extra_pnginfo,
    unique_id,
) -> dict:
    """A whole sample-until run, for both nodes: every input checked, then rounds until the loop stops, then the
    outputs."""
    loop = AcceptanceLoop(rules)
    check_pf_needs_masks(rules, segmenter)
    check_single_latent(latent_image)
    pruning = pruning.check(
        batch_size=rules.batch_size,
        steps=side.steps,
        sampler_name=side.label,
        denoise=side.denoise,
        noise_mask=latent_image.get("noise_mask") is not None,
    )
    score_round, scored_subject = round_scorer(
        encoder=encoder,
        reference_image=reference_image,
        reference_mask=reference_mask,
        subjects=subjects,
        subject=subject,
        mask_subject=mask_subject,
        prompt=prompt,
        rules=rules,
        segmenter=segmenter,
        mask_threshold=mask_threshold,
        on_blend=rules.passing.on_blend,
    )
    sampling = host.sampling()
    progress = host.CandidateProgress(rules.max_candidates, side.steps)
    first_batch, thumbnails = None, []
    ledger = Ledger(steps=side.steps) if pruning.active else None
    started = time.monotonic()
    while seeds := loop.next_seeds():
        host.check_interrupt()
        candidate_round = CandidateRound(
            sampling, vae, score_round, rules, pruning, side.steps, len(loop.candidates) // rules.batch_size
        )
        round_scores, take, pruned, round_thumbnails, batch = candidate_round.run(
            side.sample_round, seeds, latent_image, progress, loop.used, ledger
        )
        thumbnails += round_thumbnails  # every candidate, small: memory stays bounded
        first_batch = first_batch or batch
        loop.add_round(round_scores, take, pruned)
        del candidate_round, take, batch
        # What a candidate costs on this machine, so far: on a CPU a first run shows at once what the budget means.
        host.show_text(unique_id, pace_line(time.monotonic() - started, loop.used, rules.max_candidates))
    progress.update(progress.total)
    outcome = loop.outcome()
    scores = all_scores(outcome, first_batch, encoder, scored_subject, ledger, node)
    report = run_report(
        outcome, rules, scores, segmenter, side, extra_pnginfo, pruning, ledger, seconds=time.monotonic() - started
    )
    return node_result(
        outcome, scores, latent_image, report, extra_pnginfo, unique_id, to_comfy_image_batch(thumbnails), node
    )


def check_pf_needs_masks(rules: RunRules, segmenter) -> None:
    """PF needs each candidate's mask: without a segmenter, settings that use PF cannot work."""
    if segmenter is not None:
        return
    uses_pf = [
        (rules.passing.by in ("pf", "both"), f"rank_by '{rules.passing.by}'"),
        (rules.passing.min_pf is not None, "min_pf"),
        (rules.passing.reject_small_masks, "reject_small_masks"),
    ]
    for used, name in uses_pf:
        if used:
            raise MascInputError(
                f"{name} needs the candidates' masks, and no segmenter is connected: connect Load MaSC Auto Mask Model "
                "or Load MaSC SAM3 Model to "
                f"'segmenter', or rank by cp with min_pf {OFF:g} and reject_small_masks off (CP only)"
            )


def reference_inputs(reference_image, reference_mask):
    """The reference views and one mask per view, checked before the first candidate is sampled."""
    if reference_image is None or reference_mask is None:
        missing = "reference_image" if reference_image is None else "reference_mask"
        raise MascInputError(
            f"{missing} is not connected: connect the subject's reference image and its mask, or chain MaSC Subject "
            "nodes into 'subjects' (several subjects)"
        )
    references = comfy_images(reference_image, "reference_image")
    masks = comfy_masks(reference_mask)
    check_reference_mask(masks, references)
    return references, masks_for_batch(masks, len(references), "reference_mask")


def round_scorer(
    *,
    encoder,
    reference_image,
    reference_mask,
    subjects,
    subject,
    mask_subject,
    prompt,
    rules,
    segmenter,
    mask_threshold,
    on_blend,
):
    """(a function scoring one round's decoded candidates -> (ScoreBatch, masks [B,H,W] or None), the subject names the
    scores record). Every input is checked here, before the first candidate is sampled."""
    progress = host.interrupt_callback()
    if subjects is None:
        references, reference_masks = reference_inputs(reference_image, reference_mask)
        if on_blend != "report":
            raise MascInputError(
                f"on_blend is '{on_blend}' but 'subjects' is not connected: blends exist between several subjects; set "
                "it to report"
            )

        def score_one(arrays):
            masks = mask_candidates(segmenter, arrays, mask_subject or subject, mask_threshold)
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
                min_foreground=rules.min_foreground,
                cache_outputs=False,
                progress=progress,
                bands=True,
            )
            return batch, masks

        return score_one, subject

    declared = check_subjects_input(
        subjects, reference_image, reference_mask, subject, mask_subject, segmenter, on_blend
    )

    def score_several(arrays):
        per_subject = [mask_candidates(segmenter, arrays, d.subject.names, mask_threshold) for d in declared]
        multi: SubjectBatch = score_subjects(
            encoder.ready(),
            arrays,
            subjects=[d.subject for d in declared],
            output_masks=None if segmenter is None else per_subject,
            prompt=prompt,
            min_foreground=rules.min_foreground,
            cache_outputs=False,
            progress=progress,
        )
        batch = multi.as_score_batch(reject_blends=on_blend == "reject")
        union = None if segmenter is None else torch.stack(per_subject).amax(dim=0)
        return batch, union

    return score_several, subjects_label(declared)


def check_subjects_input(subjects, reference_image, reference_mask, subject, mask_subject, segmenter, on_blend) -> list:
    """The declared subjects, refusing inputs that 'subjects' replaces or that cannot apply to sampled candidates."""
    declared = declared_subjects(subjects)
    for name, value in (("reference_image", reference_image), ("reference_mask", reference_mask)):
        if value is not None:
            raise MascInputError(
                f"{name} and subjects are both connected: with several subjects each MaSC Subject holds its reference; "
                f"disconnect {name}"
            )
    for name, value in (("subject", subject), ("mask_subject", mask_subject)):
        if str(value or "").strip():
            raise MascInputError(
                f"{name} is {str(value).strip()[:40]!r} while subjects is connected: each MaSC Subject's names are "
                "stripped "
                f"from the prompt and prompt its mask; clear {name}"
            )
    with_mask = next((d.subject.label for d in declared if d.mask is not None), None)
    if with_mask is not None:
        raise MascInputError(
            f"the MaSC Subject '{with_mask}' has a mask for generated images, but Sample Until makes its own "
            "candidates: "
            "disconnect that mask; connect a segmenter to mask every subject in each candidate"
        )
    if on_blend == "reject" and segmenter is None:
        raise MascInputError(
            "on_blend 'reject' needs each subject's region in the candidates: connect a segmenter, or set on_blend to "
            "report"
        )
    return declared


def mask_candidates(segmenter, arrays, subject: str, threshold: float):
    """The candidates' masks [B,H,W] from the segmenter, or None without one."""
    if segmenter is None:
        return None
    masks = segmenter.ready().masks(arrays, subject, threshold=float(threshold), progress=host.interrupt_callback())
    return torch.stack(masks)


def all_scores(
    outcome: Outcome, first_batch: ScoreBatch, encoder, subject: str | None, ledger: Ledger | None, node: str
) -> ScoreBatch:
    """Every candidate's scores in sampling order, with seeds, verdicts, which were kept and the pruning ledger."""
    return ScoreBatch(
        scores=[c.score for c in outcome.candidates],
        references=first_batch.references,
        min_foreground=first_batch.min_foreground,
        context=ScoreContext(
            node=node,
            subject=subject,
            encoder=encoder_identity(encoder),
            seeds=[c.seed for c in outcome.candidates],
            verdicts=[c.verdict for c in outcome.candidates],
            kept=[c.index for c, _ in outcome.kept],
            ledger=None if ledger is None else ledger.to_dict(),
        ),
    )


def run_report(
    outcome: Outcome,
    rules: RunRules,
    scores: ScoreBatch,
    segmenter,
    side: SamplerSide,
    extra_pnginfo,
    pruning: PruneRules | None = None,
    ledger: Ledger | None = None,
    seconds: float | None = None,
) -> str:
    """The loop's report plus what the run cost (``seconds``, measured) and what the user should know about its
    setup."""
    sampler_name = side.label
    notes = [] if seconds is None else [pace_line(seconds, outcome.used)]
    if ledger is not None:
        what = (
            "study: every candidate judged at steps "
            + ", ".join(str(s) for s in pruning.stops(ledger.steps))
            + f" of {ledger.steps}, none pruned"
            if pruning.study
            else f"pruning at step {pruning.stops(ledger.steps)[0]} of {ledger.steps}, {pruning.prune_keep} of each "
            f"round of {rules.batch_size} go on"
        )
        notes.append(f"{what}: {ledger.summary()}")
        note = split_note(sampler_name, known=side.known)
        if note and not pruning.study:
            notes.append(note)
    if segmenter is None:
        notes.append("no segmenter connected: PF undefined, CP only")
    if scores.scores[0].subjects is not None:
        labels = ", ".join(figure["subject"] for figure in scores.scores[0].subjects)
        notes.append(
            f"several subjects ({labels}): CP is cp_min, the weakest subject's; each candidate's subjects are under "
            "its line"
        )
    if rules.batch_size > 1 and side.batches and samples_one_by_one(sampler_name) and ledger is None:
        notes.append(
            f"{sampler_name} draws noise while sampling: each candidate of a round was sampled in its own call, "
            "so a KSampler with its seed reproduces it"
        )
    if not isinstance(extra_pnginfo, dict):
        notes.append(
            "ComfyUI passed no PNG metadata (an API prompt without extra_data.extra_pnginfo): scores are not saved in "
            "PNGs"
        )
    first = scores.scores[0]
    text = outcome_report(outcome, rules, first.encoded_prompt)
    return "\n".join([text] + notes)


def kept_latent(latent_image: dict, outcome: Outcome) -> dict:
    """The kept latents, best first, with batch_index = candidate number (noise_mask etc. carried over)."""
    dropped = ("samples", "batch_index", "downscale_ratio_spacial", "downscale_ratio_temporal")
    latent = {k: v for k, v in latent_image.items() if k not in dropped}
    latent["samples"] = torch.cat([kept.latent for _, kept in outcome.kept])
    latent["batch_index"] = [candidate.index for candidate, _ in outcome.kept]
    return latent


def node_result(
    outcome: Outcome,
    scores: ScoreBatch,
    latent_image: dict,
    report: str,
    extra_pnginfo,
    unique_id,
    candidates,
    node: str,
) -> dict:
    """The outputs (blocked ones skip their consumers), the PNG metadata entry, the report on the node."""
    seeds = ", ".join(str(s) for s in outcome.seeds)
    if outcome.blocked:
        record(extra_pnginfo, unique_id, scores, node)
        return {"ui": {"text": [report]}, "result": blocked(3) + (scores, outcome.used, seeds, report, candidates)}
    images = torch.cat([kept.image for _, kept in outcome.kept])
    masks = [kept.mask for _, kept in outcome.kept]
    digests = image_digests(images)
    record(
        extra_pnginfo,
        unique_id,
        scores,
        node,
        pixels=[None if c.output is None else digests[c.output] for c in outcome.candidates],
    )
    mask = blocked(1)[0] if masks[0] is None else torch.cat(masks)
    result = (images, kept_latent(latent_image, outcome), mask, scores, outcome.used, seeds, report, candidates)
    return {"ui": {"text": [report]}, "result": result}
