"""Readable text for scores: the CLI's table and the nodes' reports share it."""

from __future__ import annotations

from typing import Sequence

from .scoring import ImageScore


def format_value(value: float | None) -> str:
    """A score with sign and 4 decimals, or n/a."""
    return "n/a" if value is None else f"{value:+.4f}"


def score_notes(score: ImageScore) -> list[str]:
    """Why a score is missing or doubtful, in a few words each."""
    notes = []
    if score.cp_undefined:
        notes.append("CP: " + score.cp_undefined)
    if score.pf_undefined:
        notes.append("PF: " + score.pf_undefined)
    if score.small_foreground:
        notes.append("mask below the paper's size filter")
    return notes


def score_table(scores: Sequence[ImageScore], names: Sequence[str] | None = None) -> str:
    """One line per image: name, CP, PF, mask share, notes."""
    labels = list(names) if names is not None else [f"#{s.index}" for s in scores]
    width = max([5] + [len(label) for label in labels])
    lines = [f"{'image':<{width}}  {'CP':>7}  {'PF':>7}  {'mask':>6}  notes"]
    for label, score in zip(labels, scores):
        share = "     -" if score.foreground_fraction is None else f"{100 * score.foreground_fraction:5.1f}%"
        lines.append(
            f"{label:<{width}}  {format_value(score.cp):>7}  {format_value(score.pf):>7}  {share:>6}  {'; '.join(score_notes(score))}".rstrip()
        )
    return "\n".join(lines)


def caption(score: ImageScore) -> str:
    """A short label for a preview image."""
    parts = [f"#{score.index}"]
    if score.cp is not None or score.cp_undefined:
        parts.append(f"CP {format_value(score.cp)}")
    if score.pf is not None or score.pf_undefined:
        parts.append(f"PF {format_value(score.pf)}")
    return "  ".join(parts)
