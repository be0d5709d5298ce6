"""``python -m masc_core mask``: subject masks from CLIPSeg or SAM3 (read from the checkpoint), written as PNG files.

One mask per image, named ``<image stem>_mask.png`` in ``--out-dir``, at the
image's size (with several ``--subject``: one per subject per image, ``<stem>_<subject>_mask.png``,
the output masks a ``--subjects`` file lists), white (255) on the subject and black (0) elsewhere: the files
``score --ref-mask/--out-mask`` expect. Nothing else is written. stdout gets
one line per mask with its share of the image, flagged when it is below the
paper's 5% filter.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import MascInputError
from ..defaults import DEFAULT_MASK_THRESHOLD
from ..defaults import SAM3_PIXEL_THRESHOLD
from .options import add_device_options, add_score_threshold_option


def register(commands) -> None:
    """Register the ``mask`` sub-command on the CLI's sub-parsers."""
    parser = commands.add_parser("mask", help="subject masks from CLIPSeg or SAM3 (text-prompted), as PNG files")
    parser.add_argument(
        "--model",
        required=True,
        help="a CLIPSeg or SAM3 checkpoint folder (Hugging Face layout; the family is read from its config.json) or "
        "Hub id: CIDAS/clipseg-rd64-refined, or facebook/sam3 (gated: accept its licence and log in first)",
    )
    parser.add_argument("--image", nargs="+", required=True, metavar="IMG", help="images to mask")
    parser.add_argument(
        "--subject",
        required=True,
        action="append",
        help="the subject's name, the segmenter's prompt; several names of one subject comma-separated ('sks dog, "
        "dog'). "
        "Repeat it for several subjects (--subject dog --subject cat): one mask per subject per image",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help=f"probability at or above which a pixel is the subject (default: {DEFAULT_MASK_THRESHOLD} for CLIPSeg, "
        f"{SAM3_PIXEL_THRESHOLD} for SAM3)",
    )
    add_score_threshold_option(parser)
    parser.add_argument(
        "--dilate", type=int, default=0, metavar="PIXELS", help="grow each mask by this many pixels (default 0)"
    )
    parser.add_argument(
        "--out-dir", required=True, metavar="DIR", help="folder for the <stem>_mask.png files (created if missing)"
    )
    add_device_options(parser)
    parser.add_argument("--batch-size", type=int, default=8, help="images per forward (default 8)")
    parser.set_defaults(run=run)


def subject_slug(label: str) -> str:
    """A subject's first name as a file-name part: lower case, runs of other characters as one '_'."""
    slug = "".join(c if c.isalnum() else "_" for c in label.lower())
    return "_".join(part for part in slug.split("_") if part) or "subject"


def mask_paths(images: list[str], out_dir: str, subject: str | None = None) -> list[str]:
    """``<out_dir>/<stem>_mask.png`` (``<stem>_<subject>_mask.png`` for one of several subjects) per image;
    two images with one stem would overwrite each other, so refuse."""
    seen: dict[str, str] = {}
    paths = []
    for image in images:
        stem = os.path.splitext(os.path.basename(image))[0]
        if subject is not None:
            stem = f"{stem}_{subject}"
        if stem in seen:
            raise MascInputError(
                f"--image '{seen[stem]}' and '{image}' would both be written as {stem}_mask.png: "
                "rename one or mask them with separate --out-dir runs"
            )
        seen[stem] = image
        paths.append(os.path.join(out_dir, f"{stem}_mask.png"))
    return paths


def _check_out_dir(out_dir: str) -> None:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise MascInputError(f"--out-dir '{out_dir}' is a file: pass a folder (it is created if missing)")


def _make_out_dir(out_dir: str) -> None:
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise MascInputError(
            f"--out-dir '{out_dir}' could not be created ({exc.strerror or exc}): pick a writable folder"
        ) from None


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from PIL import Image

    from ..io.images import load_image_file
    from ..defaults import MIN_FOREGROUND_FRACTION
    from ..metric.masks import check_dilation, check_threshold, foreground_fraction
    from ..models.segmenter_folders import load_segmenter
    from ..metric.stripping import subject_prompts

    # Everything that can be checked without the model is checked first.
    threshold = None if args.threshold is None else check_threshold(args.threshold, "--threshold")
    dilation = check_dilation(args.dilate, "--dilate")
    subjects = [subject_prompts(given, "--subject") for given in args.subject]
    slugs = [subject_slug(names[0]) for names in subjects] if len(subjects) > 1 else [None]
    if len(set(slugs)) != len(slugs):
        raise MascInputError(
            f"two --subject values would both be written as _{slugs[0]}_mask.png: give each subject its own first name"
        )
    targets = [mask_paths(args.image, args.out_dir, slug) for slug in slugs]
    images = [load_image_file(path, "--image") for path in args.image]
    _check_out_dir(args.out_dir)

    segmenter = load_segmenter(
        args.model,
        device=args.device,
        precision=args.precision,
        batch_size=args.batch_size,
        score_threshold=args.score_threshold,
    )
    written = []
    for names, paths in zip(subjects, targets):
        written += zip(paths, segmenter.masks(images, names, threshold=threshold, dilation=dilation))
    _make_out_dir(args.out_dir)  # only once there is something to write
    for target, mask in written:
        pixels = (mask.numpy() * 255).astype(np.uint8)
        try:
            Image.fromarray(pixels).save(target)
        except OSError as exc:
            raise MascInputError(
                f"--out-dir: '{target}' could not be written ({exc}): pick a writable folder"
            ) from None
        fraction = foreground_fraction(mask.numpy())
        note = "  below the paper's 5% filter" if fraction < MIN_FOREGROUND_FRACTION else ""
        sys.stdout.write(f"{target}  {100 * fraction:5.1f}%{note}\n")
    return 0
