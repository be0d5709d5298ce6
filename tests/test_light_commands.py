"""The commands that only read a log or a PNG (read, calibrate, prune-report) never import torch, transformers or scipy.

Each runs in a fresh interpreter on a real input; the test reads which modules it loaded, not how long it took (the
time and memory are measured by ``python -m benchmarks report-startup``, docs/performance.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from conftest import ROOT
from test_calibrate import synthetic_log
from test_saved_scores import candidates, save_like_comfyui, scored

from masc_core.metric.saved_scores import add_node_entry, node_entry, pixel_digest

HEAVY = ("torch", "transformers", "scipy")
PROBE = (
    "import sys\n"
    "from masc_core.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"print('loaded:', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    "sys.exit(code)\n"
)


def run_light(*argv: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.returncode, done.stdout


def test_read_prints_a_pngs_scores_without_the_model_stack(tmp_path):
    images = candidates()[[2, 1]]
    extra = {}
    add_node_entry(
        extra,
        "13",
        node_entry(
            scored(),
            node="MaSCSampleUntil",
            outputs=[None, 1, 0],
            pixels=[None, pixel_digest(images[1].numpy()), pixel_digest(images[0].numpy())],
        ),
    )
    path = save_like_comfyui(images, tmp_path, "masc", extra)[0]
    code, out = run_light("read", path)
    assert code == 0 and "this image: #2  seed 1002" in out
    assert out.splitlines()[-1] == "loaded: []"


def test_calibrate_reads_the_picks_without_the_model_stack(tmp_path):
    path, _ = synthetic_log(tmp_path, "picks.jsonl")
    code, out = run_light("calibrate", path, "--bootstrap", "50")
    assert code == 0 and "72 labelled candidates from 12 pick(s)" in out
    assert out.splitlines()[-1] == "loaded: []"


def test_prune_report_reads_a_study_without_the_model_stack(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "study.jsonl"
    with open(path, "w") as handle:
        for n in range(16):
            final = float(rng.uniform(0.2, 0.6))
            previews = [
                {"round": 0, "step": step, "steps": 10, "cp": final + float(rng.normal(0, 0.02)), "pf": None}
                for step in (3, 6)
            ]
            row = {"time": "t", "run": "study", "metric_version": "x", "cp": final, "pf": None, "previews": previews}
            handle.write(json.dumps(row) + "\n")
    code, out = run_light("prune-report", str(path))
    assert code == 0 and out.startswith("16 candidates in 1 rounds of 'study.jsonl'")
    assert "3/10 (30%)" in out and "6/10 (60%)" in out
    assert out.splitlines()[-1] == "loaded: []"


def test_the_probe_sees_a_scoring_command_load_the_model_stack(naflex_dir, files):
    """What the probe reports when a command does score: torch (SigLIP2 runs in plain torch), as it must."""
    from test_cli import pair_args

    code, out = run_light(*pair_args(naflex_dir, files))
    assert code == 0 and "CP" in out
    assert out.splitlines()[-1].startswith("loaded: ['torch'")
