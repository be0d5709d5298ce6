"""A saved PNG's MaSC scores read back (``python -m masc_core read``): the ``masc`` entry found, checked, matched to
the file's own pixels and described.

The entry is found among the PNG's text chunks and checked (``saved_scores.parse_entry``) before any pixel is
decoded, so a file without one, or with a crafted one, costs a read of its chunk headers only. Pure: PIL and numpy.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from PIL import Image

from ..errors import MascInputError, first_line
from ..io.files import check_regular_file
from ..io.images import open_quietly, too_many_pixels
from ..io.png_text import PngTextError, find_text, image_only, is_png
from ..safe_text import printable
from .report import format_band, format_score, format_share, subject_line
from .saved_scores import ENTRY_KEY, MAX_ENTRY_BYTES, NO_ENTRY_HINT, UnreadableEntry, parse_entry, pixel_digest


def _pixels_digest(path: str) -> str:
    """The hash of a PNG's pixels (``pixel_digest`` of what Save Image wrote), refusing bombs before decoding."""
    stream, width, height = image_only(path)
    too_big = too_many_pixels(width, height)
    if too_big:
        raise UnreadableEntry(too_big)
    try:
        with Image.open(stream) as image:
            image.load()
            pixels = np.asarray(image)
    except Exception as exc:  # PIL reports damaged files with many types (OSError, SyntaxError, ValueError, zlib.error)
        raise UnreadableEntry(f"has image data PIL cannot decode ({printable(first_line(exc))})") from None
    return pixel_digest(pixels)


def read_png(path: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """The ``masc`` entry of a saved PNG and the hash of its pixels; a one-line MascInputError otherwise.

    The entry is found and checked (``parse_entry``) before any pixel is decoded, so a file without one,
    or with a crafted one, costs a read of its chunk headers only.
    """
    path = os.fspath(path)
    shown_path = printable(path)
    if os.path.isdir(path):
        raise MascInputError(
            f"'{shown_path}' is a folder: pass PNG files saved by ComfyUI's Save Image (a shell glob such as "
            "folder/*.png)"
        )
    check_regular_file(path, "", label=f"'{shown_path}'", hint="pass a PNG saved by ComfyUI's Save Image")
    if not os.path.isfile(path):
        raise MascInputError(f"'{shown_path}' does not exist: pass a PNG saved by ComfyUI's Save Image")
    try:
        with open(path, "rb") as handle:
            text = find_text(handle, ENTRY_KEY, MAX_ENTRY_BYTES)
            if text is None:
                handle.seek(0)
                if not is_png(handle):
                    kind = _kind_of(path)
                    if kind is None:
                        raise UnreadableEntry("is not an image PIL can read: pass a PNG saved by ComfyUI's Save Image")
                    raise UnreadableEntry(
                        f"is a {kind} file, not a PNG: MaSC scores travel in PNGs written by Save Image"
                    )
                raise UnreadableEntry(f"has no MaSC scores (no '{ENTRY_KEY}' text chunk): {NO_ENTRY_HINT}")
        entry = parse_entry(text)
        return entry, _pixels_digest(path)
    except (UnreadableEntry, PngTextError) as problem:
        raise MascInputError(f"'{shown_path}' {problem}") from None
    except OSError as exc:
        raise MascInputError(f"'{shown_path}' could not be read ({printable(first_line(exc))})") from None


def _kind_of(path: str) -> str | None:
    """The image format PIL reads the file as ('JPEG', ...), or None."""
    try:
        with open_quietly(path) as image:
            return printable(image.format)
    except Exception:  # anything PIL cannot identify
        return None


def matches(entry: dict[str, Any], digest: str) -> list[tuple[str, dict, dict]]:
    """(node id, node entry, image record) for every scored image whose pixels are the file's."""
    return [
        (node_id, node, image)
        for node_id, node in entry["nodes"].items()
        for image in node.get("images", [])
        if image.get("pixels") == digest
    ]


def _image_line(image: dict) -> str:
    seed = f"seed {image['seed']}" if image.get("seed") is not None else "seed unknown"
    cp = "CP" if image.get("subjects") is None else "cp_min"
    cp_band = f" {format_band(image['cp_band'])}" if image.get("cp_band") else ""
    pf_band = f" {format_band(image['pf_band'])}" if image.get("pf_band") else ""
    line = (
        f"#{image.get('index')}  {seed}  {cp} {format_score(image.get('cp'))}{cp_band}  PF "
        f"{format_score(image.get('pf'))}{pf_band}  "
        f"mask {format_share(image.get('mask')).strip()}  {printable(image.get('verdict') or '')}"
    )
    if image.get("cell") is not None:  # a sweep's image: its cell and its own prompt
        line += f"\n      cell {printable(image['cell'])}, prompt {printable(repr(image.get('prompt')))}"
    if image.get("subjects") is not None:
        figures = [dict(s, subject=printable(s["subject"])) for s in image["subjects"]]
        text = subject_line(figures, [printable(b) for b in image.get("blends", [])])
        line += "".join("\n      " + part for part in text.split("\n"))
    return line


def _node_header(node_id: str, node: dict) -> str:
    encoder = node.get("encoder") or {}
    model = f"{printable(encoder.get('model'))} ({printable(encoder.get('digest'))})" if encoder else "unknown encoder"
    stripped = node.get("stripped_prompt")
    ledger = node.get("ledger")
    replayed = f", {ledger['replayed']} replayed" if ledger and ledger.get("replayed") else ""
    spent = (
        f", {ledger['spent']} of {ledger['in_full']} model evaluations ({ledger['pruned']} pruned{replayed})"
        if ledger
        else ""
    )
    return (
        f"{printable(node.get('node'))} (node {printable(node_id)}): {model}, metric "
        f"{printable(node.get('metric_version'))}, "
        f"PF text {printable(repr(stripped))}{spent}"
    )


def describe(path: str, entry: dict[str, Any], digest: str, *, every: bool = False) -> str:
    """What a saved PNG says about its scores: this image's lines, then (with ``every`` or no match) every scored image.

    Every text from the file is passed through ``printable``: a crafted entry cannot send terminal control
    sequences or forge a line of this output.
    """
    found = matches(entry, digest)
    lines = [printable(path)]
    for node_id, node, image in found:
        lines.append(f"  this image: {_image_line(image)}")
        lines.append(f"    from {_node_header(node_id, node)}")
    if not found:
        lines.append(
            "  this file's pixels match no scored image (changed after scoring?): every score in its metadata follows"
        )
    if every or not found:
        for node_id, node in entry["nodes"].items():
            lines.append(f"  {_node_header(node_id, node)}")
            lines += [f"    {_image_line(image)}" for image in node.get("images", [])]
    return "\n".join(lines)
