"""Readable text for scores and rankings: the CLI's tables and the nodes' reports share it.

One formatter for a score (``format_score``: sign, fixed decimals, "n/a"
when undefined), so a number reads the same in every table and caption.
"""

from __future__ import annotations

from typing import Sequence

from ..safe_text import printable
from .scores import ImageScore


def format_score(value: float | None, digits: int = 4) -> str:
    """A score with its sign and ``digits`` decimals, or n/a when undefined."""
    return "n/a" if value is None else f"{value:+.{digits}f}"


def format_share(fraction: float | None) -> str:
    """A mask's share of its image, 6 characters wide ("  -   " without a mask)."""
    return "   -  " if fraction is None else f"{100 * fraction:5.1f}%"


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


def format_band(band: Sequence[float] | None) -> str:
    """A mask-sensitivity band as ``[+0.81, +0.84]`` (17 characters), or ``-`` without one."""
    return "-" if band is None else f"[{band[0]:+.4f}, {band[1]:+.4f}]"


def score_table(scores: Sequence[ImageScore], names: Sequence[str] | None = None, *, bands: bool = False) -> str:
    """One line per image: name, CP, PF, mask share, notes; with ``bands`` the CP and PF bands too.

    (The nodes leave the bands out of their reports, which stay as narrow as before; the bands travel in
    ``scores``, the PNG entry and the log.)"""
    labels = list(names) if names is not None else [f"#{s.index}" for s in scores]
    width = max([5] + [len(label) for label in labels])
    head = f"  {'CP band':>18}  {'PF band':>18}" if bands else ""
    lines = [f"{'image':<{width}}  {'CP':>7}  {'PF':>7}  {'mask':>6}{head}  notes"]
    for label, score in zip(labels, scores):
        share = "     -" if score.foreground_fraction is None else format_share(score.foreground_fraction)
        columns = f"  {format_band(score.cp_band):>18}  {format_band(score.pf_band):>18}" if bands else ""
        notes = "; ".join(score_notes(score) + (score.band_notes if bands else []))
        lines.append(
            f"{label:<{width}}  {format_score(score.cp):>7}  {format_score(score.pf):>7}  {share:>6}{columns} "
            f" {notes}".rstrip()
        )
    return "\n".join(lines)


def key_columns_header(key_label: str) -> str:
    """The heads of ``key_columns``: CP, PF, the ranking key, mask."""
    return f"{'CP':>7}  {'PF':>7}  {key_label:>7}  {'mask':>6}"


def key_columns(cp: float | None, pf: float | None, key: float | None, fraction: float | None) -> str:
    """CP, PF, the ranking key and the mask share, aligned under ``key_columns_header`` (ranking and sampling
    tables)."""
    return f"{format_score(cp):>7}  {format_score(pf):>7}  {format_score(key):>7}  {format_share(fraction)}"


def ranking_table(ranking, names: Sequence[str] | None = None) -> str:
    """A ``masc_core.selection.ranking.Ranking``, best first: rank, image, CP, PF, the key, mask share, status.

    ``names[i]`` labels batch index i (default: the index itself).
    """
    labels = {item.index: (names[item.index] if names is not None else str(item.index)) for item in ranking.items}
    header = "image" if names is not None else "index"
    width = max([len(header)] + [len(label) for label in labels.values()])
    lines = [f"rank  {header:<{width}}  {key_columns_header(ranking.key_label)}  status"]
    for position, item in enumerate(ranking.items, start=1):
        status = (
            "selected" if item.index in ranking.selected else ("passed" if item.passed else "; ".join(item.reasons))
        )
        lines.append(
            f"{position:>4}  "
            f"{labels[item.index]:<{width}}  {key_columns(item.cp, item.pf, item.key, item.foreground_fraction)}  "
            f"{status}"
        )
    return "\n".join(lines)


def caption(score: ImageScore) -> str:
    """A short label for a preview image."""
    parts = [f"#{score.index}"]
    if score.cp is not None or score.cp_undefined:
        parts.append(f"CP {format_score(score.cp)}")
    if score.pf is not None or score.pf_undefined:
        parts.append(f"PF {format_score(score.pf)}")
    return "  ".join(parts)


def subject_line(figures: Sequence[dict], blends: Sequence[str] = ()) -> str:
    """Each subject's CP and mask share on one line (``ImageScore.subjects`` or a saved record's), then one line per
    blend."""
    line = "  ".join(
        f"{f['subject']} CP {format_score(f.get('cp'))} mask {format_share(f.get('mask')).strip()}" for f in figures
    )
    # Subject names come from a subjects file or a shared workflow: escaped, so each line stays one visible line.
    return "\n".join(printable(text) for text in [line] + [f"blend: {b}" for b in blends])


def subjects_table(batch, names: Sequence[str] | None = None) -> str:
    """A ``SubjectBatch``, one line per output: cp_min, cp_mean, PF, each subject's CP, then blends and notes."""
    names = list(names) if names is not None else [f"#{s.index}" for s in batch.scores]
    labels = [info.subject for info in batch.subjects]
    width = max([5] + [len(n) for n in names])
    columns = "".join(f"  {label[:10]:>10}" for label in labels)
    lines = [f"{'image':<{width}}  {'cp_min':>7}  {'cp_mean':>7}  {'PF':>7}{columns}  notes"]
    for name, item in zip(names, batch.scores):
        per = "".join(f"  {format_score(s.cp):>10}" for s in item.subjects)
        notes = ["BLEND: " + b for b in item.blends] + item.notes
        notes += [f"{s.subject}: {s.cp_undefined}" for s in item.subjects if s.cp_undefined]
        if item.pf_undefined:
            notes.append(f"PF: {item.pf_undefined}")
        lines.append(
            f"{name:<{width}}  {format_score(item.cp_min):>7}  {format_score(item.cp_mean):>7}  "
            f"{format_score(item.pf):>7}{per}  {'; '.join(notes)}".rstrip()
        )
    return "\n".join(
        printable(line) for line in lines
    )  # names from a subjects file: no control sequence reaches a terminal
