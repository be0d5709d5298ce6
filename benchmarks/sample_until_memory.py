"""MaSC Sample Until's peak memory as its budget grows: 32 vs 256 candidates of 512 x 512 pixels.

``python -m benchmarks sample-until-memory`` runs the node (imported as ComfyUI imports the pack) over its whole
budget, once per budget, each in a fresh process, with the tests' stand-in sampler and VAE (512 x 512 candidates), a
random-weight SigLIP2 of the real base architecture and a tiny CLIPSeg, on an unreachable threshold so every
candidate is sampled, scored and kept as a thumbnail. It reports the process's peak resident memory
(``ru_maxrss``), the size of the ``candidates`` output and its thumbnails' side.

What is measured is the node's own memory: the stand-in sampler holds no diffusion model, so in a ComfyUI server the
same difference sits on top of whatever the models take. The bound itself (``contact_sheet.CANDIDATE_PIXELS``) is
held by tests/test_sample_until_run.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

from .bench import ROOT
from .output import set_command


def _one(args) -> dict:
    """In this process: one run over ``args.one`` candidates; the peak RSS after it."""
    import resource

    from .bench import touch_weights
    from .loop_overhead import load_nodes, one_run, prepare_models

    models, name = prepare_models(args.workdir, "base")
    pack, harness = load_nodes(models)
    encoder = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"]().load(name, "cpu", "fp32", args.max_patches)[0]
    segmenter = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadAutoMaskModel"]().load("tiny-clipseg", "cpu", "fp32")[0]
    touch_weights(encoder.core.model)
    outputs = {}
    original = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"].sample

    def keep_outputs(self, **inputs):
        outputs["result"] = original(self, **inputs)["result"]
        return {"result": outputs["result"]}

    pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"].sample = keep_outputs
    run = one_run(
        pack, harness, encoder, segmenter, candidates=args.one, batch_size=args.batch_size, resolution=args.resolution
    )
    candidates = outputs["result"][7]
    return {
        "budget": args.one,
        "seconds": run["total"],
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "candidates_shape": list(candidates.shape),
        "candidates_mib": candidates.numel() * candidates.element_size() / 2**20,
    }


def measure(args) -> dict:
    if args.one:
        return _one(args)
    workdir = args.workdir or tempfile.mkdtemp(prefix="masc-memory-bench-")
    runs = []
    for budget in args.budgets:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks",
                "sample-until-memory",
                "--one",
                str(budget),
                "--workdir",
                workdir,
                "--resolution",
                str(args.resolution),
                "--batch-size",
                str(args.batch_size),
                "--max-patches",
                str(args.max_patches),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"budget {budget} failed: {done.stderr.strip().splitlines()[-1:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))  # the child's table is its result as JSON
    return {"resolution": args.resolution, "batch_size": args.batch_size, "runs": runs}


def table(results: dict) -> str:
    if "budget" in results:  # one child's result
        return json.dumps(results)
    lines = [
        f"MaSC Sample Until over its whole budget, {results['resolution']} x {results['resolution']} candidates, "
        f"rounds of {results['batch_size']} (stand-in sampler, random base SigLIP2, tiny CLIPSeg, CPU)",
        "| budget | peak RSS MiB | candidates output | output MiB | seconds |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    for r in results["runs"]:
        shape = " x ".join(str(n) for n in r["candidates_shape"])
        lines.append(
            f"| {r['budget']} | {r['peak_mib']:.0f} | {shape} | {r['candidates_mib']:.1f} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "sample-until-memory", help="MaSC Sample Until's peak memory for budgets 32 and 256 (512 x 512 candidates)"
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=[32, 256], help="max_candidates (default 32 256)")
    parser.add_argument("--resolution", type=int, default=512, help="candidate images are this many pixels square")
    parser.add_argument("--batch-size", type=int, default=4, help="candidates per round (default 4)")
    parser.add_argument("--max-patches", type=int, default=256, help="NaFlex patch budget (default 256)")
    parser.add_argument("--workdir", default=None, help="where checkpoints are built and kept (default: a temp folder)")
    parser.add_argument("--one", type=int, default=0, help=argparse.SUPPRESS)  # a child: one budget, in its process
    set_command(parser, measure, table)
