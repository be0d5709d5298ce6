"""One run of either MaSC Sample Until node: every input checked, the run built and called, the outputs formatted.

MaSC Sample Until (KSampler's inputs) and MaSC Sample Until (Custom) (core's NOISE, GUIDER, SAMPLER, SIGMAS) differ
only in how one round is sampled (``SamplerSide.sample_round``). The run itself (seeds, rounds, pruning's judged
steps and survivors, acceptance, the ledger, the report) is ``masc_core.selection.sample_until.SampleUntilRun``; the
candidates' scoring is ``masc_core.scoring.candidates``. This checks the inputs, binds the sampler to this run's
latent, progress bar and VAE, and formats what the run gives: the ``masc`` entry in saved PNGs and the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..masc_core.errors import MascInputError
from ..masc_core.metric.masks import masks_for_batch
from ..masc_core.metric.scores import ScoreBatch, ScoreContext
from ..masc_core.scoring.candidates import one_subject_scorer, subjects_scorer
from ..masc_core.selection.acceptance import Outcome, RunRules
from ..masc_core.selection.pruning import Ledger, PruneRules
from ..masc_core.selection.sample_until import SampleUntilRun
from . import host
from .convert import check_reference_mask, check_single_latent, comfy_images, comfy_masks, to_comfy_image_batch
from .metadata import encoder_identity, image_digests, record
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


@dataclass
class BoundSampler:
    """A ``SamplerSide`` bound to this run's latent, progress bar and VAE: the run's ``CandidateSampler``."""

    side: SamplerSide
    latent: dict
    progress: Any
    vae: Any
    backend: Any

    def __getattr__(self, name):  # steps, label, known, batches, denoise: the side's
        return getattr(self.side, name)

    def sample_round(self, seeds, *, done, stops, judge, prunes):
        return self.side.sample_round(
            seeds, self.latent, progress=self.progress, done=done, stops=stops, judge=judge, prunes=prunes
        )

    def decode(self, samples):
        return self.backend.decode(self.vae, samples)


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
    """A whole sample-until run, for both nodes: every input checked, the run, then the outputs."""
    rules = rules.check()  # the rules' errors come before any other
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
    progress = host.CandidateProgress(rules.max_candidates, side.steps)
    sampler = BoundSampler(side, latent_image, progress, vae, host.sampling())
    run = SampleUntilRun(
        rules,
        pruning,
        sampler,
        score_round,
        check_interrupt=host.check_interrupt,
        on_round=lambda news: show_round(news, progress, unique_id),
    )
    result = run.run()
    progress.update(progress.total)
    outcome = result.outcome
    scores = all_scores(
        outcome=outcome,
        first_batch=result.first_batch,
        encoder=encoder,
        subject=scored_subject,
        ledger=result.ledger,
        node=node,
    )
    report = run.report(
        result, scores, has_segmenter=segmenter is not None, saves_metadata=isinstance(extra_pnginfo, dict)
    )
    return node_result(
        outcome=outcome,
        scores=scores,
        latent_image=latent_image,
        report=report,
        extra_pnginfo=extra_pnginfo,
        unique_id=unique_id,
        candidates=to_comfy_image_batch(result.thumbnails),
        node=node,
    )


def show_round(news, progress, unique_id) -> None:
    """A finished round on the running node: its candidates' scores as the node's text, the best one's picture."""
    host.show_text(unique_id, news.text)
    progress.show(news.picture)


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

        score_one = one_subject_scorer(
            encoder=encoder,
            references=references,
            reference_masks=reference_masks,
            segmenter=segmenter,
            mask_subject=mask_subject or subject,
            mask_threshold=mask_threshold,
            prompt=prompt,
            subject=subject,
            min_foreground=rules.min_foreground,
            progress=progress,
        )
        return score_one, subject

    declared = check_subjects_input(
        subjects=subjects,
        reference_image=reference_image,
        reference_mask=reference_mask,
        subject=subject,
        mask_subject=mask_subject,
        segmenter=segmenter,
        on_blend=on_blend,
    )

    score_several = subjects_scorer(
        encoder=encoder,
        subjects=[d.subject for d in declared],
        segmenter=segmenter,
        mask_threshold=mask_threshold,
        prompt=prompt,
        min_foreground=rules.min_foreground,
        reject_blends=on_blend == "reject",
        progress=progress,
    )
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
