"""Benchmark: what a second subject costs. ``score_subjects`` with K = 2 against ``score_images`` (K = 1) on N outputs.

``python -m benchmarks subjects`` uses a random-weight SigLIP2 of the real architecture (random weights cost what
real ones cost). It scores N composite outputs (two photos side by side, a mask per half). Each call uses a fresh
encoder, so no cached feature helps. It reports the forwards each call made and the median seconds over
``--repeat`` runs:

- single-subject: one reference, N outputs;
- two subjects: two references, the same N outputs, per-subject CP, the region matrix, PF over the union.

The floor: one vision forward per distinct reference view and per output, one text forward per distinct stripped
prompt. Two subjects add one vision forward (the second reference) and a few patch-matching passes over cached
tokens (no forward).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from .bench import ensure_checkpoint
from .cases import add_cases_parser, cases_table, time_cases
from .blend_rule import SIDE, _box, _photo

PROMPT = "a photo of sks dog and a cat on the sofa"


def measure(args: argparse.Namespace) -> dict:
    from masc_core import Subject, score_images, score_subjects

    folder = args.checkpoint or ensure_checkpoint(args.workdir or tempfile.mkdtemp(prefix="masc-subjects-"), args.size)
    # N distinct outputs (the encoder's cache would serve repeated ones without a forward): each shifted by i pixels.
    pair = np.concatenate([_photo("dog_01"), _photo("cat_01")], axis=1)
    outputs = [np.roll(pair, 4 * i, axis=1) for i in range(args.n)]
    left, right, box = _box(2 * SIDE, 0), _box(2 * SIDE, SIDE), _box(SIDE, 0)
    dog, cat = Subject("sks dog, dog", _photo("dog_00"), box), Subject("cat", _photo("cat_00"), box)

    def single(encoder):
        return score_images(
            encoder,
            outputs,
            reference=dog.references,
            reference_mask=box,
            mask=np.maximum(left, right),
            prompt=PROMPT,
            subject="sks dog, dog",
        )

    def two(encoder):
        return score_subjects(encoder, outputs, subjects=[dog, cat], output_masks=[[left], [right]], prompt=PROMPT)

    results = {"checkpoint": os.path.basename(folder), "n": args.n, "repeat": args.repeat}
    results.update(time_cases(folder, args.device, args.repeat, {"single-subject": single, "two subjects": two}))
    return results


def table(results: dict) -> str:
    return "\n".join(cases_table(results, ("single-subject", "two subjects")))


def add_parser(commands) -> None:
    add_cases_parser(
        commands,
        "subjects",
        "what a second subject costs: score_subjects (K = 2) vs score_images (K = 1)",
        measure,
        table,
    )
