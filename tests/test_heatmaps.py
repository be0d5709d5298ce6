"""Heatmaps as data (patch grids) and as overlays."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import PROMPT, box_mask, load_photo
from masc_core import score_images
from masc_core import heatmaps as render


def test_heatmap_grids_explain_the_scores(encoder):
    ref = load_photo("dog_00")
    outs = [load_photo("dog_01")[:300], load_photo("cat_00")]
    masks = [box_mask(300, 512), np.ones((512, 512))]
    batch = score_images(encoder, outs, reference=ref, reference_mask=box_mask(512, 512), mask=masks, prompt=PROMPT, subject="dog", heatmaps=True)
    maps = batch.heatmaps
    keep = maps.reference_keep[0]
    assert keep.shape == batch.references[0].grid and keep.sum() == batch.references[0].concept_patches
    for i, score in enumerate(batch.scores):
        assert maps.reference_match[i][0].shape == batch.references[0].grid
        assert float(maps.reference_match[i][0][keep].mean()) == pytest.approx(score.cp, abs=1e-6)
        assert maps.output_presence[i].shape == score.grid
        # Every kept reference patch's best match is found among the output patches, and vice versa.
        assert maps.output_presence[i].max() == pytest.approx(maps.reference_match[i][0][keep].max(), abs=1e-6)
    attention, hidden = maps.background_attention[0], maps.output_hidden[0]
    assert attention.shape == hidden.shape == batch.scores[0].grid
    assert attention.sum() == pytest.approx(1.0, abs=1e-5)
    assert np.all(attention[hidden] == 0) and np.all(attention[~hidden] > 0)
    assert maps.background_attention[1] is None and batch.scores[1].pf is None  # all-foreground output


def test_heatmaps_do_not_change_scores(naflex_encoder):
    ref = load_photo("dog_00")
    kwargs = dict(reference=ref, reference_mask=box_mask(512, 512), mask=box_mask(512, 512, 0.1, 0.1, 0.5, 0.5), prompt=PROMPT, subject="dog")
    plain = score_images(naflex_encoder, load_photo("dog_02"), **kwargs).scores[0]
    detailed = score_images(naflex_encoder, load_photo("dog_02"), heatmaps=True, **kwargs).scores[0]
    assert plain.cp == detailed.cp
    assert plain.pf == pytest.approx(detailed.pf, abs=1e-6)


def test_overlays_have_the_image_size_and_grey_out_muted_patches():
    image = np.full((50, 70, 3), 200, np.uint8)
    grid = np.array([[0.0, 1.0], [0.5, -np.inf]], np.float32)
    keep = np.array([[True, True], [True, False]])
    painted = render.reference_overlay(image, grid, keep)
    assert painted.shape == (50, 70, 3) and painted.dtype == np.uint8
    muted_pixel = painted[45, 65]
    assert muted_pixel[0] == muted_pixel[1] == muted_pixel[2]  # grey where CP ignores the patch
    low, high = render.colorize(np.array([0.0, 1.0]), 0.0, 1.0)
    assert tuple(low) == (68, 1, 84) and tuple(high) == (253, 231, 37)
    assert render.upsample(np.ones((3, 4)), (30, 40)).shape == (30, 40)
    blank = render.attention_overlay(image, None, np.ones((2, 2), bool))
    assert blank.shape == image.shape
