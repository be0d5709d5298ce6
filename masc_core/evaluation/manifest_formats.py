"""A manifest file's rows as (line, {column: value}): CSV with a header line, or JSONL (one JSON object a line).

What the columns mean is ``manifest``'s; here only the file format: which one (the extension, else the first
line), an empty file, a repeated column, a row with more cells than columns, a line that is not one JSON object.
"""

from __future__ import annotations

import csv
import json
from typing import Any

from ..errors import MascInputError

Records = tuple[list[str], list[tuple[int, dict[str, Any]]]]
"""The columns in order, then each data row's first line and its cells by column."""


def fail(path: str, where: str, problem: str) -> MascInputError:
    """The one-line refusal of a manifest: "manifest '<path>' <where>: <problem>"."""
    return MascInputError(f"manifest '{path}' {where}: {problem}")


def read_records(path: str) -> Records:
    """The rows of a CSV or JSONL manifest (format from the extension, else from the first line)."""
    return _read_jsonl(path) if _detect_format(path) == "jsonl" else _read_csv(path)


def _detect_format(path: str) -> str:
    lower = path.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lower.endswith(".csv"):
        return "csv"
    with open(path, encoding="utf-8-sig") as handle:
        for line in handle:
            if line.strip():
                return "jsonl" if line.lstrip().startswith("{") else "csv"
    return "csv"


def _read_csv(path: str) -> Records:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise MascInputError(f"manifest '{path}' is empty: give a header line and one row per image") from None
        columns = [name.strip() for name in header]
        duplicates = sorted({c for c in columns if columns.count(c) > 1 and c})
        if duplicates:
            raise fail(path, "line 1", f"column '{duplicates[0]}' appears twice")
        rows = []
        start = reader.line_num + 1
        for cells in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) > len(columns):
                raise fail(
                    path,
                    f"line {line}",
                    f"{len(cells)} cells for {len(columns)} columns: quote cells that contain commas",
                )
            record = {name: (cells[i] if i < len(cells) else "") for i, name in enumerate(columns) if name}
            rows.append((line, record))
    return columns, rows


def _read_jsonl(path: str) -> Records:
    columns: list[str] = []
    rows = []
    with open(path, encoding="utf-8-sig") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                raise fail(path, f"line {line}", f"not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise fail(path, f"line {line}", "each line must be one JSON object")
            for key in record:
                if key not in columns:
                    columns.append(key)
            rows.append((line, record))
    return columns, rows
