"""`python -m masc_core score`: the contract scripts rely on, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import PROMPT, ROOT, box_mask
from masc_core.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def pair_args(folder, files, outs=("dog_01", "cat_00"), masks=True):
    args = [
        "score",
        "--model",
        folder,
        "--device",
        "cpu",
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--out",
        *[files[o] for o in outs],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
    ]
    if masks:
        args += ["--out-mask", *[files[o + "_mask"] for o in outs]]
    return args


def test_json_document_in_the_order_of_out(capsys, naflex_dir, files):
    outs = ("cat_00", "dog_01_wide", "dog_01")
    code, out, err = run(capsys, *pair_args(naflex_dir, files, outs), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert [r["image"] for r in document["results"]] == [files[o] for o in outs]
    for row in document["results"]:
        assert isinstance(row["cp"], float) and isinstance(row["pf"], float)
        assert row["encoded_prompt"] == "A photo of ON the beach, next to a red ball"
    assert document["model"]["kind"] == "naflex"


def test_json_reports_resources(capsys, naflex_dir, files):
    outs = ("cat_00", "dog_01", "cat_00")
    code, out, err = run(capsys, *pair_args(naflex_dir, files, outs), "--json")
    assert code == 0, err
    resources = json.loads(out)["resources"]
    # The repeated output is encoded once; the stripped prompt once. (The session fixture's encoder is not
    # this one: the CLI loads its own, so its counts start at zero.)
    assert resources["forwards"] == {"images": 3, "texts": 1}
    assert resources["cache"]["entries"] == 3 and resources["cache"]["bytes"] > 0
    assert resources["cache"]["max_bytes"] == 512 * 1024 * 1024
    assert resources["peak_rss_mib"] > 50 and "peak_cuda_mib" not in resources
    assert resources["seconds"]["load"] > 0 and resources["seconds"]["score"] > 0


def test_table_without_json(capsys, fixed_dir, files):
    code, out, err = run(capsys, *pair_args(fixed_dir, files))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["image", "CP", "PF"]
    assert lines[1].startswith("dog_01.jpg") and lines[2].startswith("cat_00.jpg")
    assert "PF text: 'A photo of ON the beach, next to a red ball'" in out


def test_heatmaps_are_written(capsys, naflex_dir, files, tmp_path):
    code, out, err = run(
        capsys, *pair_args(naflex_dir, files, ("dog_01_tall",)), "--heatmaps", str(tmp_path / "maps"), "--json"
    )
    assert code == 0, err
    written = json.loads(out)["heatmaps"]
    assert len(written) == 3
    for path in written:
        image = Image.open(path)
        assert image.size == Image.open(files["dog_01_tall"]).size or "reference_match" in path


def test_heatmaps_show_every_reference_view(capsys, naflex_dir, files, tmp_path):
    """With K reference views, one reference map per view, each drawn on its own view (it was view 0 only)."""
    from masc_core import MascEncoder, render_heatmaps, score_images
    from masc_core.io.images import load_image_file, load_mask_file

    views = ("dog_00", "dog_01_wide")
    args = [
        "score",
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--ref",
        *[files[v] for v in views],
        "--ref-mask",
        *[files[v + "_mask"] for v in views],
        "--out",
        files["cat_00"],
        "--out-mask",
        files["cat_00_mask"],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
        "--heatmaps",
        str(tmp_path / "maps"),
        "--json",
    ]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    written = json.loads(out)["heatmaps"]
    maps = tmp_path / "maps"
    assert written == [str(maps / f"cat_00.reference_match.view{k}.png") for k in (0, 1)] + [
        str(maps / "cat_00.presence.png"),
        str(maps / "cat_00.background_attention.png"),
    ]
    refs = [load_image_file(files[v]) for v in views]
    batch = score_images(
        MascEncoder.load(naflex_dir, device="cpu"),
        [load_image_file(files["cat_00"])],
        reference=refs,
        reference_mask=[load_mask_file(files[v + "_mask"]) for v in views],
        mask=load_mask_file(files["cat_00_mask"]),
        prompt=PROMPT,
        subject="dog",
        heatmaps=True,
    )
    expected = render_heatmaps(batch, refs, [load_image_file(files["cat_00"])], captions=False).reference
    for k in (0, 1):
        drawn = np.asarray(Image.open(written[k]))
        assert drawn.shape == refs[k].shape
        assert np.array_equal(drawn, expected[k])


def test_without_out_masks_pf_is_null_with_a_reason(capsys, naflex_dir, files):
    code, out, _ = run(capsys, *pair_args(naflex_dir, files, masks=False), "--json")
    row = json.loads(out)["results"][0]
    assert code == 0 and row["pf"] is None and "no output mask" in row["pf_undefined"] and row["cp"] is not None


@pytest.fixture
def bad_inputs(tmp_path, naflex_dir):
    text_file = tmp_path / "notes.png"
    text_file.write_text("not an image")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    for name in os.listdir(naflex_dir):
        if not name.endswith(".safetensors"):
            shutil.copy(os.path.join(naflex_dir, name), no_weights / name)
    (no_weights / "pytorch_model.bin").write_bytes(b"0")
    clip = tmp_path / "clip"
    shutil.copytree(naflex_dir, clip)
    config = json.loads((clip / "config.json").read_text())
    config["model_type"] = "clip"
    (clip / "config.json").write_text(json.dumps(config))
    return {
        "text_file": str(text_file),
        "no_weights": str(no_weights),
        "clip": str(clip),
        "missing": str(tmp_path / "nope"),
    }


@pytest.mark.parametrize(
    "change,message",
    [
        (("--out", "missing"), "--out '{missing}' does not exist"),
        (("--out", "text_file"), "--out '{text_file}' is not an image"),
        (("--ref-mask", "text_file"), "--ref-mask '{text_file}' is not an image"),
        (("--model", "missing"), "model '{missing}' does not exist"),
        (("--model", "no_weights"), "has no .safetensors weights (found pytorch_model.bin)"),
        (("--model", "clip"), "holds a 'clip' model, not SigLIP2"),
        (("--out-mask", "count"), "--out-mask has 1 files for 2 --out images"),
        (("--ref-mask", "count"), "--ref-mask has 2 files for 1 --ref images"),
        (("--device", "cuda"), "CUDA is not available"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, naflex_dir, files, bad_inputs, change, message):
    args = pair_args(naflex_dir, files)
    option, key = change
    position = args.index(option) + 1
    if key == "count" and option == "--out-mask":
        del args[position + 1]
    elif key == "count":
        args.insert(position, files["dog_00_mask"])
    elif option == "--device":
        args[position] = "cuda"
    else:
        args[position] = bad_inputs[key]
    if option == "--device" and __import__("torch").cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert message.format(**bad_inputs) in err


def test_missing_argument_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["score", "--model", "x"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "required" in err


def test_real_entry_point_prints_no_traceback(tmp_path, files):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "masc_core",
            "score",
            "--model",
            str(tmp_path),
            "--ref",
            files["dog_00"],
            "--ref-mask",
            files["dog_00_mask"],
            "--out",
            files["dog_01"],
            "--prompt",
            "p",
            "--subject",
            "dog",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"error: model folder '{tmp_path}' has no config.json: it is not a Hugging Face checkpoint folder "
        "(pick the folder that holds config.json and model.safetensors)"
    ]
    assert "Traceback" not in completed.stderr


def test_mask_of_other_size_rgba_and_gray_images_are_scored(capsys, naflex_dir, files, tmp_path):
    rgba = tmp_path / "rgba.png"
    Image.open(files["dog_01"]).convert("RGBA").save(rgba)
    gray = tmp_path / "gray.png"
    Image.open(files["dog_02"]).convert("L").save(gray)
    small_mask = tmp_path / "small.png"
    Image.fromarray(box_mask(40, 30)).save(small_mask)
    code, out, err = run(
        capsys,
        "score",
        "--model",
        naflex_dir,
        "--ref",
        files["dog_00"],
        "--ref-mask",
        str(small_mask),
        "--out",
        str(rgba),
        str(gray),
        "--out-mask",
        str(small_mask),
        str(small_mask),
        "--prompt",
        "",
        "--subject",
        "cat",
        "--json",
    )
    assert code == 0, err
    rows = json.loads(out)["results"]
    assert all(r["cp"] is not None and r["pf"] is not None for r in rows)
    assert rows[0]["encoded_prompt"] == "" and rows[0]["subject_found"] is False
