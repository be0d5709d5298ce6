"""A checkpoint folder's config held against its weights before any module is built.

A config.json is a few kilobytes that decide how much memory and time building the model takes: a SAM3 config asking
10^7 queries, or a ViT of 3,000 layers, is built whole (gigabytes, tens of seconds) before a loader could notice that
the weights hold 10 queries or 2 layers. So every loader (SigLIP2, CLIPSeg, SAM3; node and command line alike) first
reads the tensor shapes from the safetensors headers (``read_weight_shapes``: the header only, never the tensors) and
holds each size its config asks against them (``check_sizes``): widths against a weight's dimension, layer counts
against the numbered blocks the weights hold, vocabularies and query counts against their tables. Which sizes are
checked is each family's own list (``siglip_checkpoint``, ``clipseg``, ``sam3``); the check and its one-line message
are written here once.

Sizes no weight records (the input image size of a model whose positions are interpolated or rotary) are held to
``MAX_INPUT_SIDE`` by ``check_input_side``, and a processor's size to what the backbone takes by each family.
"""

from __future__ import annotations

import json
import numbers
import os
import re
import struct
from dataclasses import dataclass, field

from ..errors import MascModelError
from ..safe_text import shown

MAX_HEADER_BYTES = 100 * 2**20
"""Largest safetensors header read (the safetensors library's own limit)."""

MAX_INPUT_SIDE = 2048
"""Largest square input side a config may ask of a fixed-size model (SAM3 takes 1008, CLIPSeg 352, SigLIP 224-512):
the photos are resized to it before the first layer, so 7000 would cost gigabytes per image."""

_NUMBERED = re.compile(r"(\d+)\.")


@dataclass
class WeightShapes:
    """Every tensor's shape in a checkpoint's safetensors files, and which file holds it."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def prefix_of(self, *names: str) -> str:
        """The prefix under which the weights hold the first of ``names`` (``""`` or e.g. ``"detector_model."``)."""
        for name in names:
            for key in self.shapes:
                if key.endswith(name) and (key == name or key[: -len(name)].endswith(".")):
                    return key[: -len(name)]
        return ""

    def count(self, prefix: str) -> int:
        """How many numbered blocks (``prefix`` + N + ``.``) the weights hold: one more than the highest N."""
        found = -1
        for key in self.shapes:
            if key.startswith(prefix):
                match = _NUMBERED.match(key, len(prefix))
                if match:
                    found = max(found, int(match.group(1)))
        return found + 1

    def file_of(self, prefix: str) -> str:
        """The file holding ``prefix`` (a tensor, or the first tensor under a prefix)."""
        if prefix in self.files:
            return self.files[prefix]
        return next((f for key, f in self.files.items() if key.startswith(prefix)), next(iter(self.files.values()), ""))


@dataclass(frozen=True)
class Size:
    """One size a config asks and where the weights record it.

    ``field``: the config's name for it (as the message shows it, e.g. ``vision_config.num_hidden_layers``);
    ``asked``: the config's value (defaults filled as the model's builder fills them); ``tensor``: a weight, or with
    ``axis`` None a prefix whose numbered blocks are counted; ``axis``: the weight's dimension that holds the size;
    ``expected``: what that dimension (or count) must be when it is not ``asked`` itself (e.g. a patch embedding's
    width for a patch size).
    """

    field: str
    asked: object
    tensor: str
    axis: int | None = 0
    expected: int | None = None


def whole_number(label: str, name: str, value, *, low: int = 1) -> int:
    """A config value that must be a whole number of at least ``low``, or the one line saying which field is wrong."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise MascModelError(
            f"{label}: config.json's {name} is {shown(value)}, not a whole number of at least {low}: the config is "
            "damaged; re-download the checkpoint"
        )
    return int(value)


def check_input_side(label: str, name: str, value, *, file: str = "config.json") -> int:
    """An input side no weight records, held to 1..MAX_INPUT_SIDE before any photo is resized to it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_INPUT_SIDE:
        raise MascModelError(
            f"{label}: {file} asks an input size of {shown(value)} px ({name}): this loader takes 1 to "
            f"{MAX_INPUT_SIDE} px; re-download the checkpoint or fix {file}"
        )
    return int(value)


def read_header(path: str, name: str, label: str) -> dict:
    """A safetensors file's header (its tensors' dtypes, shapes and offsets), read without reading the tensors."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            start = handle.read(8)
            length = struct.unpack("<Q", start)[0] if len(start) == 8 else -1
            if not 2 <= length <= min(MAX_HEADER_BYTES, size - 8):
                raise ValueError("no safetensors header")
            header = json.loads(handle.read(length))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = "no safetensors header, or cut short" if isinstance(exc, ValueError) else type(exc).__name__
        raise MascModelError(f"{label}: '{name}' could not be read ({reason}): re-download it") from None
    if not isinstance(header, dict):
        raise MascModelError(f"{label}: '{name}' could not be read (a damaged safetensors header): re-download it")
    end = size - 8 - length
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(shape, list)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(n, int) for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= end
        ):
            raise MascModelError(
                f"{label}: '{name}' could not be read (tensor {shown(key, 80)} lies outside the file: cut short or "
                "damaged): re-download it"
            )
    return header


def read_weight_shapes(folder: str, files: list[str], label: str) -> WeightShapes:
    """Every tensor's shape in ``files`` (safetensors, in ``folder``), from their headers alone."""
    found = WeightShapes()
    for name in files:
        for key, entry in read_header(os.path.join(folder, name), name, label).items():
            if key != "__metadata__":
                found.shapes[key] = tuple(entry["shape"])
                found.files[key] = name
    return found


def check_sizes(label: str, weights: WeightShapes, sizes: list[Size]) -> None:
    """Each size the config asks against the weights; the first that disagrees is one line naming the file and field."""
    for size in sizes:
        asked = whole_number(label, size.field, size.asked)
        expected = asked if size.expected is None else size.expected
        if size.axis is None:
            held = weights.count(size.tensor)
            if held != expected:
                raise MascModelError(
                    f"{label}: config.json asks {size.field} = {asked}, but {weights.file_of(size.tensor)} holds "
                    f"{held} of {size.tensor}N: the config does not belong to these weights; re-download the checkpoint"
                )
            continue
        shape = weights.shapes.get(size.tensor)
        if shape is None:
            raise MascModelError(
                f"{label} lacks the weight {size.tensor} (config.json's {size.field} is held by it): the checkpoint is "
                "incomplete or of another architecture; re-download it"
            )
        if len(shape) <= size.axis or shape[size.axis] != expected:
            raise MascModelError(
                f"{label}: config.json asks {size.field} = {asked}, but {weights.files[size.tensor]} holds "
                f"{size.tensor} of shape {list(shape)}: the config does not belong to these weights; re-download the "
                "checkpoint"
            )


def check_heads(label: str, name: str, width, heads) -> None:
    """Attention heads that divide the width (a split that does not fit is an error deep inside the first forward)."""
    heads = whole_number(label, f"{name}.num_attention_heads", heads)
    if int(width) % heads:
        raise MascModelError(
            f"{label}: config.json's {name}.num_attention_heads ({heads}) does not divide its width ({width}): "
            "the config is damaged; re-download the checkpoint"
        )
