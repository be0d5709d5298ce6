"""Benchmark: ``eval`` in one process against ``eval --engine ray`` with 1 and 2 workers on this machine.

``python -m benchmarks ray-workers`` builds a manifest of synthetic images (``--groups``
references x ``--rows`` outputs each, box masks) and a random-weight SigLIP2 NaFlex checkpoint
of the real architecture (``--size``, default base: real compute cost, meaningless scores), then
runs, each as a fresh process with ``--fresh``:

- ``single``: ``eval`` in one process (torch's default threads: one per core);
- ``ray xN``: ``eval --engine ray --workers N`` on a local cluster started by the run, each
  actor with cores/N torch threads.

``--repeat`` rounds (default 2), every other one in the opposite order, so that a change in the
load of a shared machine does not favour one engine; the table gives medians and each run.

It reports the wall time of each command (imports, cluster start, model loading, scoring,
summary), the start-up the Ray runs report (cluster, actors, models: until the first worker
began scoring), images per second after start-up, and whether the three runs wrote the same
bytes (results.jsonl, results.csv, summary.json). Printed as a table; ``--json`` and
``--markdown`` save it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .bench import SIZES, child_env, ensure_checkpoint, machine, subject_mask, synthetic_image
from .output import add_output_options, publish

FILES = ("results.jsonl", "results.csv", "summary.json")
# Ray's dashboard process asks cloud metadata servers which cloud it runs on; a closed loopback
# proxy keeps that on this machine (the scorer itself makes no HTTP request).
QUIET_NETWORK = {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}


def write_manifest(folder: str, groups: int, rows: int, size: int = 384) -> str:
    """``groups`` references with ``rows`` distinct outputs each, box masks, one prompt per output."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "manifest.csv")
    lines = []
    for group in range(groups):
        names = {"ref": f"ref_{group}.png", "ref_mask": f"ref_{group}_mask.png"}
        Image.fromarray(synthetic_image(1000 * group, size)).save(os.path.join(folder, names["ref"]))
        Image.fromarray(subject_mask(1000 * group, size)).save(os.path.join(folder, names["ref_mask"]))
        for row in range(rows):
            index = 1000 * group + row + 1
            out, mask = f"out_{index}.png", f"out_{index}_mask.png"
            Image.fromarray(synthetic_image(index, size)).save(os.path.join(folder, out))
            Image.fromarray(subject_mask(index, size)).save(os.path.join(folder, mask))
            lines.append(
                {
                    **names,
                    "out": out,
                    "out_mask": mask,
                    "prompt": f"a photo of a dog, take {row}",
                    "subject": "dog",
                    "method": "m",
                    "seed": row % 4,
                }
            )
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    return path


def run_eval(manifest: str, checkpoint: str, out_dir: str, args: argparse.Namespace, workers: int | None) -> dict:
    """One ``eval`` as a fresh process: its wall time and its timing.json."""
    command = [
        sys.executable,
        "-m",
        "masc_core",
        "eval",
        manifest,
        "--model",
        checkpoint,
        "--device",
        "cpu",
        "--max-patches",
        str(args.max_patches),
        "--chunk-size",
        str(args.chunk_size),
        "--out-dir",
        out_dir,
        "--fresh",
        "--quiet",
        "--no-plots",
    ]
    if workers:
        command += ["--engine", "ray", "--workers", str(workers)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(**QUIET_NETWORK))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    with open(os.path.join(out_dir, "timing.json"), encoding="utf-8") as handle:
        timing = json.load(handle)
    seconds = timing["seconds"]
    return {
        "wall_seconds": wall,
        "startup_seconds": seconds.get("startup", seconds.get("loading_models")),
        "images_per_second": timing.get("images_per_second"),
        "rows": timing["rows_scored"],
        "threads": (timing.get("engine") or {}).get("cpus_per_worker"),
        "units": (timing.get("engine") or {}).get("units"),
        "siglip_images": timing["forwards"].get("siglip_images"),
        "peak_rss_mib": (timing.get("memory") or {}).get("peak_rss_mib"),
    }


def _bytes(folder: str) -> list[bytes]:
    result = []
    for name in FILES:
        with open(os.path.join(folder, name), "rb") as handle:
            result.append(handle.read())
    return result


def run(args: argparse.Namespace) -> dict:
    workdir = args.workdir or tempfile.mkdtemp(prefix="masc-ray-bench-")
    checkpoint = args.checkpoint or ensure_checkpoint(workdir, args.size)
    manifest = write_manifest(os.path.join(workdir, "manifest"), args.groups, args.rows)
    report = {
        "machine": machine(),
        "size": None if args.checkpoint else args.size,
        "max_patches": args.max_patches,
        "chunk_size": args.chunk_size,
        "groups": args.groups,
        "rows": args.groups * args.rows,
        "repeat": args.repeat,
    }
    configs = [None, *args.workers]
    runs: dict = {workers: [] for workers in configs}
    reference = None
    report["load_average_before"] = list(os.getloadavg())
    for round_ in range(args.repeat):
        # Every other round in the opposite order, so a change in the machine's load hits every engine alike.
        for workers in configs if round_ % 2 == 0 else configs[::-1]:
            out_dir = os.path.join(workdir, "single" if not workers else f"ray-{workers}")
            result = run_eval(manifest, checkpoint, out_dir, args, workers)
            if "error" not in result:
                written = _bytes(out_dir)
                reference = reference or written
                result["identical_to_single"] = written == reference
            runs[workers].append(result)
    report["load_average_after"] = list(os.getloadavg())
    report["runs"] = [_summary(workers, runs[workers]) for workers in configs]
    single = report["runs"][0].get("images_per_second")
    for result in report["runs"]:
        rate = result.get("images_per_second")
        result["speedup_after_startup"] = rate / single if rate and single else None
    return report


def _summary(workers: int | None, results: list[dict]) -> dict:
    """One configuration over its repeats: the median of each number, and every run."""
    good = [r for r in results if "error" not in r]
    summary = {"engine": "single" if not workers else "ray", "workers": workers or 1, "repeats": results}
    if not good:
        return dict(summary, error=results[0]["error"])
    for key in ("wall_seconds", "startup_seconds", "images_per_second", "peak_rss_mib"):
        values = [r[key] for r in good if r.get(key) is not None]
        summary[key] = statistics.median(values) if values else None
    summary.update(
        threads=good[0]["threads"],
        units=good[0]["units"],
        rows=good[0]["rows"],
        siglip_images=good[0]["siglip_images"],
        identical_to_single=all(r.get("identical_to_single") for r in results),
    )
    return summary


def _fmt(value, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _each(run: dict, key: str, digits: int) -> str:
    return ", ".join(_fmt(r.get(key), digits) for r in run["repeats"])


def markdown(report: dict) -> str:
    info = report["machine"]
    lines = [
        f"eval of {report['rows']} rows ({report['groups']} references), SigLIP2 {report['size'] or 'custom'} NaFlex "
        "(random weights), "
        f"{report['max_patches']} patches, chunks of {report['chunk_size']}; {info['cpu']}, {info['logical_cpus']} "
        "logical CPUs, "
        f"torch {info['torch']}, CPU; load average (1 min) {report['load_average_before'][0]:.1f} before, "
        f"{report['load_average_after'][0]:.1f} after",
        "",
        "| engine | workers x torch threads | wall (s), median (each run) | start-up (s) | images/s after start-up, "
        "median (each run) | vs single | same bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in report["runs"]:
        if "error" in run:
            lines.append(f"| {run['engine']} | {run['workers']} | error: {run['error']} | | | | |")
            continue
        threads = run["threads"] if run["threads"] else info["torch_threads"]
        speedup = f"{run['speedup_after_startup']:.2f}x" if run.get("speedup_after_startup") else "n/a"
        lines.append(
            f"| {run['engine']} | {run['workers']} x {threads} | {_fmt(run['wall_seconds'])} "
            f"({_each(run, 'wall_seconds', 1)}) | "
            f"{_fmt(run['startup_seconds'])} | {_fmt(run['images_per_second'], 2)} "
            f"({_each(run, 'images_per_second', 2)}) | "
            f"{speedup} | {'yes' if run.get('identical_to_single') else 'NO'} |"
        )
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser("ray-workers", help="eval in one process vs --engine ray with 1 and 2 workers")
    parser.add_argument(
        "--size", default="base", choices=SIZES, help="SigLIP2 size (random weights, real architecture)"
    )
    parser.add_argument("--checkpoint", default=None, help="use this NaFlex checkpoint folder instead of building one")
    parser.add_argument("--groups", type=int, default=3, help="references (groups of rows)")
    parser.add_argument("--rows", type=int, default=16, help="outputs per reference")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray worker counts to run")
    parser.add_argument("--max-patches", type=int, default=256, help="NaFlex patch budget")
    parser.add_argument("--chunk-size", type=int, default=8, help="eval's --chunk-size")
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs of each engine, in alternating order (medians reported)"
    )
    parser.add_argument(
        "--workdir", default=None, help="where the checkpoint, images and results go (default: a temp folder)"
    )
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    report = run(args)
    publish(args, report, markdown(report))
    return 0 if all(run.get("identical_to_single") for run in report["runs"]) else 1
