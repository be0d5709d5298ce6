"""The multi-subject benchmarks run end to end on the tests' tiny checkpoints: the forward floor, the blend study."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def _run(*argv):
    completed = subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=ROOT, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    return completed


def test_a_second_subject_costs_one_vision_forward_and_no_text_forward(naflex_dir, tmp_path):
    out = tmp_path / "subjects.json"
    _run("subjects", "--checkpoint", naflex_dir, "--n", "3", "--repeat", "1", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["single-subject"]["forwards"] == {"images": 3 + 1, "texts": 1}
    assert report["two subjects"]["forwards"] == {"images": 3 + 2, "texts": 1}
    assert report["two subjects"]["seconds"] > 0


def test_blend_study_counts_both_rules_on_both_cases(naflex_dir, fixed_dir, tmp_path):
    out = tmp_path / "blend.json"
    completed = _run("blend-rule", "--checkpoint", naflex_dir, fixed_dir, "--json", str(out))
    report = json.loads(out.read_text())
    assert len(report) == 2
    for rows in report.values():
        assert sorted({r["case"] for r in rows}) == ["different", "duplicate"] and len(rows) == 10
    # The README's numbers: the rule in use fires on 1 of 10 different pairs, 7 of 10 duplicates; the other on 7 of 10.
    every = [r for rows in report.values() for r in rows]
    count = lambda case, rule: sum(r[rule] for r in every if r["case"] == case)  # noqa: E731
    assert (count("different", "own_region"), count("duplicate", "own_region"), count("different", "in_region")) == (
        1,
        7,
        7,
    )
    assert "own-region fired" in completed.stdout


def test_the_bands_benchmark_adds_no_forward(naflex_dir, tmp_path):
    out = tmp_path / "bands.json"
    completed = _run("bands", "--checkpoint", naflex_dir, "--n", "3", "--repeat", "1", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["without bands"]["forwards"] == report["with bands"]["forwards"] == {"images": 3 + 1, "texts": 1}
    assert report["with bands"]["seconds"] > 0 and "the bands add" in completed.stdout
