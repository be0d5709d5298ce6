"""Reading a clip's frames from disk: a folder of frame images, or a video file (with PyAV, an optional extra).

Both are checked before a frame is decoded (the path, the frame count, the frame size), and only the frames that are
scored are kept in memory: a clip of 10,000 frames scored every 8th frame holds at most ``max_frames`` frames.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import MascInputError, first_line
from .images import load_image_file, load_mask_file, too_many_pixels

FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
"""The image files a folder of frames (or of masks) is read from."""
VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".gif")
"""Video files read with PyAV."""
MAX_CLIP_FRAMES = 100_000
"""Largest clip read (frames); about an hour at 25 fps."""
NO_PYAV = "reading a video file needs PyAV (pip install av, or the pack's [video] extra); or give a folder of frames"


def _natural_key(name: str) -> list:
    """``frame_2`` before ``frame_10``: digits compare as numbers."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def _frame_files(folder: str, name: str) -> list[str]:
    files = [f for f in os.listdir(folder) if f.lower().endswith(FRAME_SUFFIXES) and not f.startswith(".")]
    if not files:
        raise MascInputError(
            f"{name} '{folder}' holds no frame images: put the frames in it as PNG, JPEG or WebP files"
        )
    if len(files) > MAX_CLIP_FRAMES:
        raise MascInputError(
            f"{name} '{folder}' holds {len(files):,} frames, more than the {MAX_CLIP_FRAMES:,} read: split the clip"
        )
    return sorted(files, key=_natural_key)


@dataclass
class Clip:
    """A clip on disk: its frames' names (in order) and a reader for the frames chosen."""

    path: str
    names: list[str]
    """Each frame's name: its file's stem in a folder, its index (``000012``) in a video file."""
    read: Callable[[list[int]], list[np.ndarray]]
    """The frames at these indices (in order), as [H, W, 3] uint8."""

    @property
    def count(self) -> int:
        return len(self.names)


def open_clip(path: str, name: str = "--video") -> Clip:
    """A folder of frames or a video file, checked; no frame decoded yet."""
    if not os.path.exists(path):
        raise MascInputError(f"{name} '{path}' does not exist: give a video file or a folder of frames")
    if os.path.isdir(path):
        files = _frame_files(path, name)
        return Clip(
            path=path,
            names=[os.path.splitext(f)[0] for f in files],
            read=lambda indices: [load_image_file(os.path.join(path, files[i]), f"{name} frame") for i in indices],
        )
    if not path.lower().endswith(VIDEO_SUFFIXES):
        raise MascInputError(
            f"{name} '{path}' is neither a folder of frames nor a video file ({', '.join(VIDEO_SUFFIXES)})"
        )
    count = _video_frame_count(path, name)
    return Clip(
        path=path, names=[f"{i:06d}" for i in range(count)], read=lambda indices: _video_frames(path, name, indices)
    )


def _open_container(path: str, name: str):
    try:
        import av
    except ImportError:
        raise MascInputError(f"{name} '{path}': {NO_PYAV}") from None
    try:
        container = av.open(path)
    except Exception as exc:  # PyAV raises its own error types per FFmpeg error code
        raise MascInputError(
            f"{name} '{path}' could not be opened as a video ({first_line(exc)}): check the file"
        ) from None
    if not container.streams.video:
        container.close()
        raise MascInputError(f"{name} '{path}' has no video stream: give a video file")
    stream = container.streams.video[0]
    too_big = too_many_pixels(stream.codec_context.width or 0, stream.codec_context.height or 0)
    if too_big:
        container.close()
        raise MascInputError(f"{name} '{path}' frames {too_big}: downscale the video")
    return container, stream


def _decoded(container, stream, name: str, path: str):
    try:
        yield from container.decode(stream)
    except Exception as exc:  # a damaged stream fails mid-way with FFmpeg's error
        raise MascInputError(f"{name} '{path}' could not be decoded ({first_line(exc)}): check the file") from None


def _video_frame_count(path: str, name: str) -> int:
    """The number of frames, counted by decoding (a container's own count is missing or approximate in many files)."""
    container, stream = _open_container(path, name)
    count = 0
    with container:
        for _ in _decoded(container, stream, name, path):
            count += 1
            if count > MAX_CLIP_FRAMES:
                raise MascInputError(f"{name} '{path}' has more than {MAX_CLIP_FRAMES:,} frames: split the clip")
    if count == 0:
        raise MascInputError(f"{name} '{path}' has no frames: give a video with at least one frame")
    return count


def _video_frames(path: str, name: str, indices: list[int]) -> list[np.ndarray]:
    wanted = set(indices)
    kept: dict[int, np.ndarray] = {}
    container, stream = _open_container(path, name)
    with container:
        for index, frame in enumerate(_decoded(container, stream, name, path)):
            if index in wanted:
                kept[index] = frame.to_ndarray(format="rgb24")
            if len(kept) == len(wanted):
                break
    return [kept[i] for i in indices]


def _stem_key(stem: str):
    """How a mask file is matched to its frame: by stem, and by number when both are numbers (``12`` = ``000012``)."""
    return int(stem) if stem.isdigit() else stem


def read_frame_masks(folder: str, frame_names: list[str], name: str = "--video-masks") -> list[np.ndarray]:
    """One mask per named frame, from files named as the frames (any of the frame suffixes)."""
    if not os.path.isdir(folder):
        raise MascInputError(f"{name} '{folder}' is not a folder: give the folder of masks named as the frames")
    by_stem = {}
    for file in _frame_files(folder, name):
        by_stem.setdefault(_stem_key(os.path.splitext(file)[0]), file)
    missing = [frame for frame in frame_names if _stem_key(frame) not in by_stem]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise MascInputError(
            f"{name} has no mask for frame {shown}: name each mask as its frame (e.g. {missing[0]}.png)"
        )
    return [load_mask_file(os.path.join(folder, by_stem[_stem_key(f)]), name) for f in frame_names]
