"""One run of either MaSC Sample Until node: the run's values built once from the node's inputs, the run, the outputs.

MaSC Sample Until (KSampler's inputs) and MaSC Sample Until (Custom) (core's NOISE, GUIDER, SAMPLER, SIGMAS) differ
only in what samples (``host.KSamplerInputs`` or ``host.CustomSamplingInputs``) and where their rules come from
(their widgets, or MaSC Rules and MaSC Prune). ``sample_until`` takes those values and the node's inputs, checks the
latent and the video options, builds the scoring (``candidate_scoring``) and one ``host.ComfyCandidateSampler`` for
the run, calls the run (``masc_core.scoring.candidates.run_sample_until``: seeds, rounds, pruning, acceptance, the
ledger, the report; every check before the first step) and formats what it gives: the ``masc`` entry in saved PNGs
and the outputs.
"""

from __future__ import annotations

from typing import Mapping

import torch

from ..masc_core.defaults import DEFAULT_MASK_THRESHOLD
from ..masc_core.errors import MascInputError
from ..masc_core.scoring.candidates import CandidateScoring, FinishedRun, run_sample_until
from ..masc_core.selection.acceptance import Outcome, RunRules
from ..masc_core.selection.clip import ClipChoice
from ..masc_core.selection.pruning import PruneRules
from . import host
from .convert import check_single_latent, reference_views, to_comfy_image_batch
from .metadata import image_digests, record, scoring_context
from .selection_nodes import blocked
from .subject_nodes import declared_subjects


def sample_until(node: str, sampling_inputs, rules: RunRules, pruning: PruneRules, inputs: Mapping) -> dict:
    """A whole sample-until run, for both nodes: what samples (``sampling_inputs``), the run's rules and pruning, and
    the node's other inputs by name (``inputs``: latent_image, vae, encoder, prompt, subject, the references or
    subjects, segmenter, mask_subject, mask_threshold, video and the hidden values)."""
    latent = inputs["latent_image"]
    check_single_latent(latent)
    clip = video_choice(inputs.get("video"), latent)
    scoring = candidate_scoring(inputs, clip)
    unique_id, extra_pnginfo = inputs.get("unique_id"), inputs.get("extra_pnginfo")
    sampler = host.ComfyCandidateSampler(
        sampling_inputs, latent, inputs["vae"], unique_id, trim_latent=clip.trim_latent
    )
    if pruning.active:
        sampler.check_splittable()
    context = scoring_context(node, inputs["encoder"], scoring.label)
    finished = run_sample_until(
        rules,
        pruning,
        sampler,
        scoring,
        context=context,
        noise_mask=latent.get("noise_mask") is not None,
        saves_metadata=isinstance(extra_pnginfo, dict),
    )
    sampler.finish()
    return node_result(finished, latent, extra_pnginfo, unique_id, node)


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
    return reference_views(reference_image, reference_mask)


def candidate_scoring(inputs: Mapping, clip: ClipChoice = ClipChoice()) -> CandidateScoring:
    """How the candidates are scored, from the node's inputs by name: converted and checked before any candidate is
    sampled (mask_subject and mask_threshold are optional on the custom node: absent, the subject and the default)."""
    threshold = inputs.get("mask_threshold")
    common = dict(
        encoder=inputs["encoder"],
        prompt=inputs["prompt"],
        segmenter=inputs.get("segmenter"),
        mask_threshold=DEFAULT_MASK_THRESHOLD if threshold is None else threshold,
        progress=host.interrupt_callback(),
        clip=clip,
    )
    if inputs.get("subjects") is None:
        references, reference_masks = reference_inputs(inputs.get("reference_image"), inputs.get("reference_mask"))
        return CandidateScoring(
            references=references,
            reference_masks=reference_masks,
            subject=inputs["subject"],
            mask_subject=inputs.get("mask_subject") or "",
            **common,
        )
    return CandidateScoring(subjects=[d.subject for d in check_subjects_input(inputs)], **common)


def check_subjects_input(inputs: Mapping) -> list:
    """The declared subjects, refusing inputs that 'subjects' replaces or that cannot apply to sampled candidates."""
    declared = declared_subjects(inputs["subjects"])
    for name in ("reference_image", "reference_mask"):
        if inputs.get(name) is not None:
            raise MascInputError(
                f"{name} and subjects are both connected: with several subjects each MaSC Subject holds its reference; "
                f"disconnect {name}"
            )
    for name in ("subject", "mask_subject"):
        value = inputs.get(name)
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


def node_result(finished: FinishedRun, latent_image: dict, extra_pnginfo, unique_id, node: str) -> dict:
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
