"""What the call-timing benchmarks share (``subjects``, ``bands``): their options, timing with fresh encoders, the
table."""

from __future__ import annotations

import statistics
import time

from .output import add_output_options, publish


def add_cases_parser(commands, name: str, help_text: str, measure, table) -> None:
    """Register a ``time_cases`` benchmark: the random-encoder and output options, then measure, print, publish."""

    def command(args) -> int:
        results = measure(args)
        publish(args, results, table(results))
        return 0

    parser = commands.add_parser(name, help=help_text)
    add_random_encoder_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=command)


def add_random_encoder_options(parser, *, what: str = "outputs per call") -> None:
    """The options of a benchmark that times calls on N outputs with a random-weight SigLIP2 (``subjects``,
    ``bands``)."""
    parser.add_argument(
        "--size", default="base", choices=("base", "so400m"), help="SigLIP2 architecture (random weights)"
    )
    parser.add_argument("--n", type=int, default=8, help=f"{what} (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (median reported)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ...")
    parser.add_argument(
        "--checkpoint", default=None, help="use this NaFlex checkpoint folder instead of building a random one"
    )
    parser.add_argument(
        "--workdir", default=None, help="where the checkpoint is built and kept (default: a temp folder)"
    )


def time_cases(folder: str, device: str, repeat: int, cases: dict) -> dict:
    """Per case (name -> ``call(encoder)``): the median seconds of ``repeat`` timed calls, each with a fresh encoder
    (no cached feature helps), after one untimed call (weights read, allocator warm); and the forwards one call made."""
    from masc_core import MascEncoder

    results = {}
    for name, call in cases.items():
        times, forwards = [], None
        for run in range(repeat + 1):
            encoder = MascEncoder.load(folder, device=device)
            started = time.perf_counter()
            call(encoder)
            if run:
                times.append(time.perf_counter() - started)
            forwards = dict(encoder.forward_counts)
        results[name] = {"seconds": statistics.median(times), "forwards": forwards}
    return results


def cases_table(results: dict, names) -> list[str]:
    """The lines of a ``time_cases`` table: a heading, then seconds and forwards per case."""
    width = max(len(n) for n in names)
    lines = [
        f"{results['checkpoint']}, N = {results['n']} outputs, median of {results['repeat']}",
        f"{'case':<{width}}  seconds  image forwards  text forwards",
    ]
    for name in names:
        entry = results[name]
        lines.append(
            f"{name:<{width}}  {entry['seconds']:>7.3f}  {entry['forwards']['images']:>14}  "
            f"{entry['forwards']['texts']:>13}"
        )
    return lines
