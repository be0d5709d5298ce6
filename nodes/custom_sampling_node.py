"""MaSC Sample Until (Custom): MaSC Sample Until for core's custom sampling (NOISE, GUIDER, SAMPLER, SIGMAS).

Its rules come from MaSC Rules and MaSC Prune; it builds the same ``RunRules`` / ``PruneRules`` values as MaSC Sample
Until (``sampling_nodes``) and runs the same ``sample_until_run.sample_until``, sampling with
``host.CustomSamplingInputs``. It converts inputs; nothing else.
"""

from __future__ import annotations

import dataclasses

from ..masc_core.selection.pruning import PruneRules
from . import host
from .declarations import (
    ENCODER_INPUT,
    MaSCNode,
    MASK_SUBJECT_INPUT,
    MASK_THRESHOLD_INPUT,
    PROMPT_INPUT,
    PRUNE_INPUT,
    REFERENCE_MASK_INPUT,
    SAMPLED_REFERENCE_INPUT,
    SEGMENTER_INPUT,
    SUBJECT_INPUT,
    SUBJECTS_INPUT,
    VIDEO_INPUT,
)
from .metadata import HIDDEN_INPUTS
from .sample_until_run import sample_until
from .sampling_nodes import MaSCSampleUntil
from .types import MASC_RULES

NODE_CUSTOM = "MaSCSampleUntilCustom"


class MaSCSampleUntilCustom(MaSCNode):
    """MaSC Sample Until for core's custom sampling: samples candidates as SamplerCustomAdvanced does with your NOISE,
    GUIDER, SAMPLER and SIGMAS (seed counting up from the NOISE's), scores each with MaSC and stops as soon as MaSC
    Rules' 'accept' pass. MaSC Prune decides before the last step."""

    SEARCH_ALIASES = [
        "best of n custom",
        "rejection sampling",
        "sample until",
        "samplercustomadvanced",
        "guider",
        "flux",
    ]
    OUTPUT_NODE = True
    FUNCTION = "sample"
    OUTPUTS = MaSCSampleUntil.OUTPUTS

    @classmethod
    def INPUT_TYPES(cls):
        required = {
            "noise": (
                "NOISE",
                {
                    "tooltip": "Random Noise: candidate i uses its seed + i, so SamplerCustomAdvanced with Random "
                    "Noise at that seed reproduces it."
                },
            ),
            "guider": (
                "GUIDER",
                {
                    "tooltip": "The guider, as for SamplerCustomAdvanced (CFG Guider, Basic Guider, Dual CFG Guider, "
                    "or another pack's)."
                },
            ),
            "sampler": (
                "SAMPLER",
                {"tooltip": "The sampler, as for SamplerCustomAdvanced (KSampler Select or a Sampler... node)."},
            ),
            "sigmas": (
                "SIGMAS",
                {
                    "tooltip": "The noise schedule, as for SamplerCustomAdvanced (Basic Scheduler, Flux2 Scheduler, "
                    "...); its length sets the steps."
                },
            ),
            "latent_image": ("LATENT", {"tooltip": "ONE latent every candidate starts from (batch size 1)."}),
            "vae": ("VAE", {"tooltip": "Decodes each candidate for scoring, as VAE Decode."}),
            "encoder": ENCODER_INPUT,
            "rules": (MASC_RULES, {"tooltip": "What passes, how many to keep and the budget: MaSC Rules."}),
            "prompt": PROMPT_INPUT,
            "subject": SUBJECT_INPUT,
        }
        optional = {
            "reference_image": SAMPLED_REFERENCE_INPUT,
            "reference_mask": REFERENCE_MASK_INPUT,
            "subjects": SUBJECTS_INPUT,
            "segmenter": SEGMENTER_INPUT,
            "prune": PRUNE_INPUT,
            "mask_subject": MASK_SUBJECT_INPUT,
            "mask_threshold": MASK_THRESHOLD_INPUT,
            "video": VIDEO_INPUT,
        }
        return {"required": required, "optional": optional, "hidden": dict(HIDDEN_INPUTS)}

    def sample(self, **inputs):
        """One run on the inputs ``INPUT_TYPES`` declares, by name (each checked against its declaration first)."""
        generator = host.CustomSamplingInputs.from_inputs(inputs)
        # The seeds count up from the NOISE's; the run checks the rules before anything is sampled.
        rules = dataclasses.replace(inputs["rules"], seed=generator.seed)
        return sample_until(NODE_CUSTOM, generator, rules, inputs.get("prune") or PruneRules(), inputs)
