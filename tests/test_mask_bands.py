"""Mask-sensitivity bands: CP and PF again with the masks eroded and dilated by one patch. Each band holds its score,
equals a by-hand recomputation with the changed masks, costs no vision or text forward, and handles empty and full
masks and masks too small to erode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import box_mask, load_photo
from masc_core import score_images
from masc_core.masks import grid_weights
from masc_core.mask_bands import morph

PROMPT = "a photo of sks dog on the beach"


def test_morph_grows_and_shrinks_by_one_patch():
    keep = torch.zeros(5 * 6 + 3, dtype=torch.bool)  # 3 padding entries past the grid stay as they are
    grid = keep[:30].reshape(5, 6)
    grid[1:4, 2:5] = True
    keep[30:] = True
    grown, shrunk = morph(keep, (5, 6), dilate=True), morph(keep, (5, 6), dilate=False)
    assert grown[:30].reshape(5, 6).sum() == 5 * 5 and grown[:30].reshape(5, 6)[0:5, 1:6].all()
    assert shrunk[:30].reshape(5, 6).sum() == 1 and shrunk[:30].reshape(5, 6)[2, 3]
    assert grown[30:].all() and shrunk[30:].all()
    edge = torch.zeros(30, dtype=torch.bool)
    edge.reshape(5, 6)[:, :] = True
    assert morph(edge, (5, 6), dilate=False).reshape(5, 6).sum() == 3 * 4  # outside the grid is background


def _inputs():
    dog, out, other = load_photo("dog_00"), load_photo("dog_01"), load_photo("cat_00")
    return dict(reference=dog, reference_mask=box_mask(*dog.shape[:2]), prompt=PROMPT, subject="sks dog"), [out, other], [
        box_mask(*out.shape[:2], 0.2, 0.2, 0.8, 0.8), box_mask(*other.shape[:2], 0.3, 0.1, 0.9, 0.6)]


def test_each_band_holds_its_score_and_equals_the_scores_with_changed_masks(encoder):
    common, outs, masks = _inputs()
    plain = score_images(encoder, outs, mask=masks, **common)
    banded = score_images(encoder, outs, mask=masks, bands=True, **common)
    for a, b in zip(plain.scores, banded.scores):
        assert (a.cp, a.pf) == (b.cp, b.pf)  # the scores themselves do not change
        assert b.cp_band[0] <= b.cp <= b.cp_band[1] and b.pf_band[0] <= b.pf <= b.pf_band[1]
        assert b.cp_band[0] < b.cp_band[1] and b.pf_band[0] < b.pf_band[1]  # one patch moves these scores


def test_the_cp_band_ends_are_cp_with_the_reference_mask_grown_and_shrunk_by_one_patch(naflex_encoder):
    """By hand: the changed patch sets drawn as masks (NaFlex maps a mask straight onto the patch grid)."""
    encoder = naflex_encoder
    common, outs, masks = _inputs()
    banded = score_images(encoder, outs, mask=masks, bands=True, **common)
    ref_grid = banded.references[0].grid
    weights = grid_weights(common["reference_mask"], ref_grid).reshape(-1)
    variants = []
    for dilate in (False, True):
        changed = morph(weights > 0.5, ref_grid, dilate=dilate).reshape(ref_grid).numpy()
        pixels = np.kron(changed, np.ones((32, 32))).astype(np.uint8) * 255  # a mask drawn at the grid
        variants.append(score_images(encoder, outs, reference=common["reference"], reference_mask=pixels, cp=True, pf=False))
    for n, item in enumerate(banded.scores):
        ends = sorted([item.cp] + [v.scores[n].cp for v in variants])
        assert item.cp_band == pytest.approx([ends[0], ends[-1]], abs=1e-6)


def test_bands_cost_no_vision_or_text_forward(naflex_dir):
    from masc_core import MascEncoder

    common, outs, masks = _inputs()
    counts = []
    for bands in (False, True):
        encoder = MascEncoder.load(naflex_dir, device="cpu")
        score_images(encoder, outs, mask=masks, bands=bands, **common)
        counts.append(dict(encoder.forward_counts))
    assert counts[0] == counts[1] and counts[0]["images"] == 3 and counts[0]["texts"] == 1


def test_empty_full_and_tiny_masks(encoder):
    common, outs, masks = _inputs()
    out = outs[0]
    full, empty = np.full(out.shape[:2], 255, np.uint8), np.zeros(out.shape[:2], np.uint8)
    scored = score_images(encoder, [out, out], mask=[full, empty], bands=True, **common).scores
    assert scored[0].pf is None and scored[0].pf_band is None  # no background: no PF, no band
    assert scored[1].pf is not None and scored[1].pf_band[0] <= scored[1].pf <= scored[1].pf_band[1]
    ref = common["reference"]
    tiny = np.zeros(ref.shape[:2], np.uint8)
    tiny[200:232, 200:232] = 255  # about one patch: eroding it leaves nothing
    item = score_images(encoder, [out], mask=[masks[0]], bands=True, **dict(common, reference_mask=tiny)).scores[0]
    if item.cp is not None:
        assert item.cp_band[0] <= item.cp <= item.cp_band[1]
        assert any("eroded by one patch keeps no patch" in note for note in item.band_notes)
    unbanded = score_images(encoder, [out], mask=[masks[0]], **common).scores[0]
    assert unbanded.cp_band is None and unbanded.pf_band is None and unbanded.band_notes == []


def test_the_pf_band_ends_are_pf_with_the_output_mask_grown_and_shrunk_by_one_patch(naflex_encoder):
    common, outs, masks = _inputs()
    item = score_images(naflex_encoder, outs[:1], mask=masks[:1], bands=True, **common).scores[0]
    grid = item.grid
    hidden = grid_weights(masks[0], grid).reshape(-1) >= 0.5
    ends = [item.pf]
    for dilate in (False, True):
        changed = morph(hidden, grid, dilate=dilate).reshape(grid).numpy()
        pixels = np.kron(changed, np.ones((32, 32))).astype(np.uint8) * 255
        ends.append(score_images(naflex_encoder, outs[:1], mask=[pixels], **common).scores[0].pf)
    assert item.pf_band == pytest.approx([min(ends), max(ends)], abs=1e-6)


def test_score_bands_on_the_command_line(capsys, naflex_dir, files):
    import json

    from masc_core.cli import main

    argv = ["score", "--model", naflex_dir, "--device", "cpu", "--ref", files["dog_00"], "--ref-mask", files["dog_00_mask"],
            "--out", files["dog_01"], files["cat_00"], "--out-mask", files["dog_01_mask"], files["cat_00_mask"],
            "--prompt", PROMPT, "--subject", "sks dog", "--bands"]
    assert main(argv + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    for row in rows:
        assert row["cp_band"][0] <= row["cp"] <= row["cp_band"][1] and row["pf_band"][0] <= row["pf"] <= row["pf_band"][1]
    assert main(argv) == 0
    table = capsys.readouterr().out.splitlines()
    assert "CP band" in table[0] and "PF band" in table[0] and table[1].count("[") == 2
    assert main(argv[:-1] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["cp_band"] is None
