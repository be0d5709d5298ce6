"""Mask conventions: any size, bool/uint8/float, bilinear to the grid, thresholds > 0.5 (CP) and >= 0.5 (PF)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import PROMPT, box_mask, load_photo
from masc_core import MascInputError, score_images
from masc_core.metric.masks import grid_weights, mask_to_float, masks_for_batch


def striped(size: int, period: int = 2) -> np.ndarray:
    """Alternate columns of 1 and 0: bilinear to half the size gives exactly 0.5 everywhere."""
    mask = np.zeros((size, size), np.float32)
    mask[:, ::period] = 1.0
    return mask


def test_half_weight_patches_count_for_neither_cp_nor_pf_background(naflex_encoder):
    ref = load_photo("dog_00")  # 512x512 -> 32x32 grid at 1024 patches
    half = striped(64)
    weights = grid_weights(half, (32, 32))
    assert np.allclose(weights.numpy(), 0.5)
    batch = score_images(
        naflex_encoder, ref, reference=ref, reference_mask=half, mask=half, prompt=PROMPT, subject="dog"
    )
    score = batch.scores[0]
    # CP keeps weight > 0.5: nothing; PF hides weight >= 0.5: everything.
    assert score.cp is None and "more than half" in score.cp_undefined
    assert score.pf is None and score.background_patches == 0


def test_threshold_boundaries_move_single_patches(naflex_encoder):
    ref = load_photo("dog_00")
    mask = np.zeros((64, 64), np.float32)
    mask[:32, :] = 1.0  # top half foreground: 16 rows x 32 = 512 patches with weight 1
    mask[32:34, :] = striped(64)[:2, :]  # row 16 of the grid: weight 0.5 (rows 32,33 of the mask)
    weights = grid_weights(mask, (32, 32)).reshape(32, 32).numpy()
    assert np.allclose(weights[16], 0.5) and np.all(weights[:16] == 1.0) and np.all(weights[17:] == 0.0)
    batch = score_images(
        naflex_encoder, ref, reference=ref, reference_mask=mask, mask=mask, prompt=PROMPT, subject="dog"
    )
    assert batch.references[0].concept_patches == 16 * 32  # > 0.5: the 0.5 row is out
    assert batch.scores[0].background_patches == 32 * 32 - 17 * 32  # >= 0.5: the 0.5 row is hidden


def test_mask_dtypes_and_scales_are_equivalent(naflex_encoder):
    ref = load_photo("dog_00")
    out = load_photo("dog_01")
    binary = box_mask(512, 512, dtype=np.float32)
    variants = [
        binary,  # float 0..1
        binary.astype(bool),  # bool
        (binary * 255).astype(np.uint8),  # uint8 0..255
        binary.astype(np.uint8),  # uint8 0/1: read as binary, like the paper's package
        (binary * 255).astype(np.float64),  # float 0..255
    ]
    results = [
        score_images(naflex_encoder, out, reference=ref, reference_mask=m, mask=m, prompt=PROMPT, subject="dog").scores[
            0
        ]
        for m in variants
    ]
    assert len({(r.cp, r.pf) for r in results}) == 1


def test_masks_of_another_size_are_resized_not_refused(naflex_encoder):
    ref = load_photo("dog_00")
    small = box_mask(37, 53)
    batch = score_images(
        naflex_encoder, ref, reference=ref, reference_mask=small, mask=small, prompt=PROMPT, subject="dog"
    )
    assert batch.scores[0].cp is not None and batch.scores[0].pf is not None
    assert batch.scores[0].foreground_fraction == pytest.approx((37 // 2) * (53 // 2) / (37 * 53), abs=0.02)


@pytest.mark.parametrize(
    "mask,message",
    [
        (np.zeros((8, 8, 3)), "color image"),
        (np.full((8, 8), -1.0), "negative"),
        (np.full((8, 8), np.nan), "NaN"),
        (np.full((8, 8), 300.0), "above 255"),
        (np.zeros((0, 8)), "empty"),
        (np.full((4, 4), "a"), "dtype"),
    ],
)
def test_bad_masks_get_one_line_errors(mask, message):
    with pytest.raises(MascInputError) as error:
        masks_for_batch(mask, 1, "mask")
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("mask")


def test_mask_batches_broadcast_and_count_checks():
    one = np.ones((1, 8, 8), np.float32)
    assert len(masks_for_batch(one, 4, "mask")) == 4
    assert len(masks_for_batch(np.ones((4, 8, 8)), 4, "mask")) == 4
    with pytest.raises(MascInputError, match="3 masks for 4 images"):
        masks_for_batch(np.ones((3, 8, 8)), 4, "mask")
    assert mask_to_float(np.ones((1, 1, 8, 8))).shape == (8, 8)
