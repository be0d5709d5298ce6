"""MaSC Sweep: which LoRA file, training step or strength keeps the subject, sampled and scored in one queue run.

- MaSC Sweep LoRA -> MASC_SWEEP_CELLS: one LoRA file at one or more strengths; chain one per file, the earliest
  training step first (the order breaks ties: ``masc_core.selection.sweep_cells``).
- MaSC Sweep LoRA Model -> MASC_SWEEP_CELLS: an in-memory LoRA (core's LORA_MODEL, from Train LoRA) at one or more
  model strengths, chained into the same cells.
- MaSC Sweep: the baseline (no LoRA) and every cell, each sampled as LoraLoader + CLIPTextEncode + KSampler + VAE
  Decode would at the same prompts and seeds (``host.ComfySweepSampler``), scored, raced if asked and decided by
  ``masc_core.scoring.sweep_run.run_sweep``; the node converts inputs and formats the outputs.
- MaSC Sweep (Custom): the same sweep with the graph's NOISE, GUIDER, SAMPLER and SIGMAS, each image as
  SamplerCustomAdvanced would make it from a guider built on the cell's model and prompt (Flux, SD3, Qwen-Image,
  ...); the same body (``MaSCSweep.run``), another generator (``host.GuiderCells``).
"""

from __future__ import annotations

import dataclasses

from ..masc_core.scoring.sweep_run import MAX_SWEEP_SEEDS, SweepPlan, run_sweep
from ..masc_core.selection.sweep import DEFAULT_CONFIDENCE, DEFAULT_PF_MARGIN, SweepRule
from ..masc_core.selection.sweep_cells import lora_cells, lora_choices, parse_strengths, trained_choices
from ..masc_core.selection.sweep_figures import sweep_chart, sweep_grid, verdict_table
from . import host
from .convert import to_comfy_image_batch
from .declarations import (
    ENCODER_INPUT,
    float_input,
    int_input,
    MASK_SUBJECT_INPUT,
    MASK_THRESHOLD_INPUT,
    MaSCNode,
    REFERENCE_INPUT,
    REFERENCE_MASK_INPUT,
    SUBJECT_INPUT,
)
from .custom_sampling_node import MaSCSampleUntilCustom
from .metadata import HIDDEN_INPUTS, image_digests, record, scoring_context
from .sample_until_run import candidate_scoring
from .sampling_nodes import sampler_inputs
from .types import MASC_SCORES, MASC_SEGMENTER, MASC_SWEEP_CELLS, Output

NODE_SWEEP, NODE_SWEEP_CUSTOM = "MaSCSweep", "MaSCSweepCustom"
CELLS_INPUT = (MASC_SWEEP_CELLS, {"tooltip": "LoRA cells from MaSC Sweep LoRA (chained: earliest step first)."})
STRENGTH_MODEL_INPUT = (
    "STRING",
    {"default": "0.5, 1.0", "tooltip": "Model strengths, comma-separated (e.g. '0.5, 1.0'), -100 to 100; 8 at most."},
)


class SweepCellsNode(MaSCNode):
    """What MaSC Sweep LoRA and MaSC Sweep LoRA Model share: a ``cells`` output, chained onto an optional input."""

    FUNCTION = "cells"
    OUTPUTS = (Output(MASC_SWEEP_CELLS, "cells", "These cells after any chained in, for MaSC Sweep."),)
    CHAINED = {"cells": (MASC_SWEEP_CELLS, {"tooltip": "Optional: earlier LoRAs' cells (chain)."})}

    @staticmethod
    def chain(cells, choices) -> tuple:
        """The cells chained in, then ``choices``; a repeated LoRA and strength refused here, where it was added."""
        chained = tuple(cells or ()) + tuple(choices)
        lora_cells(chained)
        return (chained,)


class MaSCSweepLoRA(SweepCellsNode):
    """One LoRA file at one or more strengths, as cells of MaSC Sweep. Chain one per file (one per training epoch), the
    earliest first: of cells the data cannot tell apart, the lower strength and the earlier file wins."""

    SEARCH_ALIASES = ["lora sweep", "lora epochs", "xy plot lora", "lora strength"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "lora_name": (host.loras().names(), {"tooltip": "A LoRA file of models/loras, as LoraLoader's."}),
                "strength_model": STRENGTH_MODEL_INPUT,
                "strength_clip": (
                    "STRING",
                    {"default": "", "tooltip": "CLIP strengths: empty = the model's, one for all, or one each."},
                ),
            },
            "optional": dict(cls.CHAINED),
        }

    def cells(self, lora_name, strength_model, strength_clip, cells=None):
        clip_text = str(strength_clip).strip()
        clip = parse_strengths(clip_text, "strength_clip") if clip_text else None
        return self.chain(cells, lora_choices(lora_name, parse_strengths(strength_model, "strength_model"), clip))


class MaSCSweepLoRAModel(SweepCellsNode):
    """An in-memory LoRA (core's LORA_MODEL, from Train LoRA) at one or more model strengths, as cells of MaSC Sweep:
    each cell patches the model as Load LoRA Model does. Chain it with MaSC Sweep LoRA nodes."""

    SEARCH_ALIASES = ["train lora sweep", "lora model", "trained lora", "lora training evaluation"]

    @classmethod
    def INPUT_TYPES(cls):
        name = ("STRING", {"default": "trained LoRA", "tooltip": "How the report, grid and chart name this LoRA."})
        lora = ("LORA_MODEL", {"tooltip": "Train LoRA's 'lora' output."})
        return {
            "required": {"lora": lora, "name": name, "strength_model": STRENGTH_MODEL_INPUT},
            "optional": dict(cls.CHAINED),
        }

    def cells(self, lora, name, strength_model, cells=None):
        weights = host.check_lora_model(lora)
        return self.chain(cells, trained_choices(name, weights, parse_strengths(strength_model, "strength_model")))


class MaSCSweep(MaSCNode):
    """Samples the baseline and every MaSC Sweep LoRA cell at the same prompts and seeds, as LoraLoader + KSampler
    would, and recommends the cell with the highest CP whose PF stays within pf_margin of the baseline's, or says which
    cells tie. Outputs its MODEL and CLIP."""

    SEARCH_ALIASES = ["lora sweep", "which lora", "best epoch", "xy plot", "lora strength", "checkpoint comparison"]
    OUTPUT_NODE = True
    FUNCTION = "sweep"
    OUTPUTS = (
        Output("MODEL", "model", "The model with the recommended cell's LoRA (the input model for the baseline)."),
        Output("CLIP", "clip", "The CLIP with the recommended cell's LoRA."),
        Output("STRING", "lora_name", "The recommended cell's LoRA file, or a LoRA model's name (empty: baseline)."),
        Output("FLOAT", "strength_model", "Its model strength (0 for the baseline)."),
        Output("FLOAT", "strength_clip", "Its CLIP strength (0 for the baseline)."),
        Output("IMAGE", "grid", "A row per cell, a column per (prompt, seed), CP and PF on each; recommended framed."),
        Output("IMAGE", "chart", "Each cell on the CP-PF plane with its intervals, the frontier and the PF margin."),
        Output("IMAGE", "images", "Every image sampled, cell by cell, prompt by prompt, seed by seed."),
        Output("STRING", "report", "Every cell's images, means, paired intervals and status, then the verdict."),
        Output(MASC_SCORES, "scores", "Every image's CP, PF, cell, prompt and seed, for MaSC Log Scores."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        generator = sampler_inputs()
        seed = (
            generator["seed"][0],
            dict(generator["seed"][1], tooltip="The first seed; the sweep uses seed, seed+1, ..."),
        )
        required = {
            "model": generator["model"],
            "clip": ("CLIP", {"tooltip": "The text encoder: each cell's LoRA patches it, as LoraLoader does."}),
            "vae": generator["vae"],
            "latent_image": (
                "LATENT",
                {"tooltip": "ONE image latent every image starts from (Empty Latent Image with batch_size 1)."},
            ),
            "cells": CELLS_INPUT,
            "prompts": ("STRING", {"multiline": True, "default": "", "tooltip": "One prompt per line (64 at most)."}),
            "negative": (
                "STRING",
                {"multiline": True, "default": "", "tooltip": "The negative prompt, for every image."},
            ),
            "seed": seed,
            "seeds": int_input(4, 1, MAX_SWEEP_SEEDS, "Seeds per prompt."),
            **{k: generator[k] for k in ("steps", "cfg", "sampler_name", "scheduler", "denoise")},
            "encoder": ENCODER_INPUT,
            "reference_image": REFERENCE_INPUT,
            "reference_mask": REFERENCE_MASK_INPUT,
            "subject": SUBJECT_INPUT,
            "segmenter": (MASC_SEGMENTER, {"tooltip": "Masks each image (PF pools the background): CLIPSeg or SAM3."}),
            "mask_threshold": MASK_THRESHOLD_INPUT,
            "pf_margin": float_input(
                DEFAULT_PF_MARGIN,
                0.0,
                2.0,
                "Mean PF a recommended cell may lose against the baseline's (this pack's default).",
                step=0.005,
            ),
            "confidence": float_input(
                DEFAULT_CONFIDENCE,
                0.5,
                0.999,
                "Of the paired intervals that call a tie, and of the race's stops.",
                step=0.005,
            ),
            "race": (
                "BOOLEAN",
                {"default": False, "tooltip": "Stop sampling a cell once it cannot win (fewer images, same verdict)."},
            ),
        }
        return {"required": required, "optional": {"mask_subject": MASK_SUBJECT_INPUT}, "hidden": dict(HIDDEN_INPUTS)}

    def sweep(self, **inputs):
        """One sweep on the inputs ``INPUT_TYPES`` declares, by name (each checked against its declaration first)."""
        return self.run(NODE_SWEEP, inputs, host.KSamplerCells.from_inputs(inputs), int(inputs["seed"]))

    @staticmethod
    def run(node_id: str, inputs: dict, generator, first: int) -> dict:
        """Node ``node_id``'s sweep of ``inputs`` sampled by ``generator`` (``host.KSamplerCells`` or
        ``host.GuiderCells``) at seeds ``first``, ``first`` + 1, ...: the node's ui and result."""
        choices = tuple(inputs["cells"])
        cells = lora_cells(choices)
        prompts = [line.strip() for line in str(inputs["prompts"]).splitlines() if line.strip()]
        seeds = [(first + k) % 2**64 for k in range(int(inputs["seeds"]))]
        plan = SweepPlan(cells, prompts, seeds, race=bool(inputs["race"])).check()
        rule = SweepRule(pf_margin=float(inputs["pf_margin"]), confidence=float(inputs["confidence"])).check()
        host.check_sweep_latent(inputs["latent_image"], inputs["vae"], plan.images)
        scoring = candidate_scoring(dict(inputs, prompt=prompts[0]))
        by_name = {cell.name: choice for cell, choice in zip(cells, (None,) + choices)}
        sampler = host.ComfySweepSampler(
            generator, inputs["clip"], inputs["latent_image"], inputs["vae"], by_name, plan.images
        )
        sampler.check_cells()  # every LoRA file read and matched to the model before the first image
        outcome = run_sweep(sampler, plan, scoring, rule)
        verdict = outcome.verdict
        report = verdict_table(verdict) + f"\nimages sampled: {len(outcome.sampled)} of {outcome.planned}"
        host.show_text(inputs.get("unique_id"), report)
        chosen = by_name[verdict.recommended]
        model, clip = (
            (generator.model, inputs["clip"])
            if chosen is None
            else host.loras().apply(generator.model, inputs["clip"], chosen)
        )
        grid = sweep_grid(verdict, plan.pairs, outcome.pictures, outcome.scores)
        chart = sweep_chart(verdict, rule.pf_margin)
        images = sampler.output(outcome.sampled)
        context = scoring_context(node_id, inputs["encoder"], scoring.label)
        batch = outcome.batch
        batch.context = dataclasses.replace(
            batch.context, node=context.node, subject=context.subject, encoder=context.encoder
        )
        # Every image in the PNG metadata, each found again by its pixels (core Save Image on the images output).
        record(inputs.get("extra_pnginfo"), inputs.get("unique_id"), batch, node_id, pixels=image_digests(images))
        result = (
            model,
            clip,
            "" if chosen is None else chosen.lora,
            0.0 if chosen is None else chosen.strength_model,
            0.0 if chosen is None else chosen.strength_clip,
            to_comfy_image_batch([grid]),
            to_comfy_image_batch([chart]),
            images,
            report,
            batch,
        )
        return {"ui": {"text": [report]}, "result": result}


class MaSCSweepCustom(MaSCNode):
    """MaSC Sweep for core's custom sampling: samples the baseline and every MaSC Sweep LoRA cell as
    SamplerCustomAdvanced would with your NOISE, SAMPLER and SIGMAS and the GUIDER built on the cell's model and each
    prompt (what FluxGuidance or ReferenceLatent added kept), then recommends a cell as MaSC Sweep does."""

    SEARCH_ALIASES = ["lora sweep flux", "which lora custom", "best epoch flux", "samplercustomadvanced sweep"]
    OUTPUT_NODE = True
    FUNCTION = "sweep"
    OUTPUTS = MaSCSweep.OUTPUTS

    @classmethod
    def INPUT_TYPES(cls):
        declared = MaSCSweep.INPUT_TYPES()
        shared = declared["required"]
        custom = MaSCSampleUntilCustom.INPUT_TYPES()["required"]
        noise = (custom["noise"][0], dict(custom["noise"][1], tooltip="Random Noise: the sweep uses its seed, +1, ..."))
        guider = ("GUIDER", {"tooltip": "Basic Guider or CFG Guider on one prompt: re-prompted on each cell's model."})
        negative = (
            "STRING",
            {
                "multiline": True,
                "default": "",
                "tooltip": "Empty: the guider's negative as wired (e.g. ConditioningZeroOut); a text: encoded with "
                "each cell's CLIP, as CLIPTextEncode would.",
            },
        )
        required = {
            "noise": noise,
            "guider": guider,
            "sampler": custom["sampler"],
            "sigmas": custom["sigmas"],
            "clip": shared["clip"],
            "vae": shared["vae"],
            "latent_image": shared["latent_image"],
            "cells": shared["cells"],
            "prompts": shared["prompts"],
            "negative": negative,
            "seeds": shared["seeds"],
            **{k: shared[k] for k in list(shared)[list(shared).index("encoder") :]},
        }
        return dict(declared, required=required)

    def sweep(self, **inputs):
        """One sweep on the inputs ``INPUT_TYPES`` declares, by name (each checked against its declaration first)."""
        generator = host.GuiderCells.from_inputs(inputs)
        return MaSCSweep.run(NODE_SWEEP_CUSTOM, inputs, generator, generator.custom.seed)
