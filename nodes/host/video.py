"""Core's VIDEO type (Load Video, Create Video, a video model's output) as the IMAGE frames the pack scores.

A VIDEO from a file is decoded whole by core (``get_components``), so its size is checked first from what the
container says: the frame size against the pack's decompression-bomb guard, and frames x pixels against
``MAX_DECODED_BYTES``, the float32 IMAGE the decode would hold.
"""

from __future__ import annotations

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.io.images import too_many_pixels

MAX_DECODED_BYTES = 8 * 1024**3
"""Largest VIDEO decoded to frames here (float32 RGB): about 170 frames of 1080p or 860 of Wan's 832 x 480."""


def is_video(value) -> bool:
    """Whether ``value`` is one of core's VIDEO objects (``comfy_api``'s VideoInput: it has ``get_components``)."""
    return callable(getattr(value, "get_components", None))


def video_frames(video, name: str) -> torch.Tensor:
    """The frames of a VIDEO as an IMAGE [T,H,W,C], after its frame size and decoded size are checked."""
    width, height = (int(side) for side in video.get_dimensions())
    too_big = too_many_pixels(width, height)
    if too_big:
        raise MascInputError(f"{name}: the video's frames {too_big}: downscale the video")
    count = getattr(video, "get_frame_count", None)  # ComfyUI 0.33 and later; 0.3.64's VIDEO has none
    if count is not None:
        frames = int(count())
        decoded = frames * width * height * 3 * 4
        if decoded > MAX_DECODED_BYTES:
            raise MascInputError(
                f"{name}: the video has {frames:,} frames of {width}x{height}, {decoded / 1024**3:.1f} GiB decoded, "
                f"more than the {MAX_DECODED_BYTES / 1024**3:.0f} GiB read here: load fewer frames (Load Video's frame "
                "cap) or a shorter clip"
            )
    images = video.get_components().images
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[0] == 0:
        raise MascInputError(f"{name}: the video gave no frames: connect a video with at least one frame")
    return images
