"""Undefined scores are explicit (None plus a reason), never a crash or NaN; foreground fractions reported."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import PROMPT, box_mask, load_photo
from masc_core import MascInputError, score_images


def test_empty_reference_mask_leaves_cp_undefined(encoder):
    ref, out = load_photo("dog_00"), load_photo("dog_01")
    batch = score_images(
        encoder,
        out,
        reference=ref,
        reference_mask=np.zeros((512, 512)),
        mask=box_mask(512, 512),
        prompt=PROMPT,
        subject="dog",
    )
    score = batch.scores[0]
    assert score.cp is None and score.cp_undefined == "reference_mask is empty (no foreground pixel)"
    assert score.pf is not None  # PF does not need the reference
    assert batch.references[0].foreground_fraction == 0.0 and batch.references[0].small_foreground


def test_tiny_reference_mask_is_explained(encoder):
    ref = load_photo("dog_00")
    tiny = np.zeros((512, 512), np.uint8)
    tiny[100:103, 100:103] = 255  # 9 pixels: no patch is half covered
    score = score_images(encoder, ref, reference=ref, reference_mask=tiny, pf=False).scores[0]
    assert score.cp is None and "too small" in score.cp_undefined


def test_all_foreground_output_leaves_pf_undefined(encoder):
    out = load_photo("dog_01")
    score = score_images(encoder, out, mask=np.ones((512, 512)), prompt=PROMPT, subject="dog").scores[0]
    assert score.pf is None and "whole image" in score.pf_undefined
    assert score.background_patches == 0 and score.foreground_fraction == 1.0


def test_missing_output_mask_is_stated(encoder):
    score = score_images(encoder, load_photo("dog_01"), prompt=PROMPT, subject="dog").scores[0]
    assert score.pf is None and "no output mask" in score.pf_undefined


def test_small_output_masks_are_flagged_with_the_papers_threshold(encoder):
    out = load_photo("dog_01")
    masks = [box_mask(512, 512, 0.0, 0.0, 0.2, 0.2), box_mask(512, 512, 0.0, 0.0, 0.25, 0.25)]  # 4% and 6.25%
    batch = score_images(encoder, [out, out], mask=masks, prompt=PROMPT, subject="dog")
    assert [s.foreground_fraction for s in batch.scores] == pytest.approx([(102 / 512) ** 2, 0.0625])
    assert [s.small_foreground for s in batch.scores] == [True, False]
    assert batch.scores[0].pf is not None  # flagged, not dropped
    stricter = score_images(encoder, [out, out], mask=masks, prompt=PROMPT, subject="dog", min_foreground=0.1)
    assert [s.small_foreground for s in stricter.scores] == [True, True]


def test_results_serialize_to_json_with_null_not_nan(encoder):
    ref = load_photo("dog_00")
    batch = score_images(
        encoder, ref, reference=ref, reference_mask=np.zeros((4, 4)), mask=np.ones((4, 4)), prompt="", subject="dog"
    )
    text = json.dumps(batch.to_dict(), allow_nan=False)
    row = json.loads(text)["results"][0]
    assert row["cp"] is None and row["pf"] is None and row["cp_per_reference"] == [None]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(reference=None, reference_mask=None, cp=True, pf=False), "reference_image is missing"),
        (dict(reference="R", reference_mask=None, pf=False), "reference_mask is missing"),
        (dict(), "nothing to score"),
        (dict(prompt=["a", "b", "c"], mask=np.ones((4, 4))), "prompt has 3 entries for 2 images"),
        (dict(prompt="x", min_foreground=2.0), "min_foreground"),
    ],
)
def test_bad_calls_raise_one_line_input_errors(naflex_encoder, kwargs, message):
    images = [load_photo("dog_01"), load_photo("dog_02")]
    if kwargs.get("reference") == "R":
        kwargs["reference"] = load_photo("dog_00")
    with pytest.raises(MascInputError, match=message) as error:
        score_images(naflex_encoder, images, **kwargs)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "image,message",
    [
        (np.zeros((4, 4, 2)), "shape"),
        (np.full((4, 4, 3), 2.0), "expected 0..1"),
        (np.full((4, 4, 3), np.nan, np.float32), "NaN"),
        ("not an image", "unsupported image type"),
        (np.zeros((0, 4, 4, 3)), "empty batch"),
    ],
)
def test_bad_images_raise_one_line_input_errors(naflex_encoder, image, message):
    with pytest.raises(MascInputError, match=message):
        score_images(naflex_encoder, image, prompt="x", mask=np.ones((4, 4)))
