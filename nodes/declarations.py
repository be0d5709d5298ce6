"""What two or more nodes declare alike, in one place: ``MaSCNode`` (the base every node class has) and every shared
input declaration, the same words, range and default wherever it appears.

A node composes its INPUT_TYPES from these in its own order (a saved workflow stores widget values by position, so
each node's order never changes); an input only one node has is declared in that node.
"""

from __future__ import annotations

from ..masc_core.limits import ACCEPT, BATCH_SIZE, MAX_CANDIDATES
from ..masc_core.defaults import DEFAULT_MASK_THRESHOLD, MIN_FOREGROUND_FRACTION
from ..masc_core.selection.acceptance import SHORTFALL_CHOICES
from ..masc_core.selection.ranking import BLEND_CHOICES as BLENDS
from ..masc_core.selection.ranking import KEEP_BUT_MARK, RANK_KEYS, THRESHOLD_OFF, UNCERTAIN_CHOICES
from .inputs import checked_inputs
from .types import CATEGORY, MASC_ENCODER, MASC_PRUNE, MASC_RULES, MASC_SCORES, MASC_SEGMENTER, MASC_SUBJECTS
from .types import MASC_VIDEO, Output, declare_outputs


class MaSCNode:
    """What every MaSC node class declares the same way: its category; its DESCRIPTION (what the node library and
    help show) from its docstring, one text for both; its outputs from one ``OUTPUTS`` tuple of ``types.Output``
    (ComfyUI's RETURN_TYPES, RETURN_NAMES, OUTPUT_TOOLTIPS); its FUNCTION held to its own INPUT_TYPES
    (``inputs.checked_inputs``), wrapped once where the class defines it."""

    CATEGORY = CATEGORY
    OUTPUTS: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("__doc__"):
            cls.DESCRIPTION = " ".join(cls.__doc__.split())
        if "OUTPUTS" in cls.__dict__:
            cls.RETURN_TYPES, cls.RETURN_NAMES, cls.OUTPUT_TOOLTIPS = declare_outputs(*cls.OUTPUTS)
        if cls.FUNCTION in cls.__dict__:
            checked_inputs(cls)


def int_input(default: int, low: int, high: int, tooltip: str, *, step: int | None = None) -> tuple:
    """An INT widget, declared as core's ``io.Int.Input`` takes it: default, range, tooltip (and step)."""
    return ("INT", _number(default, low, high, tooltip, step))


def float_input(default: float, low: float, high: float, tooltip: str, *, step: float | None = None) -> tuple:
    """A FLOAT widget, declared as core's ``io.Float.Input`` takes it: default, range, tooltip (and step)."""
    return ("FLOAT", _number(default, low, high, tooltip, step))


def _number(default, low, high, tooltip: str, step) -> dict:
    options = {"default": default, "min": low, "max": high}
    if step is not None:
        options["step"] = step
    return dict(options, tooltip=tooltip)


# ---------------------------------------------------------------- what is scored

ENCODER_INPUT = (MASC_ENCODER, {"tooltip": "From Load MaSC Encoder."})
IMAGE_INPUT = ("IMAGE", {"tooltip": "The generated image(s) to score; a batch of N is scored in one pass."})
REFERENCE_INPUT = (
    "IMAGE",
    {"tooltip": "Reference view(s) of the subject. A batch = several views of one subject; CP is the mean over views."},
)
REFERENCE_MASK_INPUT = (
    "MASK",
    {
        "tooltip": "The subject in the reference (white = subject), one per view or one for all. From a cut-out's "
        "alpha, invert Load Image's MASK."
    },
)
OUTPUT_MASK_INPUT = (
    "MASK",
    {
        "tooltip": "The subject in each generated image (white = subject), one per image or one for all. PF hides it "
        "and pools the background."
    },
)
PROMPT_INPUT = ("STRING", {"multiline": True, "default": "", "tooltip": "The prompt the image was generated from."})
SUBJECT_INPUT = (
    "STRING",
    {
        "default": "",
        "tooltip": "The subject's name, removed from the prompt before PF (e.g. 'dog'); several names comma-separated "
        "('sks dog, dog').",
    },
)
HEATMAPS_INPUT = (
    "BOOLEAN",
    {"default": True, "tooltip": "Render heatmap overlays (switch off to save time on large batches)."},
)


REFERENCE_INPUTS = {
    "encoder": ENCODER_INPUT,
    "reference_image": REFERENCE_INPUT,
    "reference_mask": REFERENCE_MASK_INPUT,
}
"""The first inputs of every node that computes CP against one subject, in this order."""
REPORT_OUTPUT = Output("STRING", "report", "Per-image scores as text.")


# ---------------------------------------------------------------- what passes, in which order


def rank_by_input(
    default: str, tooltip: str = "Best first by cp, pf, or both = cp_weight*CP + pf_weight*PF (pf and both need masks)."
) -> tuple:
    """The ranking key's combo (its default differs by node: saved workflows keep theirs)."""
    return (list(RANK_KEYS), {"default": default, "tooltip": tooltip})


CP_WEIGHT_INPUT = float_input(1.0, 0.0, 100.0, "Weight of CP when ranking by both.", step=0.05)
PF_WEIGHT_INPUT = float_input(1.0, 0.0, 100.0, "Weight of PF when ranking by both.", step=0.05)

OFF = THRESHOLD_OFF
"""Threshold value meaning "no threshold" (cosines are >= -1)."""

THRESHOLD_INPUTS = {
    "min_cp": float_input(OFF, -1.0, 1.0, "Keep only images with CP at least this (-1 = no threshold).", step=0.005),
    "min_pf": float_input(OFF, -1.0, 1.0, "Keep only images with PF at least this (-1 = no threshold).", step=0.005),
    "reject_small_masks": (
        "BOOLEAN",
        {
            "default": False,
            "tooltip": "Reject images whose mask covers less than min_foreground of the image: usually the subject "
            "was not rendered (the paper's filter).",
        },
    ),
    "min_foreground": float_input(
        MIN_FOREGROUND_FRACTION,
        0.0,
        1.0,
        "The mask-size filter's threshold, as a share of the image (paper: 0.05).",
        step=0.005,
    ),
}
ON_UNCERTAIN_INPUT = (
    list(UNCERTAIN_CHOICES),
    {
        "default": KEEP_BUT_MARK,
        "tooltip": "When the masks could flip a verdict (the mask band straddles a threshold): keep but mark it, "
        "or count the threshold as cleared or failed.",
    },
)
"""What an uncertain image becomes (MaSC Select Best, MaSC Gate, MaSC Sample Until)."""

CARRIED_INPUTS = {
    "latent": (
        "LATENT",
        {
            "tooltip": "Optional: the latents of the same batch, selected in the same order (keeps batch_index so a "
            "seed can be re-run)."
        },
    ),
    "mask": ("MASK", {"tooltip": "Optional: masks of the same batch, selected in the same order."}),
}

SCORED_BATCH_INPUTS = {
    "scores": (
        MASC_SCORES,
        {"tooltip": "From a MaSC scoring node or MaSC Sample Until, for the same batch as 'images'."},
    ),
    "images": ("IMAGE", {"tooltip": "The scored batch."}),
}
"""The first inputs of every node that acts on a scored batch (Select Best, Gate, Pick)."""


def carried_outputs(which: str, order: str) -> tuple[Output, Output, Output]:
    """The images, latent and mask outputs of a node that passes part of a batch on (``CARRIED_INPUTS`` in, the
    chosen ones out): ``which`` images, in ``order``."""
    return (
        Output("IMAGE", "images", f"{which}, {order}."),
        Output("LATENT", "latent", f"Their latents (if a latent was connected), {order}."),
        Output("MASK", "mask", f"Their masks (if a mask was connected), {order}."),
    )


BLEND_CHOICES = list(BLENDS)
"""The on_blend combo (``masc_core.selection.ranking.BLEND_CHOICES``)."""


# ---------------------------------------------------------------- a sample-until run

RUN_MIN_CP_INPUT = ("FLOAT", dict(THRESHOLD_INPUTS["min_cp"][1], default=0.5))
"""min_cp where a run decides (MaSC Rules, MaSC Sample Until): a starting point to tune, not off as for Gate."""
BLEND_INPUT = (
    BLEND_CHOICES,
    {
        "default": "report",
        "tooltip": "With several subjects: report = blend warnings in the report only; reject = a candidate with a "
        "blend warning does not pass (needs a segmenter).",
    },
)
ACCEPT_INPUT = int_input(
    1, ACCEPT.low, ACCEPT.high, "Stop once this many candidates pass; they are returned best first."
)
MAX_CANDIDATES_INPUT = int_input(
    16, MAX_CANDIDATES.low, MAX_CANDIDATES.high, "The budget: never sample more candidates than this."
)
BATCH_SIZE_INPUT = int_input(
    1,
    BATCH_SIZE.low,
    BATCH_SIZE.high,
    "Candidates sampled per round (pruning chooses among a round's). Larger is faster on a big GPU; 1 "
    "stops soonest and needs least VRAM.",
)
ON_SHORTFALL_INPUT = (
    list(SHORTFALL_CHOICES),
    {
        "default": SHORTFALL_CHOICES[0],
        "tooltip": "When the budget runs out with fewer than accept passing: return the best so far (marked below "
        "threshold in the report), or block the nodes downstream.",
    },
)

PRUNE_INPUTS = {
    "prune_at": float_input(
        0.0,
        0.0,
        0.95,
        "At this share of the steps, judge each round on the model's preview and finish the best "
        "prune_keep (0 = off). Study first (help page).",
        step=0.05,
    ),
    "prune_keep": int_input(1, 1, BATCH_SIZE.high, "With prune_at: how many of each round of batch_size are finished."),
    "prune_study": (
        "BOOLEAN",
        {
            "default": False,
            "tooltip": "Prune nothing: judge every candidate at 20-60% of its steps and finish it, for "
            "'python -m masc_core prune-report' on MaSC Log Scores' log.",
        },
    ),
}
"""Pruning (``masc_core.selection.pruning``): optional and appended, so older graphs keep their slots and sample in
full."""

RULES_INPUT = (
    MASC_RULES,
    {
        "tooltip": "Optional: what passes, from MaSC Rules. When connected it replaces this node's ranking and "
        "threshold widgets."
    },
)
"""The optional ``rules`` input of MaSC Gate, Select Best and Pick."""

PRUNE_INPUT = (
    MASC_PRUNE,
    {
        "tooltip": "Optional: pruning, from MaSC Prune (judge each round on previews, finish the best). Not connected "
        "= every candidate sampled in full."
    },
)

VIDEO_INPUT = (
    MASC_VIDEO,
    {
        "tooltip": "Optional, for a video latent: the frames scored and the reference frames cut, from MaSC Video "
        "Options."
    },
)
"""The optional ``video`` input of both Sample Until nodes (appended: saved graphs keep their slots)."""

MASK_SUBJECT_INPUT = (
    "STRING",
    {
        "default": "",
        "tooltip": "What the segmenter masks in each candidate (e.g. 'dog'); empty = the subject names. Leave it "
        "empty with subjects.",
    },
)
MASK_THRESHOLD_INPUT = float_input(
    DEFAULT_MASK_THRESHOLD, 0.0, 1.0, "The segmenter's threshold, as in MaSC Auto Mask.", step=0.01
)
SAMPLED_REFERENCE_INPUT = (
    REFERENCE_INPUT[0],
    dict(REFERENCE_INPUT[1], tooltip=REFERENCE_INPUT[1]["tooltip"] + " Needed unless subjects is connected."),
)
"""Optional on both Sample Until nodes only so that 'subjects' can replace it; the run refuses neither given."""
SEGMENTER_INPUT = (
    MASC_SEGMENTER,
    {
        "tooltip": "Optional: masks each candidate (Load MaSC Auto Mask Model for CLIPSeg, Load MaSC SAM3 Model for "
        "SAM3). Without it: CP only, PF undefined."
    },
)
SUBJECTS_INPUT = (
    MASC_SUBJECTS,
    {
        "tooltip": "Several subjects (chained MaSC Subject nodes) instead of reference_image, reference_mask and "
        "subject: a candidate passes when every subject does."
    },
)
