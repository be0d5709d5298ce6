"""Reading a clip's frames: a folder of frame images, or a video (a file, or the bytes of one) decoded with PyAV.

A video is judged by what it decodes to, never by what its container's header claims: frames are counted by
decoding them, and each decoded frame's size is checked against the pixel limit (``images.too_many_pixels``) before
it is converted or kept; a stream that changes size part-way is refused naming the frame. Only the frames that are
scored are converted (RGB uint8) and kept, at most ``MAX_KEPT_FRAME_BYTES`` of them, counted as they are kept. The
command line and MaSC Score Video (core's VIDEO from a file) read through this one reader.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

from ..errors import MascInputError, first_line
from .files import check_regular_file
from .images import load_image_file, load_mask_file, too_many_pixels

FRAME_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
"""The image files a folder of frames (or of masks) is read from."""
VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".gif")
"""Video files read with PyAV."""
MAX_CLIP_FRAMES = 100_000
"""Largest clip read (frames); about an hour at 25 fps."""
MAX_KEPT_FRAME_BYTES = 2 * 1024**3
"""Largest total of the frames kept for scoring (RGB uint8): 2 GiB, about 340 frames of 1080p or 1,790 of Wan's
832 x 480 (the 8 GiB of float32 frames that ComfyUI's own decode of the same clip would hold)."""
NO_PYAV = "reading a video file needs PyAV (pip install av, or the pack's [video] extra); or give a folder of frames"

_ASCII_DIGITS = re.compile(r"([0-9]+)")


def _natural_key(name: str) -> list:
    """``frame_2`` before ``frame_10``: runs of ASCII digits compare as numbers, anything else (``²``, ``①``) as
    text."""
    return [(0, int(part), "") if i % 2 else (1, 0, part.lower()) for i, part in enumerate(_ASCII_DIGITS.split(name))]


def _stem_key(stem: str):
    """How a mask file is matched to its frame: by stem, and by number when both are ASCII numbers (``12`` =
    ``000012``)."""
    return int(stem) if _ASCII_DIGITS.fullmatch(stem) else stem


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
    for file in files:  # before any frame is decoded: a pipe named 3.png would block the read
        check_regular_file(os.path.join(folder, file), f"{name} '{folder}': the frame", shown_as=file)
    return sorted(files, key=_natural_key)


class _KeptBytes:
    """The running total of the frames a read keeps, refused past ``MAX_KEPT_FRAME_BYTES``."""

    def __init__(self, name: str, shown: str):
        self.name, self.shown, self.total = name, shown, 0

    def add(self, frame: np.ndarray, index: int) -> np.ndarray:
        self.check(self.total + frame.nbytes, f"the frames scored up to frame {index}")
        self.total += frame.nbytes
        return frame

    def check(self, total: int, what: str) -> None:
        if total > MAX_KEPT_FRAME_BYTES:
            raise MascInputError(
                f"{self.name} '{self.shown}': {what} hold {total / 1024**3:.1f} GiB, more than the "
                f"{MAX_KEPT_FRAME_BYTES / 1024**3:.0f} GiB kept here: lower max_frames, score fewer frames or "
                "downscale the clip"
            )


@dataclass
class Clip:
    """A clip: its frames' names (in order) and a reader for the frames chosen."""

    path: str
    """How the clip is named in messages (a path on the command line; a file's name in a node)."""
    names: list[str]
    """Each frame's name: its file's stem in a folder, its index (``000012``) in a video."""
    read: Callable[[list[int]], list[np.ndarray]]
    """The frames at these indices (in order), as [H, W, 3] uint8."""

    @property
    def count(self) -> int:
        return len(self.names)


def open_clip(path: str, name: str = "--video") -> Clip:
    """A folder of frames or a video file, checked; no frame converted yet (a video's frames are counted)."""
    if not os.path.exists(path):
        raise MascInputError(f"{name} '{path}' does not exist: give a video file or a folder of frames")
    if os.path.isdir(path):
        files = _frame_files(path, name)

        def read(indices: list[int]) -> list[np.ndarray]:
            kept = _KeptBytes(name, path)
            return [kept.add(load_image_file(os.path.join(path, files[i]), f"{name} frame"), i) for i in indices]

        return Clip(path=path, names=[os.path.splitext(f)[0] for f in files], read=read)
    check_regular_file(path, name)
    if not path.lower().endswith(VIDEO_SUFFIXES):
        raise MascInputError(
            f"{name} '{path}' is neither a folder of frames nor a video file ({', '.join(VIDEO_SUFFIXES)})"
        )
    return open_video(path, name)


@dataclass(frozen=True)
class _Video:
    source: Any
    """A path or a binary file object (core's VIDEO may hold a video's bytes in memory)."""
    name: str
    shown: str
    start: float
    duration: float


def open_video(
    source: str | BinaryIO, name: str, *, shown: str | None = None, start: float = 0.0, duration: float = 0.0
) -> Clip:
    """A video as a ``Clip``: its frames counted (and each one's size checked) by decoding, none converted yet.

    ``shown`` names it in messages (default: the path); ``start`` and ``duration`` (seconds; 0 = to the end) are
    the trim window ComfyUI's VIDEO carries, kept as core keeps it: frames whose time is in [start, start +
    duration).
    """
    video = _Video(source, name, os.fspath(source) if shown is None else shown, float(start), float(duration))
    count, frame_bytes = 0, 0
    for count, frame in enumerate(_checked_frames(video), start=1):
        frame_bytes = frame.width * frame.height * 3  # every frame's (a size change is refused)
        if count > MAX_CLIP_FRAMES:
            raise MascInputError(f"{name} '{video.shown}' has more than {MAX_CLIP_FRAMES:,} frames: split the clip")
    if count == 0:
        raise MascInputError(f"{name} '{video.shown}' has no frames: give a video with at least one frame")

    def read(indices: list[int]) -> list[np.ndarray]:
        # Refused before the second decode when the chosen frames cannot fit; counted again as they are kept.
        _KeptBytes(name, video.shown).check(len(indices) * frame_bytes, f"the {len(indices)} frames scored")
        return _read_frames(video, indices)

    return Clip(path=video.shown, names=[f"{i:06d}" for i in range(count)], read=read)


def _open_container(video: _Video):
    try:
        import av
    except ImportError:
        raise MascInputError(f"{video.name} '{video.shown}': {NO_PYAV}") from None
    if hasattr(video.source, "seek"):
        video.source.seek(0)
    try:
        container = av.open(video.source, mode="r")
    except Exception as exc:  # PyAV raises its own error types per FFmpeg error code
        raise MascInputError(
            f"{video.name} '{video.shown}' could not be opened as a video ({_reason(exc, video)}): check the file"
        ) from None
    if not container.streams.video:
        container.close()
        raise MascInputError(f"{video.name} '{video.shown}' has no video stream: give a video file")
    stream = container.streams.video[0]
    # Frame threading keeps a decoded frame in flight per thread before one is returned to be checked, so a file of
    # frames over the pixel limit would cost several of them, and how many would depend on the machine's load; slice
    # threading decodes one frame at a time, so what a crafted file costs before it is refused is one frame.
    stream.thread_type = "SLICE"
    return container, stream


def _reason(exc: BaseException, video: _Video) -> str:
    """FFmpeg's reason in one line, without the file's path (a node names a server's file by its name only)."""
    reason = getattr(exc, "strerror", None) or first_line(exc)  # PyAV's errors: the reason, then the file name
    if isinstance(video.source, str):
        for path in (os.path.abspath(video.source), video.source):
            reason = reason.replace(path, video.shown)
    return reason


def _in_window(frame, stream, video: _Video) -> int:
    """-1 before the trim window, 0 inside, 1 past it (as core's VideoFromFile decodes a trimmed VIDEO)."""
    if (video.start <= 0 and video.duration <= 0) or frame.pts is None or not stream.time_base:
        return 0
    start_pts = int(video.start / stream.time_base)
    if frame.pts < start_pts:
        return -1
    return 1 if video.duration > 0 and frame.pts >= int((video.start + video.duration) / stream.time_base) else 0


def _checked_frames(video: _Video) -> Iterator[Any]:
    """The decoded frames (PyAV's, not converted) of the trim window, each checked: its size against the pixel
    limit, and against the first frame's size."""
    container, stream = _open_container(video)
    size, index = None, 0
    with container:
        try:
            for frame in container.decode(stream):
                place = _in_window(frame, stream, video)
                if place < 0:
                    continue
                if place > 0:
                    break
                width, height = int(frame.width or 0), int(frame.height or 0)
                if width < 1 or height < 1:
                    raise MascInputError(
                        f"{video.name} '{video.shown}' frame {index} decodes to {width}x{height} pixels: check the file"
                    )
                too_big = too_many_pixels(width, height)
                if too_big:
                    raise MascInputError(f"{video.name} '{video.shown}' frame {index} {too_big}: downscale the video")
                if size is None:
                    size = (width, height)
                elif (width, height) != size:
                    raise MascInputError(
                        f"{video.name} '{video.shown}' changes frame size at frame {index} ({size[0]}x{size[1]} to "
                        f"{width}x{height}): re-encode the video at one size"
                    )
                yield frame
                index += 1
        except MascInputError:
            raise
        except Exception as exc:  # a damaged stream fails mid-way with FFmpeg's error
            raise MascInputError(
                f"{video.name} '{video.shown}' could not be decoded at frame {index} ({_reason(exc, video)}): check "
                "the file"
            ) from None


def _rgb(frame) -> np.ndarray:
    """A decoded frame as [H, W, 3] uint8, turned as it is displayed (as core turns it)."""
    pixels = frame.to_ndarray(format="rgb24")
    rotation = int(getattr(frame, "rotation", 0) or 0)
    if rotation:
        pixels = np.ascontiguousarray(np.rot90(pixels, k=int(round(rotation // 90)), axes=(0, 1)))
    return pixels


def _read_frames(video: _Video, indices: list[int]) -> list[np.ndarray]:
    wanted = set(indices)
    kept: dict[int, np.ndarray] = {}
    total = _KeptBytes(video.name, video.shown)
    for index, frame in enumerate(_checked_frames(video)):
        if index in wanted:
            kept[index] = total.add(_rgb(frame), index)
            if len(kept) == len(wanted):
                break
    missing = [i for i in indices if i not in kept]
    if missing:  # the file changed since its frames were counted
        raise MascInputError(
            f"{video.name} '{video.shown}' no longer has frame {missing[0]}: the video changed while it was read"
        )
    return [kept[i] for i in indices]


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
