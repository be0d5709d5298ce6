"""MaSC Sample Until: rejection sampling and best-of-N in one queue run, stopping as soon as enough pass.

- MaSC Sample Until (here) takes what core's KSampler takes, and every rule as a widget (saved workflows keep its
  inputs);
- MaSC Sample Until (Custom) (``custom_sampling_node``) takes what core's SamplerCustomAdvanced takes (NOISE, GUIDER,
  SAMPLER, SIGMAS) and its rules from MaSC Rules and MaSC Prune (``rules_nodes``).

Both build the same ``RunRules`` / ``PruneRules`` values and run ``sample_until_run.sample_until`` (which calls
``masc_core.scoring.candidates.run_sample_until``); they differ only in what samples (``host.KSamplerInputs`` or
``host.CustomSamplingInputs``). They convert inputs; nothing else.
"""

from __future__ import annotations

from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.contact_sheet import THUMBNAIL
from ..masc_core.selection.pruning import PruneRules
from . import host
from .metadata import HIDDEN_INPUTS
from .declarations import (
    ACCEPT_INPUT,
    BATCH_SIZE_INPUT,
    BLEND_INPUT,
    CP_WEIGHT_INPUT,
    ENCODER_INPUT,
    MaSCNode,
    MASK_SUBJECT_INPUT,
    MASK_THRESHOLD_INPUT,
    MAX_CANDIDATES_INPUT,
    ON_SHORTFALL_INPUT,
    ON_UNCERTAIN_INPUT,
    PF_WEIGHT_INPUT,
    PROMPT_INPUT,
    PRUNE_INPUTS,
    rank_by_input,
    REFERENCE_MASK_INPUT,
    RUN_MIN_CP_INPUT,
    SAMPLED_REFERENCE_INPUT,
    SEGMENTER_INPUT,
    SUBJECT_INPUT,
    SUBJECTS_INPUT,
    THRESHOLD_INPUTS,
    VIDEO_INPUT,
)
from .declarations import float_input, int_input
from .sample_until_run import sample_until
from .types import MASC_SCORES, Output

NODE = "MaSCSampleUntil"


def sampler_inputs() -> dict:
    """What core KSampler takes, with its widgets' ranges."""
    return {
        "model": ("MODEL", {"tooltip": "The diffusion model, with whatever the graph did to it upstream (LoRA, ...)."}),
        "positive": ("CONDITIONING", {"tooltip": "Positive conditioning, as for KSampler."}),
        "negative": ("CONDITIONING", {"tooltip": "Negative conditioning, as for KSampler."}),
        "latent_image": (
            "LATENT",
            {"tooltip": "ONE latent every candidate starts from (Empty Latent Image with batch_size 1)."},
        ),
        "vae": ("VAE", {"tooltip": "Decodes each candidate for scoring, as VAE Decode."}),
        "seed": (
            "INT",
            {
                "default": 0,
                "min": 0,
                "max": 0xFFFFFFFFFFFFFFFF,
                "control_after_generate": True,
                "tooltip": "Candidate i uses seed + i: a KSampler with that seed (batch 1) reproduces it.",
            },
        ),
        "steps": int_input(20, 1, 10000, "Sampler steps per candidate."),
        "cfg": (
            "FLOAT",
            {
                "default": 8.0,
                "min": 0.0,
                "max": 100.0,
                "step": 0.1,
                "round": 0.01,
                "tooltip": "Classifier-free guidance, as for KSampler.",
            },
        ),
        "sampler_name": (host.sampler_names(), {"tooltip": "The sampler, as for KSampler."}),
        "scheduler": (host.scheduler_names(), {"tooltip": "The scheduler, as for KSampler."}),
        "denoise": float_input(
            1.0, 0.0, 1.0, "As for KSampler (below 1 starts from latent_image's content).", step=0.01
        ),
    }


def acceptance_inputs() -> dict:
    """How many to keep, the budget, the ranking and the thresholds (those of MaSC Gate)."""
    return {
        "accept": ACCEPT_INPUT,
        "max_candidates": MAX_CANDIDATES_INPUT,
        "batch_size": BATCH_SIZE_INPUT,
        "rank_by": rank_by_input("cp"),
        "cp_weight": CP_WEIGHT_INPUT,
        "pf_weight": PF_WEIGHT_INPUT,
        **THRESHOLD_INPUTS,
        "min_cp": RUN_MIN_CP_INPUT,
        "on_shortfall": ON_SHORTFALL_INPUT,
        "mask_subject": MASK_SUBJECT_INPUT,
        "mask_threshold": MASK_THRESHOLD_INPUT,
    }


class MaSCSampleUntil(MaSCNode):
    """Samples candidates with ComfyUI's own sampler (seed, seed+1, ...), scores each with MaSC against the reference
    and stops as soon as 'accept' pass, or after max_candidates. Returns the kept images, latents and masks best first,
    every candidate's scores and seed, and a report. One press of Queue; no Auto Queue."""

    SEARCH_ALIASES = ["best of n", "rejection sampling", "sample until", "retry", "ksampler"]
    OUTPUT_NODE = True
    FUNCTION = "sample"
    OUTPUTS = (
        Output("IMAGE", "images", "The kept candidates, best first (skipped downstream when blocked)."),
        Output("LATENT", "latent", "Their latents, best first; batch_index = candidate number."),
        Output(
            "MASK",
            "mask",
            "Their masks from the segmenter, best first (with several subjects: every subject's mask together); "
            "skipped downstream without a segmenter.",
        ),
        Output(
            MASC_SCORES,
            "scores",
            "Every candidate's scores, seeds and verdicts (MaSC Log Scores; Select Best/Gate with 'images').",
        ),
        Output("INT", "candidates_used", "How many candidates were sampled."),
        Output("STRING", "seeds", "The kept candidates' seeds, best first, comma-separated."),
        Output("STRING", "report", "Every candidate: seed, CP, PF and verdict."),
        Output(
            "IMAGE",
            "candidates",
            f"Every candidate, rejected ones too, in sampling order, at most {THUMBNAIL} px (less past 32 candidates): "
            "for MaSC Contact Sheet with 'scores'.",
        ),
    )

    @classmethod
    def INPUT_TYPES(cls):
        required = sampler_inputs()
        required.update(
            {
                "encoder": ENCODER_INPUT,
                "prompt": PROMPT_INPUT,
                "subject": SUBJECT_INPUT,
            }
        )
        required.update(acceptance_inputs())
        # reference_image and reference_mask are optional only so that 'subjects' can replace them; the node
        # refuses a run with neither (images are links, not widgets: saved workflows keep their values).
        optional = {
            "reference_image": SAMPLED_REFERENCE_INPUT,
            "reference_mask": REFERENCE_MASK_INPUT,
            "segmenter": SEGMENTER_INPUT,
            "subjects": SUBJECTS_INPUT,
            "on_blend": BLEND_INPUT,
            "on_uncertain": ON_UNCERTAIN_INPUT,
            **PRUNE_INPUTS,
            "video": VIDEO_INPUT,
        }
        return {"required": required, "optional": optional, "hidden": dict(HIDDEN_INPUTS)}

    def sample(self, **inputs):
        """One run on the inputs ``INPUT_TYPES`` declares, by name (each checked against its declaration first)."""
        # The widgets make the same RunRules value MaSC Rules makes (on_blend, on_uncertain and pruning are absent in
        # older graphs: their defaults), so both Sample Until nodes decide on one value; the run checks it.
        generator = host.KSamplerInputs.from_inputs(inputs)
        return sample_until(NODE, generator, RunRules.from_widgets(inputs), PruneRules.from_widgets(inputs), inputs)
