"""``python -m masc_core manifest``: an evaluation manifest built from a benchmark's folders.

Sub-commands, one builder each (``masc_core.evaluation.builders``):
``dreambench`` (the DreamBench dataset + a folder of generated images),
``dreambench-multi`` (the benchmark card's subject pairs and triplets: DreamBench + a combinations file +
generated images), ``dreambench-plus`` (DreamBench++'s data, samples and human ratings) and
``pairs`` (identity pairs from photos grouped by subject). Everything is
checked before anything is written; masks are made (``--auto-masks``) or
found in ``--masks-dir``; the manifest is written last, in one step.
stdout gets what was written; stderr the notes (what was skipped, and why).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import MascInputError
from ..defaults import DEFAULT_MASK_THRESHOLD
from ..defaults import SAM3_PIXEL_THRESHOLD
from .options import add_device_options, add_score_threshold_option, positive_int


def _method_names(values: list[str] | None) -> dict[str, str]:
    names = {}
    for value in values or ():
        name, _, folder = value.partition("=")
        if not name.strip() or not folder.strip():
            raise MascInputError(
                f"--method '{value}' is not NAME=DIR (e.g. "
                "ip_adapter_vit_g_sdxl=ip_adapter_sdxl_vit_giant_scale0_6_...)"
            )
        names[os.path.basename(os.path.normpath(folder.strip()))] = name.strip()
    return names


def _build(args: argparse.Namespace, masks_dir: str):
    if args.benchmark == "dreambench":
        from ..evaluation.builders import dreambench

        return dreambench.build(
            args.dataset, args.outputs, masks_dir, token=args.token, first_view_only=args.first_view_only
        )
    if args.benchmark == "dreambench-multi":
        from ..evaluation.builders import dreambench_multi

        return dreambench_multi.build(
            args.dataset,
            args.combinations,
            args.outputs,
            masks_dir,
            token=args.token,
            first_view_only=args.first_view_only,
        )
    if args.benchmark == "dreambench-plus":
        from ..evaluation.builders import dreambench_plus

        return dreambench_plus.build(
            args.data, args.samples, masks_dir, ratings_dir=args.ratings, methods=_method_names(args.method)
        )
    from ..evaluation.builders import pairs

    return pairs.build(
        args.photos, masks_dir, cross_pairs=args.cross_pairs, seed=args.seed, per_subject=args.per_subject
    )


def _mask_progress(done: int, total: int) -> None:
    sys.stderr.write(f"masks: {done}/{total} made\n")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from ..evaluation.builders import AutoMaskOptions, ensure_masks
    from ..evaluation.builders.common import check_output, write_manifest

    output = check_output(args.output)
    masks_dir = os.path.abspath(args.masks_dir or os.path.join(os.path.dirname(output), "masks"))
    built = _build(args, masks_dir)
    options = AutoMaskOptions(
        segmenter=args.auto_masks,
        threshold=args.mask_threshold,
        dilation=args.mask_dilate,
        device=args.device,
        precision=args.precision,
        batch_size=args.batch_size,
        score_threshold=args.score_threshold,
    )
    report = ensure_masks(built.masks, masks_dir, options, progress=_mask_progress)
    write_manifest(built.rows, output)
    for note in built.notes:
        sys.stderr.write(f"note: {note}\n")
    sys.stdout.write(f"wrote {output}: {built.description}\n{report.line()}\n")
    sys.stderr.write(f"next: python -m masc_core eval {output} --model SIGLIP2 --out-dir RESULTS_DIR\n")
    return 0


def _add_mask_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="MANIFEST",
        help="the manifest to write (.csv or .jsonl); replaced if it exists",
    )
    parser.add_argument(
        "--masks-dir",
        default=None,
        metavar="DIR",
        help="where the masks are (and are made): default 'masks' beside the manifest",
    )
    parser.add_argument(
        "--auto-masks",
        default=None,
        metavar="SEGMENTER",
        help="make the missing masks with this CLIPSeg or SAM3 checkpoint (folder or Hub id; the family is read from "
        "its "
        "config.json), prompted with the subject's class; without it every mask must exist already",
    )
    parser.add_argument(
        "--mask-threshold",
        type=float,
        default=None,
        help=f"pixel probability threshold (default {DEFAULT_MASK_THRESHOLD} for CLIPSeg, {SAM3_PIXEL_THRESHOLD} "
        "for SAM3)",
    )
    add_score_threshold_option(parser)
    parser.add_argument(
        "--mask-dilate",
        type=int,
        default=0,
        metavar="PIXELS",
        help="grow each made mask by this many pixels (default 0)",
    )
    add_device_options(parser, "the segmenter's precision")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="images per segmenter forward (default 8)")
    parser.set_defaults(run=run)


def register(commands) -> None:
    """Register ``manifest`` and its sub-commands on the CLI's sub-parsers."""
    parser = commands.add_parser(
        "manifest", help="build an eval manifest from a benchmark's folders (DreamBench, DreamBench++, identity pairs)"
    )
    kinds = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True, parser_class=type(parser))
    _register_dreambench(kinds)
    _register_multi(kinds)
    _register_plus(kinds)
    _register_pairs(kinds)


def _register_dreambench(kinds) -> None:
    """``manifest dreambench``: DreamBench's dataset and a method's generated images."""
    dreambench = kinds.add_parser(
        "dreambench", help="DreamBench's dataset + generated images (<method>/<subject>/<prompt index>_<seed>.png)"
    )
    dreambench.add_argument(
        "dataset", metavar="DATASET_DIR", help="one folder per subject (00.jpg, ...) and prompts_and_classes.txt"
    )
    dreambench.add_argument(
        "outputs", metavar="OUTPUTS_DIR", help="generated images: <method>/<subject>/<prompt index 0-24>_<seed>.png"
    )
    dreambench.add_argument(
        "--token", default="sks", help="the identifier in the prompts ('a sks dog ...'; default sks; '' for none)"
    )
    dreambench.add_argument(
        "--first-view-only",
        action="store_true",
        help="use each subject's first view as the reference (default: all views)",
    )
    _add_mask_options(dreambench)


def _register_multi(kinds) -> None:
    """``manifest dreambench-multi``: DreamBench's subject pairs and triplets (a combinations file)."""
    multi = kinds.add_parser(
        "dreambench-multi",
        help="subject pairs and triplets: DreamBench + a combinations file + <method>/<a>+<b>/<prompt "
        "index>_<seed>.png",
    )
    multi.add_argument(
        "dataset",
        metavar="DATASET_DIR",
        help="DreamBench: one folder per subject (00.jpg, ...) and prompts_and_classes.txt",
    )
    multi.add_argument(
        "combinations",
        metavar="COMBINATIONS",
        help='JSON: {"combinations": [{"subjects": ["dog", "cat"], "prompts": ["a {0} and a {1} ..."]}, ...]}',
    )
    multi.add_argument(
        "outputs",
        metavar="OUTPUTS_DIR",
        help="generated images: <method>/<subject>+<subject>[+...]/<prompt index>_<seed>.png",
    )
    multi.add_argument(
        "--token",
        default="",
        help="an identifier before each class in the prompts ('a sks dog and a sks cat'; default none)",
    )
    multi.add_argument(
        "--first-view-only",
        action="store_true",
        help="use each subject's first view as its reference (default: all views)",
    )
    _add_mask_options(multi)


def _register_plus(kinds) -> None:
    """``manifest dreambench-plus``: DreamBench++'s data, samples and human ratings."""
    plus = kinds.add_parser("dreambench-plus", help="DreamBench++'s data, samples and human ratings")
    plus.add_argument("data", metavar="DATA_DIR", help="DreamBench++'s data folder (images/, captions/)")
    plus.add_argument("samples", metavar="SAMPLES_DIR", help="<method dir>/tgt_image/<collection id>/<i>_<j>.jpg")
    plus.add_argument(
        "--ratings",
        default=None,
        metavar="DIR",
        help="data_human_rating (merged_data/ or raw_data/): human_cp/human_pf per rater group",
    )
    plus.add_argument(
        "--method", action="append", metavar="NAME=DIR", help="the rating files' name for a samples dir (repeatable)"
    )
    _add_mask_options(plus)


def _register_pairs(kinds) -> None:
    """``manifest pairs``: Identity pairs from photos grouped by subject."""
    pairs = kinds.add_parser("pairs", help="identity pairs (same_subject 1/0) from photos grouped by subject")
    pairs.add_argument("photos", metavar="PHOTOS_DIR", help="one folder per subject holding its photos")
    pairs.add_argument(
        "--cross-pairs",
        type=int,
        default=None,
        metavar="N",
        help="cross-subject pairs to sample (default: as many as same-subject pairs)",
    )
    pairs.add_argument("--seed", type=int, default=0, help="seed of the cross-subject sample (default 0)")
    pairs.add_argument(
        "--per-subject",
        type=int,
        default=None,
        metavar="K",
        help="keep the first K photos of each subject (default: all)",
    )
    _add_mask_options(pairs)
