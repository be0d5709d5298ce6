"""The mask-source study: how much MaSC's verdicts hang on where the masks come from (the paper's Tables 6 and 7).

``eval MANIFEST --mask-sources clipseg,sam3,manifest`` scores every row once, with MaSC's SigLIP2 encodings
shared by every source, and each source's masks (``metrics.mask_sources``; ``manifest`` is the manifest's own
masks, MaSC's ``cp`` and ``pf``). This module turns those result rows into the study's table, as the paper
builds its own (appendix 6.1):

- **The intersected subset.** Per aspect, the keys (rows) where *every* source gave a valid mask: both the
  reference's (every view) and the output's cover at least ``min_foreground`` (the paper's 5% filter) and the
  source's score is defined. A source that fails on a key drops that key for all, so every source is judged on
  the same rows (the paper: 5,315 keys for CP, 4,998 for PF on DreamBench++).
- **Per source**, on that subset: the number of keys, the mean, Krippendorff's alpha and Spearman's rho against
  the human rating of the aspect (when the manifest has them; each source's scores mapped onto the rating
  scale by its own fit, as the main agreement block maps every metric), identity AUC for CP (when the manifest
  labels ``same_subject`` pairs), and each figure's delta from the first source listed.

The figures come from ``agreement.compare`` and ``discrimination.compare``, the code behind the main summary,
applied to each source's own column: nothing is re-derived here.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import MascInputError
from . import agreement, discrimination
from .metrics.mask_sources import SOURCES
from .records import EvalRecord

MANIFEST = "manifest"
"""The source that is the manifest's own masks (MaSC's ``cp`` and ``pf`` columns)."""
CHOICES = (*SOURCES, MANIFEST)


def parse_sources(text: str) -> tuple[str, ...]:
    """'clipseg,sam3,manifest' -> the sources in that order, or a one-line error."""
    names = [part.strip().lower() for part in str(text).split(",") if part.strip()]
    unknown = [n for n in names if n not in CHOICES]
    if unknown:
        raise MascInputError(
            f"--mask-sources: '{unknown[0]}' is not a mask source: use {', '.join(CHOICES)} (comma-separated)"
        )
    if len(set(names)) != len(names):
        raise MascInputError("--mask-sources names a source twice: give each once")
    if len(names) < 2:
        raise MascInputError("--mask-sources compares sources: give two or more, e.g. clipseg,sam3,manifest")
    return tuple(names)


def column(source: str, aspect: str) -> str:
    """The result column holding ``aspect`` ("cp" or "pf") under ``source``."""
    return aspect if source == MANIFEST else f"{aspect}_{source}"


def valid(record: EvalRecord, source: str, aspect: str, min_foreground: float) -> bool:
    """Whether ``source`` gave this row a valid mask (both masks at least ``min_foreground``) and a defined score."""
    if record.value(column(source, aspect)) is None:
        return False
    if source == MANIFEST:
        shares = [record.out_foreground, *record.ref_foreground]
    else:  # the smallest reference view's share stands for them all
        shares = [record.value(f"out_fg_{source}"), record.value(f"ref_fg_{source}")]
    return all(share is not None and share >= min_foreground for share in shares)


def intersected(
    records: Sequence[EvalRecord], sources: Sequence[str], aspect: str, min_foreground: float
) -> list[EvalRecord]:
    """The rows every source gave a valid mask and score for ``aspect``."""
    return [r for r in records if all(valid(r, s, aspect, min_foreground) for s in sources)]


def _delta(value, first) -> float | None:
    return None if value is None or first is None else float(value) - float(first)


def aspect_table(records: Sequence[EvalRecord], sources: Sequence[str], aspect: str, options) -> dict[str, Any]:
    """One aspect's study table (see the module): keys, and per source n, mean, alpha, rho, AUC and deltas."""
    keys = intersected(records, sources, aspect, options.min_foreground)
    block: dict[str, Any] = {
        "keys": len(keys),
        "rows": len(records),
        "dropped": {s: sum(1 for r in records if not valid(r, s, aspect, options.min_foreground)) for s in sources},
        "sources": {},
    }
    rated = [r for r in keys if r.human(aspect) is not None]
    labelled = [r for r in keys if r.same_subject is not None] if aspect == "cp" else []
    names = {s: column(s, aspect) for s in sources}
    agreement_figures: dict[str, dict] = {}
    if len(rated) >= 2:
        human = np.array([r.human(aspect) for r in rated], dtype=np.float64)
        for source, name in names.items():
            values = np.array([r.value(name) for r in rated], dtype=np.float64)
            mapping = agreement.fit_mapping(values, options.rating_scale, options.rating_map)
            agreement_figures[source] = agreement.compare(
                {name: values},
                human,
                {name: mapping},
                bootstrap=options.bootstrap,
                seed=options.seed,
                label=f"mask-sources/{aspect}/{source}",
            )[name]
    identity: dict[str, dict] = {}
    if labelled:
        truth = [bool(r.same_subject) for r in labelled]
        for source, name in names.items():
            identity[source] = discrimination.compare(
                {name: [r.value(name) for r in labelled]},
                truth,
                bootstrap=options.bootstrap,
                seed=options.seed,
                label=f"mask-sources/identity/{source}",
            )[name]
    first = sources[0]
    for source, name in names.items():
        values = [r.value(name) for r in keys]
        entry: dict[str, Any] = {"column": name, "n": len(keys), "mean": float(np.mean(values)) if values else None}
        if source in agreement_figures:
            figures = agreement_figures[source]
            entry.update(
                rated=len(rated),
                krippendorff_alpha=figures["krippendorff_alpha"],
                spearman=figures["spearman"],
                ci95=figures["ci95"],
            )
        if source in identity:
            entry.update(pairs=len(labelled), auc=identity[source]["auc"], auc_ci95=identity[source]["ci95"])
        block["sources"][source] = entry
    reference = block["sources"][first]
    for source in sources:
        entry = block["sources"][source]
        entry["delta"] = {
            figure: _delta(entry.get(figure), reference.get(figure))
            for figure in ("mean", "krippendorff_alpha", "spearman", "auc")
            if figure in entry
        }
    if not keys:
        block["note"] = "no row has a valid mask and a defined score under every source"
    return block


def study(records: Sequence[EvalRecord], sources: Sequence[str], options) -> dict[str, Any]:
    """summary.json's ``mask_sources`` block: the sources in order (deltas are from the first), then per aspect."""
    return {
        "sources": list(sources),
        "baseline": sources[0],
        "min_foreground": float(options.min_foreground),
        "aspects": {aspect: aspect_table(records, sources, aspect, options) for aspect in ("cp", "pf")},
    }


def _cell(value, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


FIGURES = (("mean", "mean"), ("alpha", "krippendorff_alpha"), ("rho", "spearman"), ("auc", "auc"))


def table_lines(block: dict[str, Any]) -> list[str]:
    """The study as text: one table per aspect, a row per source, each figure beside its delta."""
    lines = [
        f"mask sources (deltas from {block['baseline']}; on the keys valid under every source, masks >= "
        f"{100 * block['min_foreground']:g}%):"
    ]
    width = max(8, *(len(s) for s in block["sources"]))
    for aspect, table in block["aspects"].items():
        lines.append(f"  {aspect.upper()}: {table['keys']} of {table['rows']} keys")
        lines.append(f"    {'source':<{width}}" + "".join(f"  {label:>7}  {'delta':>7}" for label, _ in FIGURES))
        for source, entry in table["sources"].items():
            delta = entry["delta"]
            cells = "".join(
                f"  {_cell(entry.get(key)):>7}  {_cell(delta.get(key), signed=True):>7}" for _, key in FIGURES
            )
            lines.append(f"    {source:<{width}}{cells}")
        if table.get("note"):
            lines.append(f"    note: {table['note']}")
    return lines
