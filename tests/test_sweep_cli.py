"""`python -m masc_core sweep`: folders of cells scored at paired prompts and seeds, the verdict, the pictures, and a
one-line error for each way the folders can be wrong.

The cells are built from real photos (tests/data/dreambench) so the verdict is known without trained weights: the
"copy" cells hold crops of the reference photo itself (CP near 1, the random encoder's pixel-level identity), the
baseline holds other subjects; a cell that is a byte-for-byte copy of another must tie with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, box_mask, load_photo

PROMPTS = ["a dog on the beach", "a dog in a red box"]
SEEDS = (1, 2, 3, 4)


def call(*argv) -> tuple[int, str, str]:
    """``python -m masc_core ARGV`` in this process: exit code, stdout, stderr (argparse's exits included)."""
    import contextlib
    import io

    from masc_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exit:
            code = exit.code
    return code, out.getvalue(), err.getvalue()


def _variant(photo: np.ndarray, seed: int) -> np.ndarray:
    """A crop of ``photo`` that moves with the seed: each (prompt, seed) a different image."""
    shift = 8 * seed
    return photo[shift : shift + 400, 40 - shift // 2 : 440 - shift // 2]


def _write_cell(folder, photos, seeds=SEEDS, prompts=len(PROMPTS)) -> str:
    os.makedirs(folder, exist_ok=True)
    for number in range(1, prompts + 1):
        for k, seed in enumerate(seeds):
            image = _variant(load_photo(photos[(number + k) % len(photos)]), seed)
            Image.fromarray(image).save(os.path.join(folder, f"p{number}_s{seed}.png"))
            Image.fromarray(box_mask(*image.shape[:2])).save(os.path.join(folder, f"p{number}_s{seed}_mask.png"))
    return str(folder)


@pytest.fixture(scope="module")
def sweep_dirs(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("sweep")
    cells = {
        "baseline": _write_cell(root / "baseline", ["teapot_00", "cat_00", "red_cartoon_00"]),
        "weak": _write_cell(root / "weak", ["cat_00", "teapot_00", "dog_02"]),
        "copy": _write_cell(root / "copy", ["dog_00"]),
    }
    cells["copy_again"] = str(root / "copy_again")
    shutil.copytree(cells["copy"], cells["copy_again"])
    return {"root": str(root), **cells}


def sweep_args(naflex_dir, files, dirs, cells=("baseline", "weak", "copy"), *extra):
    args = ["sweep", "--model", naflex_dir, "--device", "cpu", "--ref", files["dog_00"], "--ref-mask"]
    args += [files["dog_00_mask"], "--subject", "dog"]
    for prompt in PROMPTS:
        args += ["--prompt", prompt]
    for name in cells:
        args += ["--cell", f"{name}={dirs[name]}"]
    return args + list(extra)


def test_the_cell_that_keeps_the_subject_is_recommended(naflex_dir, files, sweep_dirs):
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs), "--pf-margin", "2", "--json")
    assert code == 0, err
    document = json.loads(out)
    cells = {c["cell"]: c for c in document["cells"]}
    assert document["best"] == document["recommended"] == "copy"
    assert cells["copy"]["cp"] > cells["weak"]["cp"] and cells["copy"]["cp"] > cells["baseline"]["cp"]
    assert not cells["weak"]["tied"] and not cells["baseline"]["tied"]
    assert cells["weak"]["cp_vs_best"][1] < 0  # below the best at 95%, paired
    assert all(c["images"] == len(PROMPTS) * len(SEEDS) for c in cells.values())
    assert document["images"] == 3 * len(PROMPTS) * len(SEEDS)
    assert document["pairs"][:2] == [{"prompt": 1, "seed": 1}, {"prompt": 1, "seed": 2}]


def test_a_copy_of_the_best_ties_and_the_weaker_listed_first_is_taken(naflex_dir, files, sweep_dirs):
    cells = ("baseline", "weak", "copy", "copy_again")
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs, cells), "--pf-margin", "2", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert sorted(document["tied"]) == ["copy", "copy_again"]
    assert document["recommended"] == "copy"  # listed before copy_again: the weaker of the two
    assert document["verdict"].startswith("tie: ")
    # Listed the other way round, the other copy is the weaker one and is taken.
    cells = ("baseline", "weak", "copy_again", "copy")
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs, cells), "--pf-margin", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["recommended"] == "copy_again"


def test_each_score_is_the_score_commands(naflex_dir, files, sweep_dirs):
    """The sweep scores an image as ``score`` does: the same CP and PF for the same files and prompt."""
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs), "--json")
    assert code == 0, err
    swept = {(row["prompt"], row["seed"]): row for row in json.loads(out)["scores"]["weak"]}
    folder = sweep_dirs["weak"]
    outs = [os.path.join(folder, f"p2_s{seed}.png") for seed in SEEDS]
    code, out, err = call(
        "score",
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--subject",
        "dog",
        "--prompt",
        PROMPTS[1],
        "--out",
        *outs,
        "--out-mask",
        *[o[:-4] + "_mask.png" for o in outs],
        "--json",
    )
    assert code == 0, err
    for seed, row in zip(SEEDS, json.loads(out)["results"]):
        assert swept[(2, seed)]["cp"] == pytest.approx(row["cp"], abs=1e-6)
        assert swept[(2, seed)]["pf"] == pytest.approx(row["pf"], abs=1e-6)


def test_table_chart_and_grid(naflex_dir, files, sweep_dirs, tmp_path):
    chart, grid = tmp_path / "chart.png", tmp_path / "grid.png"
    code, out, err = call(
        *sweep_args(naflex_dir, files, sweep_dirs), "--chart", chart, "--grid", grid, "--grid-tile", "128"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["cell", "images", "CP", "PF"]
    assert lines[1].split()[0] == "baseline"
    assert lines[-1].startswith("verdict: ")
    with Image.open(chart) as picture:
        assert picture.size == (1024, 768)
        pixels = np.asarray(picture.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20  # points, axes and text drawn, not a blank canvas
    with Image.open(grid) as picture:
        header = max(160, 128)
        # a header row and a row per cell; a column per pair (8) after the row headers
        assert picture.size[0] == header + len(PROMPTS) * len(SEEDS) * 128
        line = int(max(12, 128 // 14) * 1.35)
        assert picture.size[1] == 2 * line + 8 + 3 * (128 + 2 * line)


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: os.remove(os.path.join(d["weak"], "p2_s3_mask.png")), "--cell weak: 'p2_s3.png' has no mask"),
        (lambda d: os.remove(os.path.join(d["weak"], "p1_s4.png")), "--cell weak lacks prompt 1 seed 4"),
        (lambda d: _write_cell(d["weak"], ["cat_00"], seeds=(9,)), "--cell weak has prompt 1 seed 9"),
        (lambda d: _write_cell(d["weak"], ["cat_00"], prompts=3), "is for prompt 3, but 2 prompts are given"),
        (lambda d: _pipe(d["weak"], "p1_s1.png"), "is a named pipe (FIFO), not a regular file"),
        (lambda d: _counted(d["weak"], keep=True), "'p1_s1.png' and 'p1_s1_00001_.png' are both prompt 1 seed 1"),
    ],
)
def test_a_wrong_folder_is_one_line(naflex_dir, files, sweep_dirs, tmp_path, change, expected):
    dirs = dict(sweep_dirs)
    dirs["weak"] = str(tmp_path / "weak")
    shutil.copytree(sweep_dirs["weak"], dirs["weak"])
    change(dirs)
    code, out, err = call(*sweep_args(naflex_dir, files, dirs))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err, err


def _pipe(folder, name) -> None:
    """``name`` in ``folder`` replaced by a FIFO: opening it would wait for a writer forever."""
    os.remove(os.path.join(folder, name))
    os.mkfifo(os.path.join(folder, name))


def _counted(folder, keep: bool = False) -> None:
    """Every output renamed as ComfyUI's Save Image names it (``p1_s1_00001_.png``, its mask beside it); ``keep``:
    the first output also under its plain name."""
    for name in sorted(os.listdir(folder)):
        if name.endswith("_mask.png"):
            continue
        stem = name[:-4]
        for suffix in (".png", "_mask.png"):
            source, target = os.path.join(folder, stem + suffix), os.path.join(folder, stem + "_00001_" + suffix)
            (shutil.copy if keep else os.rename)(source, target)
        if keep:
            return


def test_names_with_comfyuis_counter_are_read(naflex_dir, files, sweep_dirs, tmp_path):
    dirs = dict(sweep_dirs)
    dirs["weak"] = str(tmp_path / "weak")
    shutil.copytree(sweep_dirs["weak"], dirs["weak"])
    _counted(dirs["weak"])
    assert "p1_s1_00001_.png" in os.listdir(dirs["weak"]) and "p1_s1.png" not in os.listdir(dirs["weak"])
    code, out, err = call(*sweep_args(naflex_dir, files, dirs), "--json")
    assert code == 0, err
    assert {c["cell"]: c["images"] for c in json.loads(out)["cells"]}["weak"] == len(PROMPTS) * len(SEEDS)


def test_names_that_are_not_ascii_digits_are_ignored(naflex_dir, files, sweep_dirs, tmp_path):
    """``p²_s1.png`` or ``p1_s①.png`` is not an output of the sweep (``str.isdigit`` is true for them): ignored."""
    dirs = dict(sweep_dirs)
    dirs["weak"] = str(tmp_path / "weak")
    shutil.copytree(sweep_dirs["weak"], dirs["weak"])
    for name in ("p²_s1.png", "p1_s①.png", "notes.txt"):
        with open(os.path.join(dirs["weak"], name), "w") as handle:
            handle.write("not an image")
    code, out, err = call(*sweep_args(naflex_dir, files, dirs), "--json")
    assert code == 0, err
    assert {c["cell"]: c["images"] for c in json.loads(out)["cells"]}["weak"] == len(PROMPTS) * len(SEEDS)


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--baseline", "none"], "--baseline 'none' is not one of the cells"),
        (["--chart", "chart.jpg"], "--chart 'chart.jpg': give the picture a .png name"),
        (["--prompt", PROMPTS[0]], "prompt 3 repeats prompt 1"),
        (["--pf-margin", "nan"], "must be from 0 to 2"),
        (["--confidence", "1"], "must be from 0.5 to below 1"),
        (["--bootstrap", "10"], "must be from 100 to 100000"),
        (["--grid", "g.png", "--grid-tile", "9000"], "grid tile is 9000: give 64 to 512 pixels"),
        (["--cell", "weak=/nonexistent"], "cell 'weak' is given twice"),
        (["--cell", "noequals"], "is not NAME=FOLDER"),
    ],
)
def test_a_wrong_option_is_one_line(naflex_dir, files, sweep_dirs, extra, expected):
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs), *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err, err


def test_a_sweep_needs_a_baseline_and_another_cell(naflex_dir, files, sweep_dirs):
    code, out, err = call(*sweep_args(naflex_dir, files, sweep_dirs, ("baseline",)))
    assert code == 2 and "needs the baseline and at least one other cell" in err


def test_prompts_from_a_file(naflex_dir, files, sweep_dirs, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n\n", encoding="utf-8")
    args = [a for a in sweep_args(naflex_dir, files, sweep_dirs) if a not in PROMPTS and a != "--prompt"]
    code, out, err = call(*args, "--prompts", prompts, "--json")
    assert code == 0, err
    assert json.loads(out)["prompts"] == PROMPTS


def test_the_command_line_runs_as_a_program(naflex_dir, files, sweep_dirs):
    """``python -m masc_core sweep`` in its own process: exit 0 and the verdict line, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "masc_core", *sweep_args(naflex_dir, files, sweep_dirs)[0:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("verdict: ")
