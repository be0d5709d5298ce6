"""Command line for ranking and evaluation: ``rank``, ``eval`` and ``merge``.

- ``rank``: best-of-N from files, printed as a ranking (``masc_core.ranking``).
- ``eval``: a manifest of rows to results, a summary and the agreement
  table (``masc_core.evaluate``); resumable, shardable.
- ``merge``: shard folders to the files one ``eval`` run writes.

Registered in ``masc_core.cli`` through ``add_parsers``; errors reach the
user as the one line ``masc_core.cli.main`` prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable

from .cli import add_model_options, add_pair_options, load_encoder, read_pairs
from .manifest import parse_shard

# ---------------------------------------------------------------- rank


def _signed(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def cmd_rank(args: argparse.Namespace) -> int:
    from .ranking import rank
    from .scoring import score_images

    refs, ref_masks, outs, out_masks = read_pairs(args)
    encoder = load_encoder(args)
    batch = score_images(
        encoder, outs, reference=refs, reference_mask=ref_masks, mask=out_masks, prompt=args.prompt,
        subject=args.subject, min_foreground=args.min_foreground,
    )
    ranking = rank(
        batch.scores, by=args.by, cp_weight=args.cp_weight, pf_weight=args.pf_weight, top_k=args.top,
        min_cp=args.min_cp, min_pf=args.min_pf, reject_small_masks=args.reject_small_masks,
    )
    scores = batch.scores
    entries = []
    for position, item in enumerate(ranking.items, start=1):
        score = scores[item.index]
        entries.append(
            {
                "rank": position,
                "index": item.index,
                "image": args.out[item.index],
                "mask": args.out_mask[item.index] if args.out_mask else None,
                "cp": item.cp,
                "pf": item.pf,
                "key": item.key,
                "passed": item.passed,
                "selected": item.index in ranking.selected,
                "reasons": item.reasons,
                "foreground_fraction": score.foreground_fraction,
                "small_foreground": score.small_foreground,
            }
        )
    if args.json:
        document = {
            "model": encoder.describe(),
            "by": ranking.by,
            "weights": {"cp": args.cp_weight, "pf": args.pf_weight} if ranking.by == "both" else None,
            "selected": [args.out[i] for i in ranking.selected],
            "ranking": entries,
            "encoded_prompt": scores[0].encoded_prompt if scores else None,
        }
        json.dump(document, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    width = max([5] + [len(os.path.basename(e["image"])) for e in entries])
    key_name = ranking.by if ranking.by != "both" else "CP+PF" if args.cp_weight == args.pf_weight == 1.0 else "score"
    sys.stdout.write(f"rank  {'image':<{width}}  {'CP':>7}  {'PF':>7}  {key_name:>7}  {'mask':>6}  status\n")
    for e in entries:
        status = "selected" if e["selected"] else ("passed" if e["passed"] else "; ".join(e["reasons"]))
        share = "   -  " if e["foreground_fraction"] is None else f"{100 * e['foreground_fraction']:5.1f}%"
        sys.stdout.write(
            f"{e['rank']:>4}  {os.path.basename(e['image']):<{width}}  {_signed(e['cp']):>7}  {_signed(e['pf']):>7}  "
            f"{_signed(e['key']):>7}  {share}  {status}\n"
        )
    if not ranking.selected:
        sys.stdout.write("no output passed: nothing selected\n")
    if scores and scores[0].encoded_prompt is not None:
        sys.stdout.write(f"PF text: {scores[0].encoded_prompt!r}\n")
    return 0


# ---------------------------------------------------------------- progress and reports


class ProgressLine:
    """Rows done, images per second and time left, on one stderr line (redrawn on a terminal,
    otherwise one line every ``interval`` seconds and at the end)."""

    def __init__(self, stream=None, *, enabled: bool = True, interval: float = 10.0):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int, scored: int, elapsed: float) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        final = done >= total
        if not self.interactive and not final and now - self.last < self.interval:
            return
        self.last = now
        rate = scored / elapsed if scored and elapsed > 0 else None
        left = (total - done) / rate if rate else None
        text = f"eval: {done}/{total} rows ({100 * done / max(total, 1):.0f}%)"
        if rate:
            text += f"  {rate:.2f} img/s"
        if left is not None and not final:
            text += f"  ETA {int(left // 60)}:{int(left % 60):02d}"
        if self.interactive:
            self.stream.write("\r" + text.ljust(60) + ("\n" if final else ""))
            self.drawn = not final
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.drawn = False


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
                f"  {name:<17}  {_signed(stats['krippendorff_alpha'], 3):>7}  {_interval_cell(stats['ci95']['krippendorff_alpha']):<18}  "
                f"{_signed(stats['spearman'], 3):>7}  {_interval_cell(stats['ci95']['spearman']):<18}"
            )
        if "inter_rater" in block:
            ceiling = block["inter_rater"]
            lines.append(
                f"  human inter-rater alpha: {_signed(ceiling['krippendorff_alpha'], 3)} {_interval_cell(ceiling['ci95'])} "
                f"({len(ceiling['raters'])} raters, {ceiling['n']} rows rated twice or more)"
            )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- eval and merge


def _evaluation_options(args: argparse.Namespace):
    from .evaluate import EvalOptions
    from .summary import SummaryOptions

    summary = SummaryOptions(
        min_foreground=args.min_foreground,
        rating_scale=(args.rating_scale[0], args.rating_scale[1]),
        rating_map=args.rating_map,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    return EvalOptions(
        model=args.model, device=args.device, precision=args.precision, max_patches=args.max_patches,
        batch_size=args.batch_size, chunk_size=args.chunk_size, baselines=tuple(dict.fromkeys(args.baselines or ())),
        clip=args.clip, dino=args.dino, summary=summary, shard=parse_shard(args.shard), fresh=args.fresh,
    )


def _finish(report, args: argparse.Namespace) -> int:
    if not args.quiet:
        for line in timing_lines(report):
            sys.stderr.write(line + "\n")
        sys.stderr.write("wrote " + ", ".join(report.written) + "\n")
    if report.summary is None:
        if not args.quiet:
            sys.stderr.write(f"shard done; when every shard is, run: python -m masc_core merge {os.path.dirname(report.out_dir)}\n")
        return 0
    if args.json:
        json.dump(report.summary, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(summary_tables(report.summary))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate

    options = _evaluation_options(args)
    progress = ProgressLine(enabled=not args.quiet)
    try:
        report = evaluate(args.manifest, args.out_dir, options, progress=progress)
    finally:
        progress.close()
    return _finish(report, args)


def cmd_merge(args: argparse.Namespace) -> int:
    from .evaluate import merge

    return _finish(merge(args.out_dir, args.shards), args)


# ---------------------------------------------------------------- parsers


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def add_parsers(commands, registry: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the rank, eval and merge sub-commands to ``commands`` and their handlers to ``registry``."""
    from .baselines import SAME_BACKBONE_GROUPS
    from .evaluate import DEFAULT_CHUNK_SIZE
    from .ranking import RANK_KEYS
    from .summary import SummaryOptions

    defaults = SummaryOptions()

    rank_parser = commands.add_parser("rank", help="best-of-N: rank outputs by CP, PF or both")
    add_model_options(rank_parser)
    add_pair_options(rank_parser, out_mask_required=False)
    rank_parser.add_argument("--by", choices=RANK_KEYS, default="both", help="rank by CP, PF or their weighted sum (default both)")
    rank_parser.add_argument("--cp-weight", type=float, default=1.0, help="weight of CP in --by both (default 1)")
    rank_parser.add_argument("--pf-weight", type=float, default=1.0, help="weight of PF in --by both (default 1)")
    rank_parser.add_argument("--top", type=_positive_int, default=None, metavar="K", help="select the best K that pass (default: all that pass)")
    rank_parser.add_argument("--min-cp", type=float, default=None, help="outputs with a lower CP do not pass")
    rank_parser.add_argument("--min-pf", type=float, default=None, help="outputs with a lower PF do not pass")
    rank_parser.add_argument(
        "--reject-small-masks", action="store_true",
        help="outputs whose mask is below --min-foreground do not pass (subject probably not rendered)",
    )
    rank_parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    registry["rank"] = cmd_rank

    eval_parser = commands.add_parser("eval", help="score a manifest: results, summary, agreement with humans")
    eval_parser.add_argument("manifest", help="CSV or JSONL: ref, ref_mask, out, out_mask, prompt, subject [, method, seed, id, human_cp, human_pf]")
    add_model_options(eval_parser)
    eval_parser.add_argument("--out-dir", required=True, metavar="DIR", help="folder for results.jsonl, results.csv, summary.json")
    eval_parser.add_argument("--shard", default=None, metavar="I/N", help="score only shard I of N (0-based; groups of rows sharing a reference)")
    eval_parser.add_argument("--chunk-size", type=_positive_int, default=DEFAULT_CHUNK_SIZE, help=f"rows scored (and saved) together (default {DEFAULT_CHUNK_SIZE})")
    eval_parser.add_argument(
        "--min-foreground", type=float, default=defaults.min_foreground,
        help="the paper's filter: drop rows whose output or reference mask covers less (default 0.05; 0 keeps all)",
    )
    eval_parser.add_argument(
        "--baselines", nargs="+", choices=tuple(SAME_BACKBONE_GROUPS), default=(),
        help="same-backbone baselines: global (global_cp, global_pf), pf-ablations (pf_full_stripped, pf_bg_unstripped, pf_fg_unstripped)",
    )
    eval_parser.add_argument("--clip", default=None, metavar="DIR", help="CLIP checkpoint folder: adds CLIP-I and CLIP-T")
    eval_parser.add_argument("--dino", default=None, metavar="DIR", help="DINO (ViT/DINOv2) checkpoint folder: adds DINO-I")
    eval_parser.add_argument(
        "--rating-scale", nargs=2, type=float, default=list(defaults.rating_scale), metavar=("LOW", "HIGH"),
        help="the human rating scale metrics are mapped onto for alpha (default 0 4)",
    )
    eval_parser.add_argument("--rating-map", choices=("minmax", "none"), default=defaults.rating_map, help="metric -> rating scale before alpha (default minmax)")
    eval_parser.add_argument("--bootstrap", type=int, default=defaults.bootstrap, help="bootstrap resamples for the 95%% CIs (default 1000; 0 = none)")
    eval_parser.add_argument("--seed", type=int, default=defaults.seed, help="bootstrap seed (default 0)")
    eval_parser.add_argument("--fresh", action="store_true", help="discard earlier results in the folder instead of resuming")
    eval_parser.add_argument("--quiet", action="store_true", help="no progress line and no time report on stderr")
    eval_parser.add_argument("--json", action="store_true", help="print summary.json instead of tables")
    registry["eval"] = cmd_eval

    merge_parser = commands.add_parser("merge", help="merge the shard folders of an eval into one result")
    merge_parser.add_argument("out_dir", metavar="DIR", help="the --out-dir the shards were run with (merged files go here)")
    merge_parser.add_argument("shards", nargs="*", metavar="SHARD_DIR", help="shard folders (default: DIR/shard-*-of-*)")
    merge_parser.add_argument("--quiet", action="store_true", help="no report on stderr")
    merge_parser.add_argument("--json", action="store_true", help="print summary.json instead of tables")
    registry["merge"] = cmd_merge
