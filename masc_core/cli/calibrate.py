"""``python -m masc_core calibrate``: the artist's picks (MaSC Pick, in a score log) against CP and PF, and thresholds
from them."""

from __future__ import annotations

import argparse
import json
import sys

from ..evaluation.calibration import DEFAULT_KEEP, calibrate, calibration_text
from .options import add_log_report_options, read_logs


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0 and at most 1")
    return value


def register(commands) -> None:
    parser = commands.add_parser(
        "calibrate",
        help="how well CP and PF agree with your picks (MaSC Pick), and min_cp / min_pf suggested from them",
        description="Reads the score logs MaSC Log Scores wrote from MaSC Pick's scores. The candidates you were shown "
        "are labelled picked or passed over; prints each score's ROC AUC against those labels, with a "
        "bootstrap interval, and the highest min_cp and min_pf that keep --keep of what you picked.",
    )
    parser.add_argument("log", nargs="+", help="score logs (.jsonl or .csv) holding MaSC Pick's labels")
    parser.add_argument(
        "--keep",
        type=_share,
        default=DEFAULT_KEEP,
        help="share of the picked candidates a suggested threshold keeps (default 0.95)",
    )
    add_log_report_options(parser, "report")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    rows, source = read_logs(args.log)
    result = calibrate(
        rows,
        keep=args.keep,
        cp_weight=args.cp_weight,
        pf_weight=args.pf_weight,
        bootstrap=args.bootstrap,
        seed=args.seed,
        source=source,
    )
    sys.stdout.write((json.dumps(result, allow_nan=False) if args.json else calibration_text(result)) + "\n")
    return 0
