"""The surfaces added since the last review, attacked with crafted input: each refusal is one line, never a traceback.

Subject names (bounded, stripped once per distinct prompt), subjects files (nesting, huge numbers, counts before
any image is read, control characters), calibrate and prune-report (crafted rows left out and counted, bad options
refused, bounded memory), read (a share past any range), MaSC Log Scores' filename (NUL, length, depth, the
server's path never shown).
"""

from __future__ import annotations

import importlib
import json
import os

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import box_mask, call
from crafted import png_with_chunks, text_chunk
from masc_core.metric import stripping
from masc_core.errors import MascInputError
from masc_core.evaluation import agreement
from masc_core.evaluation.calibration import calibrate, calibration_text
from masc_core.evaluation.prune_study import prune_report, prune_report_text
from masc_core.evaluation.score_log import log_path

OSC52 = "\x1b]52;c;ZXZpbA==\x07"  # a terminal clipboard write
COLOUR = "\x1b[31m"


def one_line(text: str) -> bool:
    return text.count("\n") <= 1 and "\x1b" not in text and "\x07" not in text


# ---------------------------------------------------------------- subject names


def test_a_subject_with_thousands_of_names_is_refused_in_one_line():
    names = ", ".join(f"name{k}" for k in range(4000))
    with pytest.raises(MascInputError, match="subject lists 4,000 names: a subject takes at most 32") as refused:
        stripping.strip_subject("a photo of name3", names)
    assert one_line(str(refused.value))
    few = ", ".join(f"name{k}" for k in range(stripping.MAX_NAMES))
    assert stripping.strip_subject("a name3 on the beach", few) == "on the beach"


def test_names_of_several_subjects_may_add_up_past_one_subjects_bound():
    every = [f"name{k}" for k in range(8 * stripping.MAX_NAMES)]  # 8 subjects of 32 names: what PF strips
    assert stripping.strip_subject("a name200 and a name7 at dusk", every) == "and at dusk"
    with pytest.raises(MascInputError, match="at most 256"):
        stripping.strip_subject("x", every + ["one more"])


def test_a_batch_sharing_a_prompt_is_stripped_once(monkeypatch):
    calls = []
    real = stripping.strip_subject
    monkeypatch.setattr(stripping, "strip_subject", lambda p, s: calls.append(p) or real(p, s))
    out = stripping.strip_each(["a dog on grass"] * 16 + ["a dog at sea"] * 16, ["dog"] * 32)
    assert out == ["on grass"] * 16 + ["at sea"] * 16 and len(calls) == 2
    listed = stripping.strip_each(["a dog and a cat"] * 4, [["dog", "cat"]] * 4)
    assert listed == ["and"] * 4


def test_the_subject_node_refuses_too_many_names_before_converting_images(pack):
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSubject"]()
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    with pytest.raises(errors.MascInputError, match="names lists 2,000 names") as refused:
        node.declare(
            ", ".join(f"n{k}" for k in range(2000)),
            reference_image=torch.zeros(1, 8, 8, 3),
            reference_mask=torch.zeros(1, 8, 8),
        )
    assert one_line(str(refused.value))


def test_a_shared_subject_name_with_control_characters_is_escaped_in_the_error(pack):
    subjects = importlib.import_module(pack.__name__ + ".masc_core.metric.subjects")
    name = f"dog{OSC52}{COLOUR}"
    with pytest.raises(subjects.MascInputError) as refused:
        subjects.check_subjects([subjects.Subject(name, None, None), subjects.Subject(name, None, None)])
    message = str(refused.value)
    assert "\x1b" not in message and "\x07" not in message and "\\x1b]52" in message


# ---------------------------------------------------------------- subjects files


@pytest.fixture
def subjects_scene(tmp_path):
    image = (np.random.default_rng(0).uniform(0, 255, (64, 64, 3))).astype(np.uint8)
    Image.fromarray(image).save(tmp_path / "ref.png")
    Image.fromarray(box_mask(64, 64)).save(tmp_path / "mask.png")
    Image.fromarray(image).save(tmp_path / "out.png")
    return tmp_path


def _score_subjects_file(scene, text: str):
    path = scene / "subjects.json"
    path.write_text(text, encoding="utf-8")
    return call(
        "score",
        "--model",
        str(scene / "no-model"),
        "--subjects",
        str(path),
        "--out",
        str(scene / "out.png"),
        "--prompt",
        "a dog",
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"subjects": ' + "[" * 5000 + "]" * 5000 + "}", "could not be read as JSON (nested more than 32 deep)"),
        (
            '{"subjects": [{"names": "dog", "references": ["ref.png"], "reference_masks": ["mask.png"], "x": '
            + "9" * 5000
            + "}]}",
            "could not be read as JSON (a number of 5,000 digits)",
        ),
        ('{"subjects": [{"names": "dog", "references": NaN}]}', "could not be read as JSON (NaN is not a number)"),
    ],
)
def test_a_crafted_subjects_file_is_the_could_not_be_read_line(subjects_scene, text, message):
    code, out, err = _score_subjects_file(subjects_scene, text)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_subject_counts_are_checked_before_any_image_is_read(subjects_scene, monkeypatch):
    import masc_core.io.images

    read = []
    monkeypatch.setattr(
        masc_core.io.images, "load_image_file", lambda *a, **k: read.append(a) or np.zeros((8, 8, 3), np.uint8)
    )
    entry = {"names": "dog", "references": ["ref.png"], "reference_masks": ["mask.png"]}
    many = [dict(entry, names=f"subject {k}") for k in range(32)]
    code, _, err = _score_subjects_file(subjects_scene, json.dumps({"subjects": many}))
    assert code == 2 and "declares 32 subjects: at most 8" in err and read == []
    shared = [entry, dict(entry)]
    code, _, err = _score_subjects_file(subjects_scene, json.dumps({"subjects": shared}))
    assert code == 2 and "the name 'dog' is given to subjects[0] and subjects[1]" in err and read == []


def test_control_characters_from_a_subjects_file_never_reach_the_terminal(subjects_scene):
    entry = {"names": f"dog{OSC52}", "references": [f"missing{COLOUR}.png"], "reference_masks": ["mask.png"]}
    code, out, err = _score_subjects_file(
        subjects_scene, json.dumps({"subjects": [entry, dict(entry, names="cat" + COLOUR)]})
    )
    assert code == 2 and one_line(err) and "\\x1b" in err, err
    code, out, err = _score_subjects_file(
        subjects_scene, json.dumps({"subjects": [dict(entry, names="a\x1b[2Jb", unknown=1)]})
    )
    assert code == 2 and one_line(err), err


def test_the_subjects_table_escapes_names(naflex_dir, subjects_scene):
    document = {"subjects": [{"names": f"dog{OSC52}", "references": ["ref.png"], "reference_masks": ["mask.png"]}]}
    (subjects_scene / "s.json").write_text(json.dumps(document))
    code, out, err = call(
        "score",
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--subjects",
        str(subjects_scene / "s.json"),
        "--out",
        str(subjects_scene / "out.png"),
        "--prompt",
        "a dog",
    )
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "dog\\x1b]52" in out


# ---------------------------------------------------------------- calibrate and prune-report


def _log(tmp_path, rows: list, name="crafted.jsonl") -> str:
    path = tmp_path / name
    path.write_text(
        "".join(json.dumps(r) + "\n" if not isinstance(r, str) else r + "\n" for r in rows), encoding="utf-8"
    )
    return str(path)


def _pick_row(run, label, cp, pf=0.1, **more):
    return {"time": "t", "run": run, "metric_version": "m", "label": label, "cp": cp, "pf": pf, **more}


def _picks(rounds=6):
    rng = np.random.default_rng(1)
    rows = []
    for r in range(rounds):
        for i in range(4):
            rows.append(
                _pick_row(
                    f"r{r}",
                    "picked" if i == 0 else "passed over",
                    float(rng.uniform(0.3, 0.6)) + (0.2 if i == 0 else 0),
                )
            )
    return rows


@pytest.mark.parametrize(
    "bad, reason",
    [
        (_pick_row(["a", "list"], "picked", 0.5), "run is not a text or whole number"),
        (_pick_row({"a": 1}, "passed over", 0.5), "run is not a text or whole number"),
        (_pick_row("r9", "picked", "0.9"), "cp or pf is not a number"),
        (_pick_row("r9", "passed over", 0.4, pf=[1]), "cp or pf is not a number"),
        (_pick_row("r9", "picked", True), "cp or pf is not a number"),
    ],
)
def test_calibrate_leaves_out_crafted_rows_and_counts_them(tmp_path, bad, reason):
    clean = calibrate(_picks(), bootstrap=50)
    path = _log(tmp_path, _picks() + [bad, bad])
    code, out, err = call("calibrate", path, "--bootstrap", "50", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["left_out"] == {reason: 2}
    assert result["scores"]["cp"]["auc"] == clean["scores"]["cp"]["auc"] and result["labelled"] == clean["labelled"]
    assert f"left out 2 rows MaSC does not write: {reason} (2)" in calibration_text(result)


def _study_row(run, final, previews):
    return {"time": "t", "run": run, "metric_version": "m", "cp": final, "pf": None, "previews": previews}


def _study(rounds=8, size=6):
    rng = np.random.default_rng(2)
    rows = []
    for r in range(rounds):
        for _ in range(size):
            final = float(rng.uniform(0.2, 0.6))
            rows.append(
                _study_row(
                    f"s{r}",
                    final,
                    [{"round": 0, "step": 2, "steps": 8, "cp": final + float(rng.normal(0, 0.03)), "pf": None}],
                )
            )
    return rows


PREVIEW = {"round": 0, "step": 2, "steps": 8, "cp": 0.4, "pf": None}


@pytest.mark.parametrize(
    "bad, reason",
    [
        (_study_row(["r"], 0.4, [PREVIEW]), "run is not a text or whole number"),
        (_study_row("x", 0.4, 5), "previews is not a list"),
        (_study_row("x", 0.4, [1, 2]), "a preview is not an object"),
        (
            _study_row("x", 0.4, [{k: v for k, v in PREVIEW.items() if k != "step"}]),
            "a preview's step or steps is not a whole number",
        ),
        (_study_row("x", 0.4, [dict(PREVIEW, steps=0)]), "a preview's step or steps is not a whole number"),
        (_study_row("x", 0.4, [dict(PREVIEW, step="2")]), "a preview's step or steps is not a whole number"),
        (_study_row("x", 0.4, [dict(PREVIEW, step=9)]), "a preview's step is past its steps"),
        (_study_row("x", 0.4, [dict(PREVIEW, cp="high")]), "a preview's cp or pf is not a number"),
        (_study_row("x", 0.4, [dict(PREVIEW, round=[0])]), "a preview's round is not a text or whole number"),
        (_study_row("x", "0.4", [PREVIEW]), "the final cp or pf is not a number"),
        (
            _study_row("x", 0.4, [dict(PREVIEW, step=s % 8) for s in range(64)]),
            "more than the 63 previews MaSC writes for one candidate",
        ),
    ],
)
def test_prune_report_leaves_out_crafted_rows_and_counts_them(tmp_path, bad, reason):
    clean = prune_report(_study(), keep=2, bootstrap=50)
    path = _log(tmp_path, _study() + [bad])
    code, out, err = call("prune-report", path, "--keep", "2", "--bootstrap", "50", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["left_out"].get(reason.split(" (")[0], 0) == 1 or any(
        k.startswith(reason) for k in result["left_out"]
    ), result["left_out"]
    assert result["steps"] == clean["steps"] and result["candidates"] == clean["candidates"]
    assert "left out 1 row MaSC does not write: " in prune_report_text(result)


class CountedPreviews(list):
    """A row's previews that count how often the report walks them."""

    walks = 0

    def __iter__(self):
        CountedPreviews.walks += 1
        return super().__iter__()


def test_prune_report_reads_each_candidates_previews_a_fixed_number_of_times_however_many_steps():
    rng = np.random.default_rng(5)
    walks = {}
    for judged in (2, 60):
        rows = []
        for r in range(4):
            for _ in range(6):
                final = float(rng.uniform(0.2, 0.6))
                previews = [
                    {"round": 0, "step": s, "steps": 64, "cp": final + float(rng.normal(0, 0.05)), "pf": None}
                    for s in range(1, judged + 1)
                ]
                rows.append(_study_row(f"s{r}", final, CountedPreviews(previews)))
        CountedPreviews.walks = 0
        result = prune_report(rows, keep=2, bootstrap=0)
        assert len(result["steps"]) == judged and result["candidates"] == 24
        walks[judged] = CountedPreviews.walks / len(rows)
    assert walks[60] == walks[2] <= 3, walks  # linear in the log: no walk per judged step


def test_the_first_preview_of_a_candidate_at_a_step_counts():
    rows = [
        _study_row("s", final, [dict(PREVIEW, cp=final), dict(PREVIEW, cp=1.0 - final)])
        for final in (0.2, 0.3, 0.4, 0.5)
    ]
    step = prune_report(rows, keep=1, bootstrap=0)["steps"][0]
    assert step["rho_cp"]["rho"] == pytest.approx(1.0) and step["kept_best"]["hits"] == 1


@pytest.mark.parametrize(
    "line, message",
    [
        ("[" * 5000 + "]" * 5000, "line 1 is not JSON MaSC Log Scores writes (nested more than 32 deep)"),
        (
            '{"time": "t", "run": "r", "metric_version": "m", "cp": NaN}',
            "line 1 is not JSON MaSC Log Scores writes (NaN is not a number)",
        ),
        ('{"time": "t", "run": ' + "7" * 5000 + ', "metric_version": "m"}', "(a number of 5,000 digits)"),
    ],
)
@pytest.mark.parametrize("command", ["calibrate", "prune-report"])
def test_a_crafted_log_line_refuses_the_file_in_one_line(tmp_path, line, message, command):
    code, out, err = call(command, _log(tmp_path, [line]))
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err and "internal error" not in err, err


def test_a_csv_log_with_nan_is_refused_in_one_line(tmp_path):
    from masc_core.evaluation.score_log import LOG_COLUMNS

    row = {c: "" for c in LOG_COLUMNS} | {
        "time": "t",
        "run": "r",
        "metric_version": "m",
        "cp": "nan",
        "label": "picked",
    }
    path = tmp_path / "picks.csv"
    path.write_text(",".join(LOG_COLUMNS) + "\n" + ",".join(row[c] for c in LOG_COLUMNS) + "\n")
    code, _, err = call("calibrate", str(path))
    assert code == 2 and "cp 'nan' is not a number" in err


@pytest.mark.parametrize(
    "option, value",
    [
        ("--seed", "-1"),
        ("--seed", str(2**40)),
        ("--seed", "x"),
        ("--cp-weight", "nan"),
        ("--pf-weight", "inf"),
        ("--cp-weight", "-1"),
        ("--pf-weight", "1e9"),
        ("--bootstrap", "-3"),
    ],
)
@pytest.mark.parametrize("command", ["calibrate", "prune-report"])
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, option, value, command):
    from masc_core.cli import main

    path = _log(tmp_path, _picks() if command == "calibrate" else _study())
    with pytest.raises(SystemExit) as exited:  # argparse refuses before any command runs
        main([command, path, f"{option}={value}"])
    captured = capsys.readouterr()
    assert exited.value.code == 2 and captured.out == "" and captured.err.count("\n") == 1 and option in captured.err, (
        captured.err
    )


def test_blocked_resamples_are_the_draws_of_one_call_and_never_all_held_at_once(monkeypatch):
    monkeypatch.setattr(agreement, "_BLOCK_ELEMENTS", 10_000)
    held = []

    def statistic(draws):
        held.append(draws.size)
        return draws.mean(axis=1)

    blocked = agreement.resampled(np.random.default_rng([0, 5]), 3_000, 200, statistic)
    whole = np.random.default_rng([0, 5]).integers(0, 3_000, size=(200, 3_000)).mean(axis=1)
    assert np.array_equal(blocked, whole) and max(held) <= 10_000 and sum(held) == 200 * 3_000


def test_a_long_study_reports_the_same_figures_in_blocks(monkeypatch):
    rows = _study(rounds=40, size=8)
    whole = prune_report(rows, keep=2, bootstrap=300)
    monkeypatch.setattr(agreement, "_BLOCK_ELEMENTS", 500)  # many small blocks: the same numbers
    assert prune_report(rows, keep=2, bootstrap=300) == whole


# ---------------------------------------------------------------- read


def test_read_refuses_a_share_past_any_range_and_goes_on_to_the_next_file(tmp_path):
    pixels = np.zeros((8, 8, 3), np.uint8)
    entry = {
        "format": 1,
        "nodes": {"3": {"node": "MaSCScore", "images": [{"index": 0, "cp": 0.5, "pf": None, "mask": 2 * 10**306}]}},
    }
    bad = png_with_chunks(tmp_path / "bad.png", pixels, before=[text_chunk("masc", json.dumps(entry))])
    entry["nodes"]["3"]["images"][0]["mask"] = 0.25
    good = png_with_chunks(tmp_path / "good.png", pixels, before=[text_chunk("masc", json.dumps(entry))])
    code, out, err = call("read", bad, good)
    assert code == 2 and err.count("\n") == 1 and "bad.png" in err and "internal error" not in err, err
    assert "good.png" in out and "25.0%" in out


# ---------------------------------------------------------------- MaSC Log Scores' filename


@pytest.mark.parametrize(
    "name, message",
    [
        ("night\x00.jsonl", "holds a control character, NUL or backslash"),
        ("a" * 300 + ".jsonl", "is 306 characters long: give at most 200"),
        ("/".join(["d"] * 3000) + ".jsonl", "characters long"),
        ("/".join(["d"] * 9) + "/x.jsonl", "is 9 folders deep: give at most 8"),
        ("a\\..\\..\\x.jsonl", "backslash"),
        ("a//x.jsonl", "leaves the output folder"),
        ("./x.jsonl", "leaves the output folder"),
        ("é" * 130 + ".jsonl", "over 255 bytes"),
        (f"night{COLOUR}.jsonl", "control character"),
    ],
)
def test_a_crafted_log_filename_is_one_line_without_the_servers_path(tmp_path, name, message):
    output = tmp_path / "output"
    output.mkdir()
    with pytest.raises(MascInputError) as refused:
        log_path(str(output), name)
    text = str(refused.value)
    assert message in text and str(tmp_path) not in text and one_line(text), text
    assert list(output.iterdir()) == []  # nothing created


def test_the_log_node_refuses_a_crafted_filename_without_the_servers_path(pack, comfy_dirs):
    scores = importlib.import_module(pack.__name__ + ".masc_core.metric.scores")
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    batch = scores.ScoreBatch(
        scores=[scores.ImageScore(index=0, cp=0.5)], references=[], context=scores.ScoreContext(node="MaSCScore")
    )
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]()
    before = sorted(os.listdir(comfy_dirs["output"]))
    for name in ["x\x00.jsonl", "n" * 300 + ".jsonl", "/".join(["deep"] * 500) + ".jsonl"]:
        with pytest.raises(errors.MascInputError) as refused:
            node.log(batch, name, "")
        assert comfy_dirs["output"] not in str(refused.value) and one_line(str(refused.value))
    assert sorted(os.listdir(comfy_dirs["output"])) == before


@pytest.mark.parametrize("recursion_limit", [200, 1000, 50_000])
def test_json_nested_too_deep_is_one_wording_whatever_the_recursion_limit(recursion_limit):
    """Python 3.11's parser hits its recursion limit on 5,000 brackets, 3.13's on Linux does not and the depth check
    refuses it instead: the same sentence either way (the limit stands in for the interpreter here)."""
    import sys

    from masc_core.io.files import JSONTooDeep, parse_json

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(recursion_limit)
    try:
        with pytest.raises(JSONTooDeep) as refused:
            parse_json("[" * 5000 + "]" * 5000)
    finally:
        sys.setrecursionlimit(before)
    assert str(refused.value) == "nested more than 32 deep"
