"""The per-stage benchmark runs one scoring node call end to end (tiny checkpoint, small images) and reports every
stage."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.stages import markdown
from conftest import ROOT


def test_stages_bench_times_every_stage_of_a_node_call(naflex_dir, tmp_path):
    out = tmp_path / "stages.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "stages",
            "--models",
            "custom",
            "--checkpoint",
            naflex_dir,
            "--n",
            "2",
            "--image-size",
            "96",
            "--max-patches",
            "64",
            "--repeats",
            "2",
            "--json",
            str(out),
            "--markdown",
            str(tmp_path / "stages.md"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    assert report["n"] == 2 and report["image_size"] == 96 and report["device"] == "cpu"
    row = report["models"][0]
    assert row["maps"] == 6 and row["previews_written"] == 2  # written for real, in a temporary folder
    on, off = row["on"]["median_ms"], row["off"]["median_ms"]
    # Every stage the node goes through was seen.
    for stage in ("tensors_in", "preprocessing", "vision", "text", "metric", "heatmaps", "image_outputs", "previews"):
        assert on[stage] > 0, stage
    assert off["heatmaps"] == 0 and off["previews"] > 0 and off["vision"] > 0
    for kind in ("on", "off"):
        assert all(row[kind]["min_ms"][stage] <= row[kind]["median_ms"][stage] for stage in row[kind]["median_ms"])
    table = (tmp_path / "stages.md").read_text()
    assert "| heatmap rendering (every map, captions) |" in table and "6 maps" in table
    assert completed.stdout.strip() == table.strip() and "median of 2 calls" in table
    lowest = markdown(report, "min")
    assert "min of 2 calls" in lowest
    assert f"| heatmap rendering (every map, captions) | {row['on']['min_ms']['heatmaps']:.1f} | 0.0 |" in lowest
