"""Benchmark: what a clip costs. ``score_clip`` on a clip of N frames, every frame against every 4th.

``python -m benchmarks video --n 16`` uses a random-weight SigLIP2 of the real architecture (random weights cost what
real ones cost) and a clip of N distinct 832x480 frames (Wan's default size; a photo panned by a few pixels per frame),
a mask per frame. Each call uses a fresh encoder, so no cached feature helps. It reports the median seconds over
``--repeat`` runs and the forwards one call made: one vision forward per scored frame, plus the reference once and the
stripped prompt once, so the cost per frame is the cost of one image in MaSC Score.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from PIL import Image

from .bench import ensure_checkpoint
from .blend_rule import PHOTOS, _box, _photo
from .cases import add_cases_parser, cases_table, time_cases

WIDTH, HEIGHT = 832, 480
PROMPT = "a photo of sks dog running on the beach"


def _clip(count: int) -> tuple[np.ndarray, np.ndarray]:
    with Image.open(os.path.join(PHOTOS, "dog_01.jpg")) as image:
        wide = np.asarray(image.convert("RGB").resize((WIDTH + 4 * count, HEIGHT), Image.BICUBIC))
    frames = np.stack([wide[:, 4 * i : 4 * i + WIDTH] for i in range(count)])
    masks = np.zeros((count, HEIGHT, WIDTH), dtype=np.float32)
    masks[:, HEIGHT // 8 : HEIGHT - HEIGHT // 8, WIDTH // 4 : WIDTH - WIDTH // 4] = 1.0
    return frames, masks


def measure(args: argparse.Namespace) -> dict:
    from masc_core.scoring.clip import score_clip

    folder = args.checkpoint or ensure_checkpoint(args.workdir or tempfile.mkdtemp(prefix="masc-video-"), args.size)
    frames, masks = _clip(args.n)
    reference, reference_mask = _photo("dog_00"), _box(224, 0)

    def every(nth: int):
        def call(encoder):
            return score_clip(
                encoder,
                frames,
                reference=reference,
                reference_mask=reference_mask,
                masks=masks,
                prompt=PROMPT,
                subject="sks dog",
                every_nth_frame=nth,
                max_frames=1024,
            )

        return call

    results = {"checkpoint": os.path.basename(folder), "n": args.n, "repeat": args.repeat}
    results.update(time_cases(folder, args.device, args.repeat, {"every frame": every(1), "every 4th frame": every(4)}))
    for name in ("every frame", "every 4th frame"):
        scored = results[name]["forwards"]["images"] - 1  # less the reference
        results[name]["seconds_per_scored_frame"] = results[name]["seconds"] / scored
    return results


def table(results: dict) -> str:
    lines = cases_table(results, ("every frame", "every 4th frame"))
    for name in ("every frame", "every 4th frame"):
        lines.append(f"{name}: {results[name]['seconds_per_scored_frame']:.3f} s per scored frame")
    return "\n".join(lines)


def add_parser(commands) -> None:
    add_cases_parser(
        commands, "video", "what a clip costs: score_clip on N frames, every frame vs every 4th", measure, table
    )
