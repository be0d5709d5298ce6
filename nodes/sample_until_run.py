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
from ..masc_core.scoring.candidates import CandidateScoring, FinishedRun, run_sample_until
from ..masc_core.selection.acceptance import Outcome, RunRules
from ..masc_core.selection.clip import ClipChoice
from ..masc_core.selection.pruning import PruneRules
from . import host
from .convert import check_reference_mask, check_single_latent, comfy_images, comfy_masks, to_comfy_image_batch
from .metadata import image_digests, record, scoring_context
from .selection_nodes import blocked
from .subject_nodes import declared_subjects


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
    """A ``SamplerSide`` bound to this run's latent, node and VAE: the run's ``CandidateSampler`` in ComfyUI."""

    side: SamplerSide
    latent: dict
    vae: Any
    backend: Any
    unique_id: Any
    progress: Any = None
    """The node's progress bar (``host.CandidateProgress``), made when the run starts and knows its budget."""
    trim_latent: int = 0
    """Video: latent frames cut from the start before decoding (WanVaceToVideo's reference frames)."""

    def __getattr__(self, name):  # steps, label, known, batches, denoise: the side's
        if name == "side":  # not set yet (copying): no recursion
            raise AttributeError(name)
        return getattr(self.side, name)

    @property
    def clips(self) -> bool:
        """Whether each candidate is a video clip: the latent has frames ([B,C,T,h,w])."""
        return self.latent["samples"].ndim == 5

    def start(self, budget):
        self.progress = host.CandidateProgress(budget, self.side.steps)

    def sample_round(self, seeds, *, done, stops, judge, prunes):
        return self.side.sample_round(
            seeds, self.latent, progress=self.progress, done=done, stops=stops, judge=judge, prunes=prunes
        )

    def decode(self, samples):
        """IMAGE [B,H,W,C], or for video [B,T,H,W,C] (the reference frames cut first, as core's Trim Video Latent)."""
        if self.trim_latent:
            samples = samples[:, :, self.trim_latent :]
        return self.backend.decode(self.vae, samples)

    def show_round(self, news):
        """A finished round on the running node: its candidates' scores as the node's text, the best one's picture."""
        host.show_text(self.unique_id, news.text)
        self.progress.show(news.picture)

    def check_interrupt(self):
        host.check_interrupt()

    def finish(self):
        """The progress bar full: the run is over (it may stop before its budget)."""
        if self.progress is not None:
            self.progress.update(self.progress.total)


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
    video=None,
    extra_pnginfo,
    unique_id,
) -> dict:
    """A whole sample-until run, for both nodes: the inputs converted, the run (masc_core), then the outputs."""
    check_single_latent(latent_image)
    clip = video_choice(video, latent_image)
    scoring = candidate_scoring(
        encoder=encoder,
        reference_image=reference_image,
        reference_mask=reference_mask,
        subjects=subjects,
        subject=subject,
        mask_subject=mask_subject,
        prompt=prompt,
        segmenter=segmenter,
        mask_threshold=mask_threshold,
        clip=clip,
    )
    sampler = BoundSampler(side, latent_image, vae, host.sampling(), unique_id, trim_latent=clip.trim_latent)
    finished = run_sample_until(
        rules,
        pruning,
        sampler,
        scoring,
        context=scoring_context(node, encoder, scoring.label),
        noise_mask=latent_image.get("noise_mask") is not None,
        saves_metadata=isinstance(extra_pnginfo, dict),
    )
    sampler.finish()
    return node_result(
        finished,
        latent_image=latent_image,
        extra_pnginfo=extra_pnginfo,
        unique_id=unique_id,
        node=node,
    )


def video_choice(video, latent_image: dict) -> ClipChoice:
    """MaSC Video Options' value (or the defaults), checked against the latent before anything is sampled."""
    samples = latent_image["samples"]
    if video is None:
        return ClipChoice()
    choice = video.check()
    if samples.ndim != 5:
        raise MascInputError(
            "video is connected but latent_image is an image latent: connect a video latent (e.g. WanVaceToVideo's), "
            "or disconnect MaSC Video Options"
        )
    if choice.trim_latent >= samples.shape[2]:
        raise MascInputError(
            f"trim_latent is {choice.trim_latent} but the latent has {samples.shape[2]} frames: nothing would be left "
            "to decode; connect WanVaceToVideo's trim_latent"
        )
    return choice


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


def candidate_scoring(
    *,
    encoder,
    reference_image,
    reference_mask,
    subjects,
    subject,
    mask_subject,
    prompt,
    segmenter,
    mask_threshold,
    clip: ClipChoice = ClipChoice(),
) -> CandidateScoring:
    """How the candidates are scored, from the node's inputs: converted and checked before any candidate is
    sampled."""
    common = dict(
        encoder=encoder,
        prompt=prompt,
        segmenter=segmenter,
        mask_threshold=mask_threshold,
        progress=host.interrupt_callback(),
        clip=clip,
    )
    if subjects is None:
        references, reference_masks = reference_inputs(reference_image, reference_mask)
        return CandidateScoring(
            references=references,
            reference_masks=reference_masks,
            subject=subject,
            mask_subject=mask_subject,
            **common,
        )
    declared = check_subjects_input(
        subjects=subjects,
        reference_image=reference_image,
        reference_mask=reference_mask,
        subject=subject,
        mask_subject=mask_subject,
    )
    return CandidateScoring(subjects=[d.subject for d in declared], **common)


def check_subjects_input(*, subjects, reference_image, reference_mask, subject, mask_subject) -> list:
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
    return declared


def kept_latent(latent_image: dict, outcome: Outcome) -> dict:
    """The kept latents, best first, with batch_index = candidate number (noise_mask etc. carried over)."""
    dropped = ("samples", "batch_index", "downscale_ratio_spacial", "downscale_ratio_temporal")
    latent = {k: v for k, v in latent_image.items() if k not in dropped}
    latent["samples"] = torch.cat([kept.latent for _, kept in outcome.kept])
    latent["batch_index"] = [candidate.index for candidate, _ in outcome.kept]
    return latent


def node_result(finished: FinishedRun, *, latent_image: dict, extra_pnginfo, unique_id, node: str) -> dict:
    """The outputs (blocked ones skip their consumers), the PNG metadata entry, the report on the node."""
    outcome, scores, report = finished.result.outcome, finished.scores, finished.report
    candidates = to_comfy_image_batch(finished.result.thumbnails)
    seeds = ", ".join(str(s) for s in outcome.seeds)
    if outcome.blocked:
        record(extra_pnginfo, unique_id, scores, node)
        return {"ui": {"text": [report]}, "result": blocked(3) + (scores, outcome.used, seeds, report, candidates)}
    images = torch.cat([kept.image for _, kept in outcome.kept])
    masks = [kept.mask for _, kept in outcome.kept]
    if images.ndim == 5:  # video: each kept clip's frames in order, as VAE Decode gives them; found by its first frame
        digests = image_digests(images[:, 0])
        images = images.reshape(-1, *images.shape[-3:])
    else:
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
