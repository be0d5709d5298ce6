"""Scores saved with images: the ``masc`` metadata entry, through a real PNG written as core Save Image writes it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from masc_core.cli import main
from masc_core.errors import MascInputError
from masc_core.metric.saved_png import read_png
from masc_core.metric.saved_scores import ENTRY_KEY, add_node_entry, node_entry, pixel_digest
from masc_core.metric.scores import ImageScore, ScoreBatch, ScoreContext
from masc_core.version import __version__


def save_like_comfyui(
    images: torch.Tensor, folder, prefix: str, extra_pnginfo: dict, prompt: dict | None = None
) -> list[str]:
    """core Save Image's loop (nodes.py SaveImage.save_images, 0.3.64 and 0.33.0)."""
    paths = []
    for number, image in enumerate(images):
        i = 255.0 * image.cpu().numpy()
        img = Image.fromarray(np.clip(i, 0, 255).astype(np.uint8))
        metadata = PngInfo()
        if prompt is not None:
            metadata.add_text("prompt", json.dumps(prompt))
        for key in extra_pnginfo:
            metadata.add_text(key, json.dumps(extra_pnginfo[key]))
        path = os.path.join(folder, f"{prefix}_{number + 1:05}_.png")
        img.save(path, pnginfo=metadata, compress_level=4)
        paths.append(path)
    return paths


def candidates(count=3, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    return torch.rand(count, 24, 32, 3, generator=generator).to(dtype)


def scored(count=3):
    scores = [
        ImageScore(
            index=i,
            cp=0.5 + 0.1 * i,
            pf=None if i == 2 else 0.1 * i,
            foreground_fraction=0.2,
            prompt="a sks dog in the snow",
            encoded_prompt="in the snow",
            pf_undefined="no background" if i == 2 else None,
        )
        for i in range(count)
    ]
    context = ScoreContext(
        node="MaSCSampleUntil",
        subject="sks dog",
        encoder={"model": "masc-tiny", "digest": "0123456789ab"},
        seeds=[1000 + i for i in range(count)],
        verdicts=["rejected: CP below 0.55", "accepted", "accepted"],
        kept=[2, 1],
    )
    return ScoreBatch(scores=scores, references=[], context=context)


def test_entry_round_trips_through_png_text_chunks(tmp_path):
    images = candidates()
    batch = scored()
    kept = images[[2, 1]]
    entry = node_entry(
        batch,
        node="MaSCSampleUntil",
        outputs=[None, 1, 0],
        pixels=[None, pixel_digest(kept[1].numpy()), pixel_digest(kept[0].numpy())],
    )
    extra = {"workflow": {"nodes": []}}
    assert add_node_entry(extra, "13", entry)
    gate = node_entry(batch.subset([2, 1]), node="MaSCGate", verdicts=["passed", "passed"])
    assert add_node_entry(extra, 14, gate)
    paths = save_like_comfyui(kept, tmp_path, "masc", extra, prompt={"13": {}})
    for position, path in enumerate(paths):
        read, digest = read_png(path)
        assert read == json.loads(json.dumps(extra[ENTRY_KEY]))  # exactly what was put in, through JSON
        assert list(read["nodes"]) == ["13", "14"]  # one entry per node, in execution order
        this = [image for image in read["nodes"]["13"]["images"] if image["pixels"] == digest]
        assert len(this) == 1 and this[0]["output"] == position and this[0]["seed"] == [1002, 1001][position]
    node = read["nodes"]["13"]
    assert node["metric_version"] == __version__ and node["encoder"] == {"model": "masc-tiny", "digest": "0123456789ab"}
    assert node["stripped_prompt"] == "in the snow" and node["subject"] == "sks dog"
    assert node["images"][2]["pf"] is None and node["images"][2]["pf_undefined"] == "no background"
    assert [i["verdict"] for i in node["images"]] == ["rejected: CP below 0.55", "accepted", "accepted"]
    assert [i["seed"] for i in read["nodes"]["14"]["images"]] == [1002, 1001]


def test_pixel_hash_follows_save_images_quantization_for_float16_too(tmp_path):
    images = candidates(2, torch.float16)
    extra = {}
    add_node_entry(
        extra, "1", node_entry(scored(2), node="MaSCScore", pixels=[pixel_digest(i.numpy()) for i in images])
    )
    paths = save_like_comfyui(images, tmp_path, "half", extra)
    for k, path in enumerate(paths):
        _, digest = read_png(path)
        assert digest == extra[ENTRY_KEY]["nodes"]["1"]["images"][k]["pixels"]
    # Rounding instead of truncating would name other pixels: the hash is Save Image's, not the scorer's.
    rounded = np.clip(np.rint(images[0].float().numpy() * 255), 0, 255).astype(np.uint8)
    assert pixel_digest(rounded) != extra[ENTRY_KEY]["nodes"]["1"]["images"][0]["pixels"]


def test_no_extra_pnginfo_means_nothing_to_write():
    assert add_node_entry(None, "1", {}) is False


def test_a_node_run_again_replaces_its_own_entry_only():
    extra = {ENTRY_KEY: {"format": 1, "nodes": {"3": {"node": "MaSCScore"}}}}
    add_node_entry(extra, "5", {"node": "MaSCGate", "images": []})
    add_node_entry(extra, "3", {"node": "MaSCScore", "images": [1]})
    assert extra[ENTRY_KEY]["nodes"] == {
        "3": {"node": "MaSCScore", "images": [1]},
        "5": {"node": "MaSCGate", "images": []},
    }


def run_cli(capsys, *argv):
    code = main(["read", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_read_command_prints_this_images_scores(tmp_path, capsys):
    images = candidates()
    batch = scored()
    kept = images[[2, 1]]
    extra = {}
    add_node_entry(
        extra,
        "13",
        node_entry(
            batch,
            node="MaSCSampleUntil",
            outputs=[None, 1, 0],
            pixels=[None, pixel_digest(kept[1].numpy()), pixel_digest(kept[0].numpy())],
        ),
    )
    paths = save_like_comfyui(kept, tmp_path, "masc", extra)
    code, out, err = run_cli(capsys, paths[1])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == paths[1]
    assert lines[1] == "  this image: #1  seed 1001  CP +0.6000  PF +0.1000  mask 20.0%  accepted"
    assert (
        lines[2]
        == f"    from MaSCSampleUntil (node 13): masc-tiny (0123456789ab), metric {__version__}, PF text 'in the snow'"
    )
    assert len(lines) == 3
    code, out, _ = run_cli(capsys, paths[0], "--all")
    assert "#0  seed 1000  CP +0.5000  PF +0.0000  mask 20.0%  rejected: CP below 0.55" in out
    code, out, _ = run_cli(capsys, paths[0], "--json")
    document = json.loads(out)
    assert document["this_image"][0]["seed"] == 1002 and document["this_image"][0]["node_id"] == "13"


def test_read_command_explains_files_without_scores_in_one_line(tmp_path, capsys):
    plain = tmp_path / "plain.png"
    Image.new("RGB", (8, 8)).save(plain)
    jpeg = tmp_path / "photo.jpg"
    Image.new("RGB", (8, 8)).save(jpeg)
    good = save_like_comfyui(candidates(1), tmp_path, "good", {ENTRY_KEY: {"format": 1, "nodes": {}}})[0]
    code, out, err = run_cli(capsys, str(plain), str(jpeg), good, str(tmp_path / "missing.png"))
    assert code == 2
    errors = err.splitlines()
    assert len(errors) == 3
    assert errors[0].startswith(f"error: '{plain}' has no MaSC scores (no 'masc' text chunk): save it with Save Image")
    assert errors[1] == f"error: '{jpeg}' is a JPEG file, not a PNG: MaSC scores travel in PNGs written by Save Image"
    assert errors[2].startswith(f"error: '{tmp_path / 'missing.png'}' does not exist")
    assert out.startswith(good)  # the readable file is still printed


def test_an_edited_chunk_is_refused_with_a_reason(tmp_path):
    path = tmp_path / "bad.png"
    info = PngInfo()
    info.add_text(ENTRY_KEY, "{not json")
    Image.new("RGB", (4, 4)).save(path, pnginfo=info)
    with pytest.raises(MascInputError, match="not JSON"):
        read_png(path)


def two_subjects_scored():
    score = ImageScore(
        index=0,
        cp=0.41,
        pf=0.1,
        foreground_fraction=0.2,
        prompt="sks dog and a cat",
        encoded_prompt="and a",
        subjects=[{"subject": "sks dog", "cp": 0.41, "mask": 0.2}, {"subject": "cat\x1b[2J", "cp": None, "mask": 0.3}],
        blends=["the cat's region looks as much like the sks dog as the sks dog's own region does"],
    )
    return ScoreBatch(
        scores=[score], references=[], context=ScoreContext(node="MaSCScoreSubjects", subject="sks dog, cat")
    )


def test_several_subjects_travel_in_the_entry_and_read_shows_each(tmp_path, capsys):
    image = candidates(1)
    batch = two_subjects_scored()
    extra = {}
    assert add_node_entry(
        extra, "5", node_entry(batch, node="MaSCScoreSubjects", pixels=[pixel_digest(image[0].numpy())])
    )
    record = extra[ENTRY_KEY]["nodes"]["5"]["images"][0]
    assert (
        record["subjects"][0] == {"subject": "sks dog", "cp": 0.41, "mask": 0.2} and record["subjects"][1]["cp"] is None
    )
    assert "subjects" not in node_entry(scored(), node="MaSCScore")["images"][0]  # single-subject records as before
    path = save_like_comfyui(image, tmp_path, "two", extra)[0]
    entry, _ = read_png(path)
    assert entry["nodes"]["5"]["images"][0]["blends"] == batch.scores[0].blends
    assert main(["read", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  this image: #0  seed unknown  cp_min +0.4100  PF +0.1000")
    assert (
        lines[2] == "      sks dog CP +0.4100 mask 20.0%  cat\\x1b[2J CP n/a mask 30.0%"
    )  # a crafted name cannot drive the terminal
    assert lines[3].startswith("      blend: the cat's region looks as much like the sks dog")


@pytest.mark.parametrize(
    "subjects, blends, problem",
    [
        ("dog", [], "'subjects' is not a list of objects"),
        ([{"cp": 0.4, "mask": 0.2}], [], "'subjects' has an entry without a subject name"),
        ([{"subject": "dog", "cp": "high", "mask": 0.2}], [], "with a cp or mask that is not a number"),
        ([{"subject": "dog", "cp": 0.4, "mask": 0.2}], [3], "'blends' is not a list of texts"),
    ],
)
def test_crafted_subject_fields_are_refused_with_a_reason(tmp_path, subjects, blends, problem):
    entry = {
        "format": 1,
        "nodes": {
            "5": {
                "node": "MaSCScoreSubjects",
                "images": [{"index": 0, "cp": 0.4, "pf": None, "mask": 0.2, "subjects": subjects, "blends": blends}],
            }
        },
    }
    path = tmp_path / "crafted.png"
    info = PngInfo()
    info.add_text(ENTRY_KEY, json.dumps(entry))
    Image.new("RGB", (4, 4)).save(path, pnginfo=info)
    with pytest.raises(MascInputError, match=problem) as raised:
        read_png(path)
    assert "\n" not in str(raised.value)
