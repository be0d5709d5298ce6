"""Readable text for an evaluation: the time report and the summary's tables (what ``eval`` prints)."""

from __future__ import annotations

from ..metric.report import format_score


def timing_lines(report) -> list[str]:
    """The time report: images per second and the split between loading, encoding and scoring."""
    seconds = report.timing["seconds"]
    rate = report.timing.get("images_per_second")
    phases = (
        f"loading {seconds.get('loading', 0.0):.1f} s (models {seconds.get('loading_models', 0.0):.1f} s, "
        f"files {seconds.get('loading_files', 0.0):.1f} s), encoding {seconds.get('encoding', 0.0):.1f} s, "
        f"scoring {seconds.get('scoring', 0.0):.1f} s"
    )
    engine = report.timing.get("engine")
    if engine:  # Ray: wall time here, the phases are the workers' (they overlap)
        lines = [
            f"{report.rows_total} rows: {report.rows_scored} scored, {report.rows_skipped} already done; "
            f"{seconds.get('total', 0.0):.1f} s wall, of which {seconds.get('startup', 0.0):.1f} s start-up "
            "(cluster, actors, models)" + (f"; {rate:.2f} images/s after start-up" if rate else ""),
            "workers' time, added up: " + phases,
            f"ray: {engine.get('workers')} workers x {engine.get('cpus_per_worker')} CPU"
            + (f" + {engine['gpus_per_worker']:g} GPU" if engine.get("gpus_per_worker") else "")
            + f" on {engine.get('nodes')} node(s) ({engine.get('address')}); {engine.get('chunks')} chunks in "
            f"{engine.get('units')} units",
        ]
    else:
        if report.merged_shards:
            head = (
                f"merged {report.merged_shards} shards, {report.rows_total} rows; the shards together scored "
                f"{report.rows_scored} "
                f"rows in {seconds.get('total', 0.0):.1f} s of work"
            )
        else:
            head = (
                f"{report.rows_total} rows: {report.rows_scored} scored, {report.rows_skipped} already done; "
                f"{seconds.get('total', 0.0):.1f} s"
            )
        if rate:
            head += f", {rate:.2f} images/s (excluding model loading)"
        lines = [head, f"time: {phases}, other {seconds.get('other', 0.0):.1f} s"]
    memory = report.timing.get("memory") or {}
    peaks = [
        f"{memory[key] / 1024:.2f} GiB {label}"
        for key, label in (("peak_rss_mib", "resident"), ("peak_cuda_mib", "CUDA"))
        if memory.get(key)
    ]
    if peaks:
        where = " (the largest shard)" if report.merged_shards else " (the largest worker)" if engine else ""
        lines.append("peak memory: " + ", ".join(peaks) + where)
    return lines


def _mean_cell(stats: dict) -> str:
    if stats["mean"] is None:
        return "n/a"
    spread = stats.get("std_over_seeds")
    return f"{stats['mean']:.4f}" + (f"±{spread:.4f}" if spread is not None else "")


def _interval_cell(interval: list[float] | None) -> str:
    return "" if not interval else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


def summary_tables(summary: dict) -> str:
    """Per-method means (± std over seeds) and the agreement table, as text."""
    metrics = summary["metrics"]
    lines = []
    methods = summary["methods"]
    name_width = max([6] + [len(m) for m in methods])
    cells = {m: {k: _mean_cell(v) for k, v in block["metrics"].items()} for m, block in methods.items()}
    widths = {k: max([len(k)] + [len(cells[m][k]) for m in methods]) for k in metrics}
    lines.append(
        f"{'method':<{name_width}}  {'rows':>5}  {'kept':>5}  " + "  ".join(f"{k:>{widths[k]}}" for k in metrics)
    )
    for method, block in methods.items():
        lines.append(
            f"{method:<{name_width}}  {block['rows']:>5}  {block['kept']:>5}  "
            + "  ".join(f"{cells[method][k]:>{widths[k]}}" for k in metrics)
        )
    filtered = summary["filter"]
    lines.append(
        f"filter: {filtered['dropped']} of {summary['rows']} rows dropped (mask < "
        f"{100 * filtered['min_foreground']:g}% "
        f"of the image: {filtered['small_out_mask']} outputs, {filtered['small_ref_mask']} with a small reference mask)"
    )
    for aspect, block in (summary.get("agreement") or {}).items():
        lines.append("")
        scale = summary["options"]["rating_scale"]
        lines.append(
            f"agreement with human {aspect.upper()} ratings (n={block['n']} rows; alpha after "
            f"{summary['options']['rating_map']} "
            f"mapping onto {scale[0]:g}..{scale[1]:g}):"
        )
        if not block.get("metrics"):
            lines.append(f"  {block.get('note', 'nothing to compare')}")
            continue
        lines.append(f"  {'metric':<17}  {'alpha':>7}  {'95% CI':<18}  {'rho':>7}  {'95% CI':<18}")
        for name, stats in block["metrics"].items():
            lines.append(
                f"  {name:<17}  {format_score(stats['krippendorff_alpha'], 3):>7}  "
                f"{_interval_cell(stats['ci95']['krippendorff_alpha']):<18}  "
                f"{format_score(stats['spearman'], 3):>7}  {_interval_cell(stats['ci95']['spearman']):<18}"
            )
        if "inter_rater" in block:
            ceiling = block["inter_rater"]
            lines.append(
                f"  human inter-rater alpha: {format_score(ceiling['krippendorff_alpha'], 3)} "
                f"{_interval_cell(ceiling['ci95'])} "
                f"({len(ceiling['raters'])} raters, {ceiling['n']} rows rated twice or more)"
            )
    lines += identity_lines(summary)
    if summary.get("mask_sources"):
        from .mask_study import table_lines

        lines += [""] + table_lines(summary["mask_sources"])
    return "\n".join(lines) + "\n"


def _spread_cell(side: dict) -> str:
    if side["mean"] is None:
        return "n/a"
    return f"{side['mean']:+.4f}" + (f"±{side['std']:.4f}" if side["std"] is not None else "")


def _excluded_text(block: dict, min_foreground: float) -> str | None:
    excluded = block["excluded"]
    parts = []
    if excluded["filtered"]:
        parts.append(f"{excluded['filtered']} dropped by the filter (mask < {100 * min_foreground:g}% of the image)")
    if excluded["undefined_metric"]:
        which = ", ".join(f"{m} {k}" for m, k in excluded["undefined_by_metric"].items() if k)
        parts.append(f"{excluded['undefined_metric']} with an undefined score ({which})")
    return "left out: " + "; ".join(parts) if parts else None


def identity_lines(summary: dict) -> list[str]:
    """The identity-discrimination table (manifests with same_subject labels): AUC per concept metric."""
    block = summary.get("identity")
    if not block:
        return []
    lines = [
        "",
        f"identity discrimination (n={block['n']} labelled pairs: {block['same_subject']} same-subject, "
        f"{block['cross_subject']} cross-subject; ROC AUC, a tie counts 1/2):",
    ]
    excluded = _excluded_text(block, summary["filter"]["min_foreground"])
    if "metrics" in block:
        lines.append(
            f"  {'metric':<17}  {'AUC':>6}  {'95% CI':<16}  {'same-subject':>16}  {'cross-subject':>16}  "
            f"{'tied pairs':>10}"
        )
        for name, stats in block["metrics"].items():
            auc = "n/a" if stats["auc"] is None else f"{stats['auc']:.3f}"
            interval = "" if not stats["ci95"] else f"[{stats['ci95'][0]:.3f}, {stats['ci95'][1]:.3f}]"
            lines.append(
                f"  {name:<17}  {auc:>6}  {interval:<16}  {_spread_cell(stats['same_subject']):>16}  "
                f"{_spread_cell(stats['cross_subject']):>16}  {stats['tied_pairs']:>10}"
            )
    if block.get("note"):
        lines.append(f"  {block['note']}")
    if excluded:
        lines.append(f"  {excluded}")
    by_method = block.get("by_method") or {}
    if by_method:
        headline = block["headline"]
        aucs = {method: entry["metrics"][headline]["auc"] for method, entry in by_method.items()}
        cells = [f"{method} {'n/a' if auc is None else format(auc, '.3f')}" for method, auc in aucs.items()]
        lines.append(f"  AUC of {headline} per method: " + ", ".join(cells))
    for method, entry in by_method.items():
        if entry.get("note"):
            lines.append(f"  method '{method}': {entry['note']}")
    return lines
