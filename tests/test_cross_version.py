"""The same inputs give the same scores under transformers 4.57 and 5.x (|d| <= 1e-5).

The suite runs under one transformers; this test runs the CLI under a
second interpreter with the other major version (``MASC_ALT_PYTHON``, which
.ci/run sets up with transformers 4.57) on the same checkpoints and files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import PROMPT, ROOT

ALT_PYTHON = os.environ.get("MASC_ALT_PYTHON")


def transformers_major(python: str) -> int:
    out = subprocess.run(
        [python, "-c", "import transformers; print(transformers.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip().split(".")[0])


@pytest.mark.skipif(
    not ALT_PYTHON,
    reason="set MASC_ALT_PYTHON to an interpreter with the other transformers major version (.ci/run does)",
)
@pytest.mark.parametrize("which", ["naflex", "fixed", "fixed_bicubic"])
def test_scores_do_not_depend_on_the_installed_transformers(which, naflex_dir, fixed_dir, fixed_bicubic_dir, files):
    assert transformers_major(ALT_PYTHON) != transformers_major(sys.executable)
    folder = {"naflex": naflex_dir, "fixed": fixed_dir, "fixed_bicubic": fixed_bicubic_dir}[which]
    outs = ["dog_01", "dog_02", "cat_00", "dog_01_wide", "dog_01_tall", "dog_01_odd"]
    args = [
        "-m",
        "masc_core",
        "score",
        "--model",
        folder,
        "--device",
        "cpu",
        "--json",
        "--ref",
        files["dog_00"],
        files["teapot_00"],
        "--ref-mask",
        files["dog_00_mask"],
        files["teapot_00_mask"],
        "--out",
        *[files[o] for o in outs],
        "--out-mask",
        *[files[o + "_mask"] for o in outs],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
    ]
    results = {}
    for python in (sys.executable, ALT_PYTHON):
        completed = subprocess.run([python, *args], cwd=ROOT, capture_output=True, text=True)
        assert completed.returncode == 0, completed.stderr
        results[python] = json.loads(completed.stdout)["results"]
    for here, there in zip(results[sys.executable], results[ALT_PYTHON]):
        assert here["encoded_prompt"] == there["encoded_prompt"]
        for key in ("cp", "pf"):
            assert abs(here[key] - there[key]) <= 1e-5, (key, here[key], there[key])
        for a, b in zip(here["cp_per_reference"], there["cp_per_reference"]):
            assert abs(a - b) <= 1e-5
