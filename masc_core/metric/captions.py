"""Score captions on pictures: a dark band along the top with one line of white text.

Only the band is handed to PIL (a few dozen rows), not the whole picture:
the drawing is the same, the copies in and out of PIL are not paid for the
rows it never touches.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

BAND_ALPHA = 170
"""Opacity of the dark band (0..255)."""


@lru_cache(maxsize=16)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        return ImageFont.load_default()


def caption_layout(width: int) -> tuple[int, int, tuple[int, int]]:
    """(font size, band height, text origin) of a caption on a picture ``width`` pixels wide."""
    size = max(10, min(48, width // 22))
    return size, int(size * 1.5), (max(2, size // 3), max(1, size // 5))


def draw_caption(pixels: np.ndarray, text: str) -> np.ndarray:
    """Draw ``text`` on a dark band along the top of ``pixels`` (RGB uint8, written in place); returns it."""
    from PIL import Image, ImageDraw

    height, width = pixels.shape[:2]
    size, band, origin = caption_layout(width)
    font = _font(size)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    text_bottom = probe.textbbox(origin, text, font=font)[3]
    rows = min(height, max(band + 1, int(text_bottom) + 1))
    canvas = Image.fromarray(np.ascontiguousarray(pixels[:rows]))
    draw = ImageDraw.Draw(canvas, "RGBA")
    draw.rectangle([0, 0, width, band], fill=(0, 0, 0, BAND_ALPHA))
    draw.text(origin, text, fill=(255, 255, 255, 255), font=font)
    pixels[:rows] = np.asarray(canvas)
    return pixels


def with_caption(image: np.ndarray, text: str) -> np.ndarray:
    """A copy of ``image`` (RGB uint8) with ``text`` on a dark band along its top."""
    return draw_caption(np.array(image, dtype=np.uint8, copy=True), text)
