"""What the bounds on crafted or very large input cost: prune-report's memory on long logs, subject stripping's time.

``python -m benchmarks input-bounds`` measures, in this process:

- ``prune-report`` on a synthetic pruning study of N candidates (rounds of 16, previews at 3 steps, the default
  1,000 bootstrap resamples): the peak of memory Python and numpy allocated (``tracemalloc``), and the seconds.
  The bootstrap draws a block of resamples at a time (``agreement.resampled``), so the peak stays flat as N grows;
- ``prune-report`` as a user runs it (the .jsonl read, then the report, ``--bootstrap 0``) on 6 rows each carrying P
  previews at P distinct steps: 63 is the most MaSC writes for one candidate (a row with more is left out as crafted);
  the seconds stay linear in the file's size (each row's previews are read once, not once per step);
- stripping the most names a subject may have (``stripping.MAX_NAMES``) from the longest prompt a node takes
  (20,000 characters), once per distinct prompt of a batch: milliseconds per batch.

The tests hold the behaviour (the same numbers as one draw, the bounds refused in one line); this says what it costs.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import tracemalloc

import numpy as np

from .output import set_command


def study_rows(candidates: int, seed: int = 0) -> list[dict]:
    """Log rows of a synthetic pruning study: rounds of 16, previews at steps 3, 5 and 7 of 10 near the final CP."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(candidates):
        final = float(rng.uniform(0.2, 0.6))
        previews = [
            {
                "round": n // 16,
                "step": step,
                "steps": 10,
                "cp": final + float(rng.normal(0, 0.05 * (10 - step) / 10)),
                "pf": None,
            }
            for step in (3, 5, 7)
        ]
        rows.append({"time": "t", "run": "study", "metric_version": "x", "cp": final, "pf": None, "previews": previews})
    return rows


def previews_per_row(count: int, rows: int = 6) -> dict:
    """prune-report's read and report of ``rows`` rows with ``count`` previews each, at ``count`` distinct steps."""
    from masc_core.cli.options import read_logs
    from masc_core.errors import MascInputError
    from masc_core.evaluation.prune_study import prune_report

    rng = np.random.default_rng(count)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "study.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            for _ in range(rows):
                final = float(rng.uniform(0.2, 0.6))
                previews = [
                    {"round": 0, "step": step, "steps": count + 1, "cp": final + float(rng.normal(0, 0.05)), "pf": None}
                    for step in range(1, count + 1)
                ]
                row = {"time": "t", "run": "r", "metric_version": "x", "cp": final, "pf": None, "previews": previews}
                handle.write(json.dumps(row) + "\n")
        size = os.path.getsize(path)
        started = time.perf_counter()
        try:
            logs, source = read_logs([path])
            outcome = f"{len(prune_report(logs, keep=2, bootstrap=0, source=source)['steps'])} steps reported"
        except MascInputError:
            outcome = "refused in one line (every row left out: more previews than MaSC writes)"
        seconds = time.perf_counter() - started
    return {"rows": rows, "previews": count, "mb": size / 2**20, "seconds": seconds, "outcome": outcome}


def measure(args) -> dict:
    from masc_core.evaluation.prune_study import prune_report
    from masc_core.metric.stripping import MAX_NAMES, strip_each

    reports = []
    for candidates in args.candidates:
        rows = study_rows(candidates)
        tracemalloc.start()
        started = time.perf_counter()
        prune_report(rows, keep=4, best=1, bootstrap=args.bootstrap)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        reports.append(
            {"candidates": candidates, "bootstrap": args.bootstrap, "peak_mb": peak / 2**20, "seconds": seconds}
        )
    crafted = [previews_per_row(count) for count in args.previews]
    names = ", ".join(f"name{k}" for k in range(MAX_NAMES))
    prompt = ("a photo of name3 on the beach " * 700)[:20_000]
    started = time.perf_counter()
    strip_each([prompt] * args.batch, [names] * args.batch)
    strip_ms = 1000 * (time.perf_counter() - started)
    return {
        "prune_report": reports,
        "previews_per_row": crafted,
        "strip": {"names": MAX_NAMES, "prompt_chars": len(prompt), "batch": args.batch, "ms": strip_ms},
    }


def table(results: dict) -> str:
    lines = [
        "prune-report on a synthetic study (tracemalloc peak of what Python and numpy allocated)",
        "| candidates | bootstrap | peak MB | seconds |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['candidates']:,} | {r['bootstrap']} | {r['peak_mb']:.0f} | {r['seconds']:.1f} |"
        for r in results["prune_report"]
    ]
    lines += [
        "prune-report on 6 rows of P previews each (read and report, --bootstrap 0)",
        "| previews per row | file MB | seconds | outcome |",
        "| ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {r['previews']:,} | {r['mb']:.1f} | {r['seconds']:.2f} | {r['outcome']} |"
        for r in results["previews_per_row"]
    ]
    strip = results["strip"]
    lines.append(
        f"stripping {strip['names']} names from a {strip['prompt_chars']:,}-character prompt for a batch of "
        f"{strip['batch']}: {strip['ms']:.1f} ms (once per distinct prompt)"
    )
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "input-bounds", help="prune-report's memory on long logs; stripping the most names a subject may have"
    )
    parser.add_argument(
        "--candidates",
        type=int,
        nargs="+",
        default=[2_500, 10_000, 20_000],
        help="study sizes (default 2500 10000 20000)",
    )
    parser.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000, as prune-report)"
    )
    parser.add_argument(
        "--previews",
        type=int,
        nargs="+",
        default=[63, 1_000, 10_000, 20_000],
        help="previews per row of the crafted logs (default 63 1000 10000 20000)",
    )
    parser.add_argument("--batch", type=int, default=16, help="images sharing one prompt (default 16)")
    set_command(parser, measure, table)
