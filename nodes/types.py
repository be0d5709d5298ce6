"""The names every MaSC node shares: its category, the pack's own ComfyUI types, and how outputs are declared."""

from __future__ import annotations

from dataclasses import dataclass

from ..masc_core.metric.subjects import Subject

CATEGORY = "MaSC"

MASC_ENCODER = "MASC_ENCODER"
"""A loaded SigLIP2 encoder under ComfyUI's memory management (``host.ManagedModel``)."""
MASC_SEGMENTER = "MASC_SEGMENTER"
"""A loaded CLIPSeg or SAM3 segmenter (``masc_core.models.segmenters.Segmenter``) under ComfyUI's memory management
(``host.ManagedModel``)."""
MASC_SCORES = "MASC_SCORES"
"""Per-image scores of a batch (``masc_core.ScoreBatch``), for Select Best and Gate."""
MASC_SUBJECTS = "MASC_SUBJECTS"
"""The subjects of a multi-subject image, declared by chained MaSC Subject nodes."""
MASC_RULES = "MASC_RULES"
"""What passes, how many to keep and the budget (``masc_core.selection.acceptance.RunRules``), from MaSC Rules."""
MASC_PRUNE = "MASC_PRUNE"
"""When to judge and how many go on (``masc_core.selection.pruning.PruneRules``), from MaSC Prune."""
MASC_SWEEP_CELLS = "MASC_SWEEP_CELLS"
"""A sweep's LoRA cells (a tuple of ``masc_core.selection.sweep_cells.LoraChoice``), from chained MaSC Sweep LoRA
nodes."""
MASC_VIDEO = "MASC_VIDEO"
"""How video candidates are scored (``masc_core.selection.clip.ClipChoice``), from MaSC Video Options."""


@dataclass(frozen=True)
class DeclaredSubject:
    """One MaSC Subject node's declaration (MASC_SUBJECTS carries a tuple of them): the subject, and its masks in the
    generated images (or None)."""

    subject: Subject
    mask: object = None


@dataclass(frozen=True)
class Output:
    """One node output: its ComfyUI type, its name and its tooltip, declared together."""

    type: str
    name: str
    tooltip: str


def declare_outputs(*outputs: Output) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """RETURN_TYPES, RETURN_NAMES and OUTPUT_TOOLTIPS of a node, from one declaration per output."""
    return (
        tuple(o.type for o in outputs),
        tuple(o.name for o in outputs),
        tuple(o.tooltip for o in outputs),
    )
