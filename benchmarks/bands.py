"""Benchmark: what the mask-sensitivity bands cost. ``score_images(bands=True)`` against ``bands=False`` on N outputs.

``python -m benchmarks bands`` uses a random-weight SigLIP2 of the real architecture (random weights cost what real
ones cost) and N distinct outputs of one photo, each with a box mask. Each call uses a fresh encoder. It reports the
forwards each call made (the bands add none: CP re-aggregates Eq. 1's best matches, PF re-runs only the pooler, twice)
and the median seconds over ``--repeat`` runs, so whether the bands can be on by default is a measured call.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from .bench import ensure_checkpoint
from .cases import add_cases_parser, cases_table, time_cases
from .blend_rule import SIDE, _box, _photo

PROMPT = "a photo of sks dog on the beach"


def measure(args: argparse.Namespace) -> dict:
    from masc_core import score_images

    folder = args.checkpoint or ensure_checkpoint(args.workdir or tempfile.mkdtemp(prefix="masc-bands-"), args.size)
    photo = _photo("dog_01")
    outputs = [np.roll(photo, 4 * i, axis=1) for i in range(args.n)]  # distinct: the cache serves no output twice
    box = _box(SIDE, 0)
    reference = _photo("dog_00")

    def scored(bands):
        return lambda encoder: score_images(
            encoder,
            outputs,
            reference=reference,
            reference_mask=box,
            mask=box,
            prompt=PROMPT,
            subject="sks dog",
            bands=bands,
        )

    results = {"checkpoint": os.path.basename(folder), "n": args.n, "repeat": args.repeat}
    results.update(
        time_cases(folder, args.device, args.repeat, {"without bands": scored(False), "with bands": scored(True)})
    )
    base = results["without bands"]["seconds"]
    results["extra_share"] = (results["with bands"]["seconds"] - base) / base if base else None
    return results


def table(results: dict) -> str:
    lines = cases_table(results, ("without bands", "with bands"))
    if results["extra_share"] is not None:
        lines.append(f"the bands add {100 * results['extra_share']:+.1f}% to the scoring call")
    return "\n".join(lines)


def add_parser(commands) -> None:
    add_cases_parser(
        commands, "bands", "what the mask-sensitivity bands cost: score_images with and without bands", measure, table
    )
