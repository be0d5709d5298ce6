"""Scoring a clip: its chosen frames through ``score_images`` (exactly MaSC Score per frame), then summarised.

This project's extension for video (the paper scores images): ``masc_core.selection.clip`` says which frames are
scored and what the clip's CP, PF, worst frame and drift are. Frames come from memory (ComfyUI's IMAGE batch
[T,H,W,C]) or from disk (``masc_core.io.video.Clip``); only the chosen frames are converted or decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import MascInputError
from ..io.images import to_rgb_uint8
from ..metric.scores import ScoreBatch
from ..models.encoder import MascEncoder
from ..selection.clip import DEFAULT_MAX_FRAMES, ClipScore, frames_to_score, summarize_clip
from ..selection.ranking import PassRules
from .batch import score_images


@dataclass
class ScoredClip:
    """A scored clip: the summary, the frames' ScoreBatch (row i is frame ``clip.frames[i]``) and those frames."""

    clip: ClipScore
    batch: ScoreBatch
    frames: list[np.ndarray]
    """The scored frames as [H, W, 3] uint8, in ``clip.frames`` order."""


def _reader(value: Any, name: str) -> tuple[int, Callable[[list[int]], list]]:
    """(frame count, read(indices)) of a clip on disk (``Clip``), a batch [T,...] or a list of frames."""
    if hasattr(value, "read") and hasattr(value, "count"):
        return value.count, value.read
    if isinstance(value, (list, tuple)):
        return len(value), lambda indices: [value[i] for i in indices]
    shape = getattr(value, "shape", None)
    if shape is None:
        raise MascInputError(f"{name} is not a batch of frames: give an IMAGE batch [T,H,W,C]")
    if len(shape) == 3 and name.endswith("mask"):  # one [T,H,W] mask batch
        return shape[0], lambda indices: [value[i] for i in indices]
    if len(shape) == 4:
        return shape[0], lambda indices: [value[i] for i in indices]
    return 1, lambda indices: [value for _ in indices]


def frame_count(frames: Any) -> int:
    """How many frames a clip has (a ``Clip``, a batch [T,...] or a list of frames)."""
    return _reader(frames, "frames")[0]


def score_clip(
    encoder: MascEncoder,
    frames: Any,
    *,
    masks: Any = None,
    every_nth_frame: int = 1,
    max_frames: int = DEFAULT_MAX_FRAMES,
    rules: PassRules | None = None,
    mask_frames: Callable[[list[np.ndarray]], Any] | None = None,
    min_foreground: float | None = None,
    **scoring,
) -> ScoredClip:
    """CP and PF of a clip's chosen frames against one subject, and the clip's summary.

    frames: the clip ([T,H,W,C] batch, a list, or a ``Clip`` from ``masc_core.io.video.open_clip``).
    masks: the subject in the frames: one for all, or one per clip frame (a [T,H,W] batch, as core's SAM3 track
        gives, or a ``Clip`` of masks); None scores CP only (PF needs a background).
    every_nth_frame, max_frames: which frames are scored (``frames_to_score``).
    rules: what a frame must reach (``PassRules``); the clip passes when every scored frame does.
    mask_frames: instead of ``masks``, a segmenter's call: the chosen frames (RGB uint8) -> their masks.
    scoring: ``score_images``' keywords for each frame, as it names them: ``reference`` and ``reference_mask``
        (required), ``prompt`` (PF is scored when given), ``subject``, ``progress``, ``heatmaps``, ``cache_outputs``;
        ``min_foreground`` None keeps score_images' default.
    """
    if masks is not None and mask_frames is not None:
        raise ValueError("give masks or mask_frames, not both")
    total, read = _reader(frames, "frames")
    chosen = frames_to_score(total, every_nth_frame=every_nth_frame, max_frames=max_frames)
    chosen_masks = None
    if masks is not None:
        mask_count, read_masks = _reader(masks, "mask")
        if mask_count not in (1, total):
            raise MascInputError(
                f"mask has {mask_count} masks for a clip of {total} frames: give one mask per frame (as SAM3 Track "
                "to Mask gives) or one for all"
            )
        chosen_masks = read_masks(chosen if mask_count == total else [0] * len(chosen))
    pictures = [to_rgb_uint8(frame, f"frame {index}") for frame, index in zip(read(chosen), chosen)]
    if mask_frames is not None:
        chosen_masks = mask_frames(pictures)
    if min_foreground is not None:
        scoring["min_foreground"] = min_foreground
    batch = score_images(
        encoder, pictures, mask=chosen_masks, cp=True, pf=scoring.get("prompt") is not None, bands=True, **scoring
    )
    summary = summarize_clip(batch.scores, chosen, total, rules)
    return ScoredClip(clip=summary, batch=batch, frames=pictures)
