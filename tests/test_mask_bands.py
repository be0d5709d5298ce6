"""Mask-sensitivity bands: CP and PF again with the masks eroded and dilated by one patch. Each band holds its score,
equals a by-hand recomputation with the changed masks, costs no vision or text forward, and handles empty and full
masks and masks too small to erode."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import box_mask, load_photo
from masc_core import score_images
from masc_core.metric.masks import grid_weights
from masc_core.scoring.mask_bands import morph

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
    return (
        dict(reference=dog, reference_mask=box_mask(*dog.shape[:2]), prompt=PROMPT, subject="sks dog"),
        [out, other],
        [box_mask(*out.shape[:2], 0.2, 0.2, 0.8, 0.8), box_mask(*other.shape[:2], 0.3, 0.1, 0.9, 0.6)],
    )


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
        variants.append(
            score_images(encoder, outs, reference=common["reference"], reference_mask=pixels, cp=True, pf=False)
        )
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

    argv = [
        "score",
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--out",
        files["dog_01"],
        files["cat_00"],
        "--out-mask",
        files["dog_01_mask"],
        files["cat_00_mask"],
        "--prompt",
        PROMPT,
        "--subject",
        "sks dog",
        "--bands",
    ]
    assert main(argv + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    for row in rows:
        assert (
            row["cp_band"][0] <= row["cp"] <= row["cp_band"][1] and row["pf_band"][0] <= row["pf"] <= row["pf_band"][1]
        )
    assert main(argv) == 0
    table = capsys.readouterr().out.splitlines()
    assert "CP band" in table[0] and "PF band" in table[0] and table[1].count("[") == 2
    assert main(argv[:-1] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["cp_band"] is None


def _banded(cp, band, pf=0.1, pf_band=None, index=0):
    from masc_core.metric.scores import ImageScore

    return ImageScore(index=index, cp=cp, pf=pf, cp_band=band, pf_band=pf_band, foreground_fraction=0.3)


@pytest.mark.parametrize(
    "on_uncertain, passes", [("keep but mark", [False, True]), ("accept", [True, True]), ("reject", [False, False])]
)
def test_uncertain_exactly_when_a_band_straddles_a_threshold(on_uncertain, passes):
    from masc_core.selection.ranking import rank

    scores = [
        _banded(0.58, [0.55, 0.62], index=0),
        _banded(0.61, [0.59, 0.63], index=1),
        _banded(0.70, [0.65, 0.75], index=2),
        _banded(0.50, [0.45, 0.59], index=3),
        _banded(0.60, [0.60, 0.70], index=4),
    ]
    ranking = rank(scores, by="cp", min_cp=0.6, on_uncertain=on_uncertain)
    items = {item.index: item for item in ranking.items}
    assert [bool(items[i].uncertain) for i in range(5)] == [
        True,
        True,
        False,
        False,
        False,
    ]  # a band touching 0.6 from above is sure
    assert [items[i].passed for i in (0, 1)] == passes
    assert items[2].passed and not items[3].passed and items[4].passed  # bands that do not straddle decide nothing new
    assert items[0].uncertain == ["CP band [+0.5500, +0.6200] straddles 0.6"]
    if on_uncertain == "reject":
        assert "uncertain: CP band straddles 0.6" in items[1].reasons
    pf = rank([_banded(0.7, None, pf=0.1, pf_band=[0.08, 0.12])], by="both", min_pf=0.11, on_uncertain="accept").items[
        0
    ]
    assert pf.passed and pf.uncertain == ["PF band [+0.0800, +0.1200] straddles 0.11"]


def test_gate_marks_uncertain_verdicts_and_the_png_entry_carries_the_bands(pack, comfy_dirs, tmp_path, capsys):
    from comfy_harness import save_image
    from masc_core.cli import main

    encoder = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"]().load(
        "google/siglip2-so400m-patch16-naflex", "cpu", "fp32", 1024
    )[0]
    common, outs, masks = _inputs()
    images = (
        torch.stack([torch.from_numpy(np.array(Image.fromarray(o).resize((256, 256)))) for o in outs]).float() / 255
    )
    out_masks = torch.stack([torch.from_numpy(box_mask(256, 256, 0.2, 0.2, 0.8, 0.8).astype(np.float32) / 255)] * 2)
    extra = {"workflow": {}}
    score = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]().score(
        encoder,
        torch.from_numpy(common["reference"].astype(np.float32) / 255)[None],
        torch.from_numpy(common["reference_mask"].astype(np.float32) / 255)[None],
        images,
        PROMPT,
        "sks dog",
        False,
        mask=out_masks,
        extra_pnginfo=extra,
        unique_id="3",
    )["result"]
    scores = score[2]
    first = scores.scores[0]
    assert first.cp_band[0] <= first.cp <= first.cp_band[1]
    middle = (first.cp_band[0] + first.cp_band[1]) / 2  # a threshold inside the band: the masks could flip it
    gate = pack.nodes.NODE_CLASS_MAPPINGS["MaSCGate"]()
    report = gate.gate(scores, images, middle, -1.0, False, 0.05, extra_pnginfo=extra, unique_id="4")["result"][-1]
    assert (
        f"(uncertain: CP band [{first.cp_band[0]:+.4f}, {first.cp_band[1]:+.4f}] straddles {middle:g})"
        in report.splitlines()[1]
    )
    rejected = gate.gate(scores, images, middle, -1.0, False, 0.05, on_uncertain="reject")["result"][-1]
    line = rejected.splitlines()[1]  # on_uncertain reject: image 0 fails either way, by its score or by its band
    assert line.startswith("#0: reject (") and ("uncertain: CP band straddles" in line or "CP below" in line)
    record = extra["masc"]["nodes"]["3"]["images"][0]
    assert record["cp_band"] == pytest.approx(first.cp_band) and record["pf_band"] == pytest.approx(first.pf_band)
    assert "(uncertain: CP band" in extra["masc"]["nodes"]["4"]["images"][0]["verdict"]
    ctx = {
        "saved": {},
        "saved_files": {},
        "node_id": "9",
        "output_dir": str(tmp_path),
        "prompt": {},
        "extra_pnginfo": extra,
    }
    save_image(ctx, images[:1], "bands")
    assert main(["read", ctx["saved_files"]["9"][0]]) == 0
    assert f"CP {first.cp:+.4f} [{first.cp_band[0]:+.4f}, {first.cp_band[1]:+.4f}]" in capsys.readouterr().out
