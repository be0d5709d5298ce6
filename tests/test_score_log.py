"""The score log (MaSC Log Scores' files): eval's column names, appending across runs, one-line errors."""

from __future__ import annotations

import csv
import json

import pytest

from masc_core.errors import MascInputError
from masc_core.evaluation.records import EvalRecord
from masc_core.evaluation.score_log import LOG_COLUMNS, append_rows, log_path, log_rows
from masc_core.metric.scores import ImageScore, ReferenceInfo, ScoreBatch, ScoreContext
from masc_core.version import __version__


def batch():
    scores = [
        ImageScore(
            index=i,
            cp=0.5 + 0.1 * i,
            pf=0.05 * i if i else None,
            cp_per_reference=[0.5 + 0.1 * i],
            pf_undefined=None if i else "no output mask given",
            prompt="a sks dog in the snow",
            encoded_prompt="in the snow",
            subject_found=True,
            foreground_fraction=[0.01, 0.3, 0.4][i],
        )
        for i in range(3)
    ]
    context = ScoreContext(
        node="MaSCSampleUntil",
        subject="sks dog",
        encoder={"model": "tiny", "digest": "abc123abc123"},
        seeds=[7, 8, 9],
        verdicts=["rejected: mask below the size filter", "accepted", "accepted"],
        kept=[2, 1],
    )
    return ScoreBatch(scores=scores, references=[ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context)


def test_rows_use_evals_column_names_where_they_overlap():
    rows = log_rows(batch(), time="2026-12-01T10:00:00Z", run="r1", node_id=13, method="lora-v2")
    eval_keys = set(
        EvalRecord(
            row=0,
            id=None,
            method="",
            seed=None,
            subject="",
            prompt="",
            encoded_prompt=None,
            subject_found=None,
            ref=[],
            ref_mask=[],
            out="",
            out_mask=None,
            metrics={"cp": None, "pf": None},
        ).to_dict()
    )
    shared = [c for c in LOG_COLUMNS if c in eval_keys]
    assert shared == [
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
    ]
    assert [list(r) for r in rows] == [list(LOG_COLUMNS)] * 3
    first, second = rows[0], rows[1]
    assert first["seed"] == 7 and first["small_out_mask"] and first["filtered"] and first["output"] is None
    assert first["pf"] is None and first["pf_undefined"] == "no output mask given"
    assert second["cp"] == pytest.approx(0.6) and second["output"] == 1 and rows[2]["output"] == 0
    assert second["id"] == "r1#1" and second["node_id"] == "13" and second["method"] == "lora-v2"
    assert (
        second["encoder"] == "tiny"
        and second["encoder_digest"] == "abc123abc123"
        and second["metric_version"] == __version__
    )


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
    assert (
        rows[1]["cp"] == repr(0.6) and rows[0]["pf"] == "" and rows[0]["filtered"] == "true" and rows[4]["seed"] == "8"
    )


def test_a_csv_with_other_columns_is_never_mixed(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(
        MascInputError,
        match="filename 'old.csv' is not a MaSC score log with this version's columns .*; the file was left as it was",
    ):
        append_rows(str(path), log_rows(batch(), time="t", run="r"))
    assert path.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize(
    "name,message",
    [
        ("night.txt", "must end in .jsonl or .csv"),
        ("../night.jsonl", "leaves the output folder"),
        ("/tmp/night.jsonl", "leaves the output folder"),
    ],
)
def test_names_that_cannot_work_are_refused(tmp_path, name, message):
    with pytest.raises(MascInputError, match=message):
        log_path(str(tmp_path), name)


def two_subject_batch():
    """One image scored for two subjects: CP is their cp_min; per-subject figures and a blend warning ride along."""
    score = ImageScore(
        index=0,
        cp=0.41,
        pf=0.1,
        foreground_fraction=0.2,
        subjects=[{"subject": "sks dog", "cp": 0.41, "mask": 0.2}, {"subject": "cat", "cp": 0.66, "mask": 0.3}],
        blends=["the cat's region looks as much like the sks dog as the sks dog's own region does"],
    )
    return ScoreBatch(
        scores=[score], references=[], context=ScoreContext(node="MaSCScoreSubjects", subject="sks dog, cat")
    )


def test_several_subject_rows_carry_each_subjects_figures_in_jsonl_and_csv(tmp_path):
    jsonl, table = log_path(str(tmp_path), "two.jsonl"), log_path(str(tmp_path), "two.csv")
    for path in (jsonl, table):
        append_rows(path, log_rows(batch(), time="t1", run="r1"))
        append_rows(path, log_rows(two_subject_batch(), time="t2", run="r2"))
    rows = [json.loads(line) for line in open(jsonl)]
    assert rows[0]["subjects"] is None and rows[0]["blends"] is None  # single-subject rows: empty
    assert rows[-1]["subjects"] == [
        {"subject": "sks dog", "cp": 0.41, "mask": 0.2},
        {"subject": "cat", "cp": 0.66, "mask": 0.3},
    ]
    assert rows[-1]["blends"][0].startswith("the cat's region") and rows[-1]["cp"] == 0.41
    with open(table, newline="") as handle:
        cells = list(csv.DictReader(handle))
    assert (
        cells[0]["subjects"] == ""
        and cells[-1]["subjects"] == "subject: sks dog; cp: 0.41; mask: 0.2|subject: cat; cp: 0.66; mask: 0.3"
    )
    assert cells[-1]["blends"].startswith("the cat's region")


def test_a_csv_log_from_before_the_subject_columns_keeps_taking_single_subject_rows_only(tmp_path):
    from masc_core.evaluation.score_log import SINGLE_SUBJECT_COLUMNS
    from masc_core.evaluation.records import csv_lines

    path = tmp_path / "old_night.csv"
    path.write_text(csv_lines([list(SINGLE_SUBJECT_COLUMNS)]))  # what MaSC 0.2.0 wrote
    append_rows(str(path), log_rows(batch(), time="t1", run="r1"))
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(SINGLE_SUBJECT_COLUMNS) and len(rows) == 3 and rows[1]["cp"] == repr(0.6)
    before = path.read_bytes()
    with pytest.raises(
        MascInputError,
        match="filename 'old_night.csv' is a score log from an earlier MaSC, without the per-subject columns "
        ".subjects, blends.: give these scores a new filename",
    ):
        append_rows(str(path), log_rows(two_subject_batch(), time="t2", run="r2"))
    assert path.read_bytes() == before  # nothing dropped, nothing mixed


def test_band_rows_carry_both_bands_and_a_log_without_band_columns_refuses_them(tmp_path):
    from masc_core.evaluation.records import csv_lines
    from masc_core.evaluation.score_log import HEADER_HISTORY

    banded = batch()
    for score in banded.scores:
        score.cp_band, score.pf_band = [score.cp - 0.01, score.cp + 0.02], None
    path = log_path(str(tmp_path), "bands.csv")
    append_rows(path, log_rows(banded, time="t", run="r"))
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[1]["cp_band"] == f"{0.6 - 0.01!r}|{0.6 + 0.02!r}" and rows[1]["pf_band"] == ""
    older = tmp_path / "older.csv"
    older.write_text(csv_lines([list(HEADER_HISTORY[1])]))  # per-subject columns, no band columns
    append_rows(str(older), log_rows(batch(), time="t", run="r"))  # rows without bands fit it
    before = older.read_bytes()
    with pytest.raises(
        MascInputError, match="without the mask-band columns .cp_band.: give these scores a new filename"
    ):
        append_rows(str(older), log_rows(banded, time="t", run="r"))
    assert older.read_bytes() == before


@pytest.mark.parametrize(
    "field, value, header, words",
    [
        ("cells", ["baseline (no LoRA)", "dog @ 1", "dog @ 0.5"], -2, "sweep-cell columns .cell."),
        ("clip", {"frames": 2}, -3, "video-clip columns .clip."),
    ],
)
def test_a_csv_log_from_before_a_newer_column_names_that_column_and_takes_nothing(
    tmp_path, field, value, header, words
):
    """A sweep's cells (and a video candidate's clip) need columns an older CSV log lacks: refused, named right."""
    import dataclasses

    from masc_core.evaluation.records import csv_lines
    from masc_core.evaluation.score_log import HEADER_HISTORY

    given = batch()
    if field == "cells":
        given.context = dataclasses.replace(given.context, cells=value)
    else:
        for score in given.scores:
            score.clip = value
    older = tmp_path / "older.csv"
    older.write_text(csv_lines([list(HEADER_HISTORY[header])]))
    append_rows(str(older), log_rows(batch(), time="t", run="r"))  # rows without the newer column fit it
    before = older.read_bytes()
    with pytest.raises(MascInputError, match=f"without the {words}: give these scores a new filename"):
        append_rows(str(older), log_rows(given, time="t", run="r"))
    assert older.read_bytes() == before
    fresh = log_path(str(tmp_path), "fresh.csv")
    append_rows(fresh, log_rows(given, time="t", run="r"))
    with open(fresh, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 and all(row[field.rstrip("s")] != "" for row in rows)
