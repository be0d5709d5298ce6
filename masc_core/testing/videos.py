"""Crafted videos for tests and benchmarks, written with PyAV: containers whose header says one thing and whose frames
decode to another.

- ``mjpeg_video``: a Motion-JPEG AVI or Matroska file muxed packet by packet from JPEGs PIL writes, so each frame may
  have its own size while the stream's header keeps the first one's (FFmpeg's own encoder would refuse that);
- ``patch_avi_frame_count``: an AVI whose header claims another number of frames than it holds.
"""

from __future__ import annotations

import io
import struct
from fractions import Fraction

from PIL import Image


def jpeg(width: int, height: int, color=(200, 120, 40)) -> bytes:
    """A flat-coloured JPEG of this size (small on disk however large it decodes)."""
    buffer = io.BytesIO()
    Image.new("L" if width * height > 10**7 else "RGB", (width, height), color[0]).save(buffer, "JPEG", quality=40)
    return buffer.getvalue()


def mjpeg_video(path, sizes: list[tuple[int, int]], *, header=(64, 64), fmt: str = "avi") -> str:
    """A Motion-JPEG video whose frame i is ``sizes[i]`` (width, height) and whose header says ``header``."""
    import av

    pictures = {size: jpeg(*size) for size in set(sizes)}
    with av.open(str(path), "w", format=fmt) as container:
        stream = container.add_stream("mjpeg", rate=8)
        stream.width, stream.height, stream.pix_fmt = header[0], header[1], "yuvj420p"
        stream.time_base = Fraction(1, 8)
        container.start_encoding()
        for index, size in enumerate(sizes):
            packet = av.Packet(pictures[size])
            packet.stream, packet.pts, packet.dts, packet.time_base = stream, index, index, Fraction(1, 8)
            container.mux(packet)
    return str(path)


def patch_avi_frame_count(path, frames: int) -> None:
    """Make an AVI's main header (avih) and stream header (strh) claim ``frames`` frames."""
    data = bytearray(open(path, "rb").read())
    struct.pack_into("<I", data, data.index(b"avih") + 8 + 16, frames)  # dwTotalFrames
    struct.pack_into("<I", data, data.index(b"strh") + 8 + 32, frames)  # dwLength
    with open(path, "wb") as handle:
        handle.write(bytes(data))
