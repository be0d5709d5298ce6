"""Manifests: CSV and JSONL read alike, paths resolved against the manifest's folder, one-line errors naming line and
column."""

from __future__ import annotations

import os

import pytest

from conftest import DATA
from eval_manifests import dreambench_rows, write_csv, write_jsonl, write_masks
from masc_core import MascInputError
from masc_core.evaluation.manifest import read_manifest
from masc_core.evaluation.plan import parse_shard


@pytest.fixture
def folder(tmp_path):
    write_masks(str(tmp_path))
    return tmp_path


def rows(n=6, **kwargs):
    return dreambench_rows(references=("dog_00",), methods=("a", "b"), prompts=3, seeds=1, **kwargs)[:n]


def test_csv_and_jsonl_read_to_the_same_rows(folder):
    given = rows()
    from_csv = read_manifest(write_csv(str(folder / "m.csv"), given))
    from_jsonl = read_manifest(write_jsonl(str(folder / "m.jsonl"), given))
    assert len(from_csv.rows) == len(given)
    for a, b in zip(from_csv.rows, from_jsonl.rows):
        fields = (
            "index",
            "ref",
            "ref_mask",
            "out",
            "out_mask",
            "prompt",
            "subject",
            "method",
            "seed",
            "id",
            "ratings",
            "ref_paths",
            "out_path",
            "out_mask_path",
        )
        assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    assert from_csv.raters == from_jsonl.raters == {"cp": ["r1", "r2"], "pf": ["r1"]}


def test_relative_paths_resolve_against_the_manifest_folder(folder, monkeypatch):
    manifest = read_manifest(write_csv(str(folder / "m.csv"), rows()))
    monkeypatch.chdir("/")
    row = manifest.rows[0]
    assert row.ref_mask == ("masks/dog_00.png",)
    assert row.ref_mask_paths == (os.path.join(str(folder), "masks", "dog_00.png"),)
    assert row.ref_paths == (os.path.join(DATA, "dog_00.jpg"),)


def test_labels_ratings_several_views_and_empty_cells(folder):
    given = rows(2)
    given[0].update(
        ref=f"{DATA}/dog_00.jpg|{DATA}/dog_01.jpg",
        ref_mask="masks/dog_00.png|masks/dog_01.png",
        out_mask="",
        seed="seed-7",
    )
    given[0].update({"human_cp.r1": 4, "human_cp.r2": 1, "human_pf.r1": ""})
    given[1].update({"human_cp.r1": 3, "human_cp.r2": "", "human_pf.r1": 2, "method": ""})
    manifest = read_manifest(write_csv(str(folder / "m.csv"), given))
    first, second = manifest.rows
    assert len(first.ref_paths) == 2 and first.out_mask is None and first.out_mask_path is None
    assert first.seed == "seed-7" and second.seed == 0
    assert first.human("cp") == 2.5 and first.human("pf") is None
    assert second.ratings == {"cp": {"r1": 3.0}, "pf": {"r1": 2.0}} and second.method == "default"
    assert (first.line, second.line) == (2, 3)


def test_pooled_rating_column(folder):
    given = [{k: v for k, v in r.items() if not k.startswith("human_")} for r in rows(2)]
    given[0]["human_cp"] = 3.5
    given[1]["human_cp"] = ""
    manifest = read_manifest(write_csv(str(folder / "m.csv"), given))
    assert manifest.rows[0].human("cp") == 3.5 and manifest.rows[1].human("cp") is None
    assert manifest.raters == {"cp": [], "pf": []} and manifest.has_ratings


def error(folder, given, name="m.csv"):
    path = str(folder / name)
    (write_jsonl if name.endswith(".jsonl") else write_csv)(path, given)
    with pytest.raises(MascInputError) as info:
        read_manifest(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_column(folder):
    given = [{k: v for k, v in r.items() if k != "subject"} for r in rows(2)]
    assert "has no column 'subject'" in error(folder, given)


def test_missing_file_names_line_column_and_resolved_path(folder):
    given = rows(3)
    given[2]["out_mask"] = "masks/nope.png"
    message = error(folder, given)
    assert "line 4, column 'out_mask'" in message and "'masks/nope.png'" in message
    assert os.path.join(str(folder), "masks", "nope.png") in message and "does not exist" in message


@pytest.mark.parametrize(
    "change,expected",
    [
        ({"ref": ""}, "line 2, column 'ref': is empty"),
        ({"out": "  "}, "line 2, column 'out': is empty"),
        ({"ref_mask": "masks/dog_00.png|masks/dog_01.png"}, "2 masks for 1 reference views"),
        ({"human_cp.r1": "great"}, "line 2, column 'human_cp.r1': expected a number, got 'great'"),
        ({"human_cp.r1": "nan"}, "expected a finite number"),
        ({"out": DATA}, "is a folder, not an image file"),
    ],
)
def test_bad_cells(folder, change, expected):
    given = rows(2)
    given[0].update(change)
    assert expected in error(folder, given)


def test_both_rating_forms_are_refused(folder):
    given = rows(2)
    given[0]["human_cp"] = 2
    assert "both human_cp ratings and per-rater" in error(folder, given)


def test_jsonl_errors(folder):
    path = folder / "m.jsonl"
    write_jsonl(str(path), rows(2))
    with open(path, "a") as handle:
        handle.write("{not json\n")
    with pytest.raises(MascInputError, match=r"line 3: not valid JSON"):
        read_manifest(str(path))
    given = rows(2)
    del given[1]["prompt"]
    assert "line 2: has no 'prompt' key" in error(folder, given, "n.jsonl")


def test_missing_and_empty_manifests(tmp_path):
    with pytest.raises(MascInputError, match="does not exist"):
        read_manifest(str(tmp_path / "nope.csv"))
    (tmp_path / "empty.csv").write_text("ref,ref_mask,out,out_mask,prompt,subject\n")
    with pytest.raises(MascInputError, match="has no rows"):
        read_manifest(str(tmp_path / "empty.csv"))


def test_shard_specs():
    assert parse_shard(None) is None
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 2/3 ") == (2, 3)
    for bad in ("3/3", "1", "a/b", "-1/2", "0/0", "1/2/3"):
        with pytest.raises(MascInputError, match="is not i/n with 0 <= i < n"):
            parse_shard(bad)


def test_missing_files_are_listed_together(folder):
    given = rows(6)
    given[0]["out"] = "generated/a.png"
    given[2]["out_mask"] = "masks/b.png"
    given[3]["out"] = "generated/c.png"
    given[4]["out"] = "generated/d.png"
    given[5]["out"] = "generated/a.png"  # the same missing file again: counted once
    message = error(folder, given)
    assert message.startswith(
        f"manifest '{folder / 'm.csv'}': 4 files do not exist: line 2, column 'out': file 'generated/a.png'"
    )
    assert (
        "line 4, column 'out_mask': file 'masks/b.png'" in message
        and "line 5, column 'out': file 'generated/c.png'" in message
    )
    assert "; and 1 more: fix the paths" in message and "generated/d.png" not in message


@pytest.mark.parametrize("name", ["m.csv", "m.jsonl"])
def test_same_subject_labels(folder, name):
    given = rows(4)
    for row, label in zip(given, (1, 0, "1", "0") if name.endswith(".csv") else (1, 0, True, False)):
        row["same_subject"] = label
    path = str(folder / name)
    (write_jsonl if name.endswith(".jsonl") else write_csv)(path, given)
    manifest = read_manifest(path)
    assert [r.same_subject for r in manifest.rows] == [True, False, True, False] and manifest.has_identity_labels
    assert not read_manifest(write_csv(str(folder / "plain.csv"), rows(2))).has_identity_labels


@pytest.mark.parametrize("name", ["m.csv", "m.jsonl"])
def test_mixing_labelled_and_unlabelled_rows_is_one_line(folder, name):
    given = rows(5)
    for row in given[:3]:
        row["same_subject"] = 1
    if name.endswith(".csv"):
        for row in given[3:]:
            row["same_subject"] = ""
    message = error(folder, given, name)
    line = 5 if name.endswith(".csv") else 4  # the fourth row: CSV has a header line
    assert message.endswith(
        f"labels 3 of 5 rows with same_subject, but not line {line} (and 1 more): give every row 1 or 0, or leave the "
        "column out"
    )


def test_bad_same_subject_label(folder):
    given = rows(2)
    given[0]["same_subject"] = "maybe"
    given[1]["same_subject"] = 1
    assert (
        "line 2, column 'same_subject': expected 1 (same subject as the reference) or 0 (another subject), got 'maybe'"
        in error(folder, given)
    )
