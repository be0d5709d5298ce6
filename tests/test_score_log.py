"""The score log (MaSC Log Scores' files): eval's column names, appending across runs, one-line errors."""

from __future__ import annotations

import csv
import json

import pytest

from masc_core.errors import MascInputError
from masc_core.evaluation.records import EvalRecord
from masc_core.evaluation.score_log import LOG_COLUMNS, append_rows, log_path, log_rows
from masc_core.scores import ImageScore, ReferenceInfo, ScoreBatch, ScoreContext
from masc_core.version import __version__


def batch():
    scores = [
        ImageScore(index=i, cp=0.5 + 0.1 * i, pf=0.05 * i if i else None, cp_per_reference=[0.5 + 0.1 * i],
                   pf_undefined=None if i else "no output mask given", prompt="a sks dog in the snow",
                   encoded_prompt="in the snow", subject_found=True, foreground_fraction=[0.01, 0.3, 0.4][i])
        for i in range(3)
    ]
    context = ScoreContext(node="MaSCSampleUntil", subject="sks dog", encoder={"model": "tiny", "digest": "abc123abc123"},
                           seeds=[7, 8, 9], verdicts=["rejected: mask below the size filter", "accepted", "accepted"], kept=[2, 1])
    return ScoreBatch(scores=scores, references=[ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context)


def test_rows_use_evals_column_names_where_they_overlap():
    rows = log_rows(batch(), time="2026-12-01T10:00:00Z", run="r1", node_id=13, method="lora-v2")
    eval_keys = set(EvalRecord(row=0, id=None, method="", seed=None, subject="", prompt="", encoded_prompt=None, subject_found=None,
                               ref=[], ref_mask=[], out="", out_mask=None, metrics={"cp": None, "pf": None}).to_dict())
    shared = [c for c in LOG_COLUMNS if c in eval_keys]
    assert shared == ["id", "method", "seed", "subject", "prompt", "encoded_prompt", "subject_found", "cp", "pf", "cp_per_reference",
                      "cp_undefined", "pf_undefined", "out_foreground", "ref_foreground", "small_out_mask", "small_ref_mask", "filtered"]
    assert [list(r) for r in rows] == [list(LOG_COLUMNS)] * 3
    first, second = rows[0], rows[1]
    assert first["seed"] == 7 and first["small_out_mask"] and first["filtered"] and first["output"] is None
    assert first["pf"] is None and first["pf_undefined"] == "no output mask given"
    assert second["cp"] == pytest.approx(0.6) and second["output"] == 1 and rows[2]["output"] == 0
    assert second["id"] == "r1#1" and second["node_id"] == "13" and second["method"] == "lora-v2"
    assert second["encoder"] == "tiny" and second["encoder_digest"] == "abc123abc123" and second["metric_version"] == __version__


def test_jsonl_appends_across_runs_and_survives_a_cut_line(tmp_path):
    path = log_path(str(tmp_path), "logs/night.jsonl")
    append_rows(path, log_rows(batch(), time="t1", run="r1"))
    with open(path, "a") as handle:
        handle.write('{"time": "cut sho')  # a crash mid-write
    append_rows(path, log_rows(batch(), time="t2", run="r2"))
    lines = open(path).read().splitlines()
    assert len(lines) == 6 and [json.loads(l)["run"] for l in lines] == ["r1"] * 3 + ["r2"] * 3


def test_csv_writes_its_header_once_and_reads_back(tmp_path):
    path = log_path(str(tmp_path), "night.csv")
    append_rows(path, log_rows(batch(), time="t1", run="r1"))
    append_rows(path, log_rows(batch(), time="t2", run="r2"))
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and list(rows[0]) == list(LOG_COLUMNS)
    assert rows[1]["cp"] == repr(0.6) and rows[0]["pf"] == "" and rows[0]["filtered"] == "true" and rows[4]["seed"] == "8"


def test_a_csv_with_other_columns_is_never_mixed(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(MascInputError, match="filename 'old.csv' is not a MaSC score log with this version's columns .*; the file was left as it was"):
        append_rows(str(path), log_rows(batch(), time="t", run="r"))
    assert path.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize("name,message", [
    ("night.txt", "must end in .jsonl or .csv"),
    ("../night.jsonl", "leaves the output folder"),
    ("/tmp/night.jsonl", "leaves the output folder"),
])
def test_names_that_cannot_work_are_refused(tmp_path, name, message):
    with pytest.raises(MascInputError, match=message):
        log_path(str(tmp_path), name)
