"""``python -m masc_core score --video CLIP``: a clip's frames against one subject, per frame and for the clip."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import MascInputError
from ..limits import EVERY_NTH_FRAME, MAX_FRAMES
from .options import add_threshold_options, whole_number_in


def add_video_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``score`` for a clip (docs/video.md)."""
    from ..selection.clip import DEFAULT_MAX_FRAMES

    group = parser.add_argument_group("a video clip instead of --out (docs/video.md)")
    group.add_argument(
        "--video",
        metavar="CLIP",
        default=None,
        help="the clip to score: a folder of frame images (in name order) or a video file (needs PyAV: pip install av)",
    )
    group.add_argument(
        "--video-masks",
        metavar="DIR",
        default=None,
        help="the subject's mask in each frame: a folder of masks named as the frames (000012.png for frame 12 of a "
        "video file); PF needs them",
    )
    group.add_argument(
        "--every-nth-frame",
        type=whole_number_in(EVERY_NTH_FRAME.low, EVERY_NTH_FRAME.high, "--every-nth-frame"),
        default=1,
        help="score frames 0, n, 2n, ... (default 1: every frame)",
    )
    group.add_argument(
        "--max-frames",
        type=whole_number_in(MAX_FRAMES.low, MAX_FRAMES.high, "--max-frames"),
        default=DEFAULT_MAX_FRAMES,
        help=f"score at most this many frames, spread over the clip, ends kept (default {DEFAULT_MAX_FRAMES})",
    )
    add_threshold_options(group, what="frames")
    group.add_argument("--strip", metavar="PNG", default=None, help="also write the scored frames' strip picture")


def check_video_arguments(args: argparse.Namespace) -> None:
    """One of --out and --video; the options that only go with one of them."""
    if args.video is None:
        if args.out is None:
            raise MascInputError("--out is required: give the generated images (or --video CLIP for a clip)")
        if args.video_masks is not None:
            raise MascInputError("--video-masks goes with --video: for images use --out-mask")
        return
    if args.out is not None or args.out_mask is not None:
        raise MascInputError("--video replaces --out and --out-mask: give either images or one clip")
    if args.subjects:
        raise MascInputError("--video scores one subject: --subjects is not available with it yet")
    if args.strip is not None and not args.strip.lower().endswith(".png"):
        raise MascInputError(f"--strip '{args.strip}': give the strip a .png name")


def _score(args: argparse.Namespace):
    from ..io.video import Clip, open_clip, read_frame_masks
    from ..scoring.clip import score_clip
    from ..selection.ranking import PassRules
    from .options import load_encoder, read_references

    references, reference_masks = read_references(args)
    clip = open_clip(args.video)
    masks = None
    if args.video_masks is not None:
        folder = args.video_masks
        masks = Clip(
            path=folder, names=clip.names, read=lambda idx: read_frame_masks(folder, [clip.names[i] for i in idx])
        )
    rules = PassRules(by="both" if masks is not None else "cp", min_cp=args.min_cp, min_pf=args.min_pf)
    encoder = load_encoder(args)
    scored = score_clip(
        encoder,
        clip,
        reference=references,
        reference_mask=reference_masks,
        masks=masks,
        prompt=args.prompt,
        subject=args.subject,
        every_nth_frame=args.every_nth_frame,
        max_frames=args.max_frames,
        rules=rules,
    )
    return encoder, clip, scored


def run_video(args: argparse.Namespace) -> int:
    """Score the clip; print the JSON document (``frames`` and ``clip``) or a table."""
    from ..metric.report import format_score, score_table

    encoder, clip, scored = _score(args)
    summary, batch = scored.clip, scored.batch
    if args.strip is not None:
        from PIL import Image

        from ..selection.clip import clip_strip

        Image.fromarray(clip_strip(scored.frames, summary)).save(args.strip)
    if args.json:
        frames = [
            dict(frame=index, name=clip.names[index], **score.to_dict())
            for index, score in zip(summary.frames, batch.scores)
        ]
        document = {"model": encoder.describe(), "video": args.video, "frames": frames, "clip": summary.to_dict()}
        if args.strip is not None:
            document["strip"] = args.strip
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    names = [f"{index} {clip.names[index]}" if os.path.isdir(args.video) else str(index) for index in summary.frames]
    sys.stdout.write(score_table(batch.scores, names) + "\n")
    worst = "-" if summary.worst_frame is None else str(summary.worst_frame)
    sys.stdout.write(
        f"clip: {len(summary.frames)} of {summary.total_frames} frames; CP mean {format_score(summary.cp)}, PF mean "
        f"{format_score(summary.pf)}; worst frame {worst} (CP {format_score(summary.worst_cp)}); CP drift "
        f"{format_score(summary.cp_drift)}\n"
    )
    failing = ", ".join(str(f) for f in summary.failing) or "none"
    sys.stdout.write(f"rules: {summary.rules}; failing frames: {failing}\n")
    if batch.scores[0].encoded_prompt is not None:
        sys.stdout.write(f"PF text: {batch.scores[0].encoded_prompt!r}\n")
    return 0
