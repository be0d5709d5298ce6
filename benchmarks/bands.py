"""Benchmark: what the mask-sensitivity bands cost. ``score_images(bands=True)`` against ``bands=False`` on N outputs.

``python -m benchmarks bands`` uses a random-weight SigLIP2 of the real architecture (random weights cost what real
ones cost) and N distinct outputs of one photo, each with a box mask. Each call uses a fresh encoder. It reports the
forwards each call made (the bands add none: CP re-aggregates Eq. 1's best matches, PF re-runs only the pooler, twice)
and the median seconds over ``--repeat`` runs, so whether the bands can be on by default is a measured call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from .bench import ensure_checkpoint
from .blend_rule import SIDE, _box, _photo
from .output import add_output_options, publish

PROMPT = "a photo of sks dog on the beach"


def measure(args: argparse.Namespace) -> dict:
    from masc_core import MascEncoder, score_images

    folder = args.checkpoint or ensure_checkpoint(args.workdir or tempfile.mkdtemp(prefix="masc-bands-"), args.size)
    photo = _photo("dog_01")
    outputs = [np.roll(photo, 4 * i, axis=1) for i in range(args.n)]  # distinct: the cache serves no output twice
    box = _box(SIDE, 0)
    results = {"checkpoint": os.path.basename(folder), "n": args.n, "repeat": args.repeat}
    for name, bands in (("without bands", False), ("with bands", True)):
        times, forwards = [], None
        for run in range(args.repeat + 1):  # the first run is untimed (weights read, allocator warm)
            encoder = MascEncoder.load(folder, device=args.device)
            started = time.perf_counter()
            score_images(encoder, outputs, reference=_photo("dog_00"), reference_mask=box, mask=box, prompt=PROMPT,
                         subject="sks dog", bands=bands)
            if run:
                times.append(time.perf_counter() - started)
            forwards = dict(encoder.forward_counts)
        results[name] = {"seconds": statistics.median(times), "forwards": forwards}
    base = results["without bands"]["seconds"]
    results["extra_share"] = (results["with bands"]["seconds"] - base) / base if base else None
    return results


def table(results: dict) -> str:
    lines = [f"{results['checkpoint']}, N = {results['n']} outputs, median of {results['repeat']}",
             "case             seconds  image forwards  text forwards"]
    for name in ("without bands", "with bands"):
        entry = results[name]
        lines.append(f"{name:<15}  {entry['seconds']:>7.3f}  {entry['forwards']['images']:>14}  {entry['forwards']['texts']:>13}")
    if results["extra_share"] is not None:
        lines.append(f"the bands add {100 * results['extra_share']:+.1f}% to the scoring call")
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser("bands", help="what the mask-sensitivity bands cost: score_images with and without bands")
    parser.add_argument("--size", default="base", choices=("base", "so400m"), help="SigLIP2 architecture (random weights)")
    parser.add_argument("--n", type=int, default=8, help="outputs per call (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (median reported)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ...")
    parser.add_argument("--checkpoint", default=None, help="use this NaFlex checkpoint folder instead of building a random one")
    parser.add_argument("--workdir", default=None, help="where the checkpoint is built and kept (default: a temp folder)")
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    results = measure(args)
    publish(args, results, table(results))
    return 0
