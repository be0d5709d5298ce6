"""Command line: ``python -m masc_core <command> ...``.

Commands, one module each: ``score`` (CP and PF of outputs against a
reference), ``mask`` (CLIPSeg subject masks), ``rank`` (best-of-N),
``eval`` and ``merge`` (a manifest scored into results and a summary),
``manifest`` (a manifest built from a benchmark's folders), ``read`` (the
scores MaSC nodes saved in PNGs), ``calibrate`` (thresholds from the artist's
picks in a score log), ``prune-report`` (a pruning study's log: how early a
candidate's fate shows), ``sweep`` (which LoRA file, step or strength keeps the
subject: cells scored at paired prompts and seeds).
Every command exits 0 on success, 2 with one line on stderr for bad input
(a missing or unreadable file, a file that is not an image, a bad model
folder, counts that do not match), 130 when interrupted; no traceback is
printed unless MASC_DEBUG=1 is set.

Each command module has ``register(commands)``, which adds its parser and
sets ``run`` to its handler; nothing imports this package but
``masc_core.__main__``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import importlib

from ..errors import MascError
from ..safe_text import printable
from .options import OneLineParser

COMMANDS = {
    "score": "score",
    "mask": "mask",
    "rank": "rank",
    "eval": "evaluate",
    "merge": "evaluate",
    "manifest": "manifest",
    "read": "read",
    "calibrate": "calibrate",
    "prune-report": "prune_report",
    "sweep": "sweep",
}
"""Each command and the module that declares it (its ``register(commands)`` adds its parser and sets ``run``)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or only ``command``'s (then only its module is imported, so
    ``read``, ``calibrate`` and ``prune-report`` start without torch or transformers)."""
    parser = OneLineParser(
        prog="python -m masc_core", description="MaSC: masked similarity metric for personalized text-to-image."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f".{name}", __name__).register(commands)
    return parser


def _quiet_libraries() -> None:
    """Keep third-party progress bars and advice off the CLI's stderr."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The command is the first word (the command line has no options before it); anything else (help, a typo)
    # gets the whole parser, which lists every command.
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    _quiet_libraries()
    try:
        return args.run(args)
    except MascError as exc:
        sys.stderr.write(f"error: {printable(exc)}\n")  # escaped when raised; again for errors made elsewhere
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, the details on request
        if os.environ.get("MASC_DEBUG"):
            raise
        from ..errors import first_line

        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: {printable(first_line(exc))}); rerun with MASC_DEBUG=1 and "
            "report it\n"
        )
        return 1
