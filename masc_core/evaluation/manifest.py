"""Evaluation manifests: one row per generated image to score, read from CSV or JSONL.

Columns (CSV header, or JSONL object keys):

- required: ``ref``, ``ref_mask``, ``out``, ``out_mask``, ``prompt``, ``subject``;
- several subjects in one image: ``subject_2``, ``ref_2``, ``ref_mask_2``, ``out_mask_2`` and so on up to 8
  (``subject_columns``); the single-subject columns are then the first subject;
- optional: ``method``, ``seed``, ``id``, ``same_subject``, and human ratings, either one column
  per aspect (``human_cp``, ``human_pf``: one rating, or one pooled over raters) or one column per
  rater or rater group (``human_cp.<rater>``, ``human_pf.<rater>``; an empty cell = not rated by
  that rater). The two forms cannot be mixed for one aspect.

``ref`` and ``ref_mask`` may name several views of the subject, separated by
``|`` in CSV (or as a JSON list); one mask per view. ``out_mask`` may be
empty (PF is then undefined), ``prompt`` and ``subject`` may be empty. In
JSONL a rating column may also be an object ``{"<rater>": rating}``.

``same_subject`` labels identity pairs (the paper's ORIDa regime): 1 when ``out`` shows the
reference's subject, 0 when it shows another one (JSONL also takes true/false). When the column
is there, every row needs a label: ``eval`` then reports how well each concept metric tells the
two apart (ROC AUC; see ``discrimination``).

Relative paths are resolved against the manifest's folder, so a manifest and its images can be
moved together. Every file is checked to exist when the manifest is read, before anything is
scored; the missing ones are listed together (their count and the first few), so one round of
fixes is enough. Bad input raises ``MascInputError`` with one line naming the file,
the line and the column. Other columns are ignored.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import MascInputError
from ..io.files import check_regular_file
from .subject_columns import RowSubject, further_subjects
from .manifest_cells import (  # noqa: F401  (LISTED_PROBLEMS, PATH_SEPARATOR, missing_files_error: re-exported)
    LISTED_PROBLEMS,
    PATH_SEPARATOR,
    _check_file,
    _fail,
    _paths,
    _rating,
    _resolve,
    _seed,
    _text,
    missing_files_error,
)

REQUIRED_COLUMNS = ("ref", "ref_mask", "out", "out_mask", "prompt", "subject")
LABEL_COLUMNS = ("method", "seed", "id")
IDENTITY_COLUMN = "same_subject"
"""1/0: does ``out`` show the reference's subject (identity pairs, the paper's ORIDa regime)."""
ASPECTS = ("cp", "pf")
RATING_PREFIX = "human_"
DEFAULT_METHOD = "default"
"""Method name of rows whose ``method`` is missing or empty."""


@dataclass(frozen=True)
class ManifestRow:
    """One generated image to score, as the manifest gives it."""

    index: int
    """0-based position among the manifest's data rows: the row's key in the results."""
    line: int
    """Line of the manifest file the row starts on (for messages)."""
    ref: tuple[str, ...]
    """Reference view path(s) as written in the manifest."""
    ref_mask: tuple[str, ...]
    out: str
    out_mask: str | None
    prompt: str
    subject: str
    method: str = DEFAULT_METHOD
    seed: int | str | None = None
    id: str | None = None
    ratings: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per aspect ("cp", "pf"): rater -> rating. The single-column form uses the rater name ""."""
    same_subject: bool | None = None
    """Identity pairs: True when ``out`` shows the reference's subject, False for another subject, None unlabelled."""
    ref_paths: tuple[str, ...] = ()
    """``ref`` resolved against the manifest's folder."""
    ref_mask_paths: tuple[str, ...] = ()
    out_path: str = ""
    out_mask_path: str | None = None
    extra_subjects: tuple[RowSubject, ...] = ()
    """Subjects 2..K of a several-subject image (columns ``subject_2``, ``ref_2``, ...; ``subject_columns``);
    empty for a single-subject row, whose only subject is the fields above."""

    def human(self, aspect: str) -> float | None:
        """The pooled human rating for ``aspect``: the mean over the raters who rated this row."""
        values = list(self.ratings.get(aspect, {}).values())
        return math.fsum(values) / len(values) if values else None

    def where(self, column: str) -> str:
        """'line N, column 'c'': the place a message about this row points to."""
        return f"line {self.line}, column '{column}'"


@dataclass
class Manifest:
    """A read and checked manifest."""

    path: str
    rows: list[ManifestRow]
    raters: dict[str, list[str]]
    """Per aspect: the rater names of per-rater columns, in column order (empty for the single-column form)."""

    @property
    def has_ratings(self) -> bool:
        return any(row.ratings.get(aspect) for row in self.rows for aspect in ASPECTS)

    @property
    def has_identity_labels(self) -> bool:
        """Every row says whether its output shows the reference's subject (``same_subject``)."""
        return bool(self.rows) and all(row.same_subject is not None for row in self.rows)


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


def _read_csv(path: str) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise MascInputError(f"manifest '{path}' is empty: give a header line and one row per image") from None
        columns = [name.strip() for name in header]
        duplicates = sorted({c for c in columns if columns.count(c) > 1 and c})
        if duplicates:
            raise _fail(path, "line 1", f"column '{duplicates[0]}' appears twice")
        rows = []
        start = reader.line_num + 1
        for cells in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) > len(columns):
                raise _fail(
                    path,
                    f"line {line}",
                    f"{len(cells)} cells for {len(columns)} columns: quote cells that contain commas",
                )
            record = {name: (cells[i] if i < len(cells) else "") for i, name in enumerate(columns) if name}
            rows.append((line, record))
    return columns, rows


def _read_jsonl(path: str) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    columns: list[str] = []
    rows = []
    with open(path, encoding="utf-8-sig") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                raise _fail(path, f"line {line}", f"not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise _fail(path, f"line {line}", "each line must be one JSON object")
            for key in record:
                if key not in columns:
                    columns.append(key)
            rows.append((line, record))
    return columns, rows


def _same_subject(path: str, line: int, value: Any) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if text in ("1", "true"):
        return True
    if text in ("0", "false"):
        return False
    raise _fail(
        path,
        f"line {line}, column '{IDENTITY_COLUMN}'",
        f"expected 1 (same subject as the reference) or 0 (another subject), got {value!r}",
    )


def _named_raters(path: str, columns: list[str]) -> dict[str, list[str]]:
    """Per aspect, the rater names of the per-rater columns (human_<aspect>.<rater>) of the header."""
    raters: dict[str, list[str]] = {aspect: [] for aspect in ASPECTS}
    for column in columns:
        for aspect in ASPECTS:
            base = RATING_PREFIX + aspect
            if column.startswith(base + "."):
                name = column[len(base) + 1 :].strip()
                if not name:
                    raise _fail(path, "line 1", f"column '{column}' names no rater: use {base}.<rater>")
                raters[aspect].append(name)
    return raters


def _row_ratings(
    path: str, line: int, record: dict, raters: dict[str, list[str]], pooled_form: dict[str, bool]
) -> dict:
    """The row's ratings per aspect (rater -> rating; "" for the pooled column), noting new rater names."""
    ratings: dict[str, dict[str, float]] = {}
    for aspect in ASPECTS:
        given: dict[str, float] = {}
        column = RATING_PREFIX + aspect
        value = record.get(column)
        if isinstance(value, dict):  # JSONL shorthand: {"<rater>": rating}
            for rater, rating in value.items():
                rater = str(rater).strip()
                number = _rating(path, line, f"{column}.{rater}", rating)
                if number is not None:
                    given[rater] = number
                    if rater not in raters[aspect]:
                        raters[aspect].append(rater)
        else:
            number = _rating(path, line, column, value)
            if number is not None:
                given[""] = number
                pooled_form[aspect] = True
        for rater in raters[aspect]:
            key = f"{column}.{rater}"
            if key in record:
                number = _rating(path, line, key, record[key])
                if number is not None:
                    given[rater] = number
        if given:
            ratings[aspect] = given
    return ratings


def _row(
    path: str, folder: str, index: int, line: int, record: dict, ratings: dict, missing: dict[str, str]
) -> ManifestRow:
    """One checked row: texts read, paths resolved against the manifest's folder, files checked (see ``missing``)."""
    missing_here = [c for c in REQUIRED_COLUMNS if c not in record]
    if missing_here:
        raise _fail(path, f"line {line}", f"has no '{missing_here[0]}' key")
    refs = _paths(path, line, "ref", record["ref"])
    ref_masks = _paths(path, line, "ref_mask", record["ref_mask"])
    if len(ref_masks) != len(refs):
        raise _fail(
            path,
            f"line {line}, column 'ref_mask'",
            f"{len(ref_masks)} masks for {len(refs)} reference views: give one mask per view, separated by "
            f"'{PATH_SEPARATOR}'",
        )
    out = _text(path, line, "out", record["out"], required=True)
    out_mask = _text(path, line, "out_mask", record["out_mask"], required=False)
    ref_paths = tuple(_resolve(folder, p) for p in refs)
    ref_mask_paths = tuple(_resolve(folder, p) for p in ref_masks)
    out_path = _resolve(folder, out)
    out_mask_path = _resolve(folder, out_mask) if out_mask else None
    for column, names, resolved in (
        ("ref", refs, ref_paths),
        ("ref_mask", ref_masks, ref_mask_paths),
        ("out", (out,), (out_path,)),
        ("out_mask", (out_mask,) if out_mask else (), (out_mask_path,) if out_mask else ()),
    ):
        for name, full in zip(names, resolved):
            _check_file(path=path, line=line, column=column, name=name, resolved=full, missing=missing)
    subject = _text(path, line, "subject", record["subject"], required=False) or ""
    extra = further_subjects(
        path=path,
        folder=folder,
        line=line,
        record=record,
        missing=missing,
        first_subject=subject,
        first_out_mask=out_mask,
    )
    return ManifestRow(
        index=index,
        line=line,
        ref=refs,
        ref_mask=ref_masks,
        out=out,
        out_mask=out_mask,
        prompt=_text(path, line, "prompt", record["prompt"], required=False) or "",
        subject=subject,
        extra_subjects=extra,
        method=_text(path, line, "method", record.get("method"), required=False) or DEFAULT_METHOD,
        seed=_seed(path, line, record.get("seed")),
        id=_text(path, line, "id", record.get("id"), required=False),
        ratings=ratings,
        same_subject=_same_subject(path, line, record.get(IDENTITY_COLUMN)),
        ref_paths=ref_paths,
        ref_mask_paths=ref_mask_paths,
        out_path=out_path,
        out_mask_path=out_mask_path,
    )


def _check_identity_labels(path: str, rows: list[ManifestRow]) -> None:
    """``same_subject`` labels every row or none: a half-labelled manifest would score a different set of pairs."""
    unlabelled = [row for row in rows if row.same_subject is None]
    if unlabelled and len(unlabelled) < len(rows):
        more = f" (and {len(unlabelled) - 1} more)" if len(unlabelled) > 1 else ""
        raise MascInputError(
            f"manifest '{path}' labels {len(rows) - len(unlabelled)} of {len(rows)} rows with {IDENTITY_COLUMN}, "
            f"but not line {unlabelled[0].line}{more}: give every row 1 or 0, or leave the column out"
        )


def read_manifest(path: str | os.PathLike) -> Manifest:
    """Read and check a CSV or JSONL manifest (format from the extension, else from the first line)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MascInputError(f"manifest '{path}' does not exist: check the path")
    if os.path.isdir(path):
        raise MascInputError(f"manifest '{path}' is a folder: pass a .csv or .jsonl file")
    check_regular_file(path, "manifest", hint="pass a .csv or .jsonl file")
    try:
        columns, records = _read_jsonl(path) if _detect_format(path) == "jsonl" else _read_csv(path)
    except UnicodeDecodeError:
        raise MascInputError(f"manifest '{path}' is not UTF-8 text: save it as UTF-8 CSV or JSONL") from None
    if not records:
        raise MascInputError(f"manifest '{path}' has no rows: add one row per generated image")
    return parse_records(path, os.path.dirname(os.path.abspath(path)), columns, records)


def parse_records(
    path: str,
    folder: str,
    columns: list[str],
    records: list[tuple[int, dict[str, Any]]],
    indices: list[int] | None = None,
) -> Manifest:
    """Rows given as (line, {column: value}) checked, paths resolved against ``folder`` (a file's or a batch's rows).

    ``path`` names their source in messages; ``indices`` are the rows' keys (default 0, 1, ...)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise MascInputError(
            f"manifest '{path}' has no column '{missing[0]}': the columns are {', '.join(REQUIRED_COLUMNS)} "
            "(plus optional method, seed, id, same_subject, human_cp, human_pf)"
        )
    raters = _named_raters(path, columns)
    pooled_form = {aspect: False for aspect in ASPECTS}
    rows = []
    missing_files: dict[str, str] = {}
    for position, (line, record) in enumerate(records):
        ratings = _row_ratings(path, line, record, raters, pooled_form)
        index = indices[position] if indices is not None else position
        rows.append(
            _row(
                path=path, folder=folder, index=index, line=line, record=record, ratings=ratings, missing=missing_files
            )
        )
    if missing_files:
        raise missing_files_error(
            f"manifest '{path}'",
            list(missing_files.values()),
            "fix the paths (relative ones are resolved against the manifest's folder)",
        )
    _check_identity_labels(path, rows)
    for aspect in ASPECTS:
        if pooled_form[aspect] and raters[aspect]:
            raise MascInputError(
                f"manifest '{path}' has both human_{aspect} ratings and per-rater human_{aspect}.<rater> ratings: "
                "give one pooled column or one column per rater, not both"
            )
    return Manifest(path=path, rows=rows, raters=raters)
