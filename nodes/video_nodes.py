"""MaSC Score Video (a clip's frames scored against one subject, each exactly as MaSC Score scores an image) and MaSC
Video Options (how both Sample Until nodes score video candidates).

Converts the frames (an IMAGE batch [T,H,W,C] as core's video nodes pass them, or core's VIDEO: a file's frames read
by the pack's bounded reader, ``host.video_frames``) and the MASK batch (one per frame, as core's SAM3 Track to Mask
gives, or one for all), calls ``masc_core.scoring.clip.score_clip`` and formats its ``ClipScore``: the clip's mean CP
and PF, its worst frame, whether every scored frame passes the rules, a strip picture of the frames and a report.
Which frames are scored and what the clip's figures mean: docs/video.md.
"""

from __future__ import annotations

import torch

from ..masc_core.limits import EVERY_NTH_FRAME, MAX_FRAMES, TRIM_LATENT
from ..masc_core.scoring.clip import ScoredClip, frame_count, score_clip
from ..masc_core.selection.clip import DEFAULT_MAX_FRAMES, ClipChoice, clip_strip, frames_to_score
from . import host
from .convert import batch_value, comfy_masks, image_output, reference_views
from .declarations import MaSCNode, PROMPT_INPUT, REFERENCE_INPUTS, RULES_INPUT, SUBJECT_INPUT, int_input
from .metadata import HIDDEN_INPUTS, image_digests, record, scoring_context
from .types import MASC_SCORES, MASC_VIDEO, Output

EVERY_NTH_FRAME_INPUT = int_input(
    1,
    EVERY_NTH_FRAME.low,
    EVERY_NTH_FRAME.high,
    "Score every n-th frame from the first (one SigLIP2 forward per scored frame).",
)
MAX_FRAMES_INPUT = int_input(
    DEFAULT_MAX_FRAMES,
    MAX_FRAMES.low,
    MAX_FRAMES.high,
    "At most this many frames are scored, spread evenly over the clip, first and last kept.",
)


class MaSCScoreVideo(MaSCNode):
    """A video's frames scored as MaSC Score scores images: CP and PF per frame, the clip's mean, its worst frame and
    the frames that fail the rules. The frames come as an IMAGE batch or as a VIDEO."""

    SEARCH_ALIASES = ["video", "clip", "frames", "identity over time", "subject consistency", "wan", "vace"]
    OUTPUT_NODE = True
    FUNCTION = "score"
    OUTPUTS = (
        Output("FLOAT", "cp", "The clip's CP: the mean over the scored frames; NaN when undefined."),
        Output("FLOAT", "pf", "The clip's PF: the mean over the scored frames; NaN without masks."),
        Output("FLOAT", "worst_cp", "The lowest CP of any scored frame (what a viewer notices)."),
        Output("INT", "worst_frame", "The clip index of the frame with the lowest CP (-1 when none has a CP)."),
        Output("BOOLEAN", "passed", "True when every scored frame passes the rules."),
        Output(MASC_SCORES, "scores", "One row per scored frame, for Log Scores, Contact Sheet, Gate and Select Best."),
        Output("IMAGE", "strip", "The scored frames in order with their CP and PF; the worst frame framed red."),
        Output("STRING", "report", "The clip's figures and one line per scored frame."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **REFERENCE_INPUTS,
                "frames": (
                    "IMAGE,VIDEO",
                    {"tooltip": "The clip's frames: an IMAGE batch [T,H,W,C] (VAE Decode of a video), or a VIDEO."},
                ),
                "prompt": PROMPT_INPUT,
                "subject": SUBJECT_INPUT,
                "every_nth_frame": EVERY_NTH_FRAME_INPUT,
                "max_frames": MAX_FRAMES_INPUT,
            },
            "optional": {
                "mask": (
                    "MASK",
                    {
                        "tooltip": "The subject in each frame (white = subject): one per frame, e.g. SAM3 Track to "
                        "Mask or MaSC Auto Mask, or one for all. PF needs it."
                    },
                ),
                "rules": RULES_INPUT,
            },
            "hidden": dict(HIDDEN_INPUTS),
        }

    def score(self, **inputs):
        encoder, frames, subject = inputs["encoder"], inputs["frames"], inputs["subject"]
        every_nth_frame, max_frames, rules = inputs["every_nth_frame"], inputs["max_frames"], inputs.get("rules")
        references, reference_masks = reference_views(inputs["reference_image"], inputs["reference_mask"])
        if host.is_video(frames):
            frames = host.video_frames(frames, "frames")  # a file's frames read (bounded) by the pack, or held ones
        chosen = frames_to_score(frame_count(frames), every_nth_frame=every_nth_frame, max_frames=max_frames)
        masc = encoder.ready()
        scored: ScoredClip = score_clip(
            masc,
            frames,
            reference=references,
            reference_mask=reference_masks,
            masks=comfy_masks(inputs.get("mask")),
            prompt=inputs["prompt"],
            subject=subject,
            every_nth_frame=every_nth_frame,
            max_frames=max_frames,
            rules=rules.passing if rules is not None else None,
            progress=host.progress_callback(len(chosen) + len(references)),
        )
        clip, batch = scored.clip, scored.batch
        batch.context = scoring_context("MaSCScoreVideo", encoder, subject)
        batch.context.labels = [f"frame {f}" for f in clip.frames]
        record(
            inputs.get("extra_pnginfo"),
            inputs.get("unique_id"),
            batch,
            "MaSCScoreVideo",
            pixels=image_digests(frames[clip.frames] if isinstance(frames, torch.Tensor) else scored.frames),
        )
        strip = clip_strip(scored.frames, clip)
        report = clip.report(batch)
        result = (
            batch_value([clip.cp]),
            batch_value([clip.pf]),
            batch_value([clip.worst_cp]),
            clip.worst_frame if clip.worst_frame is not None else -1,
            clip.passed,
            batch,
            image_output([strip]),
            report,
        )
        return {"ui": {"images": host.save_previews([strip], "masc_video"), "text": [report]}, "result": result}


class MaSCVideoOptions(MaSCNode):
    """How MaSC Sample Until scores video candidates: which frames of each clip (as MaSC Score Video), and the reference
    frames WanVaceToVideo puts first, cut before decoding."""

    SEARCH_ALIASES = ["video options", "trim latent", "vace", "wan", "frames"]
    FUNCTION = "options"
    OUTPUTS = (
        Output(MASC_VIDEO, "video", "These settings, for MaSC Sample Until's and Sample Until (Custom)'s 'video'."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "trim_latent": int_input(
                    0,
                    TRIM_LATENT.low,
                    TRIM_LATENT.high,
                    "Latent frames cut from the start before decoding: connect WanVaceToVideo's "
                    "trim_latent (as core's Trim Video Latent).",
                ),
                "every_nth_frame": EVERY_NTH_FRAME_INPUT,
                "max_frames": MAX_FRAMES_INPUT,
            },
        }

    def options(self, trim_latent, every_nth_frame, max_frames):
        choice = ClipChoice(
            every_nth_frame=int(every_nth_frame), max_frames=int(max_frames), trim_latent=int(trim_latent)
        )
        return (choice.check(),)
