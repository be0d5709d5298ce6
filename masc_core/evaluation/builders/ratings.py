"""DreamBench++'s human-rating files, read into (method, key) -> {(aspect, rater group): rating}.

Two forms, both from the benchmark's code (``benchmarking.py``, ``merge_data.py``):

- merged: ``merged_data/<group>/<method>-cp.json`` and ``<method>-pf.json``,
  each ``{"<collection id>-<prompt index>": rating}``;
- raw: ``raw_data/<group>/<prefix>-<method>.json``, each ``{key: [cp, pf]}``,
  several files per method merged in name order (a later file wins).

The folder given may be ``data_human_rating`` (holding ``merged_data`` or
``raw_data``; merged wins) or one of those two. A rating is a number or
null (not rated); keys must be ``<collection id>-<prompt index>``.
"""

from __future__ import annotations

import os
import re

from ...errors import MascInputError
from ...io.files import read_json
from .common import require_folder, subfolders

LAYOUT = (
    "DreamBench++'s data_human_rating folder: merged_data/<group>/<method>-cp.json and -pf.json, "
    "or raw_data/<group>/<prefix>-<method>.json"
)
_MERGED = re.compile(r"^(.+)-(cp|pf)\.json$")
_KEY = re.compile(r"^.+-\d+$")

Ratings = dict[tuple[str, str], dict[tuple[str, str], float | None]]


def _form(folder: str) -> tuple[str, str]:
    """(folder holding the group folders, "merged" or "raw")."""
    for sub, form in (("merged_data", "merged"), ("raw_data", "raw")):
        if os.path.isdir(os.path.join(folder, sub)):
            return os.path.join(folder, sub), form
    names = [n for g in subfolders(folder) for n in os.listdir(os.path.join(folder, g)) if n.endswith(".json")]
    if any(_MERGED.match(n) for n in names):
        return folder, "merged"
    if names:
        return folder, "raw"
    raise MascInputError(f"ratings folder '{folder}' holds no rating files: expected {LAYOUT}")


def _rating(path: str, key: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MascInputError(f"rating file '{path}': key '{key}' has {value!r}, not a number or null")
    return value  # as the file has it (DreamBench++'s are whole numbers 0-4)


def _entries(path: str) -> dict:
    data = read_json(path, "rating file")
    bad = [k for k in data if not _KEY.match(k)]
    if bad:
        raise MascInputError(
            f"rating file '{path}': key '{bad[0]}' is not '<collection id>-<prompt index>' ({len(bad)} such keys)"
        )
    return data


def read_ratings(ratings_dir: str) -> tuple[Ratings, list[str], list[str]]:
    """(ratings, rater groups in name order, notes) of a DreamBench++ human-rating folder."""
    root, form = _form(require_folder(ratings_dir, "ratings folder", LAYOUT))
    groups = subfolders(root)
    ratings: Ratings = {}
    for group in groups:
        folder = os.path.join(root, group)
        for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
            path = os.path.join(folder, name)
            if form == "merged":
                match = _MERGED.match(name)
                if not match:
                    raise MascInputError(
                        f"rating file '{path}' is not named <method>-cp.json or <method>-pf.json: expected {LAYOUT}"
                    )
                method, aspect = match.groups()
                for key, value in _entries(path).items():
                    ratings.setdefault((method, key), {})[(aspect, group)] = _rating(path, key, value)
                continue
            method = name[: -len(".json")].rsplit("-", 1)[-1]
            for key, value in _entries(path).items():
                if not isinstance(value, list) or len(value) != 2:
                    raise MascInputError(f"rating file '{path}': key '{key}' has {value!r}, not [cp, pf]")
                given = ratings.setdefault((method, key), {})
                given[("cp", group)], given[("pf", group)] = _rating(path, key, value[0]), _rating(path, key, value[1])
    if not ratings:
        raise MascInputError(f"ratings folder '{ratings_dir}' holds no ratings: expected {LAYOUT}")
    notes = [f"human ratings: {form} files of {len(groups)} rater group(s) ({', '.join(groups)}), one rater each"]
    return ratings, groups, notes
