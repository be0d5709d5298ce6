"""Benchmark: what a crafted video costs ``score --video`` before it is refused, against an honest one.

``python -m benchmarks crafted-videos`` writes, with ``masc_core.testing.videos``, the files the fourth safety review
used: a Motion-JPEG whose header says 64x64 while frames 1-4 decode to 10000x10000 (each over the pixel limit), an
AVI of 12 frames of 8000x8000 (9.2 GB as float32) whose header says 1 frame, and an honest clip of 5 frames of 64x64.
Each is scored by ``python -m masc_core score --video`` in a fresh interpreter with a tiny random-weight model; the
table gives the exit code, the first line of stderr, the seconds and the process's peak RSS (VmHWM: the interpreter,
torch and the model are most of it, about 600 MiB here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

from .output import set_command

PROMPT = "a photo of sks dog on the beach"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = (
    "import json, sys\n"
    "from masc_core.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
    "print(json.dumps({'peak_mib': int(hwm.split()[1]) / 1024}), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _cases(folder: str) -> list[tuple[str, str]]:
    from masc_core.testing.videos import mjpeg_video, patch_avi_frame_count

    honest = mjpeg_video(os.path.join(folder, "honest.avi"), [(64, 64)] * 5)
    over = mjpeg_video(os.path.join(folder, "over.avi"), [(64, 64)] + [(10_000, 10_000)] * 4)
    count = mjpeg_video(os.path.join(folder, "count.avi"), [(8_000, 8_000)] * 12, header=(8_000, 8_000))
    patch_avi_frame_count(count, 1)
    return [
        ("honest: 5 frames of 64x64", honest),
        ("header 64x64, frames 1-4 of 10000x10000", over),
        ("12 frames of 8000x8000, header says 1", count),
    ]


def measure(args) -> dict:
    from masc_core.testing import build_checkpoint

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        model = build_checkpoint(os.path.join(folder, "tiny"), naflex=True, seed=1)
        reference = os.path.join(folder, "reference.png")
        mask = os.path.join(folder, "reference_mask.png")
        Image.fromarray(np.full((64, 64, 3), 128, np.uint8)).save(reference)
        Image.fromarray(np.full((64, 64), 255, np.uint8)).save(mask)
        for label, video in _cases(folder):
            argv = ["score", "--model", model, "--ref", reference, "--ref-mask", mask, "--prompt", PROMPT]
            argv += ["--subject", "dog", "--video", video]
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True, timeout=args.timeout
            )
            seconds = time.perf_counter() - started
            lines = done.stderr.strip().splitlines()
            peak = json.loads(lines[-1])["peak_mib"] if lines and lines[-1].startswith('{"peak_mib"') else None
            said = lines[0] if len(lines) > 1 else "(nothing)"
            rows.append(
                {"case": label, "mb": os.path.getsize(video) / 2**20, "exit": done.returncode, "seconds": seconds,
                 "peak_mib": peak, "said": said[:160]}
            )  # fmt: skip
    return {"rows": rows}


def table(results: dict) -> str:
    lines = [
        "| video | file MB | exit | seconds | peak RSS MiB | first line |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results["rows"]:
        peak = "?" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        lines.append(f"| {r['case']} | {r['mb']:.1f} | {r['exit']} | {r['seconds']:.1f} | {peak} | {r['said']} |")
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser("crafted-videos", help="what a crafted video costs score --video before its refusal")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a case counts as a hang (600)")
    set_command(parser, measure, table)
