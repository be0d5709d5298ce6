"""Crafted inputs made here, byte by byte: PNGs a hostile or broken workflow could hand out, and torn logs.

Nothing from elsewhere: every file is built from Python and PIL in the test's own folder.

- ``png_with_chunks``: a real PNG whose text chunks (tEXt, zTXt, iTXt, before or after the image data)
  say whatever the test wants, including a ``masc`` entry of the wrong shape;
- ``decompression_bomb``: a tiny file whose header claims a huge image (so PIL's bomb guard or its
  decoder's limits are what stop it, never the memory);
- ``zlib_bomb_text``: a zTXt chunk that inflates far past any sane metadata;
- ``ENTRY_SHAPES``: ``masc`` entries that are valid JSON but not what MaSC writes;
- ``cuts``: every prefix of a log's bytes, the states a crash can leave.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
from PIL import Image
from PIL.PngImagePlugin import PngInfo

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(pixels: np.ndarray) -> bytes:
    """A plain PNG of ``pixels`` (uint8 [H,W,3]), written by PIL."""
    import io

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def split_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of each chunk of a PNG."""
    assert data.startswith(PNG_SIGNATURE)
    chunks, position = [], len(PNG_SIGNATURE)
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        chunks.append((kind, data[position + 8 : position + 8 + length]))
        position += 12 + length
    return chunks


def png_with_chunks(path, pixels: np.ndarray, before: list[bytes] = (), after: list[bytes] = ()) -> str:
    """A PNG of ``pixels`` with extra raw chunks before the first IDAT (``before``) and before IEND (``after``)."""
    chunks = split_chunks(png_bytes(pixels))
    out = [PNG_SIGNATURE]
    placed = False
    for kind, data in chunks:
        if kind == b"IDAT" and not placed:
            out += list(before)
            placed = True
        if kind == b"IEND":
            out += list(after)
        out.append(chunk(kind, data))
    with open(path, "wb") as handle:
        handle.write(b"".join(out))
    return str(path)


def text_chunk(key: str, value: str) -> bytes:
    return chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1", "replace"))


def itxt_chunk(key: str, value: str) -> bytes:
    """An uncompressed international text chunk (UTF-8), as PIL writes non-Latin-1 text."""
    return chunk(b"iTXt", key.encode("latin-1") + b"\0\0\0\0\0" + value.encode("utf-8"))


def ztxt_chunk(key: str, value: bytes) -> bytes:
    return chunk(b"zTXt", key.encode("latin-1") + b"\0\0" + zlib.compress(value, 9))


def zlib_bomb_text(key: str = "masc", inflated: int = 256 << 20) -> bytes:
    """A zTXt chunk of a few hundred kB that inflates to ``inflated`` bytes of spaces."""
    return ztxt_chunk(key, b" " * inflated)


def decompression_bomb(path, width: int = 40_000, height: int = 40_000) -> str:
    """A PNG header claiming width x height pixels (1.6 G by default) with one tiny image-data chunk."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    with open(path, "wb") as handle:
        handle.write(data)
    return str(path)


def saved_png(path, pixels: np.ndarray, entry) -> str:
    """A PNG as core Save Image writes it: the ``masc`` entry (any JSON value, or raw text) as a tEXt chunk."""
    info = PngInfo()
    info.add_text("masc", entry if isinstance(entry, str) else json.dumps(entry))
    Image.fromarray(pixels).save(path, pnginfo=info)
    return str(path)


def _image(**changes) -> dict:
    record = {
        "index": 0,
        "seed": 1,
        "cp": 0.5,
        "pf": 0.1,
        "mask": 0.3,
        "verdict": "accepted",
        "output": 0,
        "pixels": "0" * 16,
        "cp_undefined": None,
        "pf_undefined": None,
    }
    record.update(changes)
    return record


def _node(**changes) -> dict:
    node = {
        "node": "MaSCScore",
        "metric_version": "0.2.0",
        "encoder": {"model": "tiny", "digest": "abc"},
        "subject": "dog",
        "prompt": "a dog",
        "stripped_prompt": "a",
        "images": [_image()],
    }
    node.update(changes)
    return node


def entry(**node_changes) -> dict:
    return {"format": 1, "nodes": {"7": _node(**node_changes)}}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


ENTRY_SHAPES = {
    "nodes is a list": '{"format": 1, "nodes": []}',
    "a node is a number": '{"format": 1, "nodes": {"7": 3}}',
    "images is a string": json.dumps(entry(images="many")),
    "an image is a list": json.dumps(entry(images=[[1, 2]])),
    "cp is text": json.dumps(entry(images=[_image(cp="0.9")])),
    "cp is NaN": json.dumps(entry(images=[_image(cp=float("nan"))])),
    "pf is Infinity": json.dumps(entry(images=[_image(pf=float("inf"))])),
    "cp is a huge number": json.dumps(entry(images=[_image(cp=10**400)])),
    "seed is a bool": json.dumps(entry(images=[_image(seed=True)])),
    "index is a float": json.dumps(entry(images=[_image(index=1.5)])),
    "verdict is an object": json.dumps(entry(images=[_image(verdict={"a": 1})])),
    "encoder is a list": json.dumps(entry(encoder=["tiny"])),
    "encoder model is a number": json.dumps(entry(encoder={"model": 1, "digest": "x"})),
    "stripped prompt is a list": json.dumps(entry(stripped_prompt=["a"])),
    "deep nesting": '{"format": 1, "nodes": {"7": {"node": ' + nested(100_000) + "}}}",
    "format is a string": '{"format": "1", "nodes": {}}',
    "format is a bool": '{"format": true, "nodes": {}}',
    "not an object": "[1, 2, 3]",
}
"""Valid JSON (or Python's NaN/Infinity extension of it) that MaSC never writes, by what is wrong."""


def cuts(data: bytes, start: int = 0):
    """(offset, prefix) for every prefix of ``data`` from ``start``: a crash may stop a write at any byte."""
    for offset in range(start, len(data) + 1):
        yield offset, data[:offset]
