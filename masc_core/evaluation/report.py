"""Readable text for an evaluation: the time report and the summary's tables (what ``eval`` prints)."""

from __future__ import annotations

from ..report import format_score


def timing_lines(report) -> list[str]:
    """The time report: images per second and the split between loading, encoding and scoring."""
    seconds = report.timing["seconds"]
    rate = report.timing.get("images_per_second")
    if report.merged_shards:
        head = (
            f"merged {report.merged_shards} shards, {report.rows_total} rows; the shards together scored {report.rows_scored} "
            f"rows in {seconds.get('total', 0.0):.1f} s of work"
        )
    else:
        head = (
            f"{report.rows_total} rows: {report.rows_scored} scored, {report.rows_skipped} already done; "
            f"{seconds.get('total', 0.0):.1f} s"
        )
    if rate:
        head += f", {rate:.2f} images/s (excluding model loading)"
    lines = [
        head,
        f"time: loading {seconds.get('loading', 0.0):.1f} s (models {seconds.get('loading_models', 0.0):.1f} s, "
        f"files {seconds.get('loading_files', 0.0):.1f} s), encoding {seconds.get('encoding', 0.0):.1f} s, "
        f"scoring {seconds.get('scoring', 0.0):.1f} s, other {seconds.get('other', 0.0):.1f} s",
    ]
    memory = report.timing.get("memory") or {}
    peaks = [f"{memory[key] / 1024:.2f} GiB {label}" for key, label in (("peak_rss_mib", "resident"), ("peak_cuda_mib", "CUDA")) if memory.get(key)]
    if peaks:
        lines.append("peak memory: " + ", ".join(peaks) + (" (the largest shard)" if report.merged_shards else ""))
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
    lines.append(f"{'method':<{name_width}}  {'rows':>5}  {'kept':>5}  " + "  ".join(f"{k:>{widths[k]}}" for k in metrics))
    for method, block in methods.items():
        lines.append(
            f"{method:<{name_width}}  {block['rows']:>5}  {block['kept']:>5}  "
            + "  ".join(f"{cells[method][k]:>{widths[k]}}" for k in metrics)
        )
    filtered = summary["filter"]
    lines.append(
        f"filter: {filtered['dropped']} of {summary['rows']} rows dropped (mask < {100 * filtered['min_foreground']:g}% "
        f"of the image: {filtered['small_out_mask']} outputs, {filtered['small_ref_mask']} with a small reference mask)"
    )
    for aspect, block in (summary.get("agreement") or {}).items():
        lines.append("")
        scale = summary["options"]["rating_scale"]
        lines.append(
            f"agreement with human {aspect.upper()} ratings (n={block['n']} rows; alpha after {summary['options']['rating_map']} "
            f"mapping onto {scale[0]:g}..{scale[1]:g}):"
        )
        if not block.get("metrics"):
            lines.append(f"  {block.get('note', 'nothing to compare')}")
            continue
        lines.append(f"  {'metric':<17}  {'alpha':>7}  {'95% CI':<18}  {'rho':>7}  {'95% CI':<18}")
        for name, stats in block["metrics"].items():
            lines.append(
                f"  {name:<17}  {format_score(stats['krippendorff_alpha'], 3):>7}  {_interval_cell(stats['ci95']['krippendorff_alpha']):<18}  "
                f"{format_score(stats['spearman'], 3):>7}  {_interval_cell(stats['ci95']['spearman']):<18}"
            )
        if "inter_rater" in block:
            ceiling = block["inter_rater"]
            lines.append(
                f"  human inter-rater alpha: {format_score(ceiling['krippendorff_alpha'], 3)} {_interval_cell(ceiling['ci95'])} "
                f"({len(ceiling['raters'])} raters, {ceiling['n']} rows rated twice or more)"
            )
    return "\n".join(lines) + "\n"
