"""``python -m masc_core prune-report``: read a pruning study's score log (``masc_core.evaluation.prune_study``)."""

from __future__ import annotations

import argparse
import json
import sys

from ..evaluation.prune_study import prune_report, prune_report_text
from ..selection.ranking import RANK_KEYS
from .options import add_log_report_options, positive_int, read_logs


def register(commands) -> None:
    parser = commands.add_parser(
        "prune-report",
        help="from a pruning study's log: how well previews part-way predict final scores, per step",
        description="Reads the .jsonl score logs of MaSC Sample Until runs with prune_study on. Per judged step: "
        "Spearman's "
        "rho of preview against final CP and PF, and in how many rounds keeping the best --keep previews kept "
        "the final best --best.",
    )
    parser.add_argument("log", nargs="+", help="score logs (.jsonl) of studies")
    parser.add_argument("--keep", type=positive_int, default=4, help="prune_keep to evaluate (default 4)")
    parser.add_argument(
        "--best", type=positive_int, default=1, help="how many of the final best must survive (default 1)"
    )
    parser.add_argument(
        "--by", choices=RANK_KEYS, default="cp", help="the ranking key, as the run's rank_by (default cp)"
    )
    add_log_report_options(parser, "table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    rows, source = read_logs(args.log)
    result = prune_report(
        rows,
        keep=args.keep,
        best=args.best,
        by=args.by,
        cp_weight=args.cp_weight,
        pf_weight=args.pf_weight,
        bootstrap=args.bootstrap,
        seed=args.seed,
        source=source,
    )
    sys.stdout.write((json.dumps(result, allow_nan=False) if args.json else prune_report_text(result)) + "\n")
    return 0
