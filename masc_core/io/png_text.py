"""Reading one text chunk of a PNG, and its image without the text, with bounds a crafted file cannot pass.

``python -m masc_core read`` takes PNGs from anywhere. Rather than let PIL
read every text chunk (its limits stop a file whose *other* chunks are big,
such as a large ComfyUI workflow, and it decodes the image to find chunks
placed after the image data), this walks the chunks by their lengths:

- ``find_text(handle, key, limit)``: the first text chunk (tEXt, zTXt, iTXt)
  with that keyword, before or after the image data, bounded at ``limit``
  bytes before and after inflation; other chunks are skipped unread;
- ``image_only(path)``: the file with its text chunks left out, plus the
  width and height from its header, so a caller can refuse a bomb before
  any pixel is decoded.

Pure: no model code. Problems are raised as ``PngTextError`` (a phrase that
follows the file's name in a one-line error).
"""

from __future__ import annotations

import io
import os
import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")


class PngTextError(Exception):
    """What is wrong with a PNG, worded to follow its name ("'x.png' has ...")."""


def _inflate(data: bytes, key: str, limit: int) -> bytes:
    """zlib data inflated to at most ``limit`` bytes (a bomb stops there, never fills the memory)."""
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(data, limit + 1)
    except zlib.error:
        raise PngTextError(f"has a '{key}' text chunk whose compressed data is damaged") from None
    if len(text) > limit or inflater.unconsumed_tail:
        raise PngTextError(f"has a '{key}' text chunk that inflates past {limit >> 20} MB")
    return text


def _chunk_text(kind: bytes, data: bytes, key: str, limit: int) -> str:
    """The text of a tEXt, zTXt or iTXt chunk's data (keyword and its NUL already removed)."""
    if kind == b"tEXt":
        return data.decode("latin-1")
    if kind == b"zTXt":
        return _inflate(data[1:], key, limit).decode("latin-1")
    compressed, rest = data[:1] == b"\1", data[2:]
    _language, _, rest = rest.partition(b"\0")
    _translated, _, text = rest.partition(b"\0")
    try:
        return (_inflate(text, key, limit) if compressed else text).decode("utf-8")
    except UnicodeDecodeError:
        raise PngTextError(f"has a '{key}' text chunk that is not UTF-8 text") from None


def is_png(handle) -> bool:
    """Whether the open file starts with the PNG signature (reads 8 bytes from where it is)."""
    return handle.read(8) == PNG_SIGNATURE


def find_text(handle, key: str, limit: int) -> str | None:
    """The first text chunk named ``key`` of the PNG open in ``handle`` (binary, at its start), or None."""
    if not is_png(handle):
        return None
    keyword = key.encode("latin-1") + b"\0"
    while True:
        header = handle.read(8)
        if len(header) < 8:
            return None  # the file ends early: no such chunk in what is there
        length, kind = struct.unpack(">I4s", header)
        if kind == b"IEND":
            return None
        if kind in TEXT_CHUNKS and length >= len(keyword):
            start = handle.tell()
            if handle.read(len(keyword)) == keyword:
                if length > limit:
                    raise PngTextError(
                        f"has a '{key}' text chunk of {length:,} bytes, more than the {limit >> 20} MB read here"
                    )
                data = handle.read(length - len(keyword))
                if len(data) < length - len(keyword):
                    raise PngTextError(f"ends inside its '{key}' text chunk (the file is cut short)")
                return _chunk_text(kind, data, key, limit)
            handle.seek(start)
        handle.seek(length + 4, os.SEEK_CUR)  # the chunk's data and CRC


def image_only(path: str) -> tuple[io.BytesIO, int, int]:
    """The PNG with its text chunks left out, and its width and height from the header chunk."""
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) < 33 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise PngTextError("has no PNG header chunk (the file is damaged)")
    width, height = struct.unpack(">II", data[16:24])
    kept, position = [data[:8]], 8
    while position + 8 <= len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        end = position + 12 + length
        if data[position + 4 : position + 8] not in TEXT_CHUNKS:
            kept.append(data[position:end])
        position = end
    return io.BytesIO(b"".join(kept)), width, height
