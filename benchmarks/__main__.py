"""``python -m benchmarks <benchmark> ...`` (run from the repository's root)."""

from __future__ import annotations

import argparse
import sys

from . import (
    bands,
    bench,
    blend_rule,
    crafted_videos,
    input_bounds,
    loop_overhead,
    masks,
    pruning,
    ray_workers,
    report_startup,
    sample_until_memory,
    split_drift,
    sweep_racing,
    stages,
    subjects,
    video,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="Benchmarks of MaSC for ComfyUI.")
    commands = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for module in (
        bench,
        loop_overhead,
        stages,
        ray_workers,
        blend_rule,
        subjects,
        bands,
        pruning,
        split_drift,
        input_bounds,
        crafted_videos,
        masks,
        report_startup,
        sample_until_memory,
        video,
        sweep_racing,
    ):
        module.add_parser(commands)
    args = parser.parse_args(argv)
    if not args.benchmark:
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
