"""Files from elsewhere: crafted PNGs for ``read`` (wrong shapes, NaN, deep nesting, oversized and inflating
text chunks, decompression bombs, terminal escapes), and bombs for the image readers of score, mask and eval.
Each bad file gets one line naming it, exit 2, and the files after it are still read."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import call
from crafted import (
    ENTRY_SHAPES,
    decompression_bomb,
    entry,
    itxt_chunk,
    png_with_chunks,
    saved_png,
    text_chunk,
    zlib_bomb_text,
    ztxt_chunk,
)
from masc_core.errors import MascInputError
from masc_core.io.images import load_image_file
from masc_core.metric.saved_png import read_png
from masc_core.metric.saved_scores import MAX_ENTRY_BYTES

PIXELS = np.full((8, 8, 3), 100, dtype=np.uint8)


def read_all(*paths) -> tuple[int, list[str], list[str]]:
    code, out, err = call("read", *paths)
    return code, out.splitlines(), err.splitlines()


@pytest.fixture
def good(tmp_path) -> str:
    return saved_png(tmp_path / "good.png", PIXELS, entry())


@pytest.mark.parametrize("shape", list(ENTRY_SHAPES))
def test_an_entry_of_the_wrong_shape_is_one_line_and_the_next_file_is_still_read(tmp_path, good, shape):
    bad = saved_png(tmp_path / "bad.png", PIXELS, ENTRY_SHAPES[shape])
    code, out, err = read_all(bad, good)
    assert code == 2
    assert len(err) == 1 and err[0].startswith(f"error: '{bad}' "), err
    assert "internal error" not in err[0]
    assert out and out[0] == good  # the good file after it is printed


def test_json_output_is_valid_json_for_every_file_it_prints(tmp_path, good):
    bad = saved_png(tmp_path / "nan.png", PIXELS, ENTRY_SHAPES["cp is NaN"])
    code, out, err = call("read", "--json", bad, good)
    assert code == 2 and len(err.splitlines()) == 1
    assert json.loads(out)["masc"]["nodes"]["7"]["images"][0]["cp"] == 0.5


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("make", [text_chunk, itxt_chunk], ids=["tEXt", "iTXt"])
def test_the_entry_is_found_before_or_after_the_image_data(tmp_path, where, make):
    path = png_with_chunks(tmp_path / "x.png", PIXELS, **{where: [make("masc", json.dumps(entry()))]})
    found, digest = read_png(path)
    assert found["nodes"]["7"]["subject"] == "dog" and len(digest) == 16


def test_a_compressed_entry_is_read(tmp_path):
    path = png_with_chunks(tmp_path / "z.png", PIXELS, before=[ztxt_chunk("masc", json.dumps(entry()).encode())])
    assert read_png(path)[0]["format"] == 1


def test_other_text_chunks_are_skipped_unread(tmp_path):
    """A huge workflow chunk (as big ComfyUI graphs make) beside the entry: only the entry is read."""
    huge = ztxt_chunk("workflow", b"{" + b" " * (64 << 20) + b"}")
    path = png_with_chunks(tmp_path / "w.png", PIXELS, before=[huge, text_chunk("masc", json.dumps(entry()))])
    assert read_png(path)[0]["nodes"]["7"]["node"] == "MaSCScore"


@pytest.mark.parametrize(
    "case,chunk,expected",
    [
        ("an inflating entry", zlib_bomb_text(), "text chunk that inflates past 32 MB"),
        (
            "an oversized entry",
            text_chunk("masc", " " * (MAX_ENTRY_BYTES + 1)),
            f"text chunk of {MAX_ENTRY_BYTES + 6:,} bytes, more than the 32 MB read here",
        ),
    ],
)
def test_oversized_entries_are_refused_without_filling_the_memory(tmp_path, good, case, chunk, expected):
    bad = png_with_chunks(tmp_path / "bad.png", PIXELS, before=[chunk])
    code, out, err = read_all(bad, good)
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert out[0] == good


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path, good):
    """A header claiming 40,000 x 40,000 pixels with a valid entry: refused by size, never decoded."""
    bomb = png_with_chunks(tmp_path / "bomb-src.png", PIXELS, before=[text_chunk("masc", json.dumps(entry()))])
    # Rewrite the header of that file to claim a huge size (the entry stays valid; the image data is tiny).
    data = bytearray(open(bomb, "rb").read())
    data[16:24] = (40_000).to_bytes(4, "big") + (40_000).to_bytes(4, "big")
    import zlib

    data[29:33] = (zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF).to_bytes(4, "big")
    path = tmp_path / "bomb.png"
    path.write_bytes(bytes(data))
    code, out, err = read_all(str(path), good)
    assert code == 2 and len(err) == 1 and "40000x40000 pixels, more than the" in err[0], err
    assert out[0] == good


def test_files_without_an_entry_are_not_decoded(tmp_path, monkeypatch):
    """A large PNG without scores: only its chunk headers are read (PIL is never asked for the pixels)."""
    import masc_core.metric.saved_png as reader

    decoded = []
    monkeypatch.setattr(reader, "_pixels_digest", lambda path: decoded.append(path))
    plain = png_with_chunks(tmp_path / "plain.png", np.zeros((512, 512, 3), np.uint8))
    with pytest.raises(MascInputError, match="has no MaSC scores"):
        read_png(plain)
    bad = saved_png(tmp_path / "bad.png", PIXELS, ENTRY_SHAPES["cp is text"])
    with pytest.raises(MascInputError, match="unknown layout"):
        read_png(bad)
    assert decoded == []


def test_a_folder_is_called_a_folder(tmp_path):
    code, _, err = read_all(str(tmp_path))
    assert code == 2 and err == [
        f"error: '{tmp_path}' is a folder: pass PNG files saved by ComfyUI's Save Image (a shell glob such as "
        "folder/*.png)"
    ]


def test_a_file_cut_short_or_damaged_is_one_line(tmp_path, good):
    whole = open(good, "rb").read()
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole[: len(whole) - 30])  # inside the image data, after the entry
    garbage = tmp_path / "garbage.png"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(200))
    code, out, err = read_all(str(cut), str(garbage), good)
    assert code == 2 and len(err) == 2 and all("internal error" not in line for line in err), err
    assert out[0] == good


ESCAPES = {
    "clear screen": "\x1b[2J\x1b[H",
    "clipboard (OSC 52)": "\x1b]52;c;ZWNobyBoaQ==\x07",
    "forged line": "\nerror: everything is fine\n",
    "carriage return": "\rCP +0.9999",
    "line separator": "\u2028forged",
    "right-to-left override": "\u202eevil",
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_text_from_the_file_cannot_drive_the_terminal(tmp_path, name):
    sequence = ESCAPES[name]
    crafted = entry(
        node="MaSCScore" + sequence,
        stripped_prompt="a" + sequence,
        subject=sequence,
        encoder={"model": sequence, "digest": sequence},
    )
    crafted["nodes"]["7"]["images"][0]["verdict"] = "accepted" + sequence
    path = saved_png(tmp_path / "escape.png", PIXELS, crafted)
    code, out, err = call("read", "--all", path)
    assert code == 0, err
    printed = out
    assert not any(c in printed for c in "\x1b\x07\r\u2028\u202e"), repr(printed)
    assert "error: everything is fine" not in printed.splitlines()
    assert len(printed.splitlines()) == 4  # the file, the "no match" line, the node header, its image: nothing forged
    code, out, _ = call("read", "--json", path)
    assert code == 0 and len(out.splitlines()) == 1 and out.isascii()


# ---------------------------------------------------------------- the image readers of score, mask and eval


def test_image_readers_refuse_a_bomb_in_one_line(tmp_path):
    for width, height in ((40_000, 40_000), (10_000, 9_500)):  # past PIL's hard limit; past its warning limit
        bomb = decompression_bomb(tmp_path / f"bomb{width}.png", width, height)
        with pytest.raises(
            MascInputError, match=rf"is {width}x{height} pixels, more than the .* downscale it|claims more than"
        ):
            load_image_file(bomb, "--out")


def test_score_refuses_a_bomb_and_names_the_input(tmp_path, naflex_dir):
    from conftest import photo_path

    from PIL import Image

    bomb = decompression_bomb(tmp_path / "bomb.png")
    mask = tmp_path / "mask.png"
    Image.new("L", (64, 64), 255).save(mask)
    code, _, err = call(
        "score",
        "--model",
        naflex_dir,
        "--ref",
        photo_path("dog_00"),
        "--ref-mask",
        mask,
        "--out",
        bomb,
        "--prompt",
        "a dog",
        "--subject",
        "dog",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"'{bomb}'" in err and "internal error" not in err, err


def test_mask_refuses_a_damaged_image_in_one_line(tmp_path, tiny_clipseg_dir):
    damaged = tmp_path / "damaged.png"
    damaged.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(300))
    code, _, err = call(
        "mask", "--model", tiny_clipseg_dir, "--subject", "dog", "--out-dir", tmp_path / "m", "--image", damaged
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err, err


@pytest.mark.parametrize("shape", ["cp is NaN", "deep nesting", "nodes is a list", "images is a string"])
def test_a_crafted_entry_sent_with_the_prompt_is_replaced_not_extended(shape):
    """extra_pnginfo comes from the client: a MaSC node never adds its entry to one that read would refuse."""
    from masc_core.metric.saved_scores import add_node_entry, parse_entry

    sent = {"workflow": {}, "masc": json.loads(ENTRY_SHAPES[shape]) if shape != "deep nesting" else [[[[]]]] * 3}
    if shape == "deep nesting":
        sent["masc"] = {"format": 1, "nodes": {"7": {"node": json.loads("[" * 50 + "]" * 50)}}}
    assert add_node_entry(sent, 3, entry()["nodes"]["7"])
    assert list(sent["masc"]["nodes"]) == ["3"]
    assert parse_entry(json.dumps(sent["masc"]))["nodes"]["3"]["subject"] == "dog"


def test_a_readable_entry_from_earlier_nodes_is_kept():
    from masc_core.metric.saved_scores import add_node_entry

    sent = {"masc": entry()}
    add_node_entry(sent, 9, entry()["nodes"]["7"])
    assert sorted(sent["masc"]["nodes"]) == ["7", "9"]
