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

MaSC Sweep's images add ``"cell"`` (the cell it was sampled in) and ``"prompt"`` (its own prompt: a sweep has
several, the node's ``prompt`` is the first).

With several subjects in an image (MaSC Score Subjects, MaSC Sample Until with ``subjects``), ``cp`` is
their cp_min and the image record adds ``"subjects": [{"subject", "cp", "mask"}, ...]`` (each subject's
CP and output mask share, in the declared order) and ``"blends"`` (the blend warnings). Single-subject
records are as before. Scores with mask-sensitivity bands add ``"cp_band"`` and ``"pf_band"`` ([low, high]
or null).

Several MaSC nodes in one graph each write their own entry under their node
id (a node run again replaces its own entry; the others stay), so a PNG
holds, e.g., MaSC Score's view of all candidates and MaSC Select Best's
verdicts on them. Every PNG saved by a Save Image in that prompt gets the
whole entry; which image a file is comes from ``pixels``: a short hash of
the image as Save Image quantizes it (``clip(255 * x, 0, 255)`` cast to
uint8), recomputed from the PNG's pixels when it is read back.

An entry is built and checked back here (``parse_entry``: the strict reader checks every field the builder writes,
so the two stay in step in one file); ``saved_png`` finds it in a saved PNG and describes it. Pure: JSON and numpy.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Sequence

import numpy as np

from ..errors import first_line
from ..io.files import JSONTooDeep, JSONUnreadable, parse_json
from ..safe_text import printable
from .scores import ImageScore, ScoreBatch, defined_number, subject_figures
from ..version import __version__

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
    score: ImageScore,
    *,
    verdict: str,
    seed: int | None = None,
    output: int | None = None,
    pixels: str | None = None,
    cell: str | None = None,
) -> dict[str, Any]:
    """One image's line of a node entry (JSON-ready; undefined scores are null; ``cell``: a sweep's image)."""
    record = {
        "index": score.index,
        "seed": seed,
        "cp": defined_number(score.cp),
        "pf": defined_number(score.pf),
        "mask": defined_number(score.foreground_fraction),
        "verdict": verdict,
        "output": output,
        "pixels": pixels,
        "cp_undefined": score.cp_undefined,
        "pf_undefined": score.pf_undefined,
    }
    if score.subjects is not None:
        record["subjects"] = subject_figures(score.subjects)
        record["blends"] = list(score.blends)
    if score.cp_band is not None or score.pf_band is not None:  # mask-sensitivity bands, when they were computed
        record["cp_band"], record["pf_band"] = score.cp_band, score.pf_band
    if score.previews is not None:  # pruning or a study: the scores of its denoised previews
        record["previews"] = [dict(p) for p in score.previews]
    if score.clip is not None:  # a video candidate: its cp and pf are its worst frame's; the clip's figures here
        record["clip"] = dict(score.clip)
    if cell is not None:  # a sweep's image: its cell, and its own prompt (a sweep has several)
        record["cell"], record["prompt"] = cell, score.prompt
    return record


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
    cells = list(context.cells or [None] * count)
    first = batch.scores[0] if batch.scores else ImageScore(index=0)
    return {
        "node": node,
        "metric_version": __version__,
        "encoder": dict(context.encoder) if context.encoder else None,
        "subject": context.subject,
        "prompt": first.prompt,
        "stripped_prompt": first.encoded_prompt,
        "images": [
            image_record(s, verdict=v, seed=seed, output=o, pixels=p, cell=c)
            for s, v, seed, o, p, c in zip(batch.scores, verdicts, seeds, outputs, pixels, cells)
        ],
        **(
            {}
            if context.ledger is None
            else {"ledger": {k: v for k, v in context.ledger.items() if k != "per_candidate"}}
        ),
    }


def add_node_entry(extra_pnginfo: dict | None, node_id: Any, entry: dict[str, Any]) -> bool:
    """Put a node's entry into the prompt's ``extra_pnginfo`` (False when ComfyUI gave none: nothing will be saved).

    ``extra_pnginfo`` comes from the client with the prompt: a ``masc`` entry already there that ``read``
    would refuse (another shape, NaN, deep nesting; a crafted or stale one) is replaced, not extended, so
    the PNGs saved in this prompt stay readable.
    """
    if not isinstance(extra_pnginfo, dict):
        return False
    current = extra_pnginfo.get(ENTRY_KEY)
    if not _readable(current):
        current = {"format": FORMAT, "nodes": {}}
        extra_pnginfo[ENTRY_KEY] = current
    current["nodes"][str(node_id if node_id is not None else len(current["nodes"]))] = entry
    return True


MAX_ENTRY_BYTES = 32 << 20
"""Largest ``masc`` entry read (after decompression): ample for 4,096 candidates, far below a zip bomb."""
MAX_NESTING = 16
"""Deepest nesting of lists and objects accepted in an entry (MaSC writes 5 levels)."""
_OPTIONAL_TEXT = (str, type(None))


def _is_int(value: Any, optional: bool = False) -> bool:
    return (value is None and optional) or (isinstance(value, int) and not isinstance(value, bool))


def _is_number(value: Any) -> bool:
    """None, or an int or float that converts to a finite float (JSON allows integers of any length)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


COSINE_SLACK = 1e-3
"""How far past [-1, 1] a cosine (CP, PF, a band) may read after rounding in low precision."""


def _is_score(value: Any) -> bool:
    """None, or a number a cosine can be: -1 to 1 (with ``COSINE_SLACK``)."""
    return _is_number(value) and (value is None or abs(float(value)) <= 1.0 + COSINE_SLACK)


def _is_share(value: Any) -> bool:
    """None, or a share of an image's pixels: 0 to 1 (a crafted 2x10^306 would overflow every percentage shown)."""
    return _is_number(value) and (value is None or 0.0 <= float(value) <= 1.0)


def _shape_problem(entry: Any) -> str | None:
    """What in a parsed entry MaSC would never write (wrong types, wrong layout), or None."""
    if not isinstance(entry, dict) or not isinstance(entry.get("nodes"), dict):
        return "is not an object with 'nodes'"
    for node_id, node in entry["nodes"].items():
        if not isinstance(node, dict):
            return f"node {printable(node_id)!r} is not an object"
        for key in ("node", "metric_version", "subject", "prompt", "stripped_prompt"):
            if not isinstance(node.get(key), _OPTIONAL_TEXT):
                return f"node {printable(node_id)!r}: '{key}' is not text"
        encoder = node.get("encoder")
        if encoder is not None and not (
            isinstance(encoder, dict) and all(isinstance(encoder.get(k), _OPTIONAL_TEXT) for k in ("model", "digest"))
        ):
            return f"node {printable(node_id)!r}: 'encoder' is not an object of texts"
        images = node.get("images", [])
        if not isinstance(images, list) or not all(isinstance(image, dict) for image in images):
            return f"node {printable(node_id)!r}: 'images' is not a list of objects"
        for image in images:
            if not (
                _is_int(image.get("index"), True)
                and _is_int(image.get("seed"), True)
                and _is_int(image.get("output"), True)
            ):
                return f"node {printable(node_id)!r}: an image's index, seed or output is not a whole number"
            if not (_is_score(image.get("cp")) and _is_score(image.get("pf")) and _is_share(image.get("mask"))):
                return (
                    f"node {printable(node_id)!r}: an image's cp, pf or mask is not a number in its range (-1 to "
                    "1; a share 0 to 1)"
                )
            if not all(
                isinstance(image.get(k), _OPTIONAL_TEXT)
                for k in ("verdict", "pixels", "cp_undefined", "pf_undefined", "cell", "prompt")
            ):
                return f"node {printable(node_id)!r}: an image's verdict, pixels, reasons, cell or prompt are not text"
            problem = _subjects_problem(image) or _bands_problem(image) or _previews_problem(image)
            if problem:
                return f"node {printable(node_id)!r}: an image's {problem}"
        ledger = node.get("ledger")
        if ledger is not None and not (
            isinstance(ledger, dict)
            and all(_is_int(ledger.get(k), False) for k in ("steps", "spent", "in_full", "pruned", "candidates"))
            and _is_int(ledger.get("replayed"), True)
        ):
            return f"node {printable(node_id)!r}: 'ledger' is not an object of whole numbers"
    return None


def _previews_problem(image: dict) -> str | None:
    """What is wrong with an image record's optional pruning previews, or None."""
    previews = image.get("previews")
    if previews is None:
        return None
    if not isinstance(previews, list) or not all(isinstance(p, dict) for p in previews):
        return "'previews' is not a list of objects"
    for preview in previews:
        if not all(_is_int(preview.get(k), False) for k in ("round", "step", "steps")) or not all(
            _is_score(preview.get(k)) for k in ("cp", "pf")
        ):
            return (
                "'previews' has an entry whose round, step or steps is not a whole number, or whose cp or pf is "
                "not a number"
            )
    return None


def _bands_problem(image: dict) -> str | None:
    """What is wrong with an image record's optional mask-sensitivity bands, or None."""
    for key in ("cp_band", "pf_band"):
        band = image.get(key)
        if band is not None and not (
            isinstance(band, list) and len(band) == 2 and all(v is not None and _is_score(v) for v in band)
        ):
            return f"'{key}' is not a [low, high] pair of numbers"
    return None


def _subjects_problem(image: dict) -> str | None:
    """What is wrong with an image record's optional several-subject fields, or None."""
    subjects, blends = image.get("subjects"), image.get("blends", [])
    if subjects is not None:
        if not isinstance(subjects, list) or not all(isinstance(s, dict) for s in subjects):
            return "'subjects' is not a list of objects"
        for entry in subjects:
            if not isinstance(entry.get("subject"), str) or not (
                _is_score(entry.get("cp")) and _is_share(entry.get("mask"))
            ):
                return "'subjects' has an entry without a subject name, or with a cp or mask that is not a number"
    if not isinstance(blends, list) or not all(isinstance(b, str) for b in blends):
        return "'blends' is not a list of texts"
    return None


def _readable(entry: Any) -> bool:
    """Whether ``read`` would take ``entry`` as it stands (``parse_entry`` of its JSON text)."""
    try:
        parse_entry(json.dumps(entry, allow_nan=False))
    except (ValueError, TypeError, RecursionError, UnreadableEntry):
        return False
    return True


def parse_entry(text: str) -> dict[str, Any]:
    """A ``masc`` chunk's text as an entry this version reads, or ``UnreadableEntry`` saying what is wrong.

    Strict where a crafted file could hurt a reader: NaN, Infinity and numbers out of float range are
    refused (``--json`` output stays valid JSON), nesting is bounded, every field MaSC writes has its type.
    """
    try:
        entry = parse_json(text, max_depth=MAX_NESTING)
    except JSONTooDeep:
        raise UnreadableEntry(f"has a '{ENTRY_KEY}' text chunk nested too deeply: it was not written by MaSC") from None
    except JSONUnreadable as exc:
        raise UnreadableEntry(
            f"has a '{ENTRY_KEY}' text chunk that is not JSON MaSC writes ({printable(first_line(exc))})"
        ) from None
    if isinstance(entry, dict) and "format" in entry and not (_is_int(entry["format"]) and entry["format"] == FORMAT):
        shown_format = printable(json.dumps(entry["format"]))[:40]
        raise UnreadableEntry(
            f"holds MaSC scores in format {shown_format}; this version reads format {FORMAT}: update MaSC"
        )
    problem = _shape_problem(entry)
    if problem is not None:
        raise UnreadableEntry(
            f"has a '{ENTRY_KEY}' text chunk in an unknown layout ({problem}): it was not written by MaSC"
        )
    return entry


class UnreadableEntry(Exception):
    """Why a file's entry cannot be used (becomes one MascInputError line naming the file)."""
