"""Evaluation results: the typed row record, and the files an evaluation writes.

``EvalRecord`` is one scored manifest row: its labels, paths and texts,
every metric's value (``metrics``: MaSC's ``cp`` and ``pf`` first, then the
baselines in the order the run asked for them), why a value is undefined,
the mask filter's flags and the human ratings.

In the output folder:

- ``results.jsonl``: one JSON object per manifest row. While a run is going,
  each finished chunk of rows is appended and flushed (the resume log); at
  the end the file is rewritten sorted by row.
- ``results.csv``: the same rows, flat (lists joined with ``|``).
- ``summary.json``: computed from the rows alone (see ``summary``).
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
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..io.files import check_regular_file, write_atomic
from .append_log import AppendLog, jsonl_format, jsonl_record_end
from .manifest import ASPECTS, ManifestRow

RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
SUMMARY_JSON = "summary.json"
RUN_JSON = "run.json"
TIMING_JSON = "timing.json"

MASC_COLUMNS = ("cp", "pf")


@dataclass
class EvalRecord:
    """One scored manifest row (a line of results.jsonl)."""

    row: int
    """The row's index in the manifest (0-based): its key in every result file."""
    id: str | None
    method: str
    seed: int | str | None
    subject: str
    prompt: str
    encoded_prompt: str | None
    """The prompt after subject stripping: what PF compared with."""
    subject_found: bool | None
    ref: list[str]
    ref_mask: list[str]
    out: str
    out_mask: str | None
    metrics: dict[str, float | None]
    """Metric column -> value (None when undefined): cp, pf, then the baselines in the run's order."""
    cp_per_reference: list[float | None] = field(default_factory=list)
    cp_undefined: str | None = None
    pf_undefined: str | None = None
    metric_undefined: dict[str, str] = field(default_factory=dict)
    """Baseline column -> why its value is undefined (results.jsonl: ``baseline_undefined``)."""
    out_foreground: float | None = None
    ref_foreground: list[float] = field(default_factory=list)
    small_out_mask: bool = False
    small_ref_mask: bool = False
    filtered: bool = False
    """Dropped by the paper's mask filter (output or reference mask below ``min_foreground``)."""
    human_cp: float | None = None
    human_pf: float | None = None
    ratings: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per aspect: rater -> rating ("" for the single-column form)."""
    same_subject: bool | None = None
    """Identity pairs: does the output show the reference's subject (the manifest's label; None unlabelled)."""
    fingerprint: str = ""
    """Hash of what the scores depend on (see ``plan``): the resume key."""
    subjects: list[dict[str, Any]] | None = None
    """Several subjects per image: each subject's ``{"subject", "cp", "mask"}`` (``cp`` above is their cp_min);
    None for a single-subject row (and then absent from results.jsonl)."""
    blends: list[str] | None = None
    """Several subjects per image: the blend warnings."""

    def value(self, column: str) -> float | None:
        return self.metrics.get(column)

    def human(self, aspect: str) -> float | None:
        return self.human_cp if aspect == "cp" else self.human_pf if aspect == "pf" else None

    def apply_filter(self, min_foreground: float) -> None:
        """Set the filter flags from the mask fractions (the paper's filter, Sec. 3.1)."""
        self.small_out_mask = self.out_foreground is not None and self.out_foreground < min_foreground
        self.small_ref_mask = any(f < min_foreground for f in self.ref_foreground)
        self.filtered = self.small_out_mask or self.small_ref_mask

    def relabel(self, row: ManifestRow, min_foreground: float) -> "EvalRecord":
        """The stored scores with the manifest's current labels, ratings and filter flags (no rescoring)."""
        self.id, self.method, self.seed = row.id, row.method, row.seed
        self.human_cp, self.human_pf = row.human("cp"), row.human("pf")
        self.ratings = {aspect: dict(row.ratings[aspect]) for aspect in ASPECTS if aspect in row.ratings}
        self.same_subject = row.same_subject
        self.apply_filter(min_foreground)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The results.jsonl object, keys in the file's order (MaSC's own columns first)."""
        data: dict[str, Any] = {
            "row": self.row,
            "id": self.id,
            "method": self.method,
            "seed": self.seed,
            "subject": self.subject,
            "prompt": self.prompt,
            "encoded_prompt": self.encoded_prompt,
            "subject_found": self.subject_found,
            "ref": list(self.ref),
            "ref_mask": list(self.ref_mask),
            "out": self.out,
            "out_mask": self.out_mask,
        }
        data.update({name: self.metrics.get(name) for name in MASC_COLUMNS if name in self.metrics})
        data.update(
            cp_per_reference=list(self.cp_per_reference), cp_undefined=self.cp_undefined, pf_undefined=self.pf_undefined
        )
        data.update({name: value for name, value in self.metrics.items() if name not in MASC_COLUMNS})
        data.update(
            baseline_undefined=dict(self.metric_undefined),
            out_foreground=self.out_foreground,
            ref_foreground=list(self.ref_foreground),
            small_out_mask=self.small_out_mask,
            small_ref_mask=self.small_ref_mask,
            filtered=self.filtered,
            human_cp=self.human_cp,
            human_pf=self.human_pf,
            ratings=self.ratings,
            same_subject=self.same_subject,
            fingerprint=self.fingerprint,
        )
        if self.subjects is not None:  # only then: single-subject results keep their bytes
            data.update(subjects=self.subjects, blends=list(self.blends or []))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalRecord":
        """A record from a results.jsonl object; keys that are not fields are metric columns."""
        known = {k: data.get(k) for k in _FIELDS}
        metrics = {k: v for k, v in data.items() if k not in _FIELDS and k != "baseline_undefined"}
        return cls(
            **{k: v for k, v in known.items() if v is not None or k in _NULLABLE},
            metrics=metrics,
            metric_undefined=dict(data.get("baseline_undefined") or {}),
        )


_FIELDS = (
    "row",
    "id",
    "method",
    "seed",
    "subject",
    "prompt",
    "encoded_prompt",
    "subject_found",
    "ref",
    "ref_mask",
    "out",
    "out_mask",
    "cp_per_reference",
    "cp_undefined",
    "pf_undefined",
    "out_foreground",
    "ref_foreground",
    "small_out_mask",
    "small_ref_mask",
    "filtered",
    "human_cp",
    "human_pf",
    "ratings",
    "same_subject",
    "fingerprint",
    "subjects",
    "blends",
)
_NULLABLE = {
    "id",
    "seed",
    "encoded_prompt",
    "subject_found",
    "out_mask",
    "cp_undefined",
    "pf_undefined",
    "out_foreground",
    "human_cp",
    "human_pf",
    "same_subject",
    "subjects",
    "blends",
}


def as_record(value: "EvalRecord | dict") -> EvalRecord:
    """A results.jsonl object or an EvalRecord, as an EvalRecord."""
    return value if isinstance(value, EvalRecord) else EvalRecord.from_dict(value)


def record_line(record: "EvalRecord | dict") -> str:
    """One results.jsonl line (newline included)."""
    data = record.to_dict() if isinstance(record, EvalRecord) else record
    return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"


def records_from_lines(text: str) -> list[EvalRecord]:
    """The records of ``record_line`` lines joined together (a Ray worker's chunk), split on newline only.

    Never ``str.splitlines``: it also breaks at U+2028, U+2029, U+0085 and other characters a prompt may
    hold raw (``record_line`` writes non-ASCII text as is).
    """
    return [EvalRecord.from_dict(json.loads(line)) for line in text.split("\n") if line]


def canonical(records: Iterable[EvalRecord]) -> list[EvalRecord]:
    """The records through JSON and back, as a merge reads them: a summary then sees the exact values a merge would."""
    return [EvalRecord.from_dict(json.loads(record_line(r))) for r in records]


def read_records(path: str) -> dict[int, EvalRecord]:
    """Rows of a results.jsonl by row index; a later line for the same row wins.

    Read as bytes and split on newline only (a prompt may hold U+2028 or U+0085, which ``str.splitlines``
    would break at). A line that is not complete JSON (a run killed while writing, possibly inside a
    UTF-8 character) is ignored: its chunk is simply scored again.
    """
    records: dict[int, EvalRecord] = {}
    if not os.path.exists(path):
        return records
    check_regular_file(path, "results log")
    with open(path, "rb") as handle:
        data = handle.read()
    for line in data[: jsonl_record_end(data)].split(b"\n"):
        try:
            record = json.loads(line.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError included
            continue
        if isinstance(record, dict) and isinstance(record.get("row"), int) and not isinstance(record.get("row"), bool):
            records[record["row"]] = EvalRecord.from_dict(record)
    return records


RESULTS_LOG = jsonl_format("results.jsonl of a MaSC evaluation", frozenset({"row"}), b'{"row": ')
"""results.jsonl: each line a row object, "row" first (``record_line``)."""


def open_results_log(path: str) -> AppendLog:
    """results.jsonl opened for appending finished rows (``AppendLog``: locked, torn line cut, synced)."""
    return AppendLog(path, RESULTS_LOG, hint="give eval an --out-dir of its own")


# ---------------------------------------------------------------- CSV

_LEADING_COLUMNS = (
    "row",
    "id",
    "method",
    "seed",
    "subject",
    "prompt",
    "encoded_prompt",
    "ref",
    "ref_mask",
    "out",
    "out_mask",
)
_TRAILING_COLUMNS = (
    "out_foreground",
    "ref_foreground",
    "small_out_mask",
    "small_ref_mask",
    "filtered",
    "human_cp",
    "human_pf",
)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet run a cell as a formula (OWASP's list for CSV injection)."""


def spreadsheet_text(text: str) -> str:
    """Text a spreadsheet shows and never runs: a leading ``'`` before a formula start (or before a ``'``).

    Reversible: every text that starts with ``'`` in the file had one added, so a reader drops one.
    """
    return "'" + text if text.startswith(FORMULA_STARTS + ("'",)) else text


def csv_cell(value: Any, *, spreadsheet: bool = True) -> str:
    """One CSV cell: empty for None, true/false, shortest float repr, lists joined with ``|``.

    Text (prompts, subjects, labels, ids: anything a workflow or a manifest supplies) goes through
    ``spreadsheet_text`` unless ``spreadsheet`` is False (typed columns handed to code, not to a file);
    numbers, negative ones included, stay numbers.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "|".join(csv_cell(v, spreadsheet=spreadsheet) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {csv_cell(v, spreadsheet=False)}" for k, v in value.items())
    if isinstance(value, str):
        return spreadsheet_text(value) if spreadsheet else value
    return str(value)


def csv_columns(records: list[EvalRecord], metrics: Iterable[str]) -> list[str]:
    """Columns of results.csv: labels and paths, the metrics, flags and ratings, per-rater ratings, identity labels,
    reasons."""
    raters: dict[str, list[str]] = {"cp": [], "pf": []}
    for record in records:
        for aspect, given in record.ratings.items():
            for rater in given:
                if rater and rater not in raters.setdefault(aspect, []):
                    raters[aspect].append(rater)
    columns = list(_LEADING_COLUMNS) + list(metrics) + list(_TRAILING_COLUMNS)
    for aspect in ASPECTS:
        columns += [f"human_{aspect}.{rater}" for rater in raters.get(aspect, [])]
    if any(record.same_subject is not None for record in records):
        columns.append("same_subject")
    if any(record.subjects is not None for record in records):
        columns += ["subjects", "blends"]
    return columns + ["cp_undefined", "pf_undefined", "notes", "fingerprint"]


def csv_cells(record: EvalRecord, columns: list[str], *, spreadsheet: bool = True) -> list[str]:
    """One results.csv row: ``record``'s cell (text) in each of ``columns`` (``csv_cell``)."""
    data = record.to_dict()
    cells = []
    for column in columns:
        if column.startswith("human_") and "." in column:
            aspect, rater = column[len("human_") :].split(".", 1)
            value = (data.get("ratings") or {}).get(aspect, {}).get(rater)
        elif column == "notes":
            value = data.get("baseline_undefined") or None
        else:
            value = data.get(column)
        cells.append(csv_cell(value, spreadsheet=spreadsheet))
    return cells


def csv_lines(rows: Iterable[list[str]]) -> str:
    """CSV text of rows of cells, each record ended by ``\n``.

    A row with a cell holding a carriage return is written with every cell quoted: the csv module quotes
    only the line terminator's characters, and readers (spreadsheets, the csv module) end a record at a
    bare CR, which would cut the row in two.
    """
    buffer = io.StringIO()
    plain = csv.writer(buffer, lineterminator="\n")
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        (quoted if any("\r" in cell for cell in row) else plain).writerow(row)
    return buffer.getvalue()


def csv_text(records: list[EvalRecord], metrics: Iterable[str]) -> str:
    """results.csv for ``records`` (sorted by row)."""
    columns = csv_columns(records, metrics)
    return csv_lines([columns] + [csv_cells(record, columns) for record in records])


def write_results(folder: str, records: list[EvalRecord], metrics: Iterable[str]) -> None:
    """results.jsonl and results.csv for ``records``, which must be sorted by row."""
    metrics = list(metrics)
    write_atomic(os.path.join(folder, RESULTS_JSONL), "".join(record_line(r) for r in records))
    write_atomic(os.path.join(folder, RESULTS_CSV), csv_text(records, metrics))
