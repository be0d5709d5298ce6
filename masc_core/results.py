"""The files an evaluation writes, and reading them back.

In the output folder:

- ``results.jsonl``: one JSON object per manifest row. While a run is going,
  each finished chunk of rows is appended and flushed (the resume log); at
  the end the file is rewritten sorted by row.
- ``results.csv``: the same rows, flat (lists joined with ``|``).
- ``summary.json``: computed from the rows alone (see ``masc_core.summary``).
- ``run.json``: what was run (manifest, model identity, options, shard).
- ``timing.json``: where the time went; kept out of ``summary.json``
  because it differs between runs while the summary must not.

Floats are written with Python's shortest round-trip repr, so reading a
file and writing it again gives the same bytes: shards merge to exactly the
files of one run. NaN never appears (undefined is null).
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any, Iterable

from .errors import MascInputError

RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
SUMMARY_JSON = "summary.json"
RUN_JSON = "run.json"
TIMING_JSON = "timing.json"


def record_line(record: dict) -> str:
    """One results.jsonl line (newline included)."""
    return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"


def read_records(path: str) -> dict[int, dict]:
    """Rows of a results.jsonl by row index; a later line for the same row wins.

    A line that is not complete JSON (a run killed while writing) is
    ignored: its chunk is simply scored again.
    """
    records: dict[int, dict] = {}
    if not os.path.exists(path):
        return records
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("row"), int):
                records[record["row"]] = record
    return records


class AppendLog:
    """results.jsonl opened for appending finished rows, each batch flushed to disk."""

    def __init__(self, path: str):
        self.path = path
        if os.path.exists(path):
            self._drop_partial_line()
        self._handle = open(path, "a", encoding="utf-8")

    def _drop_partial_line(self) -> None:
        # A run killed mid-write leaves a line without its newline; appending
        # after it would glue the next record onto it.
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)

    def append(self, records: Iterable[dict]) -> None:
        self._handle.write("".join(record_line(r) for r in records))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "AppendLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a kill never leaves half a file."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=2) + "\n"


def write_json(path: str, value: Any) -> None:
    write_atomic(path, json_text(value))


def read_json(path: str, what: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        raise MascInputError(f"{what} '{path}' does not exist") from None
    except (OSError, ValueError) as exc:
        raise MascInputError(f"{what} '{path}' could not be read ({exc})") from None
    if not isinstance(value, dict):
        raise MascInputError(f"{what} '{path}' is not a JSON object")
    return value


# ---------------------------------------------------------------- CSV

_LEADING_COLUMNS = (
    "row", "id", "method", "seed", "subject", "prompt", "encoded_prompt", "ref", "ref_mask", "out", "out_mask",
)
_TRAILING_COLUMNS = (
    "out_foreground", "ref_foreground", "small_out_mask", "small_ref_mask", "filtered", "human_cp", "human_pf",
)
_SKIPPED = {"ratings", "baseline_undefined", "cp_per_reference", "subject_found"}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "|".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    return str(value)


def csv_columns(records: list[dict], metrics: Iterable[str]) -> list[str]:
    """Columns of results.csv: labels and paths, the metrics, flags and ratings, per-rater ratings, reasons."""
    raters: dict[str, list[str]] = {"cp": [], "pf": []}
    for record in records:
        for aspect, given in (record.get("ratings") or {}).items():
            for rater in given:
                if rater and rater not in raters.setdefault(aspect, []):
                    raters[aspect].append(rater)
    columns = list(_LEADING_COLUMNS) + list(metrics) + list(_TRAILING_COLUMNS)
    for aspect in ("cp", "pf"):
        columns += [f"human_{aspect}.{rater}" for rater in raters.get(aspect, [])]
    return columns + ["cp_undefined", "pf_undefined", "notes", "fingerprint"]


def csv_text(records: list[dict], metrics: Iterable[str]) -> str:
    """results.csv for ``records`` (sorted by row)."""
    columns = csv_columns(records, metrics)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        cells = []
        for column in columns:
            if column.startswith("human_") and "." in column:
                aspect, rater = column[len("human_") :].split(".", 1)
                value = (record.get("ratings") or {}).get(aspect, {}).get(rater)
            elif column == "notes":
                value = record.get("baseline_undefined") or None
            else:
                value = record.get(column)
            cells.append(_cell(value))
        writer.writerow(cells)
    return buffer.getvalue()


def write_results(folder: str, records: list[dict], metrics: Iterable[str]) -> None:
    """results.jsonl and results.csv for ``records``, which must be sorted by row."""
    metrics = list(metrics)
    write_atomic(os.path.join(folder, RESULTS_JSONL), "".join(record_line(r) for r in records))
    write_atomic(os.path.join(folder, RESULTS_CSV), csv_text(records, metrics))
