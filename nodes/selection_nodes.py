"""Acting on scores: MaSC Select Best (best-of-N) and MaSC Gate (rejection sampling).

Both rank with ``masc_core.selection.ranking`` and carry IMAGE, LATENT and MASK
batches along in the same order, so the chosen seeds can go on to upscaling
or refinement without decoding or re-encoding. When nothing passes they
block the downstream nodes (ComfyUI's ExecutionBlocker) instead of failing
the queue, so Auto Queue with an incrementing seed keeps trying.
"""

from __future__ import annotations

from typing import Mapping

import torch

from ..masc_core.errors import MascInputError
from ..masc_core.limits import TOP_K
from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.ranking import PassRules, threshold_from_widget
from ..masc_core.metric.scores import ScoreBatch
from . import host
from .metadata import HIDDEN_INPUTS, image_digests, record
from .declarations import (
    CARRIED_INPUTS,
    carried_outputs,
    CP_WEIGHT_INPUT,
    MaSCNode,
    ON_UNCERTAIN_INPUT,
    PF_WEIGHT_INPUT,
    rank_by_input,
    RULES_INPUT,
    SCORED_BATCH_INPUTS,
    THRESHOLD_INPUTS,
)
from .declarations import int_input
from .types import Output


def passing_from(rules: RunRules | None, widget_rules: PassRules) -> PassRules:
    """The pass rules a judging node uses: MaSC Rules' when its ``rules`` input is connected (checked again where
    they arrive: a value over a link may have been changed since MaSC Rules made it), else its widgets'."""
    return widget_rules if rules is None else rules.check().passing


def chosen_outputs(images: torch.Tensor, chosen: list[int], latent=None, mask=None) -> tuple:
    """(images, latent, mask) of the chosen batch positions, in ``chosen``'s order: what Select Best, Gate and Pick pass
    on. An input not connected, or nothing chosen, gives ComfyUI's blocker, so the nodes downstream are skipped."""
    if not chosen:
        return blocked(3)
    count = images.shape[0]
    return (
        images[chosen],
        select_latent(latent, chosen, count) if latent is not None else blocked(1)[0],
        select_mask(mask, chosen, count) if mask is not None else blocked(1)[0],
    )


def check_batch(scores: ScoreBatch, images: torch.Tensor) -> ScoreBatch:
    """The scores of ``images``, in their order.

    MaSC Sample Until's scores cover every candidate but its images output
    holds the kept ones: given those images, their own scores are used.
    """
    count = images.shape[0]
    if count == len(scores.scores):
        return scores
    kept = scores.context.kept
    if kept is not None and count == len(kept):
        return scores.subset(kept)
    raise MascInputError(
        f"images has {count} images but scores has {len(scores.scores)}: connect the same batch that was scored"
    )


def judge_batch(node: str, inputs: Mapping, widget_rules: PassRules, top_k: int | None):
    """Select Best's and Gate's one judging, from the node's inputs by name: the scores held to the images, ranked
    by MaSC Rules' pass rules when ``rules`` is connected, else by ``widget_rules`` (the ``top_k`` best, or every
    passing image in batch order when None), and the node's PNG metadata entry with every image's verdict and where
    the chosen ones went. Returns (ranking, chosen)."""
    images = inputs["images"]
    scores = check_batch(inputs["scores"], images)
    ranking = passing_from(inputs.get("rules"), widget_rules).rank(scores.scores, top_k=top_k)
    chosen = ranking.selected if top_k is not None else sorted(ranking.selected)
    verdicts = ranking.verdicts(chosen, "selected" if top_k is not None else "passed")
    outputs = [chosen.index(i) if i in chosen else None for i in range(len(scores.scores))]
    where = (inputs.get("extra_pnginfo"), inputs.get("unique_id"))
    record(*where, scores, node, verdicts=verdicts, outputs=outputs, pixels=image_digests(images))
    return ranking, chosen


def select_mask(mask: torch.Tensor | None, indices: list[int], count: int):
    if mask is None:
        return None
    mask = mask[None] if mask.ndim == 2 else mask
    if mask.shape[0] == 1:
        return mask
    if mask.shape[0] != count:
        raise MascInputError(
            f"mask has {mask.shape[0]} masks for {count} images: connect the masks of the scored batch"
        )
    return mask[indices]


def select_latent(latent: dict | None, indices: list[int], count: int):
    """Slice samples, noise_mask and batch_index together (ComfyUI's noise uses batch_index)."""
    if latent is None:
        return None
    samples = latent["samples"]
    if samples.shape[0] != count:
        raise MascInputError(
            f"latent has {samples.shape[0]} samples for {count} images: connect the latents of the scored batch"
        )
    chosen = dict(latent)
    chosen["samples"] = samples[indices].clone()
    noise_mask = latent.get("noise_mask")
    if noise_mask is not None and noise_mask.shape[0] == count:
        chosen["noise_mask"] = noise_mask[indices].clone()
    original = latent.get("batch_index", list(range(count)))
    chosen["batch_index"] = [original[i] for i in indices]
    return chosen


def blocked(count: int) -> tuple:
    """Outputs that silently skip their consumers (no error, the queue goes on)."""
    return tuple(host.ExecutionBlocker(None) for _ in range(count))


class MaSCSelectBest(MaSCNode):
    """Best-of-N: ranks a scored batch by CP, PF or a weighted sum, keeps the top k that pass the optional thresholds,
    and passes the chosen images (and their latents and masks) on in rank order. If none passes, the downstream nodes
    are skipped instead of failing the queue."""

    SEARCH_ALIASES = ["best of n", "pick best", "rank", "top k", "seed selection"]
    FUNCTION = "select"
    OUTPUTS = (
        *carried_outputs("The chosen images", "best first"),
        Output(
            "INT",
            "best_index",
            "Batch index of the best image (for Latent From Batch / Image From Batch); -1 if none passed.",
        ),
        Output("STRING", "indices", "Batch indices of the chosen images, best first, comma-separated."),
        Output("STRING", "ranking", "The whole ranking as text."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **SCORED_BATCH_INPUTS,
                "rank_by": rank_by_input("both"),
                "cp_weight": CP_WEIGHT_INPUT,
                "pf_weight": PF_WEIGHT_INPUT,
                "top_k": int_input(1, TOP_K.low, TOP_K.high, "How many of the best passing images to keep."),
                **THRESHOLD_INPUTS,
            },
            "optional": dict(CARRIED_INPUTS, on_uncertain=ON_UNCERTAIN_INPUT, rules=RULES_INPUT),
            "hidden": dict(HIDDEN_INPUTS),
        }

    def select(self, **inputs):
        images, top_k = inputs["images"], int(inputs["top_k"])
        ranking, chosen = judge_batch("MaSCSelectBest", inputs, PassRules.from_widgets(inputs), top_k)
        table = ranking.table() + ranking.top_k_note(top_k)
        if not chosen:
            text = "no image passed; downstream nodes skipped\n" + table
            return {"ui": {"text": [text]}, "result": chosen_outputs(images, chosen) + (-1, "", text)}
        carried = chosen_outputs(images, chosen, inputs.get("latent"), inputs.get("mask"))
        return {"ui": {"text": [table]}, "result": carried + (chosen[0], ", ".join(str(i) for i in chosen), table)}


class MaSCGate(MaSCNode):
    """Rejection sampling: passes the images whose scores clear the thresholds. When none does, the downstream nodes
    (e.g. Save Image) are skipped instead of failing the queue, so Auto Queue with an incrementing seed keeps trying
    until something is saved."""

    SEARCH_ALIASES = ["rejection sampling", "threshold", "filter", "quality gate"]
    FUNCTION = "gate"
    OUTPUTS = (
        *carried_outputs("The images that passed", "in batch order"),
        Output("INT", "passed", "How many images passed."),
        Output("STRING", "report", "Which images passed and why the others did not."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        required = {
            **SCORED_BATCH_INPUTS,
            **THRESHOLD_INPUTS,
        }
        required["min_cp"] = ("FLOAT", dict(THRESHOLD_INPUTS["min_cp"][1], default=0.5))
        optional = dict(CARRIED_INPUTS, on_uncertain=ON_UNCERTAIN_INPUT, rules=RULES_INPUT)
        return {"required": required, "optional": optional, "hidden": dict(HIDDEN_INPUTS)}

    def gate(self, **inputs):
        images = inputs["images"]
        cp_on, pf_on = threshold_from_widget(inputs["min_cp"]), threshold_from_widget(inputs["min_pf"])
        by = "both" if (cp_on is not None and pf_on is not None) else ("pf" if pf_on is not None else "cp")
        ranking, passed = judge_batch("MaSCGate", inputs, PassRules.from_widgets(dict(inputs, rank_by=by)), None)
        lines = [f"{len(passed)} of {images.shape[0]} passed" + ("" if passed else "; downstream nodes skipped")]
        lines += ranking.pass_lines()
        report = "\n".join(lines)
        carried = chosen_outputs(images, passed, inputs.get("latent"), inputs.get("mask"))
        return {"ui": {"text": [report]}, "result": carried + (len(passed), report)}
