"""``python -m masc_core rank``: best-of-N from files, ranked by CP, PF or both (``masc_core.selection.ranking``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import MascInputError
from ..selection.ranking import RANK_KEYS, PassRules
from .options import add_model_options, add_pair_options, add_threshold_options, positive_int, score_pairs


def register(commands) -> None:
    parser = commands.add_parser("rank", help="best-of-N: rank outputs by CP, PF or both")
    add_model_options(parser)
    add_pair_options(parser, out_mask_required=False)
    parser.add_argument(
        "--by", choices=RANK_KEYS, default="both", help="rank by CP, PF or their weighted sum (default both)"
    )
    parser.add_argument("--cp-weight", type=float, default=1.0, help="weight of CP in --by both (default 1)")
    parser.add_argument("--pf-weight", type=float, default=1.0, help="weight of PF in --by both (default 1)")
    parser.add_argument(
        "--top",
        type=positive_int,
        default=None,
        metavar="K",
        help="select the best K that pass (default: all that pass)",
    )
    add_threshold_options(parser)
    parser.add_argument(
        "--reject-small-masks",
        action="store_true",
        help="outputs whose mask is below --min-foreground do not pass (subject probably not rendered)",
    )
    parser.add_argument(
        "--reject-blends",
        action="store_true",
        help="with --subjects: outputs with a blend warning (a subject drawn twice, or two blended) do not pass",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument(
        "--contact-sheet",
        default=None,
        metavar="PNG",
        help="also write every output side by side, captioned with its scores and verdict, in rank order (selected "
        "ones framed)",
    )
    parser.add_argument(
        "--tile-size", type=positive_int, default=256, help="contact sheet tile width in pixels (64-1024; default 256)"
    )
    parser.set_defaults(run=run)


def _scored(args: argparse.Namespace):
    """(encoder, per-output ImageScores, output index -> why it cannot pass): one subject, or --subjects (CP =
    cp_min)."""
    if not args.subjects:
        if args.reject_blends:
            raise MascInputError("--reject-blends needs --subjects: a blend is one subject looking like another")
        encoder, batch, _, _, _, _ = score_pairs(args)
        return encoder, batch.scores, {}
    from .subjects_file import score_subject_files

    encoder, batch, _, _, _, _ = score_subject_files(args)
    reject = (
        {item.index: "blend: " + item.blends[0] for item in batch.scores if item.blends} if args.reject_blends else {}
    )
    return encoder, batch.image_scores(), reject


def _write_contact_sheet(args: argparse.Namespace, scores, ranking) -> None:
    """Every output as a captioned tile, in rank order, the selected ones framed
    (``masc_core.selection.contact_sheet``)."""
    from PIL import Image

    from ..selection.contact_sheet import Tile, check_tile, contact_sheet, thumbnail
    from ..io.files import replace_atomically
    from ..io.images import load_image_file

    check_tile(args.tile_size, len(scores), 0)  # before any image is read
    selected = set(ranking.selected)
    tiles = [
        Tile(
            index=item.index,
            cp=item.cp,
            pf=item.pf,
            mask=item.foreground_fraction,
            key=item.key,
            verdict="selected"
            if item.index in selected
            else "passed"
            if item.passed
            else "rejected: " + "; ".join(item.reasons),
            kept=item.index in selected,
            label=os.path.basename(args.out[item.index]),
        )
        for item in sorted(ranking.items, key=lambda i: i.index)
    ]
    images = [thumbnail(load_image_file(path, "--out"), args.tile_size) for path in args.out]
    sheet = contact_sheet(images, tiles, tile=args.tile_size, order="rank")
    folder = os.path.dirname(os.path.abspath(args.contact_sheet))
    if not os.path.isdir(folder):
        raise MascInputError(f"--contact-sheet '{args.contact_sheet}': the folder '{folder}' does not exist")
    replace_atomically(args.contact_sheet, lambda temporary: Image.fromarray(sheet).save(temporary, format="PNG"))


def run(args: argparse.Namespace) -> int:
    if args.contact_sheet is not None and not args.contact_sheet.lower().endswith(".png"):
        raise MascInputError(f"--contact-sheet '{args.contact_sheet}': give the sheet a .png name")
    encoder, scores, reject = _scored(args)
    rules = PassRules(
        by=args.by,
        cp_weight=args.cp_weight,
        pf_weight=args.pf_weight,
        min_cp=args.min_cp,
        min_pf=args.min_pf,
        reject_small_masks=args.reject_small_masks,
        on_blend="reject" if args.reject_blends else "report",
    )
    ranking = rules.rank(scores, top_k=args.top, reject=reject)
    if args.contact_sheet is not None:
        _write_contact_sheet(args, scores, ranking)
    if args.json:
        entries = [
            {
                "rank": position,
                "index": item.index,
                "image": args.out[item.index],
                "mask": args.out_mask[item.index] if args.out_mask else None,
                "cp": item.cp,
                "pf": item.pf,
                "key": item.key,
                "passed": item.passed,
                "selected": item.index in ranking.selected,
                "reasons": item.reasons,
                "foreground_fraction": item.foreground_fraction,
                "small_foreground": scores[item.index].small_foreground,
            }
            for position, item in enumerate(ranking.items, start=1)
        ]
        document = {
            "model": encoder.describe(),
            "by": ranking.by,
            "weights": {"cp": args.cp_weight, "pf": args.pf_weight} if ranking.by == "both" else None,
            "selected": [args.out[i] for i in ranking.selected],
            "ranking": entries,
            "encoded_prompt": scores[0].encoded_prompt if scores else None,
        }
        json.dump(document, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(ranking.table([os.path.basename(p) for p in args.out]) + "\n")
    if not ranking.selected:
        sys.stdout.write("no output passed: nothing selected\n")
    if scores and scores[0].encoded_prompt is not None:
        sys.stdout.write(f"PF text: {scores[0].encoded_prompt!r}\n")
    return 0
