"""Core's VIDEO type (Load Video, Create Video, a video model's output) as the frames the pack scores.

A VIDEO backed by a file (core's ``VideoFromFile``: a path or a video's bytes) is never decoded whole by core here:
its source is read through the pack's own bounded reader (``masc_core.io.video.open_video``), which counts and sizes
every frame as it decodes it, whatever the container's header says, keeps only the frames scored, and names the file
by its name alone. A VIDEO whose frames are already in memory (``VideoFromComponents``: Create Video, a model's
output) gives its frames as they are. A VIDEO of any other kind cannot be bounded before it decodes: it is refused.
"""

from __future__ import annotations

import os

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.io.video import Clip, open_video
from .comfy import VideoFromComponents, VideoInput


def is_video(value) -> bool:
    """Whether ``value`` is one of core's VIDEO objects (``comfy_api``'s VideoInput: it has ``get_components``)."""
    return callable(getattr(value, "get_components", None))


def _file_source(video):
    """The file or bytes a VIDEO reads its frames from, or None when its class keeps no source of its own."""
    own = getattr(type(video), "get_stream_source", None)
    if own is None or (VideoInput is not None and own is VideoInput.get_stream_source):
        return None  # the base class would encode the frames to give a source: they are in memory already
    return video.get_stream_source()


def _holds_frames(video) -> bool:
    """Whether the VIDEO's frames are already in memory (``get_components`` decodes nothing)."""
    if VideoFromComponents is None:  # outside ComfyUI: the tests' stand-ins hold their frames
        return True
    return isinstance(video, VideoFromComponents)


def video_frames(video, name: str) -> torch.Tensor | Clip:
    """The frames of a VIDEO: a ``Clip`` read by the pack for a file, the IMAGE [T,H,W,C] it holds otherwise."""
    source = _file_source(video)
    if source is not None:
        shown = os.path.basename(source) if isinstance(source, str) else "the video's data"
        window = getattr(video, "get_active_trim_window", None)  # ComfyUI 0.33 and later: a trimmed VIDEO
        start, duration = window() if callable(window) else (0.0, 0.0)
        return open_video(source, name, shown=shown, start=start, duration=duration)
    if not _holds_frames(video):
        raise MascInputError(
            f"{name}: this VIDEO ({type(video).__name__}) cannot be sized before it is decoded: connect Load Video "
            "or Create Video, or the frames as an IMAGE batch"
        )
    images = video.get_components().images
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[0] == 0:
        raise MascInputError(f"{name}: the video gave no frames: connect a video with at least one frame")
    return images
