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
``metric_version``.

Formats by the file's suffix: ``.jsonl`` (one JSON object per line) or ``.csv``
(the header written once; a file with other columns is refused, never
mixed). A last line cut short by a crash is dropped before appending. Every
append is flushed and synced, so rows written are never lost.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any

from ..errors import MascInputError
from ..scores import ScoreBatch, defined_number
from ..version import __version__
from .records import AppendLog, csv_cell

LOG_COLUMNS = (
    "time", "run", "node", "node_id", "index", "id", "method", "seed", "subject", "prompt", "encoded_prompt",
    "subject_found", "cp", "pf", "cp_per_reference", "cp_undefined", "pf_undefined", "out_foreground",
    "ref_foreground", "small_out_mask", "small_ref_mask", "filtered", "verdict", "output", "encoder",
    "encoder_digest", "metric_version",
)
LOG_SUFFIXES = (".jsonl", ".csv")


def log_rows(batch: ScoreBatch, *, time: str, run: str, node_id: Any = None, method: str = "") -> list[dict[str, Any]]:
    """One row per scored image, in ``LOG_COLUMNS`` order."""
    context = batch.context
    count = len(batch.scores)
    verdicts, seeds, outputs = context.per_image(count)
    encoder = context.encoder or {}
    ref_foreground = [r.foreground_fraction for r in batch.references]
    small_ref = any(f < batch.min_foreground for f in ref_foreground)
    rows = []
    for position, score in enumerate(batch.scores):
        small_out = score.foreground_fraction is not None and score.foreground_fraction < batch.min_foreground
        rows.append({
            "time": time, "run": run, "node": context.node, "node_id": None if node_id is None else str(node_id),
            "index": score.index, "id": f"{run}#{score.index}", "method": method, "seed": seeds[position],
            "subject": context.subject, "prompt": score.prompt, "encoded_prompt": score.encoded_prompt,
            "subject_found": score.subject_found, "cp": defined_number(score.cp), "pf": defined_number(score.pf),
            "cp_per_reference": [defined_number(v) for v in score.cp_per_reference],
            "cp_undefined": score.cp_undefined, "pf_undefined": score.pf_undefined,
            "out_foreground": defined_number(score.foreground_fraction), "ref_foreground": ref_foreground,
            "small_out_mask": small_out, "small_ref_mask": small_ref, "filtered": small_out or small_ref,
            "verdict": verdicts[position], "output": outputs[position], "encoder": encoder.get("model"),
            "encoder_digest": encoder.get("digest"), "metric_version": __version__,
        })
    return rows


def log_path(folder: str, filename: str) -> str:
    """Where ``filename`` lives inside ``folder`` (subfolders created); one-line errors for names that cannot work."""
    name = (filename or "").strip()
    if not name.endswith(LOG_SUFFIXES):
        raise MascInputError(f"filename '{filename}' must end in .jsonl or .csv (the log's format)")
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, name))
    if os.path.isabs(name) or os.path.commonpath([root, path]) != root:
        raise MascInputError(f"filename '{filename}' leaves the output folder: give a name inside it (subfolders allowed, no '..')")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def append_rows(path: str, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to a .jsonl or .csv log, creating it (with the CSV header) if needed."""
    if path.endswith(".jsonl"):
        with AppendLog(path) as log:
            log.append(rows)
        return
    header = ",".join(LOG_COLUMNS)
    with AppendLog(path, newline="") as log:
        exists = os.path.getsize(path) > 0
        if exists:
            with open(path, encoding="utf-8", newline="") as handle:
                first = handle.readline().rstrip("\r\n")
            if first != header:
                raise MascInputError(
                    f"filename '{os.path.basename(path)}' already holds other columns: choose another filename, or move the old log away"
                )
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if not exists:
            writer.writerow(LOG_COLUMNS)
        for row in rows:
            writer.writerow([csv_cell(row[column]) for column in LOG_COLUMNS])
        log.write(buffer.getvalue())
