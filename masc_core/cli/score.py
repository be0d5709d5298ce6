"""``python -m masc_core score``: CP and PF of outputs against a reference, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import MascInputError
from ..metric.report import score_table
from .options import add_model_options, add_pair_options, score_pairs
from .score_video import add_video_options, check_video_arguments, run_video


def register(commands) -> None:
    parser = commands.add_parser("score", help="CP and PF of outputs against a reference")
    add_model_options(parser)
    add_pair_options(parser, out_mask_required=False, out_required=False)
    parser.add_argument("--heatmaps", metavar="DIR", default=None, help="also write heatmap PNGs into DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument(
        "--bands",
        action="store_true",
        help="also give each CP and PF its mask-sensitivity band: the score again with the masks eroded and dilated by "
        "one patch (no extra forward pass)",
    )
    add_video_options(parser)
    parser.set_defaults(run=run)


def heatmap_files(directory: str, out_path: str, views: int) -> dict[str, list[str]]:
    """The PNG paths of one output's heatmaps: one reference map per view (``.view<k>`` with several views)."""
    stem = os.path.join(directory, os.path.splitext(os.path.basename(out_path))[0])
    if views == 1:
        reference = [f"{stem}.reference_match.png"]
    else:
        reference = [f"{stem}.reference_match.view{k}.png" for k in range(views)]
    return {
        "reference": reference,
        "presence": [f"{stem}.presence.png"],
        "attention": [f"{stem}.background_attention.png"],
    }


def write_heatmaps(directory: str, batch, refs, outs, out_paths, device=None) -> list[str]:
    """Save the heatmaps of every output (the reference map once per reference view) as PNGs; return the paths."""
    from PIL import Image

    from ..metric.heatmaps import render_heatmaps

    os.makedirs(directory, exist_ok=True)
    pictures = render_heatmaps(batch, refs, outs, captions=False, device=device)
    views = pictures.views
    written = []
    for n, path in enumerate(out_paths):
        names = heatmap_files(directory, path, views)
        images = {
            **dict(zip(names["reference"], pictures.reference[n * views : (n + 1) * views])),
            names["presence"][0]: pictures.presence[n],
            names["attention"][0]: pictures.attention[n],
        }
        for target, pixels in images.items():
            Image.fromarray(pixels).save(target)
            written.append(target)
    return written


def resources_report(encoder, *, load_seconds: float, score_seconds: float) -> dict:
    """What a run cost: seconds, forwards, the feature cache and peak memory (the ``resources`` of ``score --json``)."""
    from ..resources import peak_memory

    return {
        "seconds": {"load": load_seconds, "score": score_seconds},
        "forwards": dict(encoder.forward_counts),
        "cache": encoder.image_cache.stats(),
        **peak_memory(encoder.device),
    }


def run_subjects(args: argparse.Namespace) -> int:
    """``score --subjects FILE``: each subject's CP, cp_min, cp_mean, the region matrix, blends and PF per output."""
    from ..metric.report import subjects_table
    from .subjects_file import score_subject_files, write_subject_heatmaps

    encoder, batch, load_seconds, score_seconds, subjects, outs = score_subject_files(
        args, heatmaps=bool(args.heatmaps)
    )
    written = (
        write_subject_heatmaps(
            directory=args.heatmaps,
            batch=batch,
            subjects=subjects,
            outs=outs,
            out_paths=args.out,
            device=encoder.device,
        )
        if args.heatmaps
        else []
    )
    if args.json:
        document = {
            "model": encoder.describe(),
            **batch.to_dict(),
            "results": [dict(image=args.out[i], **item.to_dict()) for i, item in enumerate(batch.scores)],
            "resources": resources_report(encoder, load_seconds=load_seconds, score_seconds=score_seconds),
        }
        if written:
            document["heatmaps"] = written
        json.dump(document, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(subjects_table(batch, [os.path.basename(p) for p in args.out]) + "\n")
    if batch.scores and batch.scores[0].encoded_prompt is not None:
        sys.stdout.write(f"PF text: {batch.scores[0].encoded_prompt!r}\n")
    for path in written:
        sys.stdout.write(f"heatmap: {path}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    check_video_arguments(args)
    if args.video is not None:
        if args.bands or args.heatmaps:
            raise MascInputError("--bands and --heatmaps are for images: with --video, --strip draws the frames")
        return run_video(args)
    if args.subjects:
        if args.bands:
            raise MascInputError(
                "--bands is for one subject: with --subjects each CP also depends on the other subjects' masks, not "
                "yet banded"
            )
        return run_subjects(args)
    encoder, batch, refs, outs, load_seconds, score_seconds = score_pairs(
        args, heatmaps=bool(args.heatmaps), bands=args.bands
    )
    rows = []
    for i, item in enumerate(batch.scores):
        row = {"image": args.out[i], "mask": args.out_mask[i] if args.out_mask else None}
        row.update(item.to_dict())
        rows.append(row)
    written = (
        write_heatmaps(
            directory=args.heatmaps, batch=batch, refs=refs, outs=outs, out_paths=args.out, device=encoder.device
        )
        if args.heatmaps
        else []
    )
    if args.json:
        document = {
            "model": encoder.describe(),
            "references": [dict(r, image=args.ref[r["index"]]) for r in batch.to_dict()["references"]],
            "results": rows,
            "resources": resources_report(encoder, load_seconds=load_seconds, score_seconds=score_seconds),
        }
        if written:
            document["heatmaps"] = written
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(score_table(batch.scores, [os.path.basename(p) for p in args.out], bands=args.bands) + "\n")
        if rows and rows[0].get("encoded_prompt") is not None:
            sys.stdout.write(f"PF text: {rows[0]['encoded_prompt']!r}\n")
        for path in written:
            sys.stdout.write(f"heatmap: {path}\n")
    return 0
