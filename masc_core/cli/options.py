"""What several commands share: the parser class, model and pair options, reading the pair files."""

from __future__ import annotations

import argparse
import math

from ..errors import MascInputError
from ..defaults import MIN_FOREGROUND_FRACTION, PRECISION_CHOICES


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors reduced to one line."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def whole_number_in(low: int, high: int, what: str):
    """argparse type: a whole number from ``low`` to ``high`` (``what`` names it in the docstring only)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} must be from {low} to {high}")
        return value

    parse.__doc__ = f"argparse type: {what}, a whole number from {low} to {high}."
    return parse


def number_in(low: float, high: float, hint: str = "", *, below_high: bool = False):
    """argparse type: a finite number from ``low`` to ``high`` (below it with ``below_high``); ``hint`` ends the
    message."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (math.isfinite(value) and low <= value and (value < high if below_high else value <= high)):
            upper = f"below {high:g}" if below_high else f"{high:g}"
            raise argparse.ArgumentTypeError(f"{text} must be from {low:g} to {upper}{' ' + hint if hint else ''}")
        return value

    return parse


def probability(text: str) -> float:
    """argparse type: a probability, a finite number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"{text} must be a number from 0 to 1")
    return value


MAX_WEIGHT = 100.0
"""The largest ranking weight, as the nodes' cp_weight / pf_weight widgets."""
MAX_SEED = 2**32 - 1


def ranking_weight(text: str) -> float:
    """argparse type: a ranking weight, a finite number from 0 to ``MAX_WEIGHT`` (as the nodes' widgets)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and 0.0 <= value <= MAX_WEIGHT):
        raise argparse.ArgumentTypeError(f"{text} must be a number from 0 to {MAX_WEIGHT:g}")
    return value


bootstrap_count = whole_number_in(0, 100_000, "a number of bootstrap resamples (0: no interval)")
bootstrap_seed = whole_number_in(0, MAX_SEED, "a bootstrap seed")


def add_log_report_options(parser: argparse.ArgumentParser, what: str) -> None:
    """What the commands reading score logs share: the weights of the sum, the bootstrap, its seed, --json."""
    from ..evaluation.agreement import DEFAULT_BOOTSTRAP, DEFAULT_SEED

    parser.add_argument(
        "--cp-weight",
        type=ranking_weight,
        default=1.0,
        help="weight of CP in the weighted sum, 0 to 100 (default 1, as rank_by both)",
    )
    parser.add_argument(
        "--pf-weight", type=ranking_weight, default=1.0, help="weight of PF in the weighted sum, 0 to 100 (default 1)"
    )
    parser.add_argument(
        "--bootstrap",
        type=bootstrap_count,
        default=DEFAULT_BOOTSTRAP,
        help="bootstrap resamples for the intervals (default 1000; 0 = none)",
    )
    parser.add_argument(
        "--seed",
        type=bootstrap_seed,
        default=DEFAULT_SEED,
        help="seed of the bootstrap, 0 to 2^32-1 (default 0): the same log gives the same report",
    )
    parser.add_argument("--json", action="store_true", help=f"print one JSON document instead of the {what}")


def read_logs(paths) -> tuple[list, str]:
    """Every row of the score logs at ``paths`` (``read_log``), and how a report names them."""
    import os

    from ..evaluation.score_log import read_log
    from ..safe_text import shown

    rows = []
    for path in paths:
        rows.extend(read_log(path))
    return rows, shown(os.path.basename(paths[0])) if len(paths) == 1 else f"{len(paths)} logs"


def add_device_options(parser: argparse.ArgumentParser, precision_help: str = "model precision") -> None:
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:N or mps")
    parser.add_argument("--precision", default="fp32", choices=PRECISION_CHOICES, help=precision_help)


def add_score_threshold_option(parser: argparse.ArgumentParser) -> None:
    """SAM3's instance score threshold (CLIPSeg has no instances and ignores it)."""
    from ..defaults import SAM3_SCORE_THRESHOLD

    parser.add_argument(
        "--score-threshold",
        type=probability,
        default=SAM3_SCORE_THRESHOLD,
        metavar="P",
        help="SAM3 only: instances scoring at least this are merged into the subject's mask (default "
        f"{SAM3_SCORE_THRESHOLD}, "
        "as core's SAM3 Detect)",
    )


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="checkpoint folder (Hugging Face layout) or Hub id")
    add_device_options(parser, "model precision (fp32 gives the paper package's numbers)")
    parser.add_argument("--max-patches", type=int, default=None, help="NaFlex patch budget, 16 to 4096 (default 1024)")
    parser.add_argument("--batch-size", type=int, default=8, help="images per vision forward (default 8)")


def add_min_foreground(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--min-foreground", type=float, default=MIN_FOREGROUND_FRACTION, help=help_text)


def add_threshold_options(parser: argparse.ArgumentParser, what: str = "outputs") -> None:
    """``--min-cp`` and ``--min-pf``: a ``PassRules``' thresholds (``rank``, ``score --video``)."""
    parser.add_argument(
        "--min-cp",
        type=float,
        default=None,
        help=f"{what} with a lower CP do not pass (with --subjects: the weakest subject's CP, cp_min)",
    )
    parser.add_argument("--min-pf", type=float, default=None, help=f"{what} with a lower PF do not pass")


def add_pair_options(parser: argparse.ArgumentParser, *, out_mask_required: bool, out_required: bool = True) -> None:
    parser.add_argument(
        "--ref",
        nargs="+",
        metavar="REF",
        help="reference image(s): several views of one subject (required without --subjects)",
    )
    parser.add_argument(
        "--ref-mask", nargs="+", metavar="MASK", help="one foreground mask per reference (required without --subjects)"
    )
    parser.add_argument("--out", nargs="+", required=out_required, metavar="OUT", help="output (generated) images")
    parser.add_argument(
        "--out-mask",
        nargs="+",
        required=out_mask_required,
        default=None,
        metavar="MASK",
        help="one foreground mask per output (PF needs them)",
    )
    parser.add_argument("--prompt", required=True, help="the generation prompt (may be empty)")
    parser.add_argument(
        "--subject", help="subject name(s) to strip from the prompt; comma-separated (required without --subjects)"
    )
    parser.add_argument(
        "--subjects",
        metavar="FILE",
        default=None,
        help="several subjects in each output: a JSON file of names, references, reference masks and output masks "
        "per subject (README, 'Several subjects'); replaces --ref, --ref-mask, --subject and --out-mask",
    )
    add_min_foreground(parser, "flag masks covering less than this share of the image (paper: 0.05)")


def load_encoder(args: argparse.Namespace):
    from ..models.encoder import MascEncoder

    return MascEncoder.load(
        args.model,
        device=args.device,
        precision=args.precision,
        max_num_patches=args.max_patches,
        batch_size=args.batch_size,
    )


def read_references(args: argparse.Namespace) -> tuple[list, list]:
    """The files of --ref and --ref-mask, read and count-checked (--subject required with them)."""
    from ..io.images import load_image_file, load_mask_file

    missing = [
        flag
        for flag, value in (("--ref", args.ref), ("--ref-mask", args.ref_mask), ("--subject", args.subject))
        if value is None
    ]
    if missing:
        raise MascInputError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required: give the subject's reference, its "
            "mask and its name (or --subjects FILE for several subjects)"
        )
    if len(args.ref_mask) != len(args.ref):
        raise MascInputError(
            f"--ref-mask has {len(args.ref_mask)} files for {len(args.ref)} --ref images: give one mask per reference"
        )
    return [load_image_file(p, "--ref") for p in args.ref], [load_mask_file(p, "--ref-mask") for p in args.ref_mask]


def read_pairs(args: argparse.Namespace):
    """The files of --ref/--ref-mask/--out/--out-mask, read and count-checked."""
    from ..io.images import load_image_file, load_mask_file

    refs, ref_masks = read_references(args)
    if args.out_mask is not None and len(args.out_mask) != len(args.out):
        raise MascInputError(
            f"--out-mask has {len(args.out_mask)} files for {len(args.out)} --out images: give one mask per output"
        )
    outs = [load_image_file(p, "--out") for p in args.out]
    out_masks = [load_mask_file(p, "--out-mask") for p in args.out_mask] if args.out_mask else None
    return refs, ref_masks, outs, out_masks


def score_pairs(args: argparse.Namespace, *, heatmaps: bool = False, bands: bool = False):
    """Read the pair files, load the encoder and score: (encoder, batch, refs, outs, load seconds, score seconds)."""
    import time

    from ..scoring.batch import score_images

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
        heatmaps=heatmaps,
        min_foreground=args.min_foreground,
        bands=bands,
    )
    return encoder, batch, refs, outs, loaded - started, time.perf_counter() - loaded
