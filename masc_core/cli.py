"""Command line: ``python -m masc_core <command> ...``.

Commands: ``score`` (CP and PF for outputs against a reference). Every
command exits 0 on success, 2 with one line on stderr for bad input (a
missing or unreadable file, a file that is not an image, a bad model folder,
counts that do not match), 130 when interrupted; no traceback is printed
unless MASC_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable, Sequence

from .errors import MascError, MascInputError
from .report import score_table

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors reduced to one line."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="checkpoint folder (Hugging Face layout) or Hub id")
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--precision", default="fp32", choices=("auto", "fp32", "bf16", "fp16"),
        help="model precision (fp32 gives the paper package's numbers)",
    )
    parser.add_argument("--max-patches", type=int, default=None, help="NaFlex patch budget (default 1024)")
    parser.add_argument("--batch-size", type=int, default=8, help="images per vision forward (default 8)")


def add_pair_options(parser: argparse.ArgumentParser, *, out_mask_required: bool) -> None:
    parser.add_argument("--ref", nargs="+", required=True, metavar="REF", help="reference image(s): several views of one subject")
    parser.add_argument("--ref-mask", nargs="+", required=True, metavar="MASK", help="one foreground mask per reference")
    parser.add_argument("--out", nargs="+", required=True, metavar="OUT", help="output (generated) images")
    parser.add_argument(
        "--out-mask", nargs="+", required=out_mask_required, default=None, metavar="MASK",
        help="one foreground mask per output (PF needs them)",
    )
    parser.add_argument("--prompt", required=True, help="the generation prompt (may be empty)")
    parser.add_argument("--subject", required=True, help="subject name(s) to strip from the prompt; comma-separated")
    parser.add_argument(
        "--min-foreground", type=float, default=0.05,
        help="flag masks covering less than this share of the image (paper: 0.05)",
    )


def load_encoder(args: argparse.Namespace):
    from .encoder import MascEncoder

    return MascEncoder.load(
        args.model,
        device=args.device,
        precision=args.precision,
        max_num_patches=args.max_patches,
        batch_size=args.batch_size,
    )


def read_pairs(args: argparse.Namespace):
    """The files of --ref/--ref-mask/--out/--out-mask, read and count-checked."""
    from .images import load_image_file, load_mask_file

    if len(args.ref_mask) != len(args.ref):
        raise MascInputError(f"--ref-mask has {len(args.ref_mask)} files for {len(args.ref)} --ref images: give one mask per reference")
    if args.out_mask is not None and len(args.out_mask) != len(args.out):
        raise MascInputError(f"--out-mask has {len(args.out_mask)} files for {len(args.out)} --out images: give one mask per output")
    refs = [load_image_file(p, "--ref") for p in args.ref]
    ref_masks = [load_mask_file(p, "--ref-mask") for p in args.ref_mask]
    outs = [load_image_file(p, "--out") for p in args.out]
    out_masks = [load_mask_file(p, "--out-mask") for p in args.out_mask] if args.out_mask else None
    return refs, ref_masks, outs, out_masks


def write_heatmaps(directory: str, batch, refs, outs, out_paths) -> list[str]:
    """Save the three overlays per output as PNGs; return the paths."""
    from PIL import Image

    from . import heatmaps as render

    os.makedirs(directory, exist_ok=True)
    written = []
    maps = batch.heatmaps
    for i, path in enumerate(out_paths):
        stem = os.path.splitext(os.path.basename(path))[0]
        images = {
            f"{stem}.reference_match.png": render.reference_overlay(refs[0], maps.reference_match[i][0], maps.reference_keep[0]),
            f"{stem}.presence.png": render.presence_overlay(outs[i], maps.output_presence[i]),
            f"{stem}.background_attention.png": render.attention_overlay(
                outs[i], maps.background_attention[i], maps.output_hidden[i]
            ),
        }
        for name, pixels in images.items():
            target = os.path.join(directory, name)
            Image.fromarray(pixels).save(target)
            written.append(target)
    return written


def resources_report(encoder, *, load_seconds: float, score_seconds: float) -> dict:
    """What a run cost: seconds, forwards, the feature cache and peak memory (the ``resources`` of ``score --json``)."""
    from .resources import peak_memory

    return {
        "seconds": {"load": load_seconds, "score": score_seconds},
        "forwards": dict(encoder.forward_counts),
        "cache": encoder.image_cache.stats(),
        **peak_memory(encoder.device),
    }


def cmd_score(args: argparse.Namespace) -> int:
    from .scoring import score_images

    refs, ref_masks, outs, out_masks = read_pairs(args)
    started = time.perf_counter()
    encoder = load_encoder(args)
    loaded = time.perf_counter()
    batch = score_images(
        encoder,
        outs,
        reference=refs,
        reference_mask=ref_masks,
        mask=out_masks,
        prompt=args.prompt,
        subject=args.subject,
        heatmaps=bool(args.heatmaps),
        min_foreground=args.min_foreground,
    )
    scored = time.perf_counter()
    rows = []
    for i, item in enumerate(batch.scores):
        row = {"image": args.out[i], "mask": args.out_mask[i] if args.out_mask else None}
        row.update(item.to_dict())
        rows.append(row)
    heatmap_files = write_heatmaps(args.heatmaps, batch, refs, outs, args.out) if args.heatmaps else []
    if args.json:
        document = {
            "model": encoder.describe(),
            "references": [dict(r, image=args.ref[r["index"]]) for r in batch.to_dict()["references"]],
            "results": rows,
            "resources": resources_report(encoder, load_seconds=loaded - started, score_seconds=scored - loaded),
        }
        if heatmap_files:
            document["heatmaps"] = heatmap_files
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(score_table(batch.scores, [os.path.basename(p) for p in args.out]) + "\n")
        if rows and rows[0].get("encoded_prompt") is not None:
            sys.stdout.write(f"PF text: {rows[0]['encoded_prompt']!r}\n")
        for path in heatmap_files:
            sys.stdout.write(f"heatmap: {path}\n")
    return 0


COMMANDS["score"] = cmd_score


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m masc_core", description="MaSC: masked similarity metric for personalized text-to-image.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    score = commands.add_parser("score", help="CP and PF of outputs against a reference")
    add_model_options(score)
    add_pair_options(score, out_mask_required=False)
    score.add_argument("--heatmaps", metavar="DIR", default=None, help="also write heatmap PNGs into DIR")
    score.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    for register in _EXTRA_PARSERS:
        register(commands)
    return parser


# Other modules (rank, eval, bench) add their sub-parsers here.
_EXTRA_PARSERS: list[Callable] = []

from .mask_cli import add_mask_parser, cmd_mask  # noqa: E402 - registered once the list exists

_EXTRA_PARSERS.append(add_mask_parser)
COMMANDS["mask"] = cmd_mask


def _add_evaluation_parsers(commands) -> None:
    # rank, eval, merge; imported here because eval_cli imports this module.
    from .eval_cli import add_parsers

    add_parsers(commands, COMMANDS)


_EXTRA_PARSERS.append(_add_evaluation_parsers)


def _add_bench_parser(commands) -> None:
    from .bench import add_parser, command

    add_parser(commands)
    COMMANDS["bench"] = command


_EXTRA_PARSERS.append(_add_bench_parser)


def _quiet_libraries() -> None:
    """Keep third-party progress bars and advice off the CLI's stderr."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    _quiet_libraries()
    try:
        return COMMANDS[args.command](args)
    except MascError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, the details on request
        if os.environ.get("MASC_DEBUG"):
            raise
        from .checkpoint import first_line

        sys.stderr.write(f"error: internal error ({type(exc).__name__}: {first_line(exc)}); rerun with MASC_DEBUG=1 and report it\n")
        return 1
