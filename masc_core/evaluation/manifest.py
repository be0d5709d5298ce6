"""Evaluation manifests: one row per generated image to score, read from CSV or JSONL (``manifest_formats``).

Columns (CSV header, or JSONL object keys):

- required: ``ref``, ``ref_mask``, ``out``, ``out_mask``, ``prompt``, ``subject``;
- several subjects in one image: subject k (2 <= k <= 8) adds ``subject_k`` (its name(s), comma-separated),
  ``ref_k``, ``ref_mask_k`` and ``out_mask_k`` (optional, but for every subject of the row or for none:
  exclusivity needs every region). The single-subject columns are the first subject, so a single-subject manifest
  is the K = 1 case; subjects are numbered without gaps; an all-empty set of cells means no such subject; no name
  may belong to two subjects of a row;
- optional: ``method``, ``seed``, ``id``, ``same_subject``, and human ratings (``manifest_ratings``).

``ref`` and ``ref_mask`` may name several views, ``|``-separated in CSV (a JSON list in JSONL), one mask per view.
``out_mask`` may be empty (PF is then undefined); so may ``prompt`` and ``subject``.

``same_subject`` labels identity pairs (the paper's ORIDa regime): 1 when ``out`` shows the reference's subject, 0
when it shows another one (JSONL also takes true/false). When the column is there, every row needs a label: ``eval``
then reports how well each concept metric tells the two apart (ROC AUC; see ``discrimination``).

Relative paths are resolved against the manifest's folder, so a manifest and its images can be moved together.
Every file is checked to exist when the manifest is read, before anything is scored; the missing ones are listed
together (their count and the first few), so one round of fixes is enough. Bad input raises ``MascInputError`` with
one line naming the file, the line and the column. Other columns are ignored.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import MascInputError
from ..io.files import check_regular_file
from ..metric.stripping import parse_subject_names
from ..metric.subjects import MAX_SUBJECTS
from .manifest_formats import fail, read_records
from .manifest_ratings import ASPECTS, Raters

REQUIRED_COLUMNS = ("ref", "ref_mask", "out", "out_mask", "prompt", "subject")
IDENTITY_COLUMN = "same_subject"
"""1/0: does ``out`` show the reference's subject (identity pairs, the paper's ORIDa regime)."""
DEFAULT_METHOD = "default"
"""Method name of rows whose ``method`` is missing or empty."""
PATH_SEPARATOR = "|"
LISTED_PROBLEMS = 3
"""How many missing files a message names (after their count)."""
_NUMBERED = re.compile(r"^(subject|ref|ref_mask|out_mask)_(\d+)$")


@dataclass(frozen=True)
class RowSubject:
    """Subject k >= 2 of a manifest row, as written and resolved against the manifest's folder."""

    subject: str
    ref: tuple[str, ...]
    ref_mask: tuple[str, ...]
    out_mask: str | None
    ref_paths: tuple[str, ...] = ()
    ref_mask_paths: tuple[str, ...] = ()
    out_mask_path: str | None = None

    def content(self) -> list:
        """What this subject contributes to its row's scores (``plan.row_content``), paths as written."""
        return [self.subject, list(self.ref), list(self.ref_mask), self.out_mask]


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
    """Subjects 2..K of a several-subject image (columns ``subject_2``, ``ref_2``, ...); empty for a single-subject
    row, whose only subject is the fields above."""

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


def column(stem: str, k: int) -> str:
    """The manifest column of subject ``k``'s ``stem``: the single-subject column for k = 1, ``<stem>_<k>`` after."""
    return stem if k == 1 else f"{stem}_{k}"


def all_names_of(row: ManifestRow) -> list[str]:
    """Every subject's names of a manifest row, in subject order (what PF strips)."""
    names = parse_subject_names(row.subject)
    for subject in row.extra_subjects:
        names += parse_subject_names(subject.subject)
    return names


def missing_files_error(what: str, missing: list[str], hint: str) -> MascInputError:
    """One line for many missing files: their count, the first few (``missing``: one description each), what to do."""
    missing = list(missing)
    count = len(missing)
    listed = "; ".join(missing[:LISTED_PROBLEMS])
    more = f"; and {count - LISTED_PROBLEMS} more" if count > LISTED_PROBLEMS else ""
    verb = "file does" if count == 1 else "files do"
    return MascInputError(f"{what}: {count} {verb} not exist: {listed}{more}: {hint}")


def read_manifest(path: str | os.PathLike) -> Manifest:
    """Read and check a CSV or JSONL manifest (format from the extension, else from the first line)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MascInputError(f"manifest '{path}' does not exist: check the path")
    if os.path.isdir(path):
        raise MascInputError(f"manifest '{path}' is a folder: pass a .csv or .jsonl file")
    check_regular_file(path, "manifest", hint="pass a .csv or .jsonl file")
    try:
        columns, records = read_records(path)
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
    absent = [c for c in REQUIRED_COLUMNS if c not in columns]
    if absent:
        raise MascInputError(
            f"manifest '{path}' has no column '{absent[0]}': the columns are {', '.join(REQUIRED_COLUMNS)} "
            "(plus optional method, seed, id, same_subject, human_cp, human_pf)"
        )
    raters = Raters(path, columns)
    reader = _RowReader(path, folder)
    rows = []
    for position, (line, record) in enumerate(records):
        ratings = raters.row(line, record)
        rows.append(reader.row(indices[position] if indices is not None else position, line, record, ratings))
    if reader.missing:
        raise missing_files_error(
            f"manifest '{path}'",
            list(reader.missing.values()),
            "fix the paths (relative ones are resolved against the manifest's folder)",
        )
    _check_identity_labels(path, rows)
    return Manifest(path=path, rows=rows, raters=raters.check())


class _RowReader:
    """The rows of one manifest read cell by cell, the files they name noted where each is first missing."""

    def __init__(self, path: str, folder: str):
        self.path, self.folder = path, folder
        self.missing: dict[str, str] = {}  # resolved path -> where it is first named, listed after the last row

    def row(self, index: int, line: int, record: dict, ratings: dict) -> ManifestRow:
        absent = [c for c in REQUIRED_COLUMNS if c not in record]
        if absent:
            raise fail(self.path, f"line {line}", f"has no '{absent[0]}' key")
        first = self.subject(line, record, 1)
        out = self.text(line, "out", record["out"], required=True)
        out_path = self.resolve(out)
        self.check_files(line, 1, first, out=(out, out_path))
        extra = tuple(self.subject(line, record, k) for k in self.numbers(line, record))
        for k, subject in enumerate(extra, start=2):
            self.check_files(line, k, subject)
        if extra:
            self.check_subjects(line, (first,) + extra)
        return ManifestRow(
            index=index,
            line=line,
            ref=first.ref,
            ref_mask=first.ref_mask,
            out=out,
            out_mask=first.out_mask,
            prompt=self.text(line, "prompt", record["prompt"], required=False) or "",
            subject=first.subject,
            extra_subjects=extra,
            method=self.text(line, "method", record.get("method"), required=False) or DEFAULT_METHOD,
            seed=self.seed(line, record.get("seed")),
            id=self.text(line, "id", record.get("id"), required=False),
            ratings=ratings,
            same_subject=self.same_subject(line, record.get(IDENTITY_COLUMN)),
            ref_paths=first.ref_paths,
            ref_mask_paths=first.ref_mask_paths,
            out_path=out_path,
            out_mask_path=first.out_mask_path,
        )

    def subject(self, line: int, record: dict, k: int) -> RowSubject:
        """Subject ``k``'s columns (k = 1: the single-subject ones) read and resolved; subject k >= 2 is named."""
        names = self.text(line, column("subject", k), record.get(column("subject", k)), required=False) or ""
        if k > 1 and not parse_subject_names(names):
            raise fail(
                self.path,
                f"line {line}, column '{column('subject', k)}'",
                f"is empty: give subject {k}'s name (its other columns are filled)",
            )
        refs = self.paths(line, column("ref", k), record.get(column("ref", k)))
        ref_masks = self.paths(line, column("ref_mask", k), record.get(column("ref_mask", k)))
        if len(ref_masks) != len(refs):
            raise fail(
                self.path,
                f"line {line}, column '{column('ref_mask', k)}'",
                f"{len(ref_masks)} masks for {len(refs)} reference views: give one mask per view, separated by "
                f"'{PATH_SEPARATOR}'",
            )
        out_mask = self.text(line, column("out_mask", k), record.get(column("out_mask", k)), required=False)
        return RowSubject(
            subject=names,
            ref=refs,
            ref_mask=ref_masks,
            out_mask=out_mask,
            ref_paths=tuple(self.resolve(p) for p in refs),
            ref_mask_paths=tuple(self.resolve(p) for p in ref_masks),
            out_mask_path=self.resolve(out_mask) if out_mask else None,
        )

    def check_files(self, line: int, k: int, subject: RowSubject, out: tuple[str, str] | None = None) -> None:
        """Subject ``k``'s files (and the row's ``out``: name, resolved) checked in column order: a folder refused
        at once, a missing file noted to be listed with the others."""
        mask = ((subject.out_mask, subject.out_mask_path),) if subject.out_mask else ()
        for stem, files in (
            ("ref", tuple(zip(subject.ref, subject.ref_paths))),
            ("ref_mask", tuple(zip(subject.ref_mask, subject.ref_mask_paths))),
            ("out", (out,) if out else ()),
            ("out_mask", mask),
        ):
            for name, resolved in files:
                where = f"line {line}, column '{column(stem, k)}'"
                shown = f"'{name}'" if os.path.abspath(name) == resolved else f"'{name}' (resolved to '{resolved}')"
                if not os.path.exists(resolved):
                    self.missing.setdefault(resolved, f"{where}: file {shown}")
                elif os.path.isdir(resolved):
                    raise fail(self.path, where, f"{shown} is a folder, not an image file")

    def numbers(self, line: int, record: dict) -> list[int]:
        """The further subjects the row gives (k >= 2 with a non-empty cell), numbered 2, 3, ... without gaps."""
        found = set()
        for key, value in record.items():
            match = _NUMBERED.match(str(key))
            if match and value is not None and (str(value).strip() if isinstance(value, str) else value != []):
                found.add(int(match.group(2)))
        numbers = sorted(found)
        if not numbers:
            return []
        if numbers[0] < 2:
            raise fail(
                self.path,
                f"line {line}, column 'subject_{numbers[0]}'",
                "subjects after the first are numbered from 2 (subject_2, ref_2, ...)",
            )
        if numbers[-1] > MAX_SUBJECTS:
            raise fail(
                self.path,
                f"line {line}, column 'subject_{numbers[-1]}'",
                f"at most {MAX_SUBJECTS} subjects per image are supported",
            )
        gaps = [k for k in range(2, numbers[-1] + 1) if k not in found]
        if gaps:
            raise fail(
                self.path,
                f"line {line}",
                f"gives subject {numbers[-1]} but not subject {gaps[0]}: number the subjects 2, 3, ... without gaps",
            )
        return numbers

    def check_subjects(self, line: int, subjects: tuple[RowSubject, ...]) -> None:
        """Several subjects: every one named, no name shared, output masks for all or none."""
        if not parse_subject_names(subjects[0].subject):
            raise fail(
                self.path,
                f"line {line}, column 'subject'",
                "is empty: with several subjects each needs its name (PF strips them all)",
            )
        owner: dict[str, int] = {}
        for k, subject in enumerate(subjects, start=1):
            for name in parse_subject_names(subject.subject):
                other = owner.setdefault(name.lower(), k)
                if other != k:
                    raise fail(
                        self.path,
                        f"line {line}, column '{column('subject', k)}'",
                        f"the name '{name}' is also subject {other}'s: each name must belong to one subject",
                    )
        given = [s.out_mask is not None for s in subjects]
        if any(given) and not all(given):
            raise fail(
                self.path,
                f"line {line}, column '{column('out_mask', given.index(False) + 1)}'",
                "is empty while another subject of the row has its output mask: give every subject's out_mask, or none",
            )

    def text(self, line: int, name: str, value: Any, *, required: bool) -> str | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise fail(self.path, f"line {line}, column '{name}'", "is empty")
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise fail(self.path, f"line {line}, column '{name}'", f"expected text, got {type(value).__name__}")
        return str(value)

    def paths(self, line: int, name: str, value: Any) -> tuple[str, ...]:
        items = value if isinstance(value, list) else str(value or "").split(PATH_SEPARATOR)
        names = tuple(str(item).strip() for item in items if item is not None and str(item).strip())
        if not names:
            raise fail(self.path, f"line {line}, column '{name}'", "is empty: give an image path")
        return names

    def resolve(self, name: str) -> str:
        return os.path.normpath(name if os.path.isabs(name) else os.path.join(self.folder, name))

    def seed(self, line: int, value: Any) -> int | str | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, bool):
            raise fail(self.path, f"line {line}, column 'seed'", "expected a number or a name, got true/false")
        if isinstance(value, int):
            return value
        text = str(value).strip()
        try:
            return int(text)
        except ValueError:
            return text

    def same_subject(self, line: int, value: Any) -> bool | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        text = str(value).strip().lower()
        if text in ("1", "true", "0", "false"):
            return text in ("1", "true")
        problem = f"expected 1 (same subject as the reference) or 0 (another subject), got {value!r}"
        raise fail(self.path, f"line {line}, column '{IDENTITY_COLUMN}'", problem)


def _check_identity_labels(path: str, rows: list[ManifestRow]) -> None:
    """``same_subject`` labels every row or none: a half-labelled manifest would score a different set of pairs."""
    unlabelled = [row for row in rows if row.same_subject is None]
    if unlabelled and len(unlabelled) < len(rows):
        more = f" (and {len(unlabelled) - 1} more)" if len(unlabelled) > 1 else ""
        raise MascInputError(
            f"manifest '{path}' labels {len(rows) - len(unlabelled)} of {len(rows)} rows with {IDENTITY_COLUMN}, "
            f"but not line {unlabelled[0].line}{more}: give every row 1 or 0, or leave the column out"
        )
