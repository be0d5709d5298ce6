"""What every benchmark does with its results: print the table, optionally keep it as JSON and Markdown."""

from __future__ import annotations

import argparse
import json
import sys


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--json FILE`` and ``--markdown FILE``: keep the results beside the printed table."""
    parser.add_argument("--json", dest="json_out", default=None, help="also write the results as JSON to this file")
    parser.add_argument("--markdown", default=None, help="also write the table as Markdown to this file")


def publish(args: argparse.Namespace, results, table: str) -> None:
    """Print ``table``; write ``results`` (JSON) and ``table`` to the files the options name, if any."""
    sys.stdout.write(table + "\n")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(table + "\n")


def set_command(parser: argparse.ArgumentParser, measure, table) -> None:
    """The output options, and the command: ``measure(args)`` to results, printed and kept by ``table``."""
    add_output_options(parser)

    def command(args) -> int:
        results = measure(args)
        publish(args, results, table(results))
        return 0

    parser.set_defaults(run=command)
