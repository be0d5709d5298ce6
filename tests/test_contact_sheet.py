"""The contact sheet: each tile is its candidate resized, captions per tile, the kept ones framed, order by rank or
seed, deterministic bytes; MaSC Contact Sheet on MaSC Sample Until's every-candidate output; `rank --contact-sheet`."""

from __future__ import annotations

import hashlib
import importlib

import numpy as np
import pytest
from PIL import Image

from conftest import load_photo
from masc_core import MascInputError
from masc_core.selection.contact_sheet import (
    FRAME,
    KEPT_COLOUR,
    MAX_SHEET_SIDE,
    PAD,
    Tile,
    contact_sheet,
    fit,
    ordered,
    thumbnail,
    tile_height,
    tile_picture,
)

PHOTOS = ["dog_00", "cat_00", "teapot_00", "dog_01", "red_cartoon_00"]


def _tiles():
    return [
        Tile(
            index=i,
            seed=1000 + i,
            cp=[0.4, 0.7, 0.1, 0.9, None][i],
            pf=0.05,
            mask=0.2,
            verdict="accepted" if i == 1 else "rejected: CP below 0.5",
            kept=i == 1,
            key=[0.4, 0.7, 0.1, 0.9, None][i],
        )
        for i in range(5)
    ]


def _images():
    images = [load_photo(p) for p in PHOTOS]
    images[2] = images[2][:, : images[2].shape[1] // 2]  # a tall one: aspect is kept
    return images


def _slot(sheet, slot, tile, columns):
    height = tile_height(tile)
    top, left = (slot // columns) * height, (slot % columns) * tile
    return sheet[top : top + height, left : left + tile]


def test_each_tile_is_its_candidate_resized_in_rank_order_with_the_kept_one_framed():
    images, tiles = _images(), _tiles()
    sheet = contact_sheet(images, tiles, tile=192, order="rank")
    order = ordered(tiles, "rank")
    assert order == [1, 3, 0, 2, 4]  # kept first, then by CP, the undefined one last
    assert sheet.shape == (2 * tile_height(192), 3 * 192, 3)
    for slot, position in enumerate(order):
        cell = _slot(sheet, slot, 192, 3)
        picture, (top, left) = tile_picture(images[position], 192)
        assert np.array_equal(cell[top : top + picture.shape[0], left : left + picture.shape[1]], picture)
        assert np.array_equal(picture, fit(images[position], 192 - 2 * PAD))
        framed = (cell[:FRAME] == KEPT_COLOUR).all()
        assert framed == tiles[position].kept
        caption = cell[192:]
        assert (caption > 200).any()  # white caption text under every picture
    tall = tile_picture(images[2], 192)[0]
    assert tall.shape[0] == 192 - 2 * PAD and tall.shape[1] < tall.shape[0]


def test_captions_differ_per_tile_and_the_bytes_are_deterministic():
    images, tiles = _images(), _tiles()
    first, second = contact_sheet(images, tiles, tile=128), contact_sheet(images, tiles, tile=128)
    assert hashlib.sha256(first.tobytes()).hexdigest() == hashlib.sha256(second.tobytes()).hexdigest()
    changed = list(tiles)
    changed[0] = Tile(**{**tiles[0].__dict__, "seed": 4242})
    other = contact_sheet(images, changed, tile=128)
    slot = ordered(tiles, "rank").index(0)
    diff = np.argwhere((other != first).any(-1))
    height = tile_height(128)
    assert len(diff) and all(
        (r // height) * 3 + c // 128 == slot and r % height >= 128 for r, c in diff
    )  # only its caption
    assert ordered(tiles, "seed") == [0, 1, 2, 3, 4] and ordered(tiles, "index") == [0, 1, 2, 3, 4]
    assert tiles[1].lines() == ["#1  seed 1001  mask 20%", "CP +0.700  PF +0.050", "accepted"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tile=32), "tile_size is 32: give 64 to 1024 pixels"),
        (dict(tile=1024, columns=17), f"over the {MAX_SHEET_SIDE} px this node makes"),
        (dict(order="best"), "order 'best' is unknown: use rank, seed, index"),
    ],
)
def test_bad_sheets_are_one_line(kwargs, message):
    images = [np.zeros((8, 8, 3), np.uint8)] * 17
    tiles = [Tile(index=i) for i in range(17)]
    with pytest.raises(MascInputError, match=message) as raised:
        contact_sheet(images, tiles, **kwargs)
    assert "\n" not in str(raised.value)


def test_thumbnails_only_shrink():
    big, small = np.zeros((600, 300, 3), np.uint8), np.zeros((100, 50, 3), np.uint8)
    assert thumbnail(big).shape == (256, 128, 3) and thumbnail(small).shape == small.shape


def test_the_node_sheets_every_candidate_of_sample_until(pack, comfy_dirs):
    from comfy_harness import stand_in_sampling
    from test_sample_until import inputs, models

    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    setup = models.__wrapped__(pack, comfy_dirs)
    with stand_in_sampling(pack):
        out = nodes["MaSCSampleUntil"]().sample(**inputs(setup, min_cp=1.0, max_candidates=5, accept=2))
    scores, candidates = out["result"][3], out["result"][7]
    assert candidates.shape == (5, 256, 256, 3)  # every candidate, rejected ones too, at 256 px
    (sheet,) = nodes["MaSCContactSheet"]().sheet(candidates, scores, "rank", "cp", 128, 0)
    assert sheet.shape == (1, 2 * tile_height(128), 3 * 128, 3)
    kept = scores.context.kept
    arrays = [(255 * c.numpy()).astype(np.uint8) for c in candidates]
    first = _slot((255 * sheet[0].numpy()).round().astype(np.uint8), 0, 128, 3)
    picture, (top, left) = tile_picture(arrays[kept[0]], 128)
    assert np.abs(first[top : top + picture.shape[0], left : left + picture.shape[1]].astype(int) - picture).max() <= 1
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    with pytest.raises(errors.MascInputError, match="images has 4 pictures but scores has 5"):
        nodes["MaSCContactSheet"]().sheet(candidates[:4], scores, "rank", "cp", 128, 0)


def test_rank_writes_a_contact_sheet(capsys, naflex_dir, files, tmp_path):
    from masc_core.cli import main

    sheet = tmp_path / "sheet.png"
    argv = [
        "rank",
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
        files["teapot_00"],
        "--by",
        "cp",
        "--top",
        "1",
        "--prompt",
        "a dog",
        "--subject",
        "dog",
        "--contact-sheet",
        str(sheet),
        "--tile-size",
        "128",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    picture = np.asarray(Image.open(sheet).convert("RGB"))
    assert picture.shape == (2 * tile_height(128), 2 * 128, 3)
    assert (picture[:FRAME, :128] == KEPT_COLOUR).all() and not (picture[:FRAME, 128:] == KEPT_COLOUR).all()
    assert main(argv[:-4] + ["--contact-sheet", str(tmp_path / "sheet.jpg")]) == 2
    assert "give the sheet a .png name" in capsys.readouterr().err
