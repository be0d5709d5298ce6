"""What scoring returns: per-image scores, reference facts and patch-level maps.

Plain data (no model code), shared by the batch API (``masc_core.scoring.batch``),
ranking, reports, heatmap rendering, the CLI and the ComfyUI nodes.
Undefined scores are ``None`` with a one-line reason, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np

from ..defaults import MIN_FOREGROUND_FRACTION


def defined_number(value: float | None) -> float | None:
    """``value`` as a float, or None when it is None, NaN or infinite (JSON never sees either).

    An infinite value is a max over nothing: e.g. a subject's CP when no output patch was left to search.
    """
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def mean_of_defined(values: Iterable[float | None]) -> float | None:
    """The mean of the defined values (None, NaN and infinities left out, as ``defined_number`` does), or None.

    How a CP over several reference views (or a cp_mean over subjects) averages what it has.
    """
    defined = [v for v in (defined_number(value) for value in values) if v is not None]
    return float(sum(defined) / len(defined)) if defined else None


@dataclass
class ReferenceInfo:
    """What CP sees of one reference view."""

    index: int
    grid: tuple[int, int]
    foreground_fraction: float
    """Share of the reference's pixels under its mask (>= 0.5)."""
    concept_patches: int
    """Reference patches CP averages over (patch weight > 0.5)."""
    small_foreground: bool
    """Mask below the paper's filter threshold (``min_foreground``)."""


@dataclass
class ImageScore:
    """MaSC scores of one output image."""

    index: int
    cp: float | None = None
    """Concept preservation, mean over the references; None if undefined or not asked for."""
    pf: float | None = None
    """Prompt following; None if undefined or not asked for."""
    cp_per_reference: list[float | None] = field(default_factory=list)
    cp_undefined: str | None = None
    """Why ``cp`` is None (one line), else None."""
    pf_undefined: str | None = None
    """Why ``pf`` is None (one line), else None."""
    prompt: str | None = None
    encoded_prompt: str | None = None
    """The prompt after subject stripping: the text PF compares with."""
    subject_found: bool | None = None
    """Whether stripping removed anything from the prompt."""
    foreground_fraction: float | None = None
    """Share of the output's pixels under its mask (>= 0.5); None without a mask."""
    small_foreground: bool = False
    """Output mask below the paper's filter threshold: the subject was probably not rendered."""
    background_patches: int | None = None
    """Output patches the PF pool attends to (patch weight < 0.5)."""
    grid: tuple[int, int] = (0, 0)
    subjects: list[dict[str, Any]] | None = None
    """Several subjects in the image (``score_subjects``; ``cp`` is then their cp_min): per subject, in order,
    ``{"subject": label, "cp": CP_k or None, "mask": its output mask share or None}``. None for one subject."""
    blends: list[str] = field(default_factory=list)
    """Several subjects: the blend warnings (``masc_core.metric.subjects.blend_warnings``)."""
    cp_band: list[float] | None = None
    """[low, high]: CP with the reference mask eroded and dilated by one patch, and CP itself
    (``score_images(bands=True)``)."""
    pf_band: list[float] | None = None
    """[low, high]: PF with the output mask eroded and dilated by one patch, and PF itself."""
    band_notes: list[str] = field(default_factory=list)
    """Why a band lacks a side (a mask too small to erode, or dilated over the whole image)."""
    previews: list[dict[str, Any]] | None = None
    """MaSC Sample Until with pruning or a study: the scores of this candidate's denoised preview at each step it
    was judged (``masc_core.selection.ledger.preview_record``); None otherwise. A pruned candidate has no final
    scores."""
    clip: dict[str, Any] | None = None
    """A video candidate (``masc_core.selection.clip.ClipScore.as_image_score``; ``cp`` and ``pf`` are then its worst
    frame's): the clip's summary, ``ClipScore.to_dict()`` with each scored frame's CP and PF. None for an image."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN never appears; undefined is null; ``clip`` only for a video candidate)."""
        data = asdict(self)
        if self.clip is None:
            del data["clip"]
        data["grid"] = list(self.grid)
        data["cp"] = defined_number(self.cp)
        data["pf"] = defined_number(self.pf)
        data["cp_per_reference"] = [defined_number(v) for v in self.cp_per_reference]
        data["subjects"] = subject_figures(self.subjects)
        return data


def subject_figures(subjects: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``ImageScore.subjects`` JSON-ready: each subject's label, CP and mask share (undefined is null)."""
    if subjects is None:
        return None
    return [
        {"subject": s["subject"], "cp": defined_number(s.get("cp")), "mask": defined_number(s.get("mask"))}
        for s in subjects
    ]


@dataclass
class Heatmaps:
    """Where the scores come from, at patch resolution (float32 numpy grids).

    Index ``[n]`` is the n-th output, ``[n][k]`` the k-th reference for it.
    """

    reference_match: list[list[np.ndarray]]
    """[n][k]: per reference patch, its best cosine with any patch of output n:
    which parts of the concept survived (Eq. 1's s_i)."""
    reference_keep: list[np.ndarray]
    """[k]: bool grid of the reference patches CP averages over."""
    output_presence: list[np.ndarray]
    """[n]: per output patch, its best cosine with any reference foreground
    patch (max over references): where the concept appears. -inf where no
    reference patch is kept."""
    background_attention: list[np.ndarray | None]
    """[n]: the PF pooler's attention over output n's patches (sums to 1 over
    the background; 0 on hidden patches); None where PF is undefined."""
    output_hidden: list[np.ndarray | None]
    """[n]: bool grid of the output patches hidden from the pooler; None without a mask."""


@dataclass
class ScoreContext:
    """Where a batch's scores came from: what the PNG metadata and the score log record beside the numbers.

    Filled in by whoever knows it (the ComfyUI nodes); every field may be unknown.
    """

    node: str | None = None
    """The node type that scored the batch (e.g. "MaSCScore")."""
    subject: str | None = None
    """The subject name(s) stripped from the prompt, as given."""
    encoder: dict[str, str] | None = None
    """The encoder's identity: ``{"model": folder name, "digest": short hash of the folder}``."""
    seeds: list[int | None] | None = None
    """Per image, the sampler seed it was generated with, when known."""
    verdicts: list[str] | None = None
    """Per image, what a deciding node made of it ("accepted", "rejected: CP below 0.6", ...)."""
    kept: list[int] | None = None
    """Positions of the images a node passed on, in its output order (MaSC Sample Until's kept candidates)."""
    ledger: dict[str, Any] | None = None
    """MaSC Sample Until with pruning: model evaluations spent and in full
    (``masc_core.selection.ledger.Ledger.to_dict``)."""
    labels: list[str | None] | None = None
    """Per image, the artist's label from MaSC Pick ("picked", "passed over"); None where the artist chose nothing."""
    cells: list[str | None] | None = None
    """Per image, the MaSC Sweep cell it was sampled in (a LoRA file at its strengths, or the baseline)."""

    def per_image(self, count: int) -> tuple[list[str], list[int | None], list[int | None]]:
        """For each of ``count`` images: its verdict ("scored" when no node decided), its seed, and its position in
        the node's output (None when not passed on)."""
        output_of = {position: rank for rank, position in enumerate(self.kept or [])}
        verdicts = list(self.verdicts or ["scored"] * count)
        return verdicts, list(self.seeds or [None] * count), [output_of.get(i) for i in range(count)]


@dataclass
class ScoreBatch:
    """The result of one ``score_images`` call."""

    scores: list[ImageScore]
    references: list[ReferenceInfo]
    heatmaps: Heatmaps | None = None
    min_foreground: float = MIN_FOREGROUND_FRACTION
    context: ScoreContext = field(default_factory=ScoreContext)

    @property
    def cp(self) -> list[float | None]:
        return [s.cp for s in self.scores]

    @property
    def pf(self) -> list[float | None]:
        return [s.pf for s in self.scores]

    def subset(self, positions: Sequence[int]) -> "ScoreBatch":
        """The scores of the images at ``positions``, re-indexed 0.. in that order (heatmaps dropped).

        Per-image context (seeds, verdicts) follows its images; ``kept`` is
        cleared, since the subset is what was kept.
        """
        positions = list(positions)
        context = self.context

        def pick(values):
            return None if values is None else [values[i] for i in positions]

        return ScoreBatch(
            scores=[replace(self.scores[p], index=i) for i, p in enumerate(positions)],
            references=self.references,
            min_foreground=self.min_foreground,
            context=replace(
                context,
                seeds=pick(context.seeds),
                verdicts=pick(context.verdicts),
                labels=pick(context.labels),
                cells=pick(context.cells),
                kept=None,
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [s.to_dict() for s in self.scores],
            "references": [dict(asdict(r), grid=list(r.grid)) for r in self.references],
            "min_foreground": self.min_foreground,
        }
