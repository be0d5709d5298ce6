"""Several subjects in one image: MaSC Subject (declare one, chainable) and MaSC Score Subjects.

MaSC Score Subjects converts ComfyUI's types and calls ``masc_core.score_subjects``. Its ``scores`` output holds
one entry per image with CP = ``cp_min`` (the weakest subject), so MaSC Select Best, MaSC Gate and MaSC Log
Scores take it as they take MaSC Score's. The metric itself lives in ``masc_core.scoring.subject_scoring``.
"""

from __future__ import annotations

from ..masc_core.errors import MascInputError
from ..masc_core.metric.report import subjects_table
from ..masc_core.metric.stripping import parse_subject_names
from ..masc_core.scoring.subject_scoring import score_subjects
from ..masc_core.metric.subjects import Subject, all_names, every_or_none
from . import host
from ..masc_core.io.images import to_rgb_uint8_list
from .convert import batch_value, check_candidate_mask, comfy_masks, reference_views
from .metadata import HIDDEN_INPUTS, image_digests, record, scoring_context
from .declarations import (
    BLEND_CHOICES,
    ENCODER_INPUT,
    IMAGE_INPUT,
    MaSCNode,
    PROMPT_INPUT,
    REFERENCE_INPUT,
    REFERENCE_MASK_INPUT,
)
from .types import MASC_SCORES, MASC_SUBJECTS, DeclaredSubject, Output


class MaSCSubject(MaSCNode):
    """Declares one subject of a multi-subject image: its names, reference view(s) and mask, and optionally its mask in
    the generated images. Chain several (subjects -> subjects) into MaSC Score Subjects."""

    SEARCH_ALIASES = ["multi subject", "two subjects", "multi concept", "subject"]
    FUNCTION = "declare"
    OUTPUTS = (
        Output(
            MASC_SUBJECTS,
            "subjects",
            "The subjects declared so far (the chained ones, then this one), for MaSC Score Subjects.",
        ),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "names": (
                    "STRING",
                    {
                        "default": "",
                        "tooltip": "The subject's name(s), comma-separated ('sks dog, dog'): stripped from the "
                        "prompt; the first labels it in reports.",
                    },
                ),
                "reference_image": REFERENCE_INPUT,
                "reference_mask": REFERENCE_MASK_INPUT,
            },
            "optional": {
                "mask": (
                    "MASK",
                    {
                        "tooltip": "This subject in each generated image (white = subject), e.g. from MaSC Auto "
                        "Mask. Give it for every subject or none."
                    },
                ),
                "subjects": (
                    MASC_SUBJECTS,
                    {"tooltip": "Subjects declared before this one (another MaSC Subject's output)."},
                ),
            },
        }

    def declare(self, names, reference_image, reference_mask, mask=None, subjects=None):
        parse_subject_names(names, what="names")  # bounded before any image is converted
        references, reference_masks = reference_views(reference_image, reference_mask)
        subject = Subject(names, references, list(reference_masks))
        if not subject.name_list:
            raise MascInputError("names is empty: give the subject's name, e.g. 'dog' (several: 'sks dog, dog')")
        return (tuple(declared_subjects(subjects, empty_ok=True)) + (DeclaredSubject(subject, mask),),)


def declared_subjects(value, *, empty_ok: bool = False) -> list[DeclaredSubject]:
    """The subjects a MASC_SUBJECTS input carries, checked: a shared workflow's value arrives over the link
    unchecked."""
    declared = list(value or ())
    if not declared and not empty_ok:
        raise MascInputError("subjects is empty: connect a MaSC Subject node (chain one per subject)")
    return declared


def subjects_label(declared: list[DeclaredSubject]) -> str:
    """Every declared subject's names, comma-separated: the 'subject' the scores' context records."""
    return ", ".join(all_names([d.subject for d in declared]))


def _output_masks(declared, outputs) -> list | None:
    """Every subject's masks in the generated images (checked against the images), or None when none has one."""
    given = every_or_none([d.subject for d in declared], [d.mask for d in declared])
    if given is None:
        return None
    masks = []
    for d in declared:
        converted = comfy_masks(d.mask)
        check_candidate_mask(converted, outputs, f"mask of '{d.subject.label}'")
        masks.append(converted)
    return masks


class MaSCScoreSubjects(MaSCNode):
    """MaSC for several subjects in each generated image: each subject's CP searched outside the other subjects'
    regions, cp_min (the weakest subject) and cp_mean, blend warnings, and PF over the background outside every subject.
    Its scores carry CP = cp_min to Select Best, Gate and Log Scores."""

    SEARCH_ALIASES = ["multi subject score", "two subjects", "multi concept", "blend", "clip score", "identity"]
    OUTPUT_NODE = True
    FUNCTION = "score"
    OUTPUTS = (
        Output("FLOAT", "cp_min", "The weakest subject's CP (batch of one) or its batch mean; NaN when undefined."),
        Output(
            "FLOAT", "cp_mean", "The mean CP over the subjects (batch of one) or its batch mean; NaN when undefined."
        ),
        Output("FLOAT", "pf", "PF (batch of one) or the batch's mean PF; NaN when undefined."),
        Output(
            MASC_SCORES,
            "scores",
            "Per-image scores with CP = cp_min, for MaSC Select Best, MaSC Gate and MaSC Log Scores.",
        ),
        Output("STRING", "stripped_prompt", "The prompt without any subject's names: the text PF compares with."),
        Output("STRING", "report", "Per image: cp_min, cp_mean, PF, each subject's CP, blend warnings and notes."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "encoder": ENCODER_INPUT,
                "image": IMAGE_INPUT,
                "subjects": (MASC_SUBJECTS, {"tooltip": "The subjects, from chained MaSC Subject nodes."}),
                "prompt": PROMPT_INPUT,
                "on_blend": (
                    BLEND_CHOICES,
                    {
                        "default": "report",
                        "tooltip": "report: blend warnings only in the report. reject: an image with a blend warning "
                        "gets an undefined CP, so Select Best and Gate do not pass it.",
                    },
                ),
            },
            "hidden": dict(HIDDEN_INPUTS),
        }

    def score(self, **inputs):
        encoder, image, subjects = inputs["encoder"], inputs["image"], inputs["subjects"]
        declared = declared_subjects(subjects)
        outputs = to_rgb_uint8_list(image, "image")
        masc = encoder.ready()
        batch = score_subjects(
            masc,
            outputs,
            subjects=[d.subject for d in declared],
            output_masks=_output_masks(declared, outputs),
            prompt=inputs["prompt"],
            progress=host.progress_callback(len(outputs) + sum(len(d.subject.references) for d in declared)),
        )
        scores = batch.as_score_batch(reject_blends=inputs["on_blend"] == "reject")
        scores.context = scoring_context("MaSCScoreSubjects", encoder, subjects_label(declared))
        record(
            inputs.get("extra_pnginfo"),
            inputs.get("unique_id"),
            scores,
            "MaSCScoreSubjects",
            pixels=image_digests(image),
        )
        report = subjects_table(batch)
        if batch.scores[0].encoded_prompt is not None:
            report += f"\nPF text: {batch.scores[0].encoded_prompt!r}"
        result = (
            batch_value(batch.cp_min),
            batch_value(batch.cp_mean),
            batch_value(batch.pf),
            scores,
            batch.scores[0].encoded_prompt,
            report,
        )
        return {"ui": {"text": [report]}, "result": result}
