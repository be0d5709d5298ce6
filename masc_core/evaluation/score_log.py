"""A running log of scored images (the MaSC Log Scores node): one row per image, appended across runs.

The columns ``eval`` writes too keep their names and meanings there
(``EvalRecord.to_dict``, results.csv): ``id``, ``method``, ``seed``,
``subject``, ``prompt``, ``encoded_prompt``, ``subject_found``, ``cp``,
``pf``, ``cp_per_reference``, ``cp_undefined``, ``pf_undefined``,
``out_foreground``, ``ref_foreground``, ``small_out_mask``,
``small_ref_mask``, ``filtered``; so a night of sampling loads beside an
evaluation's results. The log's own columns say when and where a score was
made: ``time`` (UTC), ``run`` (one node execution), ``node``, ``node_id``,
``index`` (the image's position in what the node scored: a candidate's
number in MaSC Sample Until), ``verdict``, ``output`` (position among the
images the node passed on, or empty), ``encoder``, ``encoder_digest``,
``metric_version``; ``label`` is the artist's choice in MaSC Pick ("picked",
"passed over"), which ``calibrate`` reads back (``read_log``); ``cell`` is the
MaSC Sweep cell an image was sampled in.

Formats by the file's suffix: ``.jsonl`` (one JSON object per line) or ``.csv``
(the header written once; a file with other columns is refused, never
mixed). A CSV log started by an earlier MaSC keeps its columns
(``HEADER_HISTORY``): rows that would leave a newer column empty are
written in the file's columns; rows with a value there (several subjects,
bands) are refused for it, with the hint to start a new file, so no figure
is dropped. Appends go through ``AppendLog``: each one locked against other
writers (two ComfyUI instances on one output folder, a script beside a
node), a record a crash cut short dropped first (for CSV, a whole record,
line breaks in a prompt included), flushed and synced; a file that is not
such a log is refused and left as it was. Text cells of the CSV start with
``'`` where a spreadsheet would otherwise run them as a formula (``=``,
``+``, ``-``, ``@``, tab, CR; and ``'`` itself, so a reader drops exactly
one); numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Any

from ..errors import MascInputError
from ..io.files import JSONUnreadable, check_regular_file, parse_json
from ..metric.scores import ScoreBatch, defined_number, subject_figures
from ..version import __version__
from ..safe_text import shown
from .append_log import AppendLog, LogFormat, csv_record_end, jsonl_format, jsonl_record_end
from .records import csv_cell, csv_lines, record_line

SINGLE_SUBJECT_COLUMNS = (
    "time",
    "run",
    "node",
    "node_id",
    "index",
    "id",
    "method",
    "seed",
    "subject",
    "prompt",
    "encoded_prompt",
    "subject_found",
    "cp",
    "pf",
    "cp_per_reference",
    "cp_undefined",
    "pf_undefined",
    "out_foreground",
    "ref_foreground",
    "small_out_mask",
    "small_ref_mask",
    "filtered",
    "verdict",
    "output",
    "encoder",
    "encoder_digest",
    "metric_version",
)
"""The columns of CSV logs written before several subjects per image (MaSC 0.2.0 and earlier)."""
SUBJECT_COLUMNS = ("subjects", "blends")
BAND_COLUMNS = ("cp_band", "pf_band")
LABEL_COLUMNS = ("label",)
"""The artist's label from MaSC Pick: "picked", "passed over", or empty (not shown, or a default)."""
PRUNE_COLUMNS = ("previews", "evaluations")
"""MaSC Sample Until with pruning or a study: the candidate's preview scores ([{round, step, steps, cp, pf}]) and the
model evaluations it took."""
CLIP_COLUMNS = ("clip",)
"""A video candidate (MaSC Sample Until on a video latent): the clip's summary and each scored frame's CP and PF; its
``cp`` and ``pf`` are its worst frame's."""
SWEEP_COLUMNS = ("cell",)
"""MaSC Sweep: the cell (a LoRA file at its strengths, or the baseline) the image was sampled in."""
LOG_COLUMNS = (
    SINGLE_SUBJECT_COLUMNS
    + SUBJECT_COLUMNS
    + BAND_COLUMNS
    + LABEL_COLUMNS
    + PRUNE_COLUMNS
    + CLIP_COLUMNS
    + SWEEP_COLUMNS
)
HEADER_HISTORY = (
    SINGLE_SUBJECT_COLUMNS,
    SINGLE_SUBJECT_COLUMNS + SUBJECT_COLUMNS,
    SINGLE_SUBJECT_COLUMNS + SUBJECT_COLUMNS + BAND_COLUMNS,
    SINGLE_SUBJECT_COLUMNS + SUBJECT_COLUMNS + BAND_COLUMNS + LABEL_COLUMNS,
    SINGLE_SUBJECT_COLUMNS + SUBJECT_COLUMNS + BAND_COLUMNS + LABEL_COLUMNS + PRUNE_COLUMNS,
    SINGLE_SUBJECT_COLUMNS + SUBJECT_COLUMNS + BAND_COLUMNS + LABEL_COLUMNS + PRUNE_COLUMNS + CLIP_COLUMNS,
    LOG_COLUMNS,
)
"""Every CSV header MaSC has written, oldest first: a log keeps the columns it was started with."""
LOG_SUFFIXES = (".jsonl", ".csv")


def log_rows(batch: ScoreBatch, *, time: str, run: str, node_id: Any = None, method: str = "") -> list[dict[str, Any]]:
    """One row per scored image, in ``LOG_COLUMNS`` order."""
    context = batch.context
    count = len(batch.scores)
    verdicts, seeds, outputs = context.per_image(count)
    labels = context.labels or [None] * count
    cells = context.cells or [None] * count
    evaluations = (context.ledger or {}).get("per_candidate") or [None] * count
    encoder = context.encoder or {}
    ref_foreground = [r.foreground_fraction for r in batch.references]
    small_ref = any(f < batch.min_foreground for f in ref_foreground)
    rows = []
    for position, score in enumerate(batch.scores):
        small_out = score.foreground_fraction is not None and score.foreground_fraction < batch.min_foreground
        rows.append(
            {
                "time": time,
                "run": run,
                "node": context.node,
                "node_id": None if node_id is None else str(node_id),
                "index": score.index,
                "id": f"{run}#{score.index}",
                "method": method,
                "seed": seeds[position],
                "subject": context.subject,
                "prompt": score.prompt,
                "encoded_prompt": score.encoded_prompt,
                "subject_found": score.subject_found,
                "cp": defined_number(score.cp),
                "pf": defined_number(score.pf),
                "cp_per_reference": [defined_number(v) for v in score.cp_per_reference],
                "cp_undefined": score.cp_undefined,
                "pf_undefined": score.pf_undefined,
                "out_foreground": defined_number(score.foreground_fraction),
                "ref_foreground": ref_foreground,
                "small_out_mask": small_out,
                "small_ref_mask": small_ref,
                "filtered": small_out or small_ref,
                "verdict": verdicts[position],
                "output": outputs[position],
                "encoder": encoder.get("model"),
                "encoder_digest": encoder.get("digest"),
                "metric_version": __version__,
                "subjects": subject_figures(score.subjects),
                "blends": list(score.blends) if score.subjects is not None else None,
                "cp_band": score.cp_band,
                "pf_band": score.pf_band,
                "label": labels[position],
                "previews": score.previews,
                "evaluations": evaluations[position],
                "clip": score.clip,
                "cell": cells[position],
            }
        )
    return rows


MAX_FILENAME_CHARS = 200
"""Longest log name a workflow may give (subfolders included)."""
MAX_FILENAME_FOLDERS = 8
"""Deepest subfolder a log may be written to: a shared workflow must not build a tree in the output folder."""
MAX_PART_BYTES = 255
"""Longest single file or folder name, in UTF-8 bytes (the limit of common file systems)."""


def _filename_problem(name: str) -> str | None:
    """Why ``name`` cannot be a log's name inside the output folder, or None."""
    if len(name) > MAX_FILENAME_CHARS:
        return f"is {len(name):,} characters long: give at most {MAX_FILENAME_CHARS}"
    if not name.isprintable() or "\\" in name:
        return (
            "holds a control character, NUL or backslash: use letters, digits, spaces, '-', '_', '.' and '/' "
            "between folders"
        )
    if not name.endswith(LOG_SUFFIXES):
        return "must end in .jsonl or .csv (the log's format)"
    parts = name.split("/")
    if os.path.isabs(name) or any(part in ("", ".", "..") for part in parts):
        return "leaves the output folder: give a name inside it (subfolders allowed, no '..')"
    if len(parts) - 1 > MAX_FILENAME_FOLDERS:
        return f"is {len(parts) - 1} folders deep: give at most {MAX_FILENAME_FOLDERS}"
    if any(len(part.encode("utf-8")) > MAX_PART_BYTES for part in parts):
        return f"has a file or folder name over {MAX_PART_BYTES} bytes: shorten it"
    return None


def log_path(folder: str, filename: str) -> str:
    """Where ``filename`` lives inside ``folder`` (subfolders created); one-line errors for names that cannot work.

    The name is bounded (length, depth, characters) and every refusal names only what the workflow gave,
    never the server's own folders.
    """
    name = (filename or "").strip() if isinstance(filename, str) else filename
    if not isinstance(name, str):
        raise MascInputError(f"filename {shown(filename)} is not text: give a file name ending in .jsonl or .csv")
    problem = _filename_problem(name)
    if problem:
        raise MascInputError(f"filename {shown(filename)} {problem}")
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, path]) != root:  # a link inside the output folder that points out of it
        raise MascInputError(
            f"filename {shown(filename)} leaves the output folder: give a name inside it (subfolders allowed, no '..')"
        )
    if os.path.isdir(path):
        raise MascInputError(f"filename {shown(filename)} is a folder in the output folder: give a file name")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as error:
        raise MascInputError(
            f"filename {shown(filename)}: its folder cannot be made in the output folder ({error.strerror}): give "
            "another name"
        ) from None
    return path


_HEADERS = {
    csv_lines([list(columns)]).encode("utf-8"): columns for columns in HEADER_HISTORY
}  # as the rows are written
_CSV_HEADER = csv_lines([list(LOG_COLUMNS)]).encode("utf-8")


def _csv_recognise(first: bytes | None, head: bytes) -> bool:
    """A log with one of the headers MaSC has written; a header cut short by a crash is a prefix of ours."""
    if first is not None:
        return first + b"\n" in _HEADERS
    return _CSV_HEADER.startswith(head)


JSONL_LOG = jsonl_format(
    "MaSC score log (its first line is not a row MaSC Log Scores writes)",
    frozenset({"time", "run", "metric_version"}),
    b'{"time": ',  # log_rows puts time first
)
CSV_LOG = LogFormat(
    what="MaSC score log with this version's columns (its first line is not this log's header)",
    record_end=csv_record_end,
    recognise=_csv_recognise,
    header=_CSV_HEADER,
)


def log_text(path: str, rows: list[dict[str, Any]], columns: tuple[str, ...] = LOG_COLUMNS) -> str:
    """``rows`` as the log at ``path`` holds them: JSON lines, or CSV records in ``columns`` (text cells
    spreadsheet-safe)."""
    if path.endswith(".jsonl"):
        return "".join(record_line(row) for row in rows)
    return csv_lines([csv_cell(row[column]) for column in columns] for row in rows)


_COLUMN_WORDS = (
    (SUBJECT_COLUMNS, "per-subject"),
    (BAND_COLUMNS, "mask-band"),
    (LABEL_COLUMNS, "pick-label"),
    (PRUNE_COLUMNS, "pruning"),
    (CLIP_COLUMNS, "video-clip"),
    (SWEEP_COLUMNS, "sweep-cell"),
)
"""What each group of newer columns is called when an older CSV log cannot hold them."""


def _csv_columns(path: str, rows: list[dict[str, Any]], label: str) -> tuple[str, ...]:
    """The columns the CSV log at ``path`` has (a header, once written, never changes); refuses rows it cannot hold."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
    except FileNotFoundError:
        return LOG_COLUMNS
    columns = _HEADERS.get(first, LOG_COLUMNS)
    lost = [c for c in LOG_COLUMNS if c not in columns and any(row[c] is not None for row in rows)]
    if lost:
        what = next(word for columns, word in _COLUMN_WORDS if lost[0] in columns)
        raise MascInputError(
            f"{label} is a score log from an earlier MaSC, without the {what} columns ({', '.join(lost)}): give these "
            "scores a new filename; the file was left as it was"
        )
    return columns


def append_rows(path: str, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to a .jsonl or .csv log, creating it (with the CSV header) if needed.

    Safe beside other writers and after a crash (``AppendLog``); a file that is not such a log is refused
    untouched.
    """
    log_format = JSONL_LOG if path.endswith(".jsonl") else CSV_LOG
    label = f"filename {shown(os.path.basename(path))}"
    check_regular_file(path, "filename", label=label, hint="choose another filename, or move that file away")
    columns = LOG_COLUMNS if path.endswith(".jsonl") else _csv_columns(path, rows, label)
    try:
        with AppendLog(path, log_format, label=label, hint="choose another filename, or move that file away") as log:
            log.write(log_text(path, rows, columns))
    except OSError as error:  # its message holds the server's path: only the name the workflow gave goes out
        raise MascInputError(f"{label} cannot be written ({error.strerror}): choose another filename") from None


NUMBER_COLUMNS = ("cp", "pf", "out_foreground")
"""Columns ``read_log`` gives as numbers (None when empty) from a CSV log; other cells stay text."""


def _csv_value(column: str, cell: str, label: str, line: int) -> Any:
    if column in NUMBER_COLUMNS:
        if cell == "":
            return None
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):  # "nan" and "inf" parse as floats; MaSC never writes them
            raise MascInputError(f"{label} record {line}: {column} {shown(cell)} is not a number")
        return value
    if cell == "":
        return None
    return cell[1:] if cell.startswith("'") else cell  # undo spreadsheet_text: every leading ' was added


def read_log(path: str) -> list[dict[str, Any]]:
    """The rows of a score log MaSC Log Scores wrote (.jsonl or .csv), as dicts; one-line errors for anything else.

    A last record a crash cut short (no line end) is left out, as the next append would drop it. CSV cells come
    back as text with the spreadsheet guard undone, ``NUMBER_COLUMNS`` as numbers.
    """
    label = f"log {shown(os.path.basename(path))}"
    if not path.endswith(LOG_SUFFIXES):
        raise MascInputError(f"{label} must end in .jsonl or .csv (a score log of MaSC Log Scores)")
    check_regular_file(path, "log", label=label, hint="give a score log file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise MascInputError(f"{label} does not exist") from None
    except OSError as error:
        raise MascInputError(f"{label} cannot be read ({error.strerror})") from None
    jsonl = path.endswith(".jsonl")
    data = data[: (jsonl_record_end if jsonl else csv_record_end)(data)]  # without a record a crash cut short
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MascInputError(f"{label} is not UTF-8 text: not a score log") from None
    if jsonl:
        rows = []
        for number, line in enumerate(text.split("\n")[:-1], 1):
            if not line.strip():
                continue
            try:
                row = parse_json(line)
            except JSONUnreadable as why:  # deep nesting, NaN, a 5,000-digit number: refused like any other non-JSON
                raise MascInputError(
                    f"{label} line {number} is not JSON MaSC Log Scores writes ({why}): not a score log"
                ) from None
            if not isinstance(row, dict) or not {"time", "run", "metric_version"} <= set(row):
                raise MascInputError(f"{label} line {number} is not a row MaSC Log Scores writes")
            rows.append(row)
        return rows
    records = list(csv.reader(io.StringIO(text, newline="")))
    if not records or tuple(records[0]) not in HEADER_HISTORY:
        raise MascInputError(f"{label} does not start with a header MaSC Log Scores writes: not a score log")
    columns = records[0]
    rows = []
    for number, cells in enumerate(records[1:], 2):
        if len(cells) != len(columns):
            raise MascInputError(f"{label} record {number} has {len(cells)} cells for {len(columns)} columns")
        rows.append({c: _csv_value(c, cell, label, number) for c, cell in zip(columns, cells)})
    return rows


def log_score(value: Any) -> bool:
    """Whether a logged cp or pf is usable: empty (undefined) or a finite number."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def log_key(value: Any) -> bool:
    """Whether a logged run or round id is usable as a key: empty, a text or a whole number."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def left_out_line(left_out: dict[str, int]) -> str | None:
    """The report's line for rows a command could not use, most common reason first (None when there were none)."""
    if not left_out:
        return None
    total = sum(left_out.values())
    reasons = "; ".join(f"{reason} ({count})" for reason, count in sorted(left_out.items(), key=lambda item: -item[1]))
    return f"left out {total} row{'s' if total != 1 else ''} MaSC does not write: {reasons}"
