"""What every manifest builder shares: the rows it builds, folder checks, and writing the manifest.

A builder turns a benchmark's folders into ``BuiltManifest``: rows (dicts of
manifest columns, paths absolute), the mask files each image needs (made or
reused by ``automasks``) and notes for the user (what was skipped and why).
Nothing is written until every check has passed; the manifest itself is
written last, in one atomic step (``write_manifest``).

Paths in the written manifest: inside the manifest's folder they are
written relative to it (the manifest and its masks move together), others
absolute.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ...errors import MascInputError
from ...io.files import write_atomic
from ..manifest import LISTED_PROBLEMS, PATH_SEPARATOR, REQUIRED_COLUMNS

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


@dataclass(frozen=True)
class MaskJob:
    """One image that needs a mask: where the mask goes, and what CLIPSeg is asked to find."""

    image: str
    mask: str
    prompt: str


@dataclass
class BuiltManifest:
    """A builder's result, before anything is written."""

    rows: list[dict[str, Any]]
    """Manifest rows: ``ref``/``ref_mask`` lists of absolute paths, ``out``/``out_mask`` absolute paths, texts,
    labels."""
    masks: list[MaskJob] = field(default_factory=list)
    """Every mask the rows name, once each."""
    notes: list[str] = field(default_factory=list)
    """One line each: what was left out or assumed."""
    description: str = ""
    """What the rows are, in a few words (for the summary line)."""


def mask_path(masks_dir: str, image: str, *folders: str, suffix: str = "") -> str:
    """Where ``image``'s mask goes: ``masks_dir/<folders>/<the image's file stem><suffix>.png``."""
    return os.path.join(masks_dir, *folders, os.path.splitext(os.path.basename(image))[0] + suffix + ".png")


def plan_mask(jobs: dict[str, MaskJob], image: str, mask: str, prompt: str) -> str:
    """Note that ``image`` needs ``mask`` (once per mask path); two images meeting at one mask path are refused."""
    known = jobs.setdefault(mask, MaskJob(image, mask, prompt))
    if known.image != image:
        raise MascInputError(f"'{known.image}' and '{image}' would share the mask '{mask}': keep one of the two files")
    return mask


def is_image(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def subfolders(folder: str) -> list[str]:
    """Names of the visible subfolders, sorted."""
    return sorted(n for n in os.listdir(folder) if not n.startswith(".") and os.path.isdir(os.path.join(folder, n)))


def images_in(folder: str) -> list[str]:
    """Names of the image files directly in ``folder``, sorted."""
    return sorted(n for n in os.listdir(folder) if is_image(n) and os.path.isfile(os.path.join(folder, n)))


def require_folder(path: str, what: str, expected: str) -> str:
    """``path`` as an absolute folder, or one line saying what was expected there."""
    if not os.path.exists(path):
        raise MascInputError(f"{what} '{path}' does not exist: expected {expected}")
    if not os.path.isdir(path):
        raise MascInputError(f"{what} '{path}' is a file, not a folder: expected {expected}")
    return os.path.abspath(path)


def problems_error(what: str, problem: str, items: list[str], hint: str) -> MascInputError:
    """One line for many problems of one kind: the count, the first few, what to do."""
    listed = ", ".join(f"'{item}'" for item in items[:LISTED_PROBLEMS])
    more = f" and {len(items) - LISTED_PROBLEMS} more" if len(items) > LISTED_PROBLEMS else ""
    return MascInputError(f"{what}: {len(items)} {problem}: {listed}{more}: {hint}")


def count_text(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


# ---------------------------------------------------------------- writing


def check_output(path: str) -> str:
    """The manifest's path, absolute, checked before any work: a .csv or .jsonl file in a folder that can exist."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise MascInputError(f"-o '{path}' is a folder: give the manifest's file name (.csv or .jsonl)")
    if not path.lower().endswith((".csv", ".jsonl")):
        raise MascInputError(f"-o '{path}': give the manifest a .csv or .jsonl name")
    parent = os.path.dirname(path)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise MascInputError(f"-o '{path}': '{parent}' is a file, not a folder")
    return path


def _written_path(path: str, folder: str) -> str:
    if PATH_SEPARATOR in path:
        raise MascInputError(
            f"'{path}' has a '{PATH_SEPARATOR}' in its name, which manifests use between views: rename it"
        )
    relative = os.path.relpath(path, folder)
    return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative.replace(os.sep, "/")


def _written_row(row: dict[str, Any], folder: str) -> dict[str, Any]:
    written = dict(row)
    for column, value in row.items():  # every subject's paths: ref, ref_mask, out_mask and their _2, _3, ... columns
        stem = column.rsplit("_", 1)[0] if column.rsplit("_", 1)[-1].isdigit() else column
        if stem in ("ref", "ref_mask"):
            written[column] = [_written_path(p, folder) for p in value]
        elif stem in ("out", "out_mask"):
            written[column] = _written_path(value, folder) if value else None
    return written


def manifest_text(rows: list[dict[str, Any]], path: str) -> str:
    """The manifest file's text: CSV (lists joined with '|', empty cells for None) or JSONL (by ``path``'s
    extension)."""
    folder = os.path.dirname(os.path.abspath(path))
    written = [_written_row(row, folder) for row in rows]
    if path.lower().endswith(".jsonl"):
        return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in written)
    columns = list(REQUIRED_COLUMNS) + [
        c for c in dict.fromkeys(k for row in written for k in row) if c not in REQUIRED_COLUMNS
    ]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in written:
        cells = []
        for column in columns:
            value = row.get(column)
            cells.append(PATH_SEPARATOR.join(value) if isinstance(value, list) else "" if value is None else str(value))
        writer.writerow(cells)
    return buffer.getvalue()


def write_manifest(rows: list[dict[str, Any]], path: str) -> str:
    """Write the manifest in one atomic step (a killed run leaves the old file or none, never half of one)."""
    path = check_output(path)
    text = manifest_text(rows, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text)
    return path
