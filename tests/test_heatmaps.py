"""Heatmaps as data (patch grids) and as overlays."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import PROMPT, box_mask, load_photo
from masc_core import score_images
from masc_core.metric import heatmaps as render


def test_heatmap_grids_explain_the_scores(encoder):
    ref = load_photo("dog_00")
    outs = [load_photo("dog_01")[:300], load_photo("cat_00")]
    masks = [box_mask(300, 512), np.ones((512, 512))]
    batch = score_images(
        encoder,
        outs,
        reference=ref,
        reference_mask=box_mask(512, 512),
        mask=masks,
        prompt=PROMPT,
        subject="dog",
        heatmaps=True,
    )
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
    kwargs = dict(
        reference=ref,
        reference_mask=box_mask(512, 512),
        mask=box_mask(512, 512, 0.1, 0.1, 0.5, 0.5),
        prompt=PROMPT,
        subject="dog",
    )
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


# ---------------------------------------------------------------- torch rendering vs the numpy reference

ASPECTS = {"square": (0, 0, 512, 512), "wide": (0, 60, 512, 348), "tall": (90, 0, 378, 512), "odd": (3, 17, 500, 390)}


def crop(name: str, aspect: str) -> np.ndarray:
    left, top, right, bottom = ASPECTS[aspect]
    return np.ascontiguousarray(load_photo(name)[top:bottom, left:right])


def assert_within_one_level(new: list, old: list) -> None:
    assert len(new) == len(old) and new
    for drawn, expected in zip(new, old):
        assert drawn.shape == expected.shape and drawn.dtype == np.uint8
        difference = np.abs(drawn.astype(np.int16) - expected.astype(np.int16))
        assert int(difference.max()) <= 1
        # Not two blank pictures: the maps have content and mostly agree exactly.
        assert float((difference == 0).mean()) > 0.9 and len(np.unique(drawn.reshape(-1, 3), axis=0)) > 50


@pytest.fixture(scope="module")
def photo_batch(naflex_encoder):
    """Two reference views and four outputs of four aspect ratios, scored with heatmaps.

    The reference masks leave most patches out (muted); outputs 0-2 have a subject box
    (hidden from the pooler, muted on the attention map); output 3's mask covers
    everything, so its PF, and its attention map, are undefined.
    """
    references = [crop("dog_00", "square"), crop("dog_02", "tall")]
    outputs = [crop("dog_01", "wide"), crop("cat_00", "odd"), crop("teapot_00", "tall"), crop("backpack_00", "square")]
    masks = [box_mask(*o.shape[:2], 0.2, 0.3, 0.9, 0.7) for o in outputs[:3]] + [
        np.ones(outputs[3].shape[:2], np.uint8)
    ]
    batch = score_images(
        naflex_encoder,
        outputs,
        reference=references,
        reference_mask=[box_mask(*r.shape[:2]) for r in references],
        mask=masks,
        prompt=PROMPT,
        subject="dog",
        heatmaps=True,
    )
    assert batch.scores[3].pf is None and batch.heatmaps.background_attention[3] is None
    assert len({o.shape for o in outputs}) == 4 and not batch.heatmaps.reference_keep[0].all()
    return batch, references, outputs


@pytest.mark.parametrize("captions", [False, True])
def test_torch_rendering_is_within_one_grey_level_of_the_numpy_renderer(photo_batch, captions):
    import numpy_heatmaps

    batch, references, outputs = photo_batch
    pictures = render.render_heatmaps(batch, references, outputs, captions=captions)
    expected = numpy_heatmaps.render_heatmaps(batch, references, outputs, captions=captions)
    assert pictures.views == 2 and len(pictures.reference) == 8
    for new, old in zip((pictures.reference, pictures.presence, pictures.attention), expected):
        assert_within_one_level(new, old)
    # PF undefined: the whole attention map is the image in grey, as before.
    blank = pictures.attention[3][60:]
    assert np.array_equal(blank[..., 0], blank[..., 1]) and np.array_equal(blank[..., 1], blank[..., 2])


def test_torch_rendering_handles_extreme_grids_like_the_numpy_renderer():
    """Non-finite cells, values outside the scale, a one-patch grid, attention with partly hidden patches."""
    import numpy_heatmaps

    image = crop("red_cartoon_00", "odd")
    rng = np.random.default_rng(0)
    grid = rng.uniform(-0.5, 1.5, (11, 9)).astype(np.float32)
    grid[0, 0], grid[3, 4], grid[5, 5] = np.nan, np.inf, -np.inf
    muted = rng.random((11, 9)) > 0.6
    attention = np.where(muted, 0.0, rng.random((11, 9))).astype(np.float32)
    attention /= attention.sum()
    cases = [
        (render.reference_overlay(image, grid, ~muted), numpy_heatmaps.reference_overlay(image, grid, ~muted)),
        (render.presence_overlay(image, grid), numpy_heatmaps.presence_overlay(image, grid)),
        (
            render.presence_overlay(image, np.full((1, 1), 0.7, np.float32)),
            numpy_heatmaps.presence_overlay(image, np.full((1, 1), 0.7, np.float32)),
        ),
        (render.attention_overlay(image, attention, muted), numpy_heatmaps.attention_overlay(image, attention, muted)),
        (render.attention_overlay(image, None, None), numpy_heatmaps.attention_overlay(image, None, None)),
    ]
    for new, old in cases[:-1]:
        assert_within_one_level([new], [old])
    assert np.array_equal(*cases[-1])  # all grey: no colour involved, exactly as before


def test_colour_table_is_viridis_at_evenly_spaced_values():
    import numpy_heatmaps

    table = render.colour_table()
    assert table.shape == (render.COLOUR_STEPS, 3) and table.dtype == np.uint8
    exact = numpy_heatmaps.colorize(np.linspace(0.0, 1.0, render.COLOUR_STEPS, dtype=np.float32), 0.0, 1.0)
    assert int(np.abs(table.astype(int) - exact.astype(int)).max()) <= 1
    values = np.random.default_rng(1).uniform(-0.2, 1.2, 5000).astype(np.float32)
    steps = np.abs(
        render.colorize(values, 0.0, 1.0).astype(int) - numpy_heatmaps.colorize(values, 0.0, 1.0).astype(int)
    )
    assert int(steps.max()) <= 1


@pytest.mark.parametrize("width,height", [(512, 512), (1000, 300), (120, 400), (64, 12)])
def test_captions_drawn_on_the_band_equal_captions_drawn_on_the_whole_picture(width, height):
    import numpy_heatmaps
    from masc_core.metric.captions import draw_caption, with_caption

    image = np.ascontiguousarray(np.asarray(Image.fromarray(load_photo("duck_toy_00")).resize((width, height))))
    text = "#7 view 1  CP 0.8123  PF -0.0456 gjpqy"
    expected = numpy_heatmaps.with_caption(image, text)
    assert np.array_equal(with_caption(image, text), expected)
    assert not np.array_equal(expected, image)
    in_place = image.copy()
    assert draw_caption(in_place, text) is in_place and np.array_equal(in_place, expected)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_rendering_on_a_device_gives_the_cpu_pictures(photo_batch, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    batch, references, outputs = photo_batch
    on_device = render.render_heatmaps(batch, references, outputs, device=device)
    on_cpu = render.render_heatmaps(batch, references, outputs)
    for new, old in zip(
        (on_device.reference, on_device.presence, on_device.attention),
        (on_cpu.reference, on_cpu.presence, on_cpu.attention),
    ):
        assert_within_one_level(new, old)


def test_maps_not_asked_for_are_not_rendered(photo_batch):
    batch, references, outputs = photo_batch
    only_attention = render.render_heatmaps(batch, references, outputs, reference=False, presence=False)
    assert only_attention.reference == only_attention.presence == [] and len(only_attention.attention) == 4
    full = render.render_heatmaps(batch, references, outputs)
    assert all(np.array_equal(a, b) for a, b in zip(only_attention.attention, full.attention))


@pytest.mark.parametrize(
    "grid,size",
    [((32, 32), (1024, 1024)), ((7, 13), (300, 517)), ((24, 41), (384, 656)), ((5, 3), (4, 2)), ((1, 1), (9, 9))],
)
def test_muting_covers_exactly_the_nearest_upsampled_cells(grid, size):
    rng = np.random.default_rng(sum(grid))
    box = np.ones(grid, bool)
    box[grid[0] // 3 : grid[0] // 3 + 1, grid[1] // 2 :] = False
    for cells in (rng.random(grid) > 0.5, box, np.ones(grid, bool), np.zeros(grid, bool)):
        plan = render.muting(cells, size)
        expected = render.upsample(cells.astype(np.float32), size, mode="nearest") > 0.5
        covered = np.zeros(size, bool)
        for top, bottom, left, right in plan.blocks:
            assert not covered[top:bottom, left:right].any()  # no pixel painted twice
            covered[top:bottom, left:right] = True
        assert np.array_equal(covered, expected)
        if expected.all():
            assert plan.coloured is None
        else:  # the coloured rectangle is the bounding box of the pixels left in colour
            rows, cols = np.flatnonzero((~expected).any(axis=1)), np.flatnonzero((~expected).any(axis=0))
            assert plan.coloured == (rows[0], rows[-1] + 1, cols[0], cols[-1] + 1)
    assert render.muting(None, size) == render.Muting([], (0, size[0], 0, size[1]))
