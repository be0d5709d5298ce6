"""The scoring nodes: Concept Preservation, Prompt Following, Score (both), Strip Subject.

Each converts ComfyUI's types, calls ``masc_core.score_images`` once (one
vision forward per distinct image, batched), and formats the results: a
FLOAT, a MASC_SCORES object for the selection nodes, heatmap IMAGEs and a
text report. The per-image scores are shown on the node (captioned previews
and text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..masc_core.metric.captions import with_caption
from ..masc_core.metric.heatmaps import HeatmapImages, render_heatmaps
from ..masc_core.io.images import preview_thumbnail
from ..masc_core.metric.report import caption, score_table
from ..masc_core.metric.scores import ScoreBatch
from ..masc_core.scoring.batch import score_images
from ..masc_core.metric.stripping import strip_subject
from . import host
from .declarations import (
    ENCODER_INPUT,
    HEATMAPS_INPUT,
    IMAGE_INPUT,
    MaSCNode,
    OUTPUT_MASK_INPUT,
    PROMPT_INPUT,
    REFERENCE_INPUTS,
    REPORT_OUTPUT,
    SUBJECT_INPUT,
)
from ..masc_core.io.images import to_rgb_uint8_list
from .convert import batch_value, check_candidate_mask, comfy_masks, image_output, reference_views
from .metadata import HIDDEN_INPUTS, image_digests, record, scoring_context
from .types import MASC_SCORES, Output


def run_scoring(inputs: Mapping, *, node: str, cp: bool, pf: bool) -> "NodeScoring":
    """A scoring node's inputs (by name) converted and scored once (one vision forward per distinct image): the batch
    with its context and its pictures, ready to ``finish``. CP reads the reference, PF the prompt and subject."""
    image, encoder, heatmaps = inputs["image"], inputs["encoder"], inputs["heatmaps"]
    outputs = to_rgb_uint8_list(image, "image")
    references, reference_masks = (
        reference_views(inputs["reference_image"], inputs["reference_mask"]) if cp else ([], None)
    )
    output_masks = comfy_masks(inputs.get("mask"))
    check_candidate_mask(output_masks, outputs)
    masc = encoder.ready()
    subject = inputs.get("subject")
    batch = score_images(
        masc,
        outputs,
        reference=references or None,
        reference_mask=reference_masks,
        mask=output_masks,
        prompt=inputs["prompt"] if pf else None,
        subject=subject,
        cp=cp,
        pf=pf,
        heatmaps=heatmaps,
        progress=host.progress_callback(len(outputs) + len(references)),
        bands=True,  # costs no forward (python -m benchmarks bands): Gate, Select Best and the report use them
    )
    batch.context = scoring_context(node, encoder, subject if pf else None)
    pictures = None
    if heatmaps:
        pictures = render_heatmaps(
            batch, references, outputs, reference=cp, presence=cp, attention=pf, device=masc.device
        )
    return NodeScoring(batch, outputs, pictures, image, (inputs.get("extra_pnginfo"), inputs.get("unique_id")))


@dataclass
class NodeScoring:
    """What a scoring node scored (``batch``, its arrays ``outputs``, the heatmap ``pictures`` or None, the IMAGE
    input, ``where`` its PNG entry goes: extra_pnginfo, unique_id), and the one way the three scoring nodes finish:
    the PNG entry recorded, the report, the captioned previews on the node."""

    batch: ScoreBatch
    outputs: list
    pictures: HeatmapImages | None
    image: object
    where: tuple

    def heatmap(self, kind: str):
        """One kind of heatmap ("reference", "presence", "attention") as an IMAGE output (empty when off)."""
        return image_output(self._maps(kind))

    def _maps(self, kind: str) -> list:
        return getattr(self.pictures, kind) if self.pictures is not None else []

    def report(self) -> str:
        """The node's text output: one line per image, then the text PF compared with."""
        batch = self.batch
        lines = [score_table(batch.scores)]
        first = batch.scores[0]
        if first.encoded_prompt is not None:
            found = "" if first.subject_found else " (subject not found in the prompt)"
            lines.append(f"PF text: {first.encoded_prompt!r}{found}")
        return "\n".join(lines)

    def finish(self, values: tuple, shown: str, prefix: str) -> dict:
        """ComfyUI's return: ``values`` then the report as outputs; the node's PNG entry, every scored image found
        again in a saved PNG by its pixels; on the node, the ``shown`` heatmaps (the IMAGE outputs themselves) or,
        with heatmaps off, the images captioned at thumbnail size."""
        record(*self.where, self.batch, self.batch.context.node, pixels=image_digests(self.image))
        report = self.report()
        pictures = self._maps(shown) or [
            with_caption(preview_thumbnail(img), caption(score)) for img, score in zip(self.outputs, self.batch.scores)
        ]
        return {"ui": {"images": host.save_previews(pictures, prefix), "text": [report]}, "result": values + (report,)}


class MaSCConceptPreservation(MaSCNode):
    """Concept preservation: for each reference patch under the reference mask, its best cosine with any patch of the
    generated image; CP is their mean. The generated image is searched in full, so no output mask is needed."""

    SEARCH_ALIASES = [
        "identity",
        "subject similarity",
        "clip score",
        "dino",
        "similarity",
        "concept preservation",
        "cp",
    ]
    OUTPUT_NODE = True
    FUNCTION = "score"
    OUTPUTS = (
        Output(
            "FLOAT",
            "cp",
            "CP of the image (batch of one), or the mean CP of the batch; NaN when undefined (the report says why).",
        ),
        Output(MASC_SCORES, "scores", "Per-image scores, for MaSC Select Best and MaSC Gate."),
        Output(
            "IMAGE",
            "reference_heatmap",
            "On each reference view, per output: each patch's best match (which parts of the concept survived); grey "
            "= outside the mask.",
        ),
        Output(
            "IMAGE",
            "image_heatmap",
            "On each output: each patch's best match with the reference's subject (where the concept appears).",
        ),
        REPORT_OUTPUT,
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **REFERENCE_INPUTS,
                "image": IMAGE_INPUT,
                "heatmaps": HEATMAPS_INPUT,
            },
            "optional": {
                "mask": (
                    "MASK",
                    {
                        "tooltip": "Optional: the subject in each generated image. CP does not use it; it sets the "
                        "mask-size flag the selection nodes can filter on."
                    },
                ),
            },
            "hidden": dict(HIDDEN_INPUTS),
        }

    def score(self, **inputs):
        run = run_scoring(inputs, node="MaSCConceptPreservation", cp=True, pf=False)
        values = (batch_value(run.batch.cp), run.batch, run.heatmap("reference"), run.heatmap("presence"))
        return run.finish(values, shown="presence", prefix="masc_cp")


class MaSCPromptFollowing(MaSCNode):
    """Prompt following: SigLIP2's attention pooler over the generated image's background only (the subject is hidden),
    compared with the prompt without the subject's name."""

    SEARCH_ALIASES = ["prompt adherence", "text alignment", "clip score", "clip-t", "pf"]
    OUTPUT_NODE = True
    FUNCTION = "score"
    OUTPUTS = (
        Output(
            "FLOAT",
            "pf",
            "PF of the image (batch of one), or the mean PF of the batch; NaN when undefined (the report says why).",
        ),
        Output("STRING", "stripped_prompt", "The prompt without the subject: the text PF actually compares with."),
        Output(MASC_SCORES, "scores", "Per-image scores, for MaSC Select Best and MaSC Gate."),
        Output(
            "IMAGE",
            "heatmap",
            "On each output: the pooler's attention over the background (what drives PF); grey = hidden subject.",
        ),
        REPORT_OUTPUT,
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "encoder": ENCODER_INPUT,
                "image": IMAGE_INPUT,
                "mask": OUTPUT_MASK_INPUT,
                "prompt": PROMPT_INPUT,
                "subject": SUBJECT_INPUT,
                "heatmaps": HEATMAPS_INPUT,
            },
            "hidden": dict(HIDDEN_INPUTS),
        }

    def score(self, **inputs):
        run = run_scoring(inputs, node="MaSCPromptFollowing", cp=False, pf=True)
        values = (batch_value(run.batch.pf), run.batch.scores[0].encoded_prompt, run.batch, run.heatmap("attention"))
        return run.finish(values, shown="attention", prefix="masc_pf")


class MaSCScore(MaSCNode):
    """CP and PF together, from one SigLIP2 forward pass per image (the reference once, each generated image once). Feed
    'scores' to MaSC Select Best or MaSC Gate."""

    SEARCH_ALIASES = ["clip score", "dino", "similarity", "identity", "personalization score", "dreambooth"]
    OUTPUT_NODE = True
    FUNCTION = "score"
    OUTPUTS = (
        Output("FLOAT", "cp", "CP (batch of one) or the batch's mean CP; NaN when undefined."),
        Output("FLOAT", "pf", "PF (batch of one) or the batch's mean PF; NaN when undefined."),
        Output(MASC_SCORES, "scores", "Per-image scores, for MaSC Select Best and MaSC Gate."),
        Output("STRING", "stripped_prompt", "The prompt without the subject: the text PF compares with."),
        Output(
            "IMAGE", "reference_heatmap", "On each reference view, per output: which parts of the concept survived."
        ),
        Output("IMAGE", "image_heatmap", "On each output: where the concept appears."),
        Output("IMAGE", "attention_heatmap", "On each output: the PF pooler's attention over the background."),
        REPORT_OUTPUT,
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **REFERENCE_INPUTS,
                "image": IMAGE_INPUT,
                "prompt": PROMPT_INPUT,
                "subject": SUBJECT_INPUT,
                "heatmaps": HEATMAPS_INPUT,
            },
            "optional": {"mask": OUTPUT_MASK_INPUT},
            "hidden": dict(HIDDEN_INPUTS),
        }

    def score(self, **inputs):
        run = run_scoring(inputs, node="MaSCScore", cp=True, pf=True)
        batch = run.batch
        values = (batch_value(batch.cp), batch_value(batch.pf), batch, batch.scores[0].encoded_prompt)
        values += (run.heatmap("reference"), run.heatmap("presence"), run.heatmap("attention"))
        return run.finish(values, shown="presence", prefix="masc_score")


class MaSCStripSubject(MaSCNode):
    """Removes the subject's name from the prompt with the paper's rule: shows the exact text MaSC's PF encodes."""

    SEARCH_ALIASES = ["remove subject", "prompt", "strip"]
    # It shows its text, so it runs whether or not its output is connected (ComfyUI runs only what feeds an output).
    OUTPUT_NODE = True
    FUNCTION = "strip"
    OUTPUTS = (
        Output(
            "STRING",
            "stripped_prompt",
            "The prompt without 'a/an/the <name>' (or the bare name), whitespace collapsed.",
        ),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"prompt": PROMPT_INPUT, "subject": SUBJECT_INPUT}}

    def strip(self, prompt, subject):
        stripped = strip_subject(prompt, subject)
        return {"ui": {"text": [stripped]}, "result": (stripped,)}
