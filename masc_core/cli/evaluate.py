"""``python -m masc_core eval`` and ``merge``: a manifest scored into results, a summary and agreement tables.

See ``masc_core.evaluation``; errors reach the user as the one line the
CLI prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..evaluation import metrics
from ..evaluation.agreement import MAPPINGS
from ..evaluation.plan import parse_shard
from ..evaluation.report import summary_tables, timing_lines
from ..evaluation.options import DEFAULT_CHUNK_SIZE, ENGINES, EngineOptions
from ..evaluation.summary import SummaryOptions
from .options import add_min_foreground, add_model_options, bootstrap_count, bootstrap_seed, positive_int


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


def _option_dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def requested_baselines(args: argparse.Namespace) -> tuple[str, ...]:
    """The baselines asked for: --baselines in the order given, then the metrics whose folder option is set."""
    return tuple(dict.fromkeys(args.baselines or ())) + tuple(baseline_folders(args))


def baseline_folders(args: argparse.Namespace) -> dict[str, str]:
    """Metric key -> model folder, for the metrics whose folder option is set (in registry order)."""
    folders = {}
    for spec in metrics.REGISTRY:
        if spec.folder_option and getattr(args, _option_dest(spec.folder_option)):
            folders[spec.key] = getattr(args, _option_dest(spec.folder_option))
    return folders


def _engine_options(args: argparse.Namespace) -> EngineOptions:
    return EngineOptions(
        name=args.engine, address=args.address, workers=args.workers, gpus_per_worker=args.gpus_per_worker or 0.0
    )


def _evaluation_options(args: argparse.Namespace):
    from ..evaluation.options import EvalOptions

    summary = SummaryOptions(
        min_foreground=args.min_foreground,
        rating_scale=(args.rating_scale[0], args.rating_scale[1]),
        rating_map=args.rating_map,
        bootstrap=args.bootstrap,
        seed=args.seed,
        mask_sources=args.mask_sources or (),
    )
    return EvalOptions(
        model=args.model,
        device=args.device,
        precision=args.precision,
        max_patches=args.max_patches,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        baselines=requested_baselines(args),
        folders=baseline_folders(args),
        summary=summary,
        shard=parse_shard(args.shard),
        fresh=args.fresh,
    )


def _plots(report, args: argparse.Namespace) -> None:
    """The PNG plots beside summary.json, drawn from the rows just written (which they never change)."""
    from ..evaluation.plots import write_plots

    written, note = write_plots(report.out_dir, report.records, report.summary)
    report.written += written
    if note:
        sys.stderr.write(note + "\n")


def _finish(report, args: argparse.Namespace) -> int:
    if report.summary is not None and not args.no_plots:
        _plots(report, args)
    if not args.quiet:
        for line in timing_lines(report):
            sys.stderr.write(line + "\n")
        sys.stderr.write("wrote " + ", ".join(report.written) + "\n")
    if report.summary is None:
        if not args.quiet:
            sys.stderr.write(
                f"shard done; when every shard is, run: python -m masc_core merge {os.path.dirname(report.out_dir)}\n"
            )
        return 0
    if args.json:
        json.dump(report.summary, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(summary_tables(report.summary))
    return 0


def _mask_source_folders(args: argparse.Namespace) -> None:
    """``--mask-sources``: parsed; each built-in source's checkpoint (its folder option, else its usual Hub id,
    downloaded now) resolved to a local folder before anything is scored."""
    from ..errors import MascModelError
    from ..evaluation.mask_study import parse_sources
    from ..models import checkpoints
    from ..models.clipseg import CLIPSEG_MODEL_ID
    from ..models.sam3 import SAM3_MODEL_ID, resolve_sam3

    if args.mask_sources is None:
        return
    args.mask_sources = parse_sources(args.mask_sources)
    for source, hub_id in (("clipseg", CLIPSEG_MODEL_ID), ("sam3", SAM3_MODEL_ID)):
        if source in args.mask_sources and not getattr(args, source):
            resolve = resolve_sam3 if source == "sam3" else checkpoints.resolve
            try:
                folder, _ = resolve(hub_id, what=f"--{source}")
            except MascModelError as error:
                raise MascModelError(f"--mask-sources {source}: {error}; or pass --{source} DIR") from None
            setattr(args, source, folder)


def run_eval(args: argparse.Namespace) -> int:
    from ..evaluation.run import evaluate

    from ..evaluation.plots import remove_plots

    _mask_source_folders(args)
    options = _evaluation_options(args)
    if options.shard is None and os.path.isdir(args.out_dir):
        remove_plots(args.out_dir)  # until this run's summary is written, older plots would show other rows
    progress = ProgressLine(enabled=not args.quiet)
    try:
        report = evaluate(args.manifest, args.out_dir, options, progress=progress, engine=_engine_options(args))
    finally:
        progress.close()
    return _finish(report, args)


def run_merge(args: argparse.Namespace) -> int:
    from ..evaluation.run import merge

    return _finish(merge(args.out_dir, args.shards), args)


def register(commands) -> None:
    """Register ``eval`` and ``merge`` on the CLI's sub-parsers."""
    _register_eval(commands)
    _register_merge(commands)


def _register_eval(commands) -> None:
    eval_parser = commands.add_parser("eval", help="score a manifest: results, summary, agreement with humans")
    eval_parser.add_argument(
        "manifest",
        help="CSV or JSONL: ref, ref_mask, out, out_mask, prompt, subject [, method, seed, id, human_cp, human_pf]",
    )
    add_model_options(eval_parser)
    eval_parser.add_argument(
        "--out-dir", required=True, metavar="DIR", help="folder for results.jsonl, results.csv, summary.json"
    )
    eval_parser.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="score only shard I of N (0-based; groups of rows sharing a reference)",
    )
    eval_parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=DEFAULT_CHUNK_SIZE,
        help=f"rows scored (and saved) together (default {DEFAULT_CHUNK_SIZE})",
    )
    add_min_foreground(
        eval_parser,
        "the paper's filter: drop rows whose output or reference mask covers less (default 0.05; 0 keeps all)",
    )
    eval_parser.add_argument(
        "--baselines",
        nargs="+",
        choices=metrics.BASELINE_CHOICES,
        default=(),
        help="same-backbone baselines: "
        + "; ".join(f"{spec.key} ({spec.description})" for spec in metrics.REGISTRY if spec.folder_option is None),
    )
    for spec in metrics.REGISTRY:
        if spec.folder_option:
            eval_parser.add_argument(spec.folder_option, default=None, metavar="DIR", help=spec.description)
    eval_parser.add_argument(
        "--mask-sources",
        default=None,
        metavar="A,B[,...]",
        help="the mask-source study (the paper's Tables 6-7): score every row under each source (clipseg, sam3: masks "
        "made "
        "by that segmenter, prompted with the row's subject, from --clipseg / --sam3 or the usual Hub id; manifest: "
        "the "
        "manifest's own masks) and compare them on the keys valid under all, deltas from the first",
    )
    _add_summary_options(eval_parser)
    _add_engine_options(eval_parser)
    eval_parser.add_argument(
        "--fresh", action="store_true", help="discard earlier results in the folder instead of resuming"
    )
    eval_parser.add_argument("--quiet", action="store_true", help="no progress line and no time report on stderr")
    eval_parser.add_argument("--json", action="store_true", help="print summary.json instead of tables")
    eval_parser.add_argument(
        "--no-plots", action="store_true", help="no PNG plots beside summary.json (they need matplotlib)"
    )
    eval_parser.set_defaults(run=run_eval)


def _add_summary_options(eval_parser) -> None:
    """How the human ratings are read and how the confidence intervals are drawn."""
    defaults = SummaryOptions()
    eval_parser.add_argument(
        "--rating-scale",
        nargs=2,
        type=float,
        default=list(defaults.rating_scale),
        metavar=("LOW", "HIGH"),
        help="the human rating scale metrics are mapped onto for alpha (default 0 4)",
    )
    eval_parser.add_argument(
        "--rating-map",
        choices=MAPPINGS,
        default=defaults.rating_map,
        help="metric -> rating scale before alpha (default minmax)",
    )
    eval_parser.add_argument(
        "--bootstrap",
        type=bootstrap_count,
        default=defaults.bootstrap,
        help="bootstrap resamples for the 95%% CIs, 0 to 100000 (default 1000; 0 = none)",
    )
    eval_parser.add_argument(
        "--seed", type=bootstrap_seed, default=defaults.seed, help="bootstrap seed, 0 to 2^32-1 (default 0)"
    )


def _add_engine_options(eval_parser) -> None:
    """Where the chunks are scored: this process, or actors on a Ray cluster."""
    engine = eval_parser.add_argument_group("engine", "where the chunks are scored (the result files are the same)")
    engine.add_argument(
        "--engine",
        choices=ENGINES,
        default="single",
        help="single: this process (default); ray: actors on a Ray cluster (pip install 'masc-comfyui[ray]')",
    )
    engine.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="ray: the cluster's head, HOST:PORT as 'ray start --head' prints it, or auto (default: start a local "
        "cluster)",
    )
    engine.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="ray: actors, each loading the models once (default: one per GPU with --gpus-per-worker, else one per "
        "CPU)",
    )
    engine.add_argument(
        "--gpus-per-worker", type=float, default=None, metavar="G", help="ray: GPUs per actor (default 0: CPU)"
    )


def _register_merge(commands) -> None:
    merge_parser = commands.add_parser("merge", help="merge the shard folders of an eval into one result")
    merge_parser.add_argument(
        "out_dir", metavar="DIR", help="the --out-dir the shards were run with (merged files go here)"
    )
    merge_parser.add_argument(
        "shards", nargs="*", metavar="SHARD_DIR", help="shard folders (default: DIR/shard-*-of-*)"
    )
    merge_parser.add_argument("--quiet", action="store_true", help="no report on stderr")
    merge_parser.add_argument("--json", action="store_true", help="print summary.json instead of tables")
    merge_parser.add_argument(
        "--no-plots", action="store_true", help="no PNG plots beside summary.json (they need matplotlib)"
    )
    merge_parser.set_defaults(run=run_merge)
