"""Differential tests against the paper's package, masc-metric 0.3.0 (the correctness oracle).

Same files, same random-weight checkpoints, fp32 on CPU: CP and PF must
agree within 1e-4, for NaFlex and fixed-size checkpoints, several aspect
ratios, RGBA and grayscale inputs, and degenerate masks (null here where the
oracle gives NaN).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import PROMPT, ROOT, box_mask

masc = pytest.importorskip("masc", reason="masc-metric (the oracle) is installed by .ci/run")

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def oracles(naflex_dir, fixed_dir, fixed_bicubic_dir):
    return {folder: masc.MaSC(model_id=folder, device="cpu") for folder in (naflex_dir, fixed_dir, fixed_bicubic_dir)}


def oracle_score(oracle, ref_path, ref_mask_path, out_path, out_mask_path, prompt, subject):
    ref_mask = np.array(Image.open(ref_mask_path).convert("L"))
    out_mask = np.array(Image.open(out_mask_path).convert("L"))
    result = oracle.score(Image.open(ref_path), ref_mask, Image.open(out_path), out_mask, prompt, object_name=subject)
    return result


def cli_json(*args: str) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "masc_core", "score", *args, "--json", "--device", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def assert_close(ours, theirs):
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        assert ours is None
    else:
        assert ours is not None and abs(ours - theirs) <= TOLERANCE, (ours, theirs)


@pytest.mark.parametrize("which", ["naflex", "fixed", "fixed_bicubic"])
def test_cli_matches_oracle_on_real_photos(which, oracles, naflex_dir, fixed_dir, fixed_bicubic_dir, files):
    folder = {"naflex": naflex_dir, "fixed": fixed_dir, "fixed_bicubic": fixed_bicubic_dir}[which]
    outputs = ["dog_01", "dog_02", "cat_00", "teapot_00", "dog_01_wide", "dog_01_tall", "dog_01_odd"]
    document = cli_json(
        "--model",
        folder,
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--out",
        *[files[o] for o in outputs],
        "--out-mask",
        *[files[o + "_mask"] for o in outputs],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
    )
    assert [r["image"] for r in document["results"]] == [files[o] for o in outputs]
    for name, row in zip(outputs, document["results"]):
        expected = oracle_score(
            oracles[folder], files["dog_00"], files["dog_00_mask"], files[name], files[name + "_mask"], PROMPT, "dog"
        )
        assert_close(row["cp"], expected.cp)
        assert_close(row["pf"], expected.pf)
        assert row["encoded_prompt"] == expected.extras["prompt_text"]


def test_degenerate_masks_are_null_where_oracle_is_nan(oracles, naflex_dir, files, tmp_path):
    empty = tmp_path / "empty.png"
    full = tmp_path / "full.png"
    Image.fromarray(np.zeros((512, 512), np.uint8)).save(empty)
    Image.fromarray(np.full((512, 512), 255, np.uint8)).save(full)
    document = cli_json(
        "--model",
        naflex_dir,
        "--ref",
        files["dog_00"],
        "--ref-mask",
        str(empty),
        "--out",
        files["dog_01"],
        "--out-mask",
        str(full),
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
    )
    row = document["results"][0]
    expected = oracle_score(oracles[naflex_dir], files["dog_00"], str(empty), files["dog_01"], str(full), PROMPT, "dog")
    assert math.isnan(expected.cp) and math.isnan(expected.pf)
    assert row["cp"] is None and row["pf"] is None
    assert "empty" in row["cp_undefined"]
    assert "whole image" in row["pf_undefined"]


@pytest.mark.parametrize("mode", ["RGBA", "L", "P"])
def test_image_modes_match_oracle(mode, oracles, naflex_dir, files, tmp_path):
    """RGBA (alpha dropped), grayscale and palette images are scored as the oracle scores them."""
    source = Image.open(files["teapot_00"]).convert("RGB")
    if mode == "RGBA":
        converted = source.convert("RGBA")
        alpha = Image.fromarray(box_mask(source.height, source.width, 0.1, 0.1, 0.6, 0.9))
        converted.putalpha(alpha)
    else:
        converted = source.convert(mode)
    path = tmp_path / f"teapot.{mode}.png"
    converted.save(path)
    mask = tmp_path / "teapot_mask_small.png"
    Image.fromarray(box_mask(100, 80)).save(mask)  # another size than the image: resized
    document = cli_json(
        "--model",
        naflex_dir,
        "--ref",
        str(path),
        "--ref-mask",
        str(mask),
        "--out",
        files["teapot_00"],
        "--out-mask",
        str(mask),
        "--prompt",
        "the teapot in the snow",
        "--subject",
        "teapot",
    )
    row = document["results"][0]
    expected = oracle_score(
        oracles[naflex_dir], str(path), str(mask), files["teapot_00"], str(mask), "the teapot in the snow", "teapot"
    )
    assert_close(row["cp"], expected.cp)
    assert_close(row["pf"], expected.pf)


@pytest.mark.parametrize(
    "prompt,subject",
    [
        ("", "dog"),  # empty prompt
        ("a cat sleeping on a sofa", "dog"),  # subject absent
        ("The DOG and the dog's toy", "dog"),  # case, several occurrences
        ("a sks dog playing in the snow", "sks dog"),  # multi-word name
        ("a photo   with   spaces of a dog", "dog"),  # whitespace collapsed
    ],
)
def test_prompts_match_oracle(prompt, subject, oracles, naflex_dir, files):
    document = cli_json(
        "--model",
        naflex_dir,
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--out",
        files["dog_02"],
        "--out-mask",
        files["dog_02_mask"],
        "--prompt",
        prompt,
        "--subject",
        subject,
    )
    row = document["results"][0]
    expected = oracle_score(
        oracles[naflex_dir],
        files["dog_00"],
        files["dog_00_mask"],
        files["dog_02"],
        files["dog_02_mask"],
        prompt,
        subject,
    )
    assert row["encoded_prompt"] == expected.extras["prompt_text"]
    assert_close(row["pf"], expected.pf)
    assert_close(row["cp"], expected.cp)


def test_library_float_and_mask_types_match_oracle(oracles, naflex_encoder, naflex_dir, files):
    """ComfyUI-style float images and float/bool masks give the oracle's numbers on the same pixels."""
    from masc_core import score_images

    ref = np.asarray(Image.open(files["dog_00"]).convert("RGB"))
    out = np.asarray(Image.open(files["dog_01_odd"]).convert("RGB"))
    ref_mask = box_mask(*ref.shape[:2], dtype=np.float32)
    out_mask = box_mask(*out.shape[:2], 0.2, 0.3, 0.9, 0.7).astype(bool)
    batch = score_images(
        naflex_encoder,
        (out[None].astype(np.float32) / 255.0),
        reference=ref.astype(np.float32)[None] / 255.0,
        reference_mask=ref_mask[None],
        mask=out_mask[None],
        prompt=PROMPT,
        subject="dog",
    )
    expected = oracles[naflex_dir].score(
        Image.fromarray(ref), ref_mask, Image.fromarray(out), out_mask.astype(np.uint8), PROMPT, object_name="dog"
    )
    assert_close(batch.scores[0].cp, expected.cp)
    assert_close(batch.scores[0].pf, expected.pf)
