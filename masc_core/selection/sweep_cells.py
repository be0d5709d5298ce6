"""MaSC Sweep's cells from LoRA choices: what each is called, how weak it is, and what cannot be a cell.

A ``LoraChoice`` is one LoRA file at one model and one CLIP strength (core's LoraLoader's three values), or an
in-memory LoRA (core's LORA_MODEL, from Train LoRA) under a name the user gives, at a model strength (core's Load
LoRA Model patches the model only). The cells of a sweep are the no-LoRA baseline and one cell per choice, in the
order given: MaSC Sweep LoRA nodes chained with the earliest training step first. A cell's weakness, the
tie-breaker (``selection.sweep``), is its model strength, then its CLIP strength, then its place in that order: of
cells the data cannot tell apart, the lower strength and the earlier file is recommended.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import MascInputError
from .sweep import SweepCell

MAX_STRENGTH = 100.0
"""The largest strength magnitude, as core's LoraLoader widgets (-100 to 100)."""
MAX_STRENGTHS = 8
"""Strengths one MaSC Sweep LoRA node lists at most."""
BASELINE = "baseline (no LoRA)"


@dataclass(frozen=True)
class LoraChoice:
    """One LoRA file (its name in ``models/loras``) at a model and a CLIP strength; or, with ``weights``, an
    in-memory LoRA named ``lora`` by the user (the CLIP strength then 0)."""

    lora: str
    strength_model: float
    strength_clip: float
    weights: Any = field(default=None, compare=False, repr=False)
    """Core's LORA_MODEL (a dict of weight name -> tensor, held by the graph), or None for a file."""

    @property
    def label(self) -> str:
        """How reports name it: the file's stem (an in-memory LoRA's name) at its strength (both when they differ)."""
        stem = self.lora if self.weights is not None else os.path.splitext(self.lora)[0].replace(os.sep, "/")
        if self.strength_model == self.strength_clip or self.weights is not None:
            return f"{stem} @ {self.strength_model:g}"
        return f"{stem} @ {self.strength_model:g}/{self.strength_clip:g}"


def parse_strengths(text: str, name: str) -> list[float]:
    """The strengths written in ``text`` ("0.5, 1.0"), or one line naming input ``name``."""
    if not isinstance(text, str):
        raise MascInputError(f"{name} is a {type(text).__name__}: give strengths as text, e.g. '0.5, 1.0'")
    words = [w.strip() for w in text.replace(";", ",").split(",") if w.strip()]
    if not 1 <= len(words) <= MAX_STRENGTHS:
        raise MascInputError(f"{name} lists {len(words)} strengths: give 1 to {MAX_STRENGTHS}, e.g. '0.5, 1.0'")
    values = []
    for word in words:
        try:
            value = float(word)
        except ValueError:
            raise MascInputError(f"{name}: '{word[:20]}' is not a number: give strengths such as '0.5, 1.0'") from None
        if not (math.isfinite(value) and abs(value) <= MAX_STRENGTH):
            raise MascInputError(f"{name}: {word[:20]} is not a strength from -100 to 100 (as LoraLoader's)")
        if value in values:
            raise MascInputError(f"{name} lists {value:g} twice: give each strength once")
        values.append(value)
    return values


def lora_choices(lora: str, strengths: Sequence[float], clip_strengths: Sequence[float] | None) -> list[LoraChoice]:
    """One file's choices: each model strength with its CLIP strength (the same list, or one value for all, or the
    model strength itself when ``clip_strengths`` is None)."""
    if clip_strengths is None:
        clip_strengths = list(strengths)
    elif len(clip_strengths) == 1:
        clip_strengths = list(clip_strengths) * len(strengths)
    elif len(clip_strengths) != len(strengths):
        raise MascInputError(
            f"strength_clip lists {len(clip_strengths)} strengths for {len(strengths)} model strengths: give one, or "
            "one per model strength, or leave it empty (the same as the model's)"
        )
    return [LoraChoice(lora, float(m), float(c)) for m, c in zip(strengths, clip_strengths)]


MAX_NAME_CHARS = 80
"""Longest name an in-memory LoRA may be given (it labels the chart, the grid and the report)."""


def trained_choices(name: str, weights: Any, strengths: Sequence[float]) -> list[LoraChoice]:
    """An in-memory LoRA's choices, one per model strength (CLIP strength 0, as core's Load LoRA Model), or one line
    when its ``name`` is empty, too long or not printable."""
    if not isinstance(name, str) or not name.strip():
        raise MascInputError("name is empty: name this LoRA as the report should show it, e.g. 'trained, step 40'")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise MascInputError(f"name must be one line of at most {MAX_NAME_CHARS} printable characters")
    return [LoraChoice(name, float(m), 0.0, weights) for m in strengths]


def lora_cells(choices: Sequence[LoraChoice]) -> list[SweepCell]:
    """The baseline, then a cell per choice (named ``LoraChoice.label``), each once; a choice at strength 0 and 0 is
    the baseline itself and is refused."""
    cells = [SweepCell(BASELINE, baseline=True, weakness=(0.0, 0.0, -1))]
    seen: dict[str, LoraChoice] = {}
    for order, choice in enumerate(choices):
        if choice.strength_model == 0 and choice.strength_clip == 0:
            raise MascInputError(
                f"{choice.label}: strength 0 and 0 is the baseline's image, which the sweep samples already: remove 0"
            )
        if choice.label in seen:
            raise MascInputError(f"{choice.label} is in the sweep twice: give each LoRA file and strength once")
        seen[choice.label] = choice
        cells.append(SweepCell(choice.label, weakness=(choice.strength_model, choice.strength_clip, order)))
    return cells
