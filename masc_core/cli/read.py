"""``python -m masc_core read``: print the MaSC scores stored in saved PNGs (``masc_core.metric.saved_png``)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import MascError
from ..metric.saved_png import describe, matches, read_png


def register(commands) -> None:
    parser = commands.add_parser(
        "read",
        help="print the MaSC scores saved in PNGs (written by Save Image after a MaSC node)",
        description="Print the scores MaSC nodes stored in PNGs saved by ComfyUI's Save Image: this image's CP, PF, "
        "verdict and seed, the encoder and the metric version. Exit 2 if any file has none.",
    )
    parser.add_argument("png", nargs="+", help="PNG files saved by ComfyUI")
    parser.add_argument(
        "--all", action="store_true", help="also list every image each MaSC node scored (all candidates)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per file (one per line)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.png:
        try:
            entry, digest = read_png(path)
        except MascError as exc:
            sys.stderr.write(f"error: {exc}\n")
            failed = True
            continue
        if args.json:
            found = [
                {"node_id": node_id, "node": node.get("node"), **image}
                for node_id, node, image in matches(entry, digest)
            ]
            # ensure_ascii (json's default) escapes every control and non-ASCII character: one safe line per file.
            sys.stdout.write(
                json.dumps({"file": path, "pixels": digest, "this_image": found, "masc": entry}, allow_nan=False) + "\n"
            )
        else:
            sys.stdout.write(describe(path, entry, digest, every=args.all) + "\n")
    return 2 if failed else 0
