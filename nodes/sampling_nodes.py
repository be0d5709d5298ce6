"""MaSC Sample Until: rejection sampling and best-of-N in one queue run, stopping as soon as enough pass.

The node samples with ComfyUI's own sampler (``host.sampling()``: core's
noise, sampler, latent previews and VAE decode), masks the candidates with
the optional segmenter, scores them with ``masc_core.score_images`` (one
subject) or ``masc_core.score_subjects`` (several, from chained MaSC Subject
nodes: a candidate's CP is then their cp_min) and leaves every decision (seeds, acceptance, budget, what to keep, order,
shortfall) to ``masc_core.selection.acceptance``. It converts types and formats
results; nothing else.
"""

from __future__ import annotations

import torch

from ..masc_core.selection.contact_sheet import THUMBNAIL
from ..masc_core.selection.acceptance import SHORTFALL_CHOICES, AcceptanceLoop, AcceptanceRules, Outcome, outcome_report
from ..masc_core.errors import MascInputError
from ..masc_core.limits import ACCEPT, BATCH_SIZE, MAX_CANDIDATES
from ..masc_core.metric.masks import DEFAULT_MASK_THRESHOLD, masks_for_batch
from ..masc_core.selection.pruning import Ledger, PruneRules, samples_one_by_one, split_note
from ..masc_core.selection.ranking import KEEP_BUT_MARK, RANK_KEYS
from ..masc_core.metric.scores import ScoreBatch, ScoreContext
from ..masc_core.scoring.batch import score_images
from ..masc_core.scoring.subject_scoring import score_subjects
from ..masc_core.metric.subjects import SubjectBatch
from . import host
from .convert import check_reference_mask, check_single_latent, comfy_images, comfy_masks, to_comfy_image_batch
from .metadata import HIDDEN_INPUTS, encoder_identity, image_digests, record
from .scoring_nodes import ENCODER_INPUT, PROMPT_INPUT, REFERENCE_INPUT, REFERENCE_MASK_INPUT, SUBJECT_INPUT
from .selection_nodes import OFF, ON_UNCERTAIN_INPUT, THRESHOLD_INPUTS, blocked, threshold_value
from .inputs import checked_inputs
from .rounds import PRUNE_INPUTS, CandidateRound
from .subject_nodes import BLEND_CHOICES, declared_subjects, subjects_label
from .types import CATEGORY, MASC_SCORES, MASC_SEGMENTER, MASC_SUBJECTS, Output, declare_outputs

NODE = "MaSCSampleUntil"


def sampler_inputs() -> dict:
    """What core KSampler takes, with its widgets' ranges."""
    return {
        "model": ("MODEL", {"tooltip": "The diffusion model, with whatever the graph did to it upstream (LoRA, ...)."}),
        "positive": ("CONDITIONING", {"tooltip": "Positive conditioning, as for KSampler."}),
        "negative": ("CONDITIONING", {"tooltip": "Negative conditioning, as for KSampler."}),
        "latent_image": ("LATENT", {"tooltip": "ONE latent every candidate starts from (Empty Latent Image with batch_size 1)."}),
        "vae": ("VAE", {"tooltip": "Decodes each candidate for scoring, as VAE Decode."}),
        "seed": ("INT", {"default": 0, "min": 0, "max": 0xFFFFFFFFFFFFFFFF, "control_after_generate": True,
                         "tooltip": "Candidate i uses seed + i: a KSampler with that seed (batch 1) reproduces it."}),
        "steps": ("INT", {"default": 20, "min": 1, "max": 10000, "tooltip": "Sampler steps per candidate."}),
        "cfg": ("FLOAT", {"default": 8.0, "min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01, "tooltip": "Classifier-free guidance, as for KSampler."}),
        "sampler_name": (host.sampler_names(), {"tooltip": "The sampler, as for KSampler."}),
        "scheduler": (host.scheduler_names(), {"tooltip": "The scheduler, as for KSampler."}),
        "denoise": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": "As for KSampler (below 1 starts from latent_image's content)."}),
    }


def acceptance_inputs() -> dict:
    """How many to keep, the budget, the ranking and the thresholds (those of MaSC Gate)."""
    return {
        "accept": ("INT", {"default": 1, "min": ACCEPT.low, "max": ACCEPT.high, "tooltip": "Stop once this many candidates pass; they are returned best first."}),
        "max_candidates": ("INT", {"default": 16, "min": MAX_CANDIDATES.low, "max": MAX_CANDIDATES.high, "tooltip": "The budget: never sample more candidates than this."}),
        "batch_size": ("INT", {"default": 1, "min": BATCH_SIZE.low, "max": BATCH_SIZE.high, "tooltip": "Candidates sampled per round. Larger is faster on a big GPU; 1 stops soonest and needs least VRAM."}),
        "rank_by": (list(RANK_KEYS), {"default": "cp", "tooltip": "Best first by cp, pf, or both = cp_weight*CP + pf_weight*PF (pf and both need a segmenter)."}),
        "cp_weight": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.05, "tooltip": "Weight of CP when ranking by both."}),
        "pf_weight": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.05, "tooltip": "Weight of PF when ranking by both."}),
        **THRESHOLD_INPUTS,
        "min_cp": ("FLOAT", dict(THRESHOLD_INPUTS["min_cp"][1], default=0.5)),  # as MaSC Gate: a starting point, tune it
        "on_shortfall": (list(SHORTFALL_CHOICES), {"default": SHORTFALL_CHOICES[0], "tooltip": "When the budget runs out with fewer than accept passing: return the best so far (marked below threshold in the report), or block the nodes downstream."}),
        "mask_subject": ("STRING", {"default": "", "tooltip": "What the segmenter masks in each candidate (e.g. 'dog'); empty = the subject names. Leave it empty with subjects."}),
        "mask_threshold": ("FLOAT", {"default": DEFAULT_MASK_THRESHOLD, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": "The segmenter's threshold, as in MaSC Auto Mask."}),
    }


@checked_inputs
class MaSCSampleUntil:
    """Node: MaSC Sample Until."""

    SEARCH_ALIASES = ["best of n", "rejection sampling", "sample until", "retry", "ksampler"]
    """Words the node library's search finds it by (ComfyUI 0.33 and later; older versions ignore it)."""

    DESCRIPTION = (
        "Samples candidates with ComfyUI's own sampler (seed, seed+1, ...), scores each with MaSC against the reference "
        "and stops as soon as 'accept' pass, or after max_candidates. Returns the kept images, latents and masks best "
        "first, every candidate's scores and seed, and a report. One press of Queue; no Auto Queue."
    )
    CATEGORY = CATEGORY
    OUTPUT_NODE = True
    FUNCTION = "sample"
    RETURN_TYPES, RETURN_NAMES, OUTPUT_TOOLTIPS = declare_outputs(
        Output("IMAGE", "images", "The kept candidates, best first (skipped downstream when blocked)."),
        Output("LATENT", "latent", "Their latents, best first; batch_index = candidate number."),
        Output("MASK", "mask", "Their masks from the segmenter, best first (with several subjects: every subject's mask together); skipped downstream without a segmenter."),
        Output(MASC_SCORES, "scores", "Every candidate's scores, seeds and verdicts (MaSC Log Scores; Select Best/Gate with 'images')."),
        Output("INT", "candidates_used", "How many candidates were sampled."),
        Output("STRING", "seeds", "The kept candidates' seeds, best first, comma-separated."),
        Output("STRING", "report", "Every candidate: seed, CP, PF and verdict."),
        Output("IMAGE", "candidates", f"Every candidate, rejected ones too, shrunk to {THUMBNAIL} px at most (in sampling order): for MaSC Contact Sheet with 'scores'."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        required = sampler_inputs()
        required.update({
            "encoder": ENCODER_INPUT,
            "prompt": PROMPT_INPUT,
            "subject": SUBJECT_INPUT,
        })
        required.update(acceptance_inputs())
        # reference_image and reference_mask are optional only so that 'subjects' can replace them; the node
        # refuses a run with neither (images are links, not widgets: saved workflows keep their values).
        optional = {
            "reference_image": (REFERENCE_INPUT[0], dict(REFERENCE_INPUT[1], tooltip=REFERENCE_INPUT[1]["tooltip"] + " Needed unless subjects is connected.")),
            "reference_mask": REFERENCE_MASK_INPUT,
            "segmenter": (MASC_SEGMENTER, {"tooltip": "Optional: masks each candidate (Load MaSC Auto Mask Model for CLIPSeg, Load MaSC SAM3 Model for SAM3). Without it: CP only, PF undefined."}),
            "subjects": (MASC_SUBJECTS, {"tooltip": "Several subjects in each candidate (chained MaSC Subject nodes) instead of reference_image, reference_mask and subject. A candidate passes only when every subject does (CP = cp_min, the weakest subject); the segmenter masks each subject by its own names."}),
            "on_blend": (BLEND_CHOICES, {"default": "report", "tooltip": "With subjects: report = blend warnings in the report only; reject = a candidate with a blend warning does not pass (needs a segmenter)."}),
            "on_uncertain": ON_UNCERTAIN_INPUT,
            **PRUNE_INPUTS,
        }
        return {"required": required, "optional": optional, "hidden": dict(HIDDEN_INPUTS)}

    def sample(
        self, model, positive, negative, latent_image, vae, seed, steps, cfg, sampler_name, scheduler, denoise,
        encoder, prompt, subject, accept, max_candidates, batch_size, rank_by, cp_weight, pf_weight, min_cp, min_pf,
        reject_small_masks, min_foreground, on_shortfall, mask_subject, mask_threshold, reference_image=None,
        reference_mask=None, segmenter=None, subjects=None, on_blend=None, on_uncertain=None, prune_at=None, prune_keep=None,
        prune_study=None, extra_pnginfo=None, unique_id=None,
    ):
        loop = AcceptanceLoop(AcceptanceRules(  # checks the rules: their errors come before any other
            seed=int(seed), accept=int(accept), max_candidates=int(max_candidates), batch_size=int(batch_size), by=rank_by,
            cp_weight=float(cp_weight), pf_weight=float(pf_weight), min_cp=threshold_value(min_cp), min_pf=threshold_value(min_pf),
            reject_small_masks=bool(reject_small_masks), min_foreground=float(min_foreground), on_shortfall=on_shortfall,
            on_uncertain=on_uncertain or KEEP_BUT_MARK, on_blend=on_blend or "report",  # both absent in older graphs
        ))
        rules = loop.rules
        check_pf_needs_masks(rules, segmenter)
        check_single_latent(latent_image)
        pruning = PruneRules(  # absent in older graphs: off
            prune_at=float(prune_at or 0.0), prune_keep=int(prune_keep or 1), study=bool(prune_study),
        ).check(batch_size=rules.batch_size, steps=int(steps), sampler_name=sampler_name, denoise=float(denoise),
                noise_mask=latent_image.get("noise_mask") is not None)
        score_round, scored_subject = round_scorer(encoder, reference_image, reference_mask, subjects, subject, mask_subject,
                                                   prompt, rules, segmenter, mask_threshold, rules.on_blend)
        sampling = host.sampling()
        progress = host.CandidateProgress(rules.max_candidates, steps)
        settings = dict(positive=positive, negative=negative, steps=int(steps), cfg=float(cfg), sampler_name=sampler_name,
                        scheduler=scheduler, denoise=float(denoise))
        first_batch, thumbnails = None, []
        ledger = Ledger(steps=int(steps)) if pruning.active else None
        while seeds := loop.next_seeds():
            host.check_interrupt()
            candidate_round = CandidateRound(sampling, vae, score_round, rules, pruning, int(steps), len(loop.candidates) // rules.batch_size)
            round_scores, take, pruned, round_thumbnails, batch = candidate_round.run(model, seeds, latent_image, progress, loop.used, settings, ledger)
            thumbnails += round_thumbnails  # every candidate, small: memory stays bounded
            first_batch = first_batch or batch
            loop.add_round(round_scores, take, pruned)
            del candidate_round, take, batch
        progress.update(progress.total)
        outcome = loop.outcome()
        scores = all_scores(outcome, first_batch, encoder, scored_subject, ledger)
        report = run_report(outcome, rules, scores, segmenter, sampler_name, extra_pnginfo, pruning, ledger)
        return node_result(outcome, scores, latent_image, report, extra_pnginfo, unique_id, to_comfy_image_batch(thumbnails))


def check_pf_needs_masks(rules: AcceptanceRules, segmenter) -> None:
    """PF needs each candidate's mask: without a segmenter, settings that use PF cannot work."""
    if segmenter is not None:
        return
    uses_pf = [
        (rules.by in ("pf", "both"), f"rank_by '{rules.by}'"),
        (rules.min_pf is not None, "min_pf"),
        (rules.reject_small_masks, "reject_small_masks"),
    ]
    for used, name in uses_pf:
        if used:
            raise MascInputError(
                f"{name} needs the candidates' masks, and no segmenter is connected: connect Load MaSC Auto Mask Model or Load MaSC SAM3 Model to "
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


def round_scorer(encoder, reference_image, reference_mask, subjects, subject, mask_subject, prompt, rules, segmenter,
                 mask_threshold, on_blend):
    """(a function scoring one round's decoded candidates -> (ScoreBatch, masks [B,H,W] or None), the subject names the
    scores record). Every input is checked here, before the first candidate is sampled."""
    progress = host.interrupt_callback()
    if subjects is None:
        references, reference_masks = reference_inputs(reference_image, reference_mask)
        if on_blend != "report":
            raise MascInputError(f"on_blend is '{on_blend}' but 'subjects' is not connected: blends exist between several subjects; set it to report")

        def score_one(arrays):
            masks = mask_candidates(segmenter, arrays, mask_subject or subject, mask_threshold)
            batch = score_images(encoder.ready(), arrays, reference=references, reference_mask=reference_masks, mask=masks,
                                 prompt=prompt, subject=subject, cp=True, pf=True, min_foreground=rules.min_foreground,
                                 cache_outputs=False, progress=progress, bands=True)
            return batch, masks
        return score_one, subject

    declared = check_subjects_input(subjects, reference_image, reference_mask, subject, mask_subject, segmenter, on_blend)

    def score_several(arrays):
        per_subject = [mask_candidates(segmenter, arrays, d.subject.names, mask_threshold) for d in declared]
        multi: SubjectBatch = score_subjects(
            encoder.ready(), arrays, subjects=[d.subject for d in declared],
            output_masks=None if segmenter is None else per_subject, prompt=prompt,
            min_foreground=rules.min_foreground, cache_outputs=False, progress=progress,
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
            raise MascInputError(f"{name} and subjects are both connected: with several subjects each MaSC Subject holds its reference; disconnect {name}")
    for name, value in (("subject", subject), ("mask_subject", mask_subject)):
        if str(value or "").strip():
            raise MascInputError(
                f"{name} is {str(value).strip()[:40]!r} while subjects is connected: each MaSC Subject's names are stripped "
                f"from the prompt and prompt its mask; clear {name}"
            )
    with_mask = next((d.subject.label for d in declared if d.mask is not None), None)
    if with_mask is not None:
        raise MascInputError(
            f"the MaSC Subject '{with_mask}' has a mask for generated images, but Sample Until makes its own candidates: "
            "disconnect that mask; connect a segmenter to mask every subject in each candidate"
        )
    if on_blend == "reject" and segmenter is None:
        raise MascInputError("on_blend 'reject' needs each subject's region in the candidates: connect a segmenter, or set on_blend to report")
    return declared


def mask_candidates(segmenter, arrays, subject: str, threshold: float):
    """The candidates' masks [B,H,W] from the segmenter, or None without one."""
    if segmenter is None:
        return None
    masks = segmenter.ready().masks(arrays, subject, threshold=float(threshold), progress=host.interrupt_callback())
    return torch.stack(masks)


def all_scores(outcome: Outcome, first_batch: ScoreBatch, encoder, subject: str | None, ledger: Ledger | None = None) -> ScoreBatch:
    """Every candidate's scores in sampling order, with seeds, verdicts, which were kept and the pruning ledger."""
    return ScoreBatch(
        scores=[c.score for c in outcome.candidates],
        references=first_batch.references,
        min_foreground=first_batch.min_foreground,
        context=ScoreContext(
            node=NODE, subject=subject, encoder=encoder_identity(encoder), seeds=[c.seed for c in outcome.candidates],
            verdicts=[c.verdict for c in outcome.candidates], kept=[c.index for c, _ in outcome.kept],
            ledger=None if ledger is None else ledger.to_dict(),
        ),
    )


def run_report(outcome: Outcome, rules: AcceptanceRules, scores: ScoreBatch, segmenter, sampler_name: str, extra_pnginfo,
               pruning: PruneRules | None = None, ledger: Ledger | None = None) -> str:
    """The loop's report plus what the user should know about this run's setup."""
    notes = []
    if ledger is not None:
        what = "study: every candidate judged at steps " + ", ".join(str(s) for s in pruning.stops(ledger.steps)) + f" of {ledger.steps}, none pruned" if pruning.study \
            else f"pruning at step {pruning.stops(ledger.steps)[0]} of {ledger.steps}, {pruning.prune_keep} of each round of {rules.batch_size} go on"
        notes.append(f"{what}: {ledger.summary()}")
        note = split_note(sampler_name)
        if note and not pruning.study:
            notes.append(note)
    if segmenter is None:
        notes.append("no segmenter connected: PF undefined, CP only")
    if scores.scores[0].subjects is not None:
        labels = ", ".join(figure["subject"] for figure in scores.scores[0].subjects)
        notes.append(f"several subjects ({labels}): CP is cp_min, the weakest subject's; each candidate's subjects are under its line")
    if rules.batch_size > 1 and samples_one_by_one(sampler_name) and ledger is None:
        notes.append(
            f"{sampler_name} draws noise while sampling: each candidate of a round was sampled in its own call, "
            "so a KSampler with its seed reproduces it"
        )
    if not isinstance(extra_pnginfo, dict):
        notes.append("ComfyUI passed no PNG metadata (an API prompt without extra_data.extra_pnginfo): scores are not saved in PNGs")
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


def node_result(outcome: Outcome, scores: ScoreBatch, latent_image: dict, report: str, extra_pnginfo, unique_id, candidates) -> dict:
    """The outputs (blocked ones skip their consumers), the PNG metadata entry, the report on the node."""
    seeds = ", ".join(str(s) for s in outcome.seeds)
    if outcome.blocked:
        record(extra_pnginfo, unique_id, scores, NODE)
        return {"ui": {"text": [report]}, "result": blocked(3) + (scores, outcome.used, seeds, report, candidates)}
    images = torch.cat([kept.image for _, kept in outcome.kept])
    masks = [kept.mask for _, kept in outcome.kept]
    digests = image_digests(images)
    record(extra_pnginfo, unique_id, scores, NODE, pixels=[None if c.output is None else digests[c.output] for c in outcome.candidates])
    mask = blocked(1)[0] if masks[0] is None else torch.cat(masks)
    result = (images, kept_latent(latent_image, outcome), mask, scores, outcome.used, seeds, report, candidates)
    return {"ui": {"text": [report]}, "result": result}
