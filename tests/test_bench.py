"""The benchmark runs end to end (tiny checkpoint, small N) and reports what the README's table shows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("masc", reason="the benchmark compares with masc-metric, installed by .ci/run")


def test_bench_reports_rows_ratios_forward_counts_and_whole_process(naflex_dir, tmp_path):
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "best-of-n",
            "--checkpoint",
            naflex_dir,
            "--n",
            "3",
            "--max-patches",
            "64",
            "--batch-size",
            "2",
            "--process-n",
            "2",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
            "--markdown",
            str(tmp_path / "bench.md"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    assert [row["n"] for row in report["rows"]] == [3]
    for row in report["rows"]:
        for kind in ("masc", "ours", "floor"):
            assert row[kind]["seconds"] > 0 and row[kind]["peak_rss_mib"] > 0, row
        # The batch path reaches the floor's forward counts: N + 1 images, one text.
        assert row["ours"]["forwards"] == {"images": row["n"] + 1, "texts": 1}
        assert row["masc_over_ours"] == pytest.approx(row["masc"]["seconds"] / row["ours"]["seconds"])
    process = report["whole_process"][0]
    assert process["n"] == 2 and process["masc"]["seconds"] > 0 and process["ours"]["seconds"] > 0
    table = (tmp_path / "bench.md").read_text()
    assert "| custom | 3 |" in table and "Whole process, best-of-2" in table
    assert completed.stdout.strip() == table.strip()


def test_markdown_adds_cuda_peaks_only_when_measured():
    from benchmarks.bench import markdown

    machine = {"cpu": "test cpu", "logical_cpus": 2, "torch": "2.x", "torch_threads": 2, "transformers": "5.x"}
    row = {
        "size": "base",
        "n": 8,
        "masc_over_ours": 2.0,
        "ours_over_floor": 1.05,
        "masc": {"seconds": 20.0, "peak_rss_mib": 2048.0},
        "ours": {"seconds": 10.0, "peak_rss_mib": 1024.0},
        "floor": {"seconds": 9.5, "peak_rss_mib": None},
    }
    report = {
        "machine": machine,
        "device": "cpu",
        "max_patches": 1024,
        "batch_size": 8,
        "rows": [row],
        "whole_process": [],
    }
    lines = markdown(report).splitlines()
    assert lines[4] == "| base | 8 | 20.00 | 10.00 | 9.50 | 2.00x | 1.050x | 2.00 / 1.00 / n/a |"
    assert lines[2].count("|") == lines[3].count("|") == lines[4].count("|") == 9 and "CUDA" not in lines[2]
    for kind, mib in (("masc", 3072.0), ("ours", 1536.0), ("floor", 1024.0)):
        row[kind]["peak_cuda_mib"] = mib
    report["machine"]["gpu"] = "Test GPU"
    lines = markdown(report).splitlines()
    assert "device cpu (Test GPU)" in lines[0]
    assert lines[4].endswith("| 2.00 / 1.00 / n/a | 3.00 / 1.50 / 1.00 |")
    assert lines[2].count("|") == lines[3].count("|") == lines[4].count("|") == 10


def test_loop_overhead_benchmark_runs_and_accounts_for_every_part(naflex_dir, tmp_path):
    """``python -m benchmarks loop-overhead`` end to end on the tiny checkpoint (its numbers are not asserted: not a
    timed test)."""
    out = tmp_path / "loop.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "loop-overhead",
            "--checkpoint",
            naflex_dir,
            "--candidates",
            "3",
            "--batch-sizes",
            "1",
            "2",
            "--repeat",
            "1",
            "--resolution",
            "128",
            "--max-patches",
            "64",
            "--sampling-seconds",
            "1",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    rows = json.loads(out.read_text())
    assert [(r["batch_size"], r["rounds"]) for r in rows] == [(1, 3), (2, 2)]
    for row in rows:
        assert set(row["parts_per_round_ms"]) == {
            "sampling (stand-in)",
            "decoding (stand-in)",
            "masking",
            "encoder forwards",
            "preprocessing (part of the overhead)",
        }
        assert row["overhead_per_round_ms"] > 0 and 0 < row["overhead_share"] < 1
        assert row["overhead_share_with_sampling"] < row["overhead_share"]
    assert completed.stdout.splitlines()[0].startswith("| size | batch_size | rounds |")
