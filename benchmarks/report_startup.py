"""How fast the report commands start: ``python -m masc_core prune-report | calibrate | read`` on small inputs.

``python -m benchmarks report-startup`` runs each command ``--repeat`` times as a user runs it (a fresh interpreter,
``python -m masc_core ...``) on a 16-candidate pruning study, a 12-round pick log and a PNG saved with scores, and
reports the median wall time and the peak resident memory of the command's process (``ru_maxrss``). These commands
import neither torch, transformers nor scipy (tests/test_light_commands.py holds that); before, each imported the
whole model stack for a table of numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from .input_bounds import study_rows
from .output import set_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One child per measurement, so RUSAGE_CHILDREN's maximum is that command's own peak.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _inputs(folder: str) -> dict[str, list[str]]:
    """Each command's arguments on a small real input, written into ``folder``."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from masc_core.evaluation.score_log import append_rows, log_path, log_rows
    from masc_core.metric.saved_scores import add_node_entry, node_entry
    from masc_core.metric.scores import ImageScore, ReferenceInfo, ScoreBatch, ScoreContext
    from masc_core.selection.picks import PASSED_OVER, PICKED

    study = os.path.join(folder, "study.jsonl")
    with open(study, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in study_rows(16))
    rng = np.random.default_rng(0)
    picks = log_path(folder, "picks.jsonl")
    for run in range(12):
        cp = rng.uniform(0.3, 0.9, size=6)
        labels = [PICKED if i in np.argsort(-cp)[:2] else PASSED_OVER for i in range(6)]
        scores = [ImageScore(index=i, cp=float(cp[i]), pf=0.1, foreground_fraction=0.3) for i in range(6)]
        context = ScoreContext(node="MaSCPick", subject="dog", seeds=list(range(6)), labels=labels)
        batch = ScoreBatch(scores=scores, references=[ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context)
        append_rows(picks, log_rows(batch, time=f"t{run}", run=f"run{run}"))
    png = os.path.join(folder, "scored.png")
    extra = {}  # what ComfyUI's extra_pnginfo holds, written as core Save Image writes it
    scores = ScoreBatch(scores=[ImageScore(index=0, cp=0.5, pf=0.1)], references=[], context=ScoreContext(seeds=[7]))
    add_node_entry(extra, "1", node_entry(scores, node="MaSCScore"))
    info = PngInfo()
    for key, value in extra.items():
        info.add_text(key, json.dumps(value))
    Image.new("RGB", (64, 64)).save(png, pnginfo=info)
    return {"prune-report": [study], "calibrate": [picks, "--bootstrap", "100"], "read": [png]}


def measure(args) -> dict:
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for command, argv in _inputs(folder).items():
            seconds, peaks = [], []
            for _ in range(args.repeat):
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", _MEASURE, sys.executable, "-m", "masc_core", command, *argv],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                seconds.append(time.perf_counter() - started)
                code, peak_kb = done.stdout.split()
                peaks.append(int(peak_kb) / 1024)
            results.append(
                {
                    "command": command,
                    "exit": int(code),
                    "median_seconds": statistics.median(seconds),
                    "peak_mib": max(peaks),
                }
            )
    return {"repeat": args.repeat, "commands": results}


def table(results: dict) -> str:
    lines = [
        f"report commands, a fresh interpreter each ({results['repeat']} runs, median)",
        "| command | exit | seconds | peak RSS MiB |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['command']} | {r['exit']} | {r['median_seconds']:.2f} | {r['peak_mib']:.0f} |"
        for r in results["commands"]
    ]
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser("report-startup", help="start-up time and memory of prune-report, calibrate, read")
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    set_command(parser, measure, table)
