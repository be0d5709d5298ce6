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
        [sys.executable, "-m", "masc_core", "bench", "--checkpoint", naflex_dir, "--n", "3", "--max-patches", "64",
         "--batch-size", "2", "--process-n", "2", "--workdir", str(tmp_path / "work"), "--json", str(out),
         "--markdown", str(tmp_path / "bench.md")],
        cwd=ROOT, capture_output=True, text=True,
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
