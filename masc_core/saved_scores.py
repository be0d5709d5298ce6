"""Scores that travel with a saved image: the ``masc`` entry of ComfyUI's PNG metadata, built and read back.

ComfyUI hands every node that asks for it (hidden input ``extra_pnginfo``)
one dict per queued prompt; core Save Image writes each of its keys as a PNG
text chunk (``PngInfo.add_text(key, json.dumps(value))``). MaSC nodes add
the key ``masc``::

    {"format": 1,
     "nodes": {"<node id>": {"node": "MaSCSampleUntil", "metric_version": "0.1.0",
                             "encoder": {"model": "<folder name>", "digest": "<12 hex>"},
                             "subject": ..., "prompt": ..., "stripped_prompt": ...,
                             "images": [{"index", "seed", "cp", "pf", "mask", "verdict",
                                         "output", "pixels", "cp_undefined", "pf_undefined"}, ...]}}}

Several MaSC nodes in one graph each write their own entry under their node
id (a node run again replaces its own entry; the others stay), so a PNG
holds, e.g., MaSC Score's view of all candidates and MaSC Select Best's
verdicts on them. Every PNG saved by a Save Image in that prompt gets the
whole entry; which image a file is comes from ``pixels``: a short hash of
the image as Save Image quantizes it (``clip(255 * x, 0, 255)`` cast to
uint8), recomputed from the PNG's pixels when it is read back.

Pure: JSON, numpy and PIL only.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import MascInputError
from .report import format_score, format_share
from .scores import ImageScore, ScoreBatch, defined_number
from .version import __version__

ENTRY_KEY = "masc"
FORMAT = 1
NO_ENTRY_HINT = (
    "save it with Save Image downstream of a MaSC node, with metadata on (ComfyUI without --disable-metadata); "
    "API clients must send extra_data.extra_pnginfo"
)


def pixel_digest(image: np.ndarray) -> str:
    """A short hash of one image [H,W,C] as core Save Image writes it (float 0..1 quantized by truncation)."""
    array = np.asarray(image)
    if np.issubdtype(array.dtype, np.floating):
        array = np.clip(255.0 * array, 0, 255).astype(np.uint8)
    return _digest(np.ascontiguousarray(array, dtype=np.uint8))


def _digest(pixels: np.ndarray) -> str:
    hasher = hashlib.blake2b(digest_size=8)
    hasher.update(repr(pixels.shape).encode())
    hasher.update(pixels.data)
    return hasher.hexdigest()


def image_record(
    score: ImageScore, *, verdict: str, seed: int | None = None, output: int | None = None, pixels: str | None = None
) -> dict[str, Any]:
    """One image's line of a node entry (JSON-ready; undefined scores are null)."""
    return {
        "index": score.index, "seed": seed, "cp": defined_number(score.cp), "pf": defined_number(score.pf),
        "mask": defined_number(score.foreground_fraction), "verdict": verdict, "output": output, "pixels": pixels,
        "cp_undefined": score.cp_undefined, "pf_undefined": score.pf_undefined,
    }


def node_entry(
    batch: ScoreBatch,
    *,
    node: str,
    verdicts: Sequence[str] | None = None,
    outputs: Sequence[int | None] | None = None,
    pixels: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """A node's entry from its scores: per image CP, PF, verdict, seed, output position and pixel hash.

    ``verdicts`` and ``outputs`` default to the batch's own (``ScoreContext.per_image``).
    """
    context = batch.context
    count = len(batch.scores)
    own_verdicts, seeds, own_outputs = context.per_image(count)
    verdicts = list(verdicts or own_verdicts)
    outputs = list(outputs or own_outputs)
    pixels = list(pixels or [None] * count)
    first = batch.scores[0] if batch.scores else ImageScore(index=0)
    return {
        "node": node,
        "metric_version": __version__,
        "encoder": dict(context.encoder) if context.encoder else None,
        "subject": context.subject,
        "prompt": first.prompt,
        "stripped_prompt": first.encoded_prompt,
        "images": [
            image_record(s, verdict=v, seed=seed, output=o, pixels=p)
            for s, v, seed, o, p in zip(batch.scores, verdicts, seeds, outputs, pixels)
        ],
    }


def add_node_entry(extra_pnginfo: dict | None, node_id: Any, entry: dict[str, Any]) -> bool:
    """Put a node's entry into the prompt's ``extra_pnginfo`` (False when ComfyUI gave none: nothing will be saved)."""
    if not isinstance(extra_pnginfo, dict):
        return False
    current = extra_pnginfo.get(ENTRY_KEY)
    if not (isinstance(current, dict) and current.get("format") == FORMAT and isinstance(current.get("nodes"), dict)):
        current = {"format": FORMAT, "nodes": {}}
        extra_pnginfo[ENTRY_KEY] = current
    current["nodes"][str(node_id if node_id is not None else len(current["nodes"]))] = entry
    return True


def read_png(path: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """The ``masc`` entry of a saved PNG and the hash of its pixels; one-line errors otherwise."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MascInputError(f"'{path}' does not exist: pass a PNG saved by ComfyUI's Save Image")
    try:
        with Image.open(path) as image:
            if image.format != "PNG":
                raise MascInputError(f"'{path}' is a {image.format} file, not a PNG: MaSC scores travel in PNGs written by Save Image")
            image.load()
            text = dict(getattr(image, "text", {}) or {})
            pixels = np.asarray(image)
    except (UnidentifiedImageError, OSError):
        raise MascInputError(f"'{path}' is not an image PIL can read: pass a PNG saved by ComfyUI's Save Image") from None
    if ENTRY_KEY not in text:
        raise MascInputError(f"'{path}' has no MaSC scores (no '{ENTRY_KEY}' text chunk): {NO_ENTRY_HINT}")
    try:
        entry = json.loads(text[ENTRY_KEY])
    except ValueError:
        raise MascInputError(f"'{path}' has a '{ENTRY_KEY}' text chunk that is not JSON: the file was edited or damaged") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("nodes"), dict):
        raise MascInputError(f"'{path}' has a '{ENTRY_KEY}' text chunk in an unknown layout: it was not written by MaSC")
    if entry.get("format") != FORMAT:
        raise MascInputError(
            f"'{path}' holds MaSC scores in format {entry.get('format')!r}; this version reads format {FORMAT}: update MaSC"
        )
    return entry, _digest(np.ascontiguousarray(pixels, dtype=np.uint8))


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
    return (
        f"#{image.get('index')}  {seed}  CP {format_score(image.get('cp'))}  PF {format_score(image.get('pf'))}  "
        f"mask {format_share(image.get('mask')).strip()}  {image.get('verdict', '')}"
    )


def _node_header(node_id: str, node: dict) -> str:
    encoder = node.get("encoder") or {}
    model = f"{encoder.get('model')} ({encoder.get('digest')})" if encoder else "unknown encoder"
    return f"{node.get('node')} (node {node_id}): {model}, metric {node.get('metric_version')}, PF text {node.get('stripped_prompt')!r}"


def describe(path: str, entry: dict[str, Any], digest: str, *, every: bool = False) -> str:
    """What a saved PNG says about its scores: this image's lines, then (with ``every`` or no match) every scored image."""
    found = matches(entry, digest)
    lines = [path]
    for node_id, node, image in found:
        lines.append(f"  this image: {_image_line(image)}")
        lines.append(f"    from {_node_header(node_id, node)}")
    if not found:
        lines.append("  this file's pixels match no scored image (changed after scoring?): every score in its metadata follows")
    if every or not found:
        for node_id, node in entry["nodes"].items():
            lines.append(f"  {_node_header(node_id, node)}")
            lines += [f"    {_image_line(image)}" for image in node.get("images", [])]
    return "\n".join(lines)
