"""PNG plots of an evaluation, beside summary.json, for researchers who would rather look than read.

- ``plot_agreement_cp.png`` / ``plot_agreement_pf.png`` (manifests with human
  ratings): per metric of the aspect, the metric against the human rating,
  one point per row and rater group (ratings jittered a little so equal
  ones stay visible), the rows the summary compared; alpha and rho in the
  panel's title (pooled rating) and per rater group in its legend.
- ``plot_methods.png``: per method, the mean of each CP and PF metric over
  the kept rows, with error bars of one standard deviation over seeds and a
  dot per seed mean; with several subjects per image a third panel of
  cp (their cp_min), cp_mean and the blend rate.
- ``plot_identity_roc.png`` (manifests with ``same_subject`` labels): the
  ROC curve of each concept metric, its AUC and 95% CI in the legend.
- ``plot_mask_sources.png`` (``--mask-sources``): per aspect, each source's
  alpha against the human rating with its 95% CI (the mean when the
  manifest has no ratings), on the keys valid under every source.

Every number drawn comes from summary.json or from the rows it was
computed on (``summary.agreement_rows`` / ``identity_rows``). matplotlib
is optional (``pip install 'masc-comfyui[plots]'``); it is driven through
its object API and the Agg canvas, leaving the caller's pyplot state
alone. Plots are written after, and never change, the result files.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..io import files
from ..metric.report import format_score
from . import discrimination
from .metrics import ASPECT_METRICS, ASPECTS
from .records import EvalRecord
from .summary import agreement_rows, identity_rows

PLOT_FILES = {
    "agreement_cp": "plot_agreement_cp.png",
    "agreement_pf": "plot_agreement_pf.png",
    "methods": "plot_methods.png",
    "identity_roc": "plot_identity_roc.png",
    "mask_sources": "plot_mask_sources.png",
}
INSTALL_HINT = "pip install 'masc-comfyui[plots]'"
MISSING = f"plots not written: matplotlib is not installed ({INSTALL_HINT} gives them)"
_JITTER = 0.08


def remove_plots(folder: str) -> None:
    """Delete the plots of an earlier run (they would describe other rows than the next run's)."""
    for name in PLOT_FILES.values():
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            os.remove(path)


def _figure(panels: int, width: float = 4.6, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    columns = min(3, max(1, panels))
    rows = math.ceil(max(1, panels) / columns)
    figure = Figure(figsize=(width * columns, height * rows), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, [figure.add_subplot(rows, columns, i + 1) for i in range(panels)]


def _save(figure, path: str) -> str:
    files.replace_atomically(path, lambda temporary: figure.savefig(temporary, format="png"))
    return path


def _agreement_plot(path: str, records: list[EvalRecord], aspect: str, block: dict) -> str:
    names = list(block["metrics"])
    rows = agreement_rows(records, aspect, names)
    raters = list(block.get("by_rater") or {}) or [None]
    figure, axes = _figure(len(names))
    jitter = np.random.default_rng(0).uniform(-_JITTER, _JITTER, size=len(rows))
    for axis, name in zip(axes, names):
        for rater in raters:
            picked = [(i, r) for i, r in enumerate(rows) if rater is None or rater in r.ratings.get(aspect, {})]
            x = [r.value(name) for _, r in picked]
            y = [(r.human(aspect) if rater is None else r.ratings[aspect][rater]) + jitter[i] for i, r in picked]
            label = "pooled rating"
            if rater is not None:
                stats = block["by_rater"][rater]["metrics"][name]
                label = (
                    f"{rater}: α {format_score(stats['krippendorff_alpha'], 3)}, ρ "
                    f"{format_score(stats['spearman'], 3)} (n={len(picked)})"
                )
            axis.scatter(x, y, s=10, alpha=0.5, label=label)
        stats = block["metrics"][name]
        axis.set_title(
            f"{name}: α {format_score(stats['krippendorff_alpha'], 3)}, ρ {format_score(stats['spearman'], 3)} "
            f"(n={stats['n']})",
            fontsize=10,
        )
        axis.set_xlabel(name)
        axis.set_ylabel(f"human {aspect.upper()} rating")
        axis.legend(fontsize=7, loc="best")
    figure.suptitle(f"{aspect.upper()}: metric vs human rating (one point per row and rater group)", fontsize=11)
    return _save(figure, path)


SEVERAL_SUBJECT_PANEL = ("cp", "cp_mean", "blend")
"""With several subjects per image a third panel: cp (their cp_min), cp_mean and the blend rate (mean of blend)."""


def _methods_plot(path: str, summary: dict) -> str:
    methods = summary["methods"]
    panels = [(aspect.upper(), [m for m in ASPECT_METRICS[aspect] if m in summary["metrics"]]) for aspect in ASPECTS]
    if "cp_mean" in summary["metrics"] or "blend" in summary["metrics"]:
        panels.append(
            (
                "several subjects (cp = cp_min; blend = blend rate)",
                [m for m in SEVERAL_SUBJECT_PANEL if m in summary["metrics"]],
            )
        )
    figure, axes = _figure(len(panels), width=max(5.0, 1.6 * len(methods) + 2.5))
    for axis, (title, names) in zip(axes, panels):
        width = 0.8 / max(1, len(names))
        for k, name in enumerate(names):
            centres = np.arange(len(methods)) + (k - (len(names) - 1) / 2) * width
            blocks = [block["metrics"][name] for block in methods.values()]
            means = [np.nan if b["mean"] is None else b["mean"] for b in blocks]
            spreads = [0.0 if b["std_over_seeds"] is None else b["std_over_seeds"] for b in blocks]
            axis.bar(centres, means, width * 0.9, yerr=spreads, capsize=3, label=name, alpha=0.8)
            for centre, block in zip(centres, blocks):
                seed_means = list(block["seed_means"].values())
                axis.scatter([centre] * len(seed_means), seed_means, s=9, color="black", zorder=3)
        axis.set_xticks(np.arange(len(methods)), list(methods), rotation=20, ha="right", fontsize=8)
        axis.set_title(f"{title} per method: mean ± std over seeds (dots: seed means)", fontsize=10)
        axis.axhline(0.0, color="grey", linewidth=0.5)
        if names:
            axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=min(3, len(names)))
    return _save(figure, path)


def _roc_plot(path: str, records: list[EvalRecord], block: dict) -> str:
    names = list(block["metrics"])
    rows = identity_rows(records, names)
    labels = [bool(r.same_subject) for r in rows]
    figure, (axis,) = _figure(1, width=5.2, height=5.0)
    for name in names:
        fpr, tpr, _ = discrimination.roc_curve([r.value(name) for r in rows], labels)
        stats = block["metrics"][name]
        interval = f" [{stats['ci95'][0]:.3f}, {stats['ci95'][1]:.3f}]" if stats["ci95"] else ""
        axis.plot(fpr, tpr, label=f"{name}: AUC {stats['auc']:.3f}{interval}")
    axis.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=0.8)
    axis.set_xlabel("false positive rate (cross-subject pairs called same)")
    axis.set_ylabel("true positive rate (same-subject pairs called same)")
    axis.set_title(
        f"identity: {block['same_subject']} same- vs {block['cross_subject']} cross-subject pairs", fontsize=10
    )
    axis.set_aspect("equal")
    axis.legend(fontsize=8, loc="lower right")
    return _save(figure, path)


def _mask_sources_plot(path: str, block: dict) -> str:
    aspects = list(block["aspects"].items())
    figure, axes = _figure(len(aspects), width=max(4.6, 1.2 * len(block["sources"]) + 2.0))
    for axis, (aspect, table) in zip(axes, aspects):
        entries = list(table["sources"].items())
        rated = any(e.get("krippendorff_alpha") is not None for _, e in entries)
        figure_name = "krippendorff_alpha" if rated else "mean"
        values = [np.nan if e.get(figure_name) is None else e[figure_name] for _, e in entries]
        errors = None
        if rated:
            intervals = [(e.get("ci95") or {}).get("krippendorff_alpha") for _, e in entries]
            errors = np.array(
                [[v - i[0], i[1] - v] if i and not math.isnan(v) else [0.0, 0.0] for v, i in zip(values, intervals)]
            ).T
        axis.bar(np.arange(len(entries)), values, 0.6, yerr=errors, capsize=4, alpha=0.8)
        axis.set_xticks(np.arange(len(entries)), [name for name, _ in entries], fontsize=9)
        what = "Krippendorff alpha (95% CI)" if rated else "mean score"
        axis.set_title(f"{aspect.upper()} by mask source: {what}, {table['keys']} keys", fontsize=10)
        axis.axhline(0.0, color="grey", linewidth=0.5)
    return _save(figure, path)


def write_plots(folder: str, records: list[EvalRecord], summary: dict[str, Any]) -> tuple[list[str], str | None]:
    """Write the plots that apply to this summary (removing the others): (paths written, a note or None).

    The note says why nothing was drawn (matplotlib missing) or what was
    left out (an identity block with one class has no ROC curve).
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [], MISSING
    remove_plots(folder)
    written = [_methods_plot(os.path.join(folder, PLOT_FILES["methods"]), summary)]
    for aspect, block in (summary.get("agreement") or {}).items():
        if block.get("metrics"):
            written.append(
                _agreement_plot(os.path.join(folder, PLOT_FILES[f"agreement_{aspect}"]), records, aspect, block)
            )
    identity = summary.get("identity")
    note = None
    if identity and identity.get("metrics") and identity.get("auc") is not None:
        written.append(_roc_plot(os.path.join(folder, PLOT_FILES["identity_roc"]), records, identity))
    elif identity:
        note = f"no ROC plot: {identity.get('note', 'no AUC')}"
    if summary.get("mask_sources"):
        written.append(_mask_sources_plot(os.path.join(folder, PLOT_FILES["mask_sources"]), summary["mask_sources"]))
    return written, note
