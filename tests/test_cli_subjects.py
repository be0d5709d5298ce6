"""`score --subjects` and `rank --subjects`: several subjects per output from the command line, equal to the library."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from masc_core import MascEncoder, score_subjects
from masc_core.cli import main

from test_subjects import CAT, DOG, PROMPT, _half, _pair, _photo
from conftest import box_mask


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """Two outputs (dog + cat, dog + dog), the references, every mask, and a subjects file, as files."""
    root = tmp_path_factory.mktemp("subjects")
    files = {}

    def save(name, pixels):
        files[name] = str(root / f"{name}.png")
        Image.fromarray(pixels).save(files[name])

    save("out_dog_cat", _pair("dog_01", "cat_01"))
    save("out_dog_dog", _pair("dog_01", "dog_02"))
    save("dog_ref", _photo("dog_00"))
    save("cat_ref", _photo("cat_00"))
    save("ref_mask", box_mask(224, 224, 0.1, 0.1, 0.9, 0.9))
    save("left", _half("left"))
    save("right", _half("right"))
    document = {
        "subjects": [
            {
                "names": "sks dog, dog",
                "references": ["dog_ref.png"],
                "reference_masks": "ref_mask.png",
                "output_masks": ["left.png", "left.png"],
            },
            {
                "names": "cat",
                "references": ["cat_ref.png"],
                "reference_masks": ["ref_mask.png"],
                "output_masks": ["right.png", "right.png"],
            },
        ]
    }
    files["subjects"] = str(root / "subjects.json")
    with open(files["subjects"], "w") as handle:
        json.dump(document, handle)
    return files


def _args(command, naflex_dir, scene, *extra):
    return [
        command,
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--subjects",
        scene["subjects"],
        "--out",
        scene["out_dog_cat"],
        scene["out_dog_dog"],
        "--prompt",
        PROMPT,
        *extra,
    ]


def test_score_json_carries_every_subjects_figures_as_the_library_computes_them(capsys, naflex_dir, scene):
    code, out, err = run(capsys, *_args("score", naflex_dir, scene, "--json"))
    assert code == 0, err
    document = json.loads(out)
    encoder = MascEncoder.load(naflex_dir, device="cpu")
    expected = score_subjects(
        encoder,
        [_pair("dog_01", "cat_01"), _pair("dog_01", "dog_02")],
        subjects=[DOG, CAT],
        output_masks=[[_half("left")] * 2, [_half("right")] * 2],
        prompt=PROMPT,
    )
    assert [s["subject"] for s in document["subjects"]] == ["sks dog", "cat"]
    for row, item in zip(document["results"], expected.scores):
        assert row["cp_min"] == pytest.approx(item.cp_min, abs=1e-6) and row["pf"] == pytest.approx(item.pf, abs=1e-6)
        assert [s["cp"] for s in row["subjects"]] == pytest.approx([s.cp for s in item.subjects], abs=1e-6)
        assert np.allclose(row["region_matrix"], item.region_matrix, atol=1e-6)
        assert row["blend"] == bool(item.blends) and row["exclusive"]
    assert not document["results"][0]["blend"] and document["results"][1]["blend"]
    assert document["resources"]["forwards"] == {"images": 4, "texts": 1}


def test_score_table_shows_both_summaries_each_subject_and_the_blend(capsys, naflex_dir, scene):
    code, out, _ = run(capsys, *_args("score", naflex_dir, scene))
    header, first, second = out.splitlines()[:3]
    assert header.split() == ["image", "cp_min", "cp_mean", "PF", "sks", "dog", "cat", "notes"]
    assert "BLEND" not in first and "BLEND: the cat's region" in second
    assert out.splitlines()[-1] == "PF text: 'a photo of and on the sofa'"


def test_score_heatmaps_writes_each_subjects_maps_and_the_attention_once(capsys, naflex_dir, scene, tmp_path):
    folder = tmp_path / "maps"
    code, out, err = run(capsys, *_args("score", naflex_dir, scene, "--heatmaps", str(folder)))
    assert code == 0, err
    expected = sorted(
        f"{stem}.{part}.png"
        for stem in ("out_dog_cat", "out_dog_dog")
        for part in (
            "sks_dog.reference_match",
            "sks_dog.presence",
            "cat.reference_match",
            "cat.presence",
            "background_attention",
        )
    )
    assert sorted(p.name for p in folder.iterdir()) == expected
    assert sum(line.startswith("heatmap: ") for line in out.splitlines()) == len(expected)
    with Image.open(folder / "out_dog_cat.cat.presence.png") as picture:
        assert picture.size == (448, 224)


def test_rank_reject_blends_keeps_only_the_picture_with_both_subjects(capsys, naflex_dir, scene):
    code, out, err = run(capsys, *_args("rank", naflex_dir, scene, "--reject-blends", "--json"))
    assert code == 0, err
    document = json.loads(out)
    assert document["selected"] == [scene["out_dog_cat"]]
    rejected = next(e for e in document["ranking"] if e["image"] == scene["out_dog_dog"])
    assert not rejected["passed"] and rejected["reasons"][0].startswith("blend: ")
    code, out, _ = run(capsys, *_args("rank", naflex_dir, scene, "--json"))
    assert len(json.loads(out)["selected"]) == 2  # without the option a blend is reported, not rejected


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("subjects"), "has no 'subjects' list"),
        (lambda d: d["subjects"][0].update(colour="red"), "has the unknown key 'colour'"),
        (lambda d: d["subjects"][1].pop("output_masks"), "has no output mask while the"),
        (
            lambda d: d["subjects"][1].update(output_masks=["right.png"]),
            "subject 1 has 1 output_masks for 2 --out images",
        ),
        (lambda d: d["subjects"][1].update(names="dog"), "the name 'dog' is given to subjects[0] and subjects[1]"),
        (lambda d: d["subjects"][0].update(references=[]), "'references' must be a file name or a non-empty list"),
    ],
)
def test_a_bad_subjects_file_is_one_line(capsys, naflex_dir, scene, tmp_path, change, message):
    with open(scene["subjects"]) as handle:
        document = json.load(handle)
    change(document)
    bad = tmp_path / "subjects.json"
    bad.write_text(json.dumps(document))
    for name in ("dog_ref", "cat_ref", "ref_mask", "left", "right"):  # the paths are relative to the file
        (tmp_path / f"{name}.png").write_bytes(open(scene[name], "rb").read())
    argv = _args("score", naflex_dir, scene)
    argv[argv.index("--subjects") + 1] = str(bad)
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == "" and err.count("\n") == 1 and message in err, err


def test_single_subject_flags_are_required_without_subjects_and_refused_beside_it(capsys, naflex_dir, scene):
    code, _, err = run(capsys, "score", "--model", naflex_dir, "--out", scene["out_dog_cat"], "--prompt", PROMPT)
    assert code != 0 and "--ref, --ref-mask, --subject are required" in err and err.count("\n") == 1
    code, _, err = run(capsys, *_args("score", naflex_dir, scene, "--subject", "dog"))
    assert code != 0 and "--subjects replaces --ref" in err
    code, _, err = run(
        capsys,
        "rank",
        "--model",
        naflex_dir,
        "--ref",
        scene["dog_ref"],
        "--ref-mask",
        scene["ref_mask"],
        "--out",
        scene["out_dog_cat"],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
        "--reject-blends",
    )
    assert code != 0 and "--reject-blends needs --subjects" in err


def test_one_subject_in_a_file_gives_what_the_single_subject_flags_give(capsys, naflex_dir, scene, tmp_path):
    one = tmp_path / "one.json"
    one.write_text(
        json.dumps(
            {
                "subjects": [
                    {
                        "names": "sks dog, dog",
                        "references": [scene["dog_ref"]],
                        "reference_masks": [scene["ref_mask"]],
                        "output_masks": [scene["left"]] * 2,
                    }
                ]
            }
        )
    )
    outs = [scene["out_dog_cat"], scene["out_dog_dog"]]
    common = ["--model", naflex_dir, "--device", "cpu", "--out", *outs, "--prompt", PROMPT, "--json"]
    _, by_file, _ = run(capsys, "score", "--subjects", str(one), *common)
    _, by_flags, _ = run(
        capsys,
        "score",
        "--ref",
        scene["dog_ref"],
        "--ref-mask",
        scene["ref_mask"],
        "--subject",
        "sks dog, dog",
        "--out-mask",
        scene["left"],
        scene["left"],
        *common,
    )
    for multi, single in zip(json.loads(by_file)["results"], json.loads(by_flags)["results"]):
        assert multi["cp_min"] == multi["cp_mean"] == single["cp"] and multi["pf"] == single["pf"]
        assert multi["encoded_prompt"] == single["encoded_prompt"]
