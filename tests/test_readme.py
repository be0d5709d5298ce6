"""The README's commands run as written (the Hub ids swapped for local random-weight checkpoints)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

HUB_IDS = ("google/siglip2-so400m-patch16-naflex", "CIDAS/clipseg-rd64-refined")


def readme_block(heading: str) -> str:
    """The first ```bash block under a README heading."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split(heading, 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def commands(block: str) -> list[list[str]]:
    """The block's commands, continuation lines joined, split as a shell would."""
    joined = block.replace("\\\n", " ")
    return [
        shlex.split(line, comments=True) for line in joined.splitlines() if line.strip() and not line.startswith("#")
    ]


@pytest.fixture(scope="module")
def clipseg_dir(tmp_path_factory):
    from masc_core.testing import build_clipseg_checkpoint

    return build_clipseg_checkpoint(str(tmp_path_factory.mktemp("clipseg") / "tiny-clipseg"), seed=0)


def test_the_main_job_runs_as_written(naflex_dir, clipseg_dir, tmp_path):
    lines = commands(readme_block("### Run the main job"))
    assert lines[0][:3] == ["pip", "install", "-e"]
    local = {HUB_IDS[0]: naflex_dir, HUB_IDS[1]: clipseg_dir}
    # A fresh clone: the shipped photos are where the commands say, and the outputs land in the working folder.
    os.symlink(os.path.join(ROOT, "tests"), tmp_path / "tests")
    env = dict(os.environ, PYTHONPATH=ROOT)
    results = []
    for argv in lines[1:]:
        assert argv[:3] == ["python", "-m", "masc_core"], argv
        argv = [sys.executable] + [local.get(a, a) for a in argv[1:]]
        completed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
        assert completed.returncode == 0, completed.stderr
        results.append(completed.stdout)
    assert sorted(os.listdir(tmp_path / "masks")) == [
        "cat_00_mask.png",
        "dog_00_mask.png",
        "dog_01_mask.png",
        "dog_02_mask.png",
    ]
    document = json.loads(results[-1])
    assert [os.path.basename(r["image"]) for r in document["results"]] == ["dog_01.jpg", "dog_02.jpg", "cat_00.jpg"]
    assert all(r["encoded_prompt"] == "a photo of on the beach" for r in document["results"])
    assert all(r["cp"] is not None or r["cp_undefined"] for r in document["results"])


def test_the_test_command_is_what_ci_runs():
    assert commands(readme_block("### Run the tests")) == [["bash", ".ci/run"]]
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert "python -m pytest -q" in ci


@pytest.mark.parametrize(
    "document",
    ["README.md", *sorted("docs/" + name for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md"))],
)
def test_local_links_and_pictures_point_at_files_of_the_repository(document):
    """Every relative link or picture (``[text](path)``, ``![alt](path)``) names a file the repository ships."""
    path = os.path.join(ROOT, document)
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold commands, not links
    targets = {m.group(1).split("#")[0] for m in re.finditer(r"\]\(([^)\s]+)\)", text)}
    local = sorted(t for t in targets if t and not re.match(r"[a-z]+:", t))
    missing = [t for t in local if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), t)))]
    assert missing == [], f"{document} links to files that do not exist: {missing}"
