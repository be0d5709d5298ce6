"""MaSC Log Scores: one row per scored image, appended to a .jsonl or .csv file in ComfyUI's output folder."""

from __future__ import annotations

import datetime
import os
import uuid

from .declarations import MaSCNode
from ..masc_core.evaluation.score_log import append_rows, log_path, log_rows
from . import host
from .types import MASC_SCORES, Output


class MaSCLogScores(MaSCNode):
    """Appends one row per scored image (every candidate of MaSC Sample Until, or every image a scoring node scored) to
    a .jsonl or .csv file in ComfyUI's output folder: seed, CP, PF, verdict, prompt, encoder and the columns 'python -m
    masc_core eval' writes, so a night of sampling can be analysed afterwards."""

    SEARCH_ALIASES = ["log", "csv", "jsonl", "save scores"]
    OUTPUT_NODE = True
    FUNCTION = "log"
    OUTPUTS = (
        Output("STRING", "path", "The log file written to, relative to ComfyUI's output folder."),
        Output("STRING", "report", "How many rows were appended, and where."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "scores": (MASC_SCORES, {"tooltip": "From MaSC Sample Until or a MaSC scoring node."}),
                "filename": (
                    "STRING",
                    {
                        "default": "masc_scores.jsonl",
                        "tooltip": "File in the output folder (subfolders allowed); .jsonl or .csv. Rows are appended "
                        "across runs.",
                    },
                ),
                "method": (
                    "STRING",
                    {
                        "default": "",
                        "tooltip": "Optional label for these rows (eval's 'method' column), e.g. the LoRA or settings "
                        "tried.",
                    },
                ),
            }
        }

    def log(self, scores, filename, method):
        folder = host.output_directory()
        path = log_path(folder, filename)
        now = datetime.datetime.now(datetime.timezone.utc)
        run = now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
        rows = log_rows(scores, time=now.isoformat(timespec="seconds"), run=run, method=method)
        append_rows(path, rows)
        # Relative to the output folder: a report is shown, saved in thumbnails and shared; the server's layout is not.
        shown_path = os.path.relpath(path, os.path.realpath(folder)).replace(os.sep, "/")
        # Three short lines: the node keeps its width on the canvas (one line of ~70 characters widened it into
        # whatever sits to its right in a template).
        report = f"appended {len(rows)} rows to\noutput/{shown_path}\n(run {run})"
        return {"ui": {"text": [report]}, "result": (shown_path, report)}
