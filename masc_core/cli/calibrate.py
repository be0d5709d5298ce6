"""``python -m masc_core calibrate``: the artist's picks (MaSC Pick, in a score log) against CP and PF, and thresholds from them."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..evaluation.agreement import DEFAULT_BOOTSTRAP, DEFAULT_SEED
from ..evaluation.calibration import DEFAULT_KEEP, calibrate, calibration_text
from ..evaluation.score_log import read_log
from ..safe_text import shown


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0 and at most 1")
    return value


def _bootstrap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{text} must be from 0 to 100000")
    return value


def register(commands) -> None:
    parser = commands.add_parser(
        "calibrate", help="how well CP and PF agree with your picks (MaSC Pick), and min_cp / min_pf suggested from them",
        description="Reads the score logs MaSC Log Scores wrote from MaSC Pick's scores. The candidates you were shown "
                    "are labelled picked or passed over; prints each score's ROC AUC against those labels, with a "
                    "bootstrap interval, and the highest min_cp and min_pf that keep --keep of what you picked.",
    )
    parser.add_argument("log", nargs="+", help="score logs (.jsonl or .csv) holding MaSC Pick's labels")
    parser.add_argument("--keep", type=_share, default=DEFAULT_KEEP, help="share of the picked candidates a suggested threshold keeps (default 0.95)")
    parser.add_argument("--cp-weight", type=float, default=1.0, help="weight of CP in the weighted sum (default 1, as rank_by both)")
    parser.add_argument("--pf-weight", type=float, default=1.0, help="weight of PF in the weighted sum (default 1)")
    parser.add_argument("--bootstrap", type=_bootstrap, default=DEFAULT_BOOTSTRAP, help="bootstrap resamples for the intervals (default 1000; 0 = none)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the bootstrap (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    rows = []
    for path in args.log:
        rows.extend(read_log(path))
    source = shown(os.path.basename(args.log[0])) if len(args.log) == 1 else f"{len(args.log)} logs"
    result = calibrate(
        rows, keep=args.keep, cp_weight=args.cp_weight, pf_weight=args.pf_weight, bootstrap=args.bootstrap, seed=args.seed,
        source=source,
    )
    if args.json:
        sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
    else:
        sys.stdout.write(calibration_text(result) + "\n")
    return 0
