"""The benchmark card's multi-subject half: `manifest dreambench-multi` (DreamBench + a combinations file + generated
images), manifest rows with several subjects (subject_2, ref_2, ...), `eval` scoring them with score_subjects
(cp = cp_min, cp_mean, blend, per-subject figures), the card's CLIP-I/DINO averaged over every reference image of
every subject, and per-method summaries with the spread over seeds."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from benchmark_layouts import dreambench_dataset
from conftest import DATA, box_mask, call
from masc_core import MascEncoder, Subject, score_subjects
from masc_core.evaluation.builders import dreambench_multi
from masc_core.evaluation.manifest import read_manifest
from masc_core.io.images import load_image_file, load_mask_file
from masc_core.models.embedders import ClipEmbedder, DinoEmbedder
from masc_core.testing import build_clip, build_dino
from test_evaluate import records

CPU = torch.device("cpu")
PATCHES = ["--device", "cpu", "--max-patches", "256"]
"""Enough patches for the random-weight encoder's pixel-level identity signal to separate a dog from a cat."""
SIDE = 224
COMBINATIONS = {
    "combinations": [
        {"subjects": ["dog", "cat"], "prompts": ["a {0} and a {1} on the beach", "a {0} next to a {1} in the snow"]},
        {"subjects": ["dog", "cat", "teapot"], "prompts": ["a {0}, a {1} and a {2} on a table"]},
    ]
}


def _photo(name: str) -> Image.Image:
    return Image.open(os.path.join(DATA, f"{name}.jpg")).convert("RGB").resize((SIDE, SIDE))


def _side_by_side(names) -> Image.Image:
    canvas = Image.new("RGB", (SIDE * len(names), SIDE))
    for k, name in enumerate(names):
        canvas.paste(_photo(name), (k * SIDE, 0))
    return canvas


def generated(folder: str) -> None:
    """Method 'good' draws each subject once; method 'twice' draws the dog where the cat should be (a blend)."""
    for method in ("good", "twice"):
        for combination, prompts in (("dog+cat", 2), ("dog+cat+teapot", 1)):
            os.makedirs(os.path.join(folder, method, combination), exist_ok=True)
            for prompt in range(prompts):
                for seed in (0, 1):
                    views = ["dog_01", "cat_01", "teapot_00"][: combination.count("+") + 1]
                    if method == "twice":
                        views[1] = "dog_02"
                    _side_by_side(views).save(os.path.join(folder, method, combination, f"{prompt}_{seed}.png"))


def box_masks(root, dataset: str) -> None:
    """The masks the builder expects, made by hand: a box on each reference, each subject's third of the output.

    (The random-weight test CLIPSeg's masks are noise; boxes keep the blend and exclusivity checks directional.)
    """
    for subject in ("dog", "cat", "teapot"):
        for view in os.listdir(os.path.join(dataset, subject)):
            size = Image.open(os.path.join(dataset, subject, view)).size
            path = root / "work" / "masks" / "references" / subject / (os.path.splitext(view)[0] + ".png")
            os.makedirs(path.parent, exist_ok=True)
            Image.fromarray(box_mask(size[1], size[0], 0.1, 0.1, 0.9, 0.9)).save(path)
    for method in ("good", "twice"):
        for combination in ("dog+cat", "dog+cat+teapot"):
            subjects = combination.split("+")
            folder = root / "outputs" / method / combination
            for name in os.listdir(folder):
                for k, subject in enumerate(subjects):
                    mask = np.zeros((SIDE, SIDE * len(subjects)), np.uint8)
                    mask[:, k * SIDE : (k + 1) * SIDE] = box_mask(SIDE, SIDE, 0.1, 0.1, 0.9, 0.9)
                    path = (
                        root
                        / "work"
                        / "masks"
                        / "outputs"
                        / method
                        / combination
                        / f"{os.path.splitext(name)[0]}.{subject}.png"
                    )
                    os.makedirs(path.parent, exist_ok=True)
                    Image.fromarray(mask).save(path)


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    dataset = dreambench_dataset(str(root / "dataset"))
    combinations = root / "combinations.json"
    combinations.write_text(json.dumps(COMBINATIONS))
    generated(str(root / "outputs"))
    box_masks(root, dataset)
    manifest = root / "work" / "manifest.csv"
    code, out, err = call("manifest", "dreambench-multi", dataset, combinations, root / "outputs", "-o", manifest)
    assert code == 0, err
    return {"root": root, "dataset": dataset, "manifest": manifest, "combinations": combinations, "out": out}


def test_auto_masks_make_one_mask_per_subject_of_each_image(multi, tiny_clipseg_dir, tmp_path):
    manifest = tmp_path / "auto.jsonl"
    code, out, err = call(
        "manifest",
        "dreambench-multi",
        multi["dataset"],
        multi["combinations"],
        multi["root"] / "outputs",
        "-o",
        manifest,
        "--auto-masks",
        tiny_clipseg_dir,
        "--device",
        "cpu",
    )
    assert code == 0, err
    row = read_manifest(manifest).rows[-1]
    masks = [row.out_mask_path] + [s.out_mask_path for s in row.extra_subjects]
    assert [os.path.basename(m) for m in masks] == [
        "0_1.dog.png",
        "0_1.cat.png",
        "0_1.teapot.png",
    ]  # twice/dog+cat+teapot/0_1
    # 6 reference views, and per method 4 pair images x 2 subjects + 2 triple images x 3 subjects
    assert all(os.path.isfile(m) for m in masks) and "34 made with CLIPSeg, 0 reused" in out


def test_the_builder_writes_one_row_per_image_with_every_subject(multi):
    assert "wrote" in multi["out"] and "12 rows: 2 methods, 2 combinations, 2 seeds" in multi["out"]
    with open(multi["manifest"], newline="") as handle:
        rows = list(csv.DictReader(handle))
    header = list(rows[0])
    assert header[:6] == ["ref", "ref_mask", "out", "out_mask", "prompt", "subject"]
    assert {"subject_2", "ref_2", "ref_mask_2", "out_mask_2", "subject_3", "ref_3", "ref_mask_3", "out_mask_3"} <= set(
        header
    )
    pair = next(r for r in rows if r["id"] == "dog+cat-1" and r["method"] == "good" and r["seed"] == "0")
    assert (
        pair["prompt"] == "a dog next to a cat in the snow" and pair["subject"] == "dog" and pair["subject_2"] == "cat"
    )
    cat_views = [os.path.join(multi["dataset"], "cat", f"0{v}.jpg") for v in (0, 1)]
    assert pair["subject_3"] == "" and pair["ref_2"] == "|".join(cat_views)  # outside the manifest's folder: absolute
    assert (
        pair["out_mask_2"] == "masks/outputs/good/dog+cat/1_0.cat.png"
        and pair["out_mask"] == "masks/outputs/good/dog+cat/1_0.dog.png"
    )
    triple = read_manifest(multi["manifest"]).rows[-1]
    assert [s.subject for s in triple.extra_subjects] == ["cat", "teapot"] and triple.id == "dog+cat+teapot-0"
    assert all(os.path.isfile(s.out_mask_path) for s in triple.extra_subjects)


@pytest.fixture(scope="module")
def scored(multi, naflex_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("multi-results")
    clip_dir = build_clip(str(folder / "tiny-clip"))
    dino_dir = build_dino(str(folder / "tiny-dino"))
    out_dir = folder / "results"
    code, out, err = call(
        "eval",
        multi["manifest"],
        "--model",
        naflex_dir,
        *PATCHES,
        "--out-dir",
        out_dir,
        "--clip",
        clip_dir,
        "--dino",
        dino_dir,
        "--bootstrap",
        "20",
        "--quiet",
        "--min-foreground",
        "0",
        "--chunk-size",
        "3",
    )
    assert code == 0, err
    return {
        "dir": out_dir,
        "rows": records(out_dir),
        "out": out,
        "clip": clip_dir,
        "dino": dino_dir,
        "model": naflex_dir,
    }


def _subjects_of(row: dict, manifest_row) -> list[Subject]:
    refs = [(manifest_row.subject, manifest_row.ref_paths, manifest_row.ref_mask_paths)]
    refs += [(s.subject, s.ref_paths, s.ref_mask_paths) for s in manifest_row.extra_subjects]
    return [
        Subject(names, [load_image_file(p) for p in views], [load_mask_file(p) for p in masks])
        for names, views, masks in refs
    ]


def test_eval_scores_each_row_as_score_subjects_does(multi, scored):
    manifest = read_manifest(multi["manifest"])
    encoder = MascEncoder.load(scored["model"], device="cpu", max_num_patches=int(PATCHES[-1]))
    for row in (scored["rows"][0], scored["rows"][7], scored["rows"][-1]):
        source = manifest.rows[row["row"]]
        masks = [[load_mask_file(p)] for p in [source.out_mask_path] + [s.out_mask_path for s in source.extra_subjects]]
        direct = score_subjects(
            encoder,
            [load_image_file(source.out_path)],
            subjects=_subjects_of(row, source),
            output_masks=masks,
            prompt=source.prompt,
        ).scores[0]
        assert row["cp"] == pytest.approx(direct.cp_min, abs=1e-6) and row["cp_mean"] == pytest.approx(
            direct.cp_mean, abs=1e-6
        )
        assert row["pf"] == pytest.approx(direct.pf, abs=1e-6) and row["encoded_prompt"] == direct.encoded_prompt
        assert [s["cp"] for s in row["subjects"]] == pytest.approx([s.cp for s in direct.subjects], abs=1e-6)
        assert row["blend"] == float(direct.blend) and row["blends"] == direct.blends
        assert len(row["ref_foreground"]) == sum(len(s.references) for s in _subjects_of(row, source))


def test_the_cards_clip_i_and_dino_average_over_every_reference_image_of_every_subject(multi, scored):
    manifest = read_manifest(multi["manifest"])
    clip = ClipEmbedder.load(scored["clip"], device=CPU, dtype=torch.float32)
    dino = DinoEmbedder.load(scored["dino"], device=CPU, dtype=torch.float32)

    def cosine(a, b):
        return float(F.cosine_similarity(a.float().reshape(1, -1), b.float().reshape(1, -1))[0])

    for row in (scored["rows"][1], scored["rows"][-1]):
        source = manifest.rows[row["row"]]
        paths = list(source.ref_paths) + [p for s in source.extra_subjects for p in s.ref_paths]
        views = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
        out_image = np.asarray(Image.open(source.out_path).convert("RGB"))
        # the card's recipe, literally: mean over all reference images of cos(enc(gen), enc(ref)); CLIP-T on the prompt
        g_clip, g_dino = clip.images([out_image])[0], dino.images([out_image])[0]
        assert row["clip_i"] == pytest.approx(np.mean([cosine(g_clip, clip.images([v])[0]) for v in views]), abs=1e-5)
        assert row["dino_i"] == pytest.approx(np.mean([cosine(g_dino, dino.images([v])[0]) for v in views]), abs=1e-5)
        assert row["clip_t"] == pytest.approx(cosine(g_clip, clip.texts([source.prompt])[0]), abs=1e-5)
        assert len(paths) == (
            5 if source.extra_subjects[-1].subject == "cat" else 6
        )  # 3 dog + 2 cat (+ 1 teapot) views


def test_the_summary_gives_cp_min_cp_mean_blend_rate_pf_and_baselines_per_method_over_seeds(scored):
    summary = json.load(open(scored["dir"] / "summary.json"))
    assert summary["metrics"] == ["cp", "clip_i", "dino_i", "pf", "clip_t", "cp_mean", "blend"]
    rows = scored["rows"]
    for method in ("good", "twice"):
        block = summary["methods"][method]
        assert block["seeds"] == ["0", "1"] and block["kept"] == 6
        blend = block["metrics"]["blend"]
        mine = [r for r in rows if r["method"] == method]
        assert blend["mean"] == pytest.approx(np.mean([r["blend"] for r in mine]))  # the blend rate
        per_seed = [np.mean([r["cp_mean"] for r in mine if r["seed"] == s]) for s in (0, 1)]
        assert block["metrics"]["cp_mean"]["seed_means"] == pytest.approx({"0": per_seed[0], "1": per_seed[1]})
        assert block["metrics"]["cp_mean"]["std_over_seeds"] == pytest.approx(np.std(per_seed, ddof=1), abs=1e-12)
    assert "cp_mean" in scored["out"] and "blend" in scored["out"]
    # the floor, no more: each group's views once (5 for dog+cat, 6 with the teapot), and each chunk's distinct
    # outputs and stripped prompts once. Chunks of 3 in path order: dog+cat [good x3] [good, twice x2] [twice x2] hold
    # 1 + 2 + 1 distinct pictures and 2 + 2 + 1 distinct prompts; the triple [good x2, twice] [twice] 2 + 1 and 1 + 1.
    forwards = json.load(open(scored["dir"] / "timing.json"))["forwards"]
    assert forwards["siglip_images"] == 11 + 4 + 3 and forwards["siglip_texts"] == 5 + 2
    assert os.path.isfile(scored["dir"] / "plot_methods.png")
    with open(scored["dir"] / "results.csv", newline="") as handle:
        cells = list(csv.DictReader(handle))
    assert cells[0]["subjects"].startswith("subject: dog; cp: ") and "|subject: cat; cp: " in cells[0]["subjects"]


def test_a_drawn_twice_subject_is_a_blend_and_lowers_cp_min_more_than_cp_mean(scored):
    rows = scored["rows"]
    good = [r for r in rows if r["method"] == "good"]
    twice = [r for r in rows if r["method"] == "twice"]
    # the dog drawn where the cat should be: the cat's CP (searched outside the dog's region) drops
    assert np.mean([r["subjects"][1]["cp"] for r in twice]) < np.mean([r["subjects"][1]["cp"] for r in good])
    assert np.mean([r["blend"] for r in twice]) > np.mean([r["blend"] for r in good])


def _one_row_manifest(folder, **cells) -> str:
    row = {
        "ref": f"{DATA}/dog_00.jpg",
        "ref_mask": "m.png",
        "out": f"{DATA}/dog_01.jpg",
        "out_mask": "m.png",
        "prompt": "a dog and a cat",
        "subject": "dog",
        "subject_2": "cat",
        "ref_2": f"{DATA}/cat_00.jpg",
        "ref_mask_2": "m.png",
        "out_mask_2": "m.png",
    }
    row.update(cells)
    Image.fromarray(np.full((8, 8), 255, np.uint8)).save(os.path.join(folder, "m.png"))
    path = os.path.join(folder, "m.jsonl")
    with open(path, "w") as handle:
        handle.write(json.dumps({k: v for k, v in row.items() if v is not None}) + "\n")
    return path


@pytest.mark.parametrize(
    "cells, message",
    [
        (dict(subject_2=""), "line 1, column 'subject_2': is empty: give subject 2's name"),
        (dict(subject_3="teapot"), "gives subject 3 but not subject ... |"),
        (dict(subject_2="cat, dog"), "column 'subject_2': the name 'dog' is also subject 1's"),
        (dict(out_mask_2=""), "column 'out_mask_2': is empty while another subject of the row has its output mask"),
        (dict(ref_mask_2="m.png|m.png"), "column 'ref_mask_2': 2 masks for 1 reference views"),
        (dict(ref_2="nowhere.jpg"), "1 file does not exist: line 1, column 'ref_2': file 'nowhere.jpg'"),
        (dict(subject=""), "column 'subject': is empty: with several subjects each needs its name"),
        (dict(subject_9="x", ref_9="m.png", ref_mask_9="m.png"), "at most 8 subjects per image"),
    ],
)
def test_bad_several_subject_rows_are_one_line_naming_line_and_column(tmp_path, cells, message):
    from masc_core.errors import MascInputError

    if message.endswith("|"):
        message = "gives subject 3 but not subject 2: number the subjects 2, 3, ... without gaps"
        cells = dict(
            cells,
            subject_2=None,
            ref_2=None,
            ref_mask_2=None,
            out_mask_2=None,
            ref_3=f"{DATA}/teapot_00.jpg",
            ref_mask_3="m.png",
        )
    with pytest.raises(MascInputError) as raised:
        read_manifest(_one_row_manifest(str(tmp_path), **cells))
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["combinations"][0].update(subjects=["dog", "dog2"]), None),
        (
            lambda c: c["combinations"][0].update(subjects=["dog", "cat"], prompts=["a {0} on the beach"]),
            "never names subject 1 ('cat')",
        ),
        (lambda c: c["combinations"][0].update(subjects=["dog", "unicorn"]), "'unicorn' has no reference images"),
        (lambda c: c["combinations"][0].update(subjects=["dog"]), "'subjects' must list 2 to 8"),
        (lambda c: c["combinations"].append(dict(c["combinations"][0])), "'dog+cat' is listed twice"),
    ],
)
def test_bad_combinations_are_one_line(multi, tmp_path, change, message):
    from masc_core.errors import MascInputError

    data = json.loads(json.dumps(COMBINATIONS))
    change(data)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    if (
        message is None
    ):  # dog2 is not in the mini dataset: the unknown-subject check comes first; same-class needs two folders
        dataset = tmp_path / "dataset"
        dreambench_dataset(str(dataset))
        os.makedirs(dataset / "dog2")
        Image.open(os.path.join(DATA, "dog_01.jpg")).save(dataset / "dog2" / "00.jpg")
        message = "'dog' and 'dog2' are both a dog"
    else:
        dataset = multi["dataset"]
    with pytest.raises(MascInputError) as raised:
        dreambench_multi.build(str(dataset), str(path), str(multi["root"] / "outputs"), str(tmp_path / "masks"))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_single_subject_row_beside_several_subject_rows_is_scored_as_always(multi, scored, naflex_dir, tmp_path):
    """A mixed manifest: the single-subject row's record equals the one a single-subject manifest gives."""
    manifest = read_manifest(multi["manifest"])
    source = manifest.rows[0]
    single = {
        "ref": "|".join(source.ref_paths),
        "ref_mask": "|".join(source.ref_mask_paths),
        "out": source.out_path,
        "out_mask": source.out_mask_path,
        "prompt": source.prompt,
        "subject": source.subject,
    }
    pair = dict(
        single,
        subject_2=source.extra_subjects[0].subject,
        ref_2="|".join(source.extra_subjects[0].ref_paths),
        ref_mask_2="|".join(source.extra_subjects[0].ref_mask_paths),
        out_mask_2=source.extra_subjects[0].out_mask_path,
    )
    results = {}
    for name, rows in (("alone", [single]), ("mixed", [single, pair])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        code, _, err = call(
            "eval", path, "--model", naflex_dir, *PATCHES, "--out-dir", tmp_path / name, "--quiet", "--bootstrap", "0"
        )
        assert code == 0, err
        results[name] = records(tmp_path / name)
    alone, mixed = results["alone"][0], results["mixed"][0]
    assert "subjects" not in alone and "cp_mean" not in alone  # single-subject rows keep their fields
    assert {k: v for k, v in mixed.items() if k != "fingerprint"} == {
        k: v for k, v in alone.items() if k != "fingerprint"
    }
    assert results["mixed"][1]["cp"] == pytest.approx(scored["rows"][0]["cp"], abs=1e-6)


@pytest.mark.parametrize(
    "image, message",
    [
        (
            "good/cat+dog/0_0.png",
            "1 combination folders are not in the combinations file: 'cat+dog': name each folder as its subjects "
            "joined with '+'",
        ),
        ("good/dog+cat/2_0.png", "images have a prompt index past their combination's prompts: 'good/dog+cat/2_0.png'"),
        (
            "good/dog+cat/first.png",
            "images do not follow the layout: 'good/dog+cat/first.png': expected <method>/<subject>+<subject>",
        ),
    ],
)
def test_generated_images_outside_the_layout_are_one_line(multi, tmp_path, image, message):
    from masc_core.errors import MascInputError

    outputs = tmp_path / "outputs"
    os.makedirs(outputs / os.path.dirname(image))
    _side_by_side(["dog_01", "cat_01"]).save(outputs / image)
    with pytest.raises(MascInputError) as raised:
        dreambench_multi.build(multi["dataset"], str(multi["combinations"]), str(outputs), str(tmp_path / "masks"))
    assert message in str(raised.value) and "\n" not in str(raised.value)
