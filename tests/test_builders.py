"""`manifest dreambench | dreambench-plus | pairs`: manifests from benchmark folders, masks made once, scored end to
end."""

from __future__ import annotations

import csv
import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image, ImageOps
from sklearn.metrics import roc_auc_score

from benchmark_layouts import (
    COLLECTIONS,
    METHOD_DIRS,
    SAMPLED_PROMPTS,
    caption_prompts,
    dreambench_dataset,
    dreambench_plus,
    generated_outputs,
    raw_ratings,
)
from masc_core.evaluation.builders import dreambench as dreambench_builder
from masc_core.evaluation.manifest import read_manifest
from masc_core.io.images import load_image_file, load_mask_file
from masc_core.models.clipseg import ClipSegSegmenter
from test_evaluate import FAST, call, records

EVAL = FAST + ["--chunk-size", "8", "--bootstrap", "50", "--baselines", "global", "--quiet"]


def table(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def one_line_error(code, out, err, expected):
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert expected in err, err


@pytest.fixture(scope="module")
def dreambench(tmp_path_factory, tiny_clipseg_dir):
    """The DreamBench layout, generated outputs, and a manifest built with --auto-masks."""
    root = tmp_path_factory.mktemp("dreambench")
    dataset = dreambench_dataset(str(root / "dataset"))
    generated_outputs(str(root / "outputs"))
    manifest = root / "work" / "manifest.csv"
    code, out, err = call(
        "manifest",
        "dreambench",
        dataset,
        root / "outputs",
        "-o",
        manifest,
        "--auto-masks",
        tiny_clipseg_dir,
        "--device",
        "cpu",
    )
    assert code == 0, err
    return {"root": root, "dataset": dataset, "manifest": manifest, "out": out, "err": err}


# ---------------------------------------------------------------- DreamBench


def test_dreambench_prompts_and_classes_are_parsed():
    with open(os.path.join(os.path.dirname(__file__), "data", "dreambench", "prompts_and_classes.txt")) as handle:
        table_ = dreambench_builder.parse_prompts_and_classes(handle.read(), "prompts_and_classes.txt")
    assert (
        len(table_.classes) == 30
        and table_.classes["bear_plushie"] == "stuffed animal"
        and "dog4" not in table_.classes
    )
    assert len(table_.object_prompts) == len(table_.live_prompts) == 25
    assert (
        table_.object_prompts[:10] == table_.live_prompts[:10]
        and table_.object_prompts[20:] == table_.live_prompts[20:]
    )
    assert table_.templates("dog")[11] == "a {0} {1} wearing a santa hat"
    assert table_.templates("backpack_dog")[11] == "a {0} {1} with a tree and autumn leaves in the background"
    assert dreambench_builder.render_prompt(table_.object_prompts[24], "sks", "teapot") == "a cube shaped sks teapot"
    assert (
        dreambench_builder.render_prompt(table_.object_prompts[0], "", "stuffed animal")
        == "a stuffed animal in the jungle"
    )


def test_dreambench_manifest_rows(dreambench):
    rows = table(dreambench["manifest"])
    assert len(rows) == 2 * 3 * 3 * 2
    assert list(rows[0])[:9] == ["ref", "ref_mask", "out", "out_mask", "prompt", "subject", "method", "seed", "id"]
    dog = next(r for r in rows if r["method"] == "dreambooth" and r["id"] == "dog-11" and r["seed"] == "1")
    dataset = dreambench["dataset"]
    assert dog["ref"] == "|".join(os.path.join(dataset, "dog", f"{v:02d}.jpg") for v in range(3))  # outside: absolute
    assert dog["ref_mask"] == "|".join(
        f"masks/references/dog/{v:02d}.png" for v in range(3)
    )  # beside the manifest: relative
    assert dog["out"] == os.path.join(str(dreambench["root"]), "outputs", "dreambooth", "dog", "11_1.png")
    assert dog["out_mask"] == "masks/outputs/dreambooth/dog/11_1.png"
    assert dog["prompt"] == "a sks dog wearing a santa hat" and dog["subject"] == "sks dog, dog"  # live: cat/dog list
    teapot = next(r for r in rows if r["id"] == "teapot-11")
    assert teapot["prompt"] == "a sks teapot with a tree and autumn leaves in the background"
    assert sorted({r["method"] for r in rows}) == ["dreambooth", "textual_inversion"]
    # Sorted by method, subject, prompt index, seed.
    keys = [(r["method"], r["id"].split("-")[0], int(r["id"].split("-")[1]), int(r["seed"])) for r in rows]
    assert keys == sorted(keys)
    manifest = read_manifest(dreambench["manifest"])  # every file is there
    assert len(manifest.rows) == len(rows)
    assert "wrote " in dreambench["out"] and "36 rows: 2 methods, 3 subjects, 2 seeds" in dreambench["out"]
    assert "masks in '" in dreambench["out"] and ": 42 made with CLIPSeg, 0 reused" in dreambench["out"]
    assert "note: 24 subjects of prompts_and_classes.txt have no images here (skipped)" in dreambench["err"]


def test_dreambench_masks_are_clipseg_masks_of_the_class_word(dreambench, tiny_clipseg_dir):
    folder = os.path.dirname(dreambench["manifest"])
    made = json.load(open(os.path.join(folder, "masks", "masks.json")))
    assert made["threshold"] == 0.4 and made["dilation"] == 0 and made["segmenter"] == tiny_clipseg_dir
    segmenter = ClipSegSegmenter.load(tiny_clipseg_dir, device="cpu")
    for image, mask, word in (
        (os.path.join(dreambench["dataset"], "dog", "01.jpg"), "masks/references/dog/01.png", "dog"),
        (
            os.path.join(str(dreambench["root"]), "outputs", "textual_inversion", "teapot", "24_0.png"),
            "masks/outputs/textual_inversion/teapot/24_0.png",
            "teapot",
        ),
    ):
        expected = segmenter.masks([load_image_file(image)], word)[0].numpy() * 255
        assert np.array_equal(load_mask_file(os.path.join(folder, mask)), expected.astype(np.uint8))


def test_dreambench_masks_are_reused_and_the_segmenter_not_loaded(dreambench, tiny_clipseg_dir, monkeypatch):
    masks = os.path.join(os.path.dirname(dreambench["manifest"]), "masks")
    stamps = {
        os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime_ns for d, _, names in os.walk(masks) for n in names
    }

    def no_model(*args, **kwargs):
        raise AssertionError("CLIPSeg loaded although every mask exists")

    monkeypatch.setattr(ClipSegSegmenter, "load", no_model)
    before = open(dreambench["manifest"], "rb").read()
    code, out, err = call(
        "manifest",
        "dreambench",
        dreambench["dataset"],
        dreambench["root"] / "outputs",
        "-o",
        dreambench["manifest"],
        "--auto-masks",
        tiny_clipseg_dir,
    )
    assert code == 0, err
    assert ": 0 made with CLIPSeg, 42 reused" in out
    assert open(dreambench["manifest"], "rb").read() == before
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps
    # Without --auto-masks the existing masks are enough.
    code, out, err = call(
        "manifest", "dreambench", dreambench["dataset"], dreambench["root"] / "outputs", "-o", dreambench["manifest"]
    )
    assert code == 0 and ": 0 made, 42 reused" in out, err
    # Another threshold would mix two segmentations in one folder: refused.
    code, out, err = call(
        "manifest",
        "dreambench",
        dreambench["dataset"],
        dreambench["root"] / "outputs",
        "-o",
        dreambench["manifest"],
        "--auto-masks",
        tiny_clipseg_dir,
        "--mask-threshold",
        "0.6",
    )
    one_line_error(code, out, err, "were made by '")
    assert "at threshold 0.4 (dilation 0), not by" in err and "give another --masks-dir" in err


def test_dreambench_scores_end_to_end(dreambench, naflex_dir, tmp_path):
    out_dir = tmp_path / "results"
    code, out, err = call("eval", dreambench["manifest"], "--model", naflex_dir, *EVAL, "--out-dir", out_dir)
    assert code == 0, err
    rows = records(out_dir)
    assert len(rows) == 36 and all(r["cp"] is not None for r in rows)
    assert {r["id"] for r in rows} == {f"{s}-{p}" for s in ("dog", "cat", "teapot") for p in (0, 11, 24)}
    assert next(r for r in rows if r["id"] == "dog-0")["encoded_prompt"] == "in the jungle"  # "a sks dog" stripped
    summary = json.load(open(out_dir / "summary.json"))
    assert list(summary["methods"]) == ["dreambooth", "textual_inversion"]
    assert summary["methods"]["dreambooth"]["seeds"] == ["0", "1"]
    assert "dreambooth" in out and "textual_inversion" in out


def test_dreambench_missing_masks_are_listed_and_nothing_is_written(dreambench, tmp_path):
    manifest = tmp_path / "m.csv"
    code, out, err = call(
        "manifest", "dreambench", dreambench["dataset"], dreambench["root"] / "outputs", "-o", manifest
    )
    one_line_error(code, out, err, f"masks folder '{tmp_path / 'masks'}': 42 masks are missing: '")
    assert "' and 39 more: pass --auto-masks SEGMENTER" in err
    assert not manifest.exists() and not (tmp_path / "masks").exists()


@pytest.mark.parametrize(
    "case,expected",
    [
        ("no_prompts_file", "has no prompts_and_classes.txt: expected DreamBench's layout: one folder per subject"),
        (
            "misplaced",
            "2 images do not follow the layout: 'dreambooth/loose.png', 'dreambooth/dog/best.png': expected "
            "<method>/<subject>/<prompt index>_<seed>.png",
        ),
        ("unknown_subject", "1 subject folders have no reference images in the DreamBench folder: 'wolf_plushie'"),
        ("prompt_index", "1 images have a prompt index above 24: 'dreambooth/dog/25_0.png'"),
        ("twice", "1 images are there twice (other extensions): 'dreambooth/dog/0_0'"),
        ("empty_outputs", "holds no generated images: expected <method>/<subject>/<prompt index>_<seed>.png"),
        ("output_is_folder", "is a folder: give the manifest's file name (.csv or .jsonl)"),
        ("not_prompts_file", "prompts_and_classes.txt' has no 'subject_name,class' table"),
    ],
)
def test_dreambench_bad_layouts_are_one_line(case, expected, tmp_path):
    dataset = dreambench_dataset(str(tmp_path / "dataset"))
    outputs = tmp_path / "outputs"
    os.makedirs(outputs / "dreambooth" / "dog")

    def image(path):
        Image.new("RGB", (8, 8)).save(path)

    image(outputs / "dreambooth" / "dog" / "0_0.png")
    manifest = tmp_path / "m.csv"
    if case == "no_prompts_file":
        os.remove(os.path.join(dataset, "prompts_and_classes.txt"))
    elif case == "not_prompts_file":
        open(os.path.join(dataset, "prompts_and_classes.txt"), "w").write("subject,class\ndog,dog\n")
    elif case == "misplaced":
        image(outputs / "dreambooth" / "dog" / "best.png")
        image(outputs / "dreambooth" / "loose.png")
    elif case == "unknown_subject":
        os.makedirs(outputs / "dreambooth" / "wolf_plushie")
        image(outputs / "dreambooth" / "wolf_plushie" / "0_0.png")
    elif case == "prompt_index":
        image(outputs / "dreambooth" / "dog" / "25_0.png")
    elif case == "twice":
        image(outputs / "dreambooth" / "dog" / "0_0.jpg")
    elif case == "empty_outputs":
        os.remove(outputs / "dreambooth" / "dog" / "0_0.png")
    elif case == "output_is_folder":
        manifest = tmp_path
    code, out, err = call("manifest", "dreambench", dataset, outputs, "-o", manifest)
    one_line_error(code, out, err, expected)
    assert not (tmp_path / "m.csv").exists()


# ---------------------------------------------------------------- DreamBench++


@pytest.fixture(scope="module")
def plus(tmp_path_factory, tiny_clipseg_dir):
    root = tmp_path_factory.mktemp("dreambench_plus")
    layout = dreambench_plus(str(root))
    manifest = root / "manifest.csv"
    code, out, err = call(
        "manifest",
        "dreambench-plus",
        layout["data"],
        layout["samples"],
        "--ratings",
        layout["ratings"],
        "-o",
        manifest,
        "--auto-masks",
        tiny_clipseg_dir,
        "--device",
        "cpu",
    )
    assert code == 0, err
    return dict(layout, root=root, manifest=manifest, out=out, err=err)


def test_dreambench_plus_rows_prompts_and_method_names(plus):
    rows = table(plus["manifest"])
    assert len(rows) == len(METHOD_DIRS) * len(COLLECTIONS) * len(SAMPLED_PROMPTS)
    assert sorted({r["method"] for r in rows}) == sorted(METHOD_DIRS)  # the IP-Adapter dir's other spelling mapped
    row = next(r for r in rows if r["id"] == "style_10_ukiyo-e-3" and r["method"] == "dreambooth_sd")
    assert row["subject"] == "ukiyo-e" and row["seed"] == "0"
    assert row["prompt"] == "a ukiyo-e as generated, prompt 3"  # from text/<cid>/3_0.txt
    assert row["ref"] == "data/images/style/10.jpg" and row["ref_mask"] == "masks/references/style_10_ukiyo-e.png"
    assert row["out"] == f"samples/{METHOD_DIRS['dreambooth_sd']}/tgt_image/style_10_ukiyo-e/3_0.jpg"
    assert row["out_mask"] == f"masks/outputs/{METHOD_DIRS['dreambooth_sd']}/style_10_ukiyo-e/3_0.png"
    kitten = next(r for r in rows if r["id"] == "live_subject_animal_00_kitten-8")
    assert kitten["prompt"] == caption_prompts("kitten")[8]  # no text file: the caption's line
    assert "18 rows: 2 methods, 3 subjects, ratings of 2 rater groups (group1, group2)" in plus["out"]


def test_dreambench_plus_ratings_per_rater_group(plus):
    rows = table(plus["manifest"])
    expected = plus["expected"]
    for row in rows:
        for group in ("group1", "group2"):
            for aspect in ("cp", "pf"):
                value = expected.get((group, row["method"], aspect, row["id"]))
                assert row[f"human_{aspect}.{group}"] == ("" if value is None else str(value)), (
                    row["id"],
                    group,
                    aspect,
                )
    teapot = next(r for r in rows if r["id"] == "object_00_teapot-3" and r["method"] == "dreambooth_sd")
    assert teapot["human_cp.group2"] == "" and teapot["human_cp.group1"] != ""  # group2 did not rate it
    kitten = next(
        r for r in rows if r["id"] == "live_subject_animal_00_kitten-0" and r["method"] == "ip_adapter_plus_vit_h_sdxl"
    )
    assert kitten["human_cp.group1"] == kitten["human_cp.group2"] == ""  # null in the file
    manifest = read_manifest(plus["manifest"])
    assert manifest.raters == {"cp": ["group1", "group2"], "pf": ["group1", "group2"]}
    # Every prompt is rated, three were sampled: the other six per subject and method are said.
    assert "note: 36 rated keys have no generated image here (left out)" in plus["err"]


def test_dreambench_plus_scores_end_to_end_with_agreement_per_group(plus, naflex_dir, tmp_path):
    out_dir = tmp_path / "results"
    code, out, err = call(
        "eval", plus["manifest"], "--model", naflex_dir, *EVAL, "--out-dir", out_dir, "--min-foreground", "0"
    )
    assert code == 0, err
    summary = json.load(open(out_dir / "summary.json"))
    cp = summary["agreement"]["cp"]
    assert set(cp["by_rater"]) == {"group1", "group2"} and cp["inter_rater"]["raters"] == ["group1", "group2"]
    assert cp["rated"] == 17  # 18 rows, one null from both groups
    assert "agreement with human CP ratings" in out


def test_dreambench_plus_raw_ratings(plus, tmp_path):
    folder, given = raw_ratings(str(tmp_path))
    manifest = tmp_path / "raw.csv"
    code, out, err = call(
        "manifest",
        "dreambench-plus",
        plus["data"],
        plus["samples"],
        "--ratings",
        folder,
        "-o",
        manifest,
        "--masks-dir",
        plus["root"] / "masks",
    )
    assert code == 0, err
    rows = {(r["method"], r["id"]): r for r in table(manifest)}
    teapot = rows[("dreambooth_sd", "object_00_teapot-0")]
    assert (teapot["human_cp.group1"], teapot["human_pf.group1"]) == ("4", "0")  # the later file wins
    assert (teapot["human_cp.group2"], teapot["human_pf.group2"]) == tuple(
        str(v) for v in given["first"]["object_00_teapot-0"]
    )
    assert (
        rows[("ip_adapter_plus_vit_h_sdxl", "object_00_teapot-0")]["human_cp.group1"] == ""
    )  # raw files for dreambooth_sd only
    assert "note: 9 rows of 18 have no human rating" in err


@pytest.mark.parametrize(
    "case,expected",
    [
        ("no_images", "has no images/ and captions/: expected DreamBench++'s data folder"),
        (
            "no_samples",
            "has no <method dir>/tgt_image/: expected <method dir>/tgt_image/<collection id>/<prompt index>_<image "
            "index>.jpg",
        ),
        ("bad_rating", "key 'object_00_teapot-1' has 'good', not a number or null"),
        ("bad_key", "key 'object_00_teapot' is not '<collection id>-<prompt index>'"),
        ("same_method", "are both method 'dreambooth_sd': tell them apart with --method NAME="),
        ("unknown_collection", "1 collection ids are not in the data folder: 'object_99_kettle'"),
        ("no_ratings", "holds no rating files: expected DreamBench++'s data_human_rating folder"),
    ],
)
def test_dreambench_plus_bad_input_is_one_line(case, expected, plus, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(plus["data"], root / "data")
    shutil.copytree(plus["samples"], root / "samples")
    shutil.copytree(plus["ratings"], root / "ratings")
    data, samples, ratings = root / "data", root / "samples", root / "ratings"
    group1 = ratings / "merged_data" / "group1"
    if case == "no_images":
        shutil.rmtree(data / "captions")
    elif case == "no_samples":
        samples = root / "data"
    elif case == "bad_rating":
        content = json.load(open(group1 / "dreambooth_sd-cp.json"))
        json.dump(dict(content, **{"object_00_teapot-1": "good"}), open(group1 / "dreambooth_sd-cp.json", "w"))
    elif case == "bad_key":
        json.dump({"object_00_teapot": 3}, open(group1 / "dreambooth_sd-cp.json", "w"))
    elif case == "same_method":
        shutil.copytree(
            samples / METHOD_DIRS["dreambooth_sd"], samples / "dreambooth_sd_gs5_step50_seed7_torch_float16"
        )
    elif case == "unknown_collection":
        os.makedirs(samples / METHOD_DIRS["dreambooth_sd"] / "tgt_image" / "object_99_kettle")
        shutil.copy(
            plus["data"] + "/images/object/00.jpg",
            samples / METHOD_DIRS["dreambooth_sd"] / "tgt_image" / "object_99_kettle" / "0_0.jpg",
        )
    elif case == "no_ratings":
        shutil.rmtree(ratings)
        os.makedirs(ratings / "empty")
    code, out, err = call(
        "manifest",
        "dreambench-plus",
        data,
        samples,
        "--ratings",
        ratings,
        "-o",
        tmp_path / "m.csv",
        "--masks-dir",
        plus["root"] / "masks",
    )
    one_line_error(code, out, err, expected)
    assert not (tmp_path / "m.csv").exists()


# ---------------------------------------------------------------- identity pairs


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, tiny_clipseg_dir):
    root = tmp_path_factory.mktemp("pairs")
    photos = dreambench_dataset(str(root / "photos"))
    manifest = root / "pairs.jsonl"
    code, out, err = call(
        "manifest", "pairs", photos, "-o", manifest, "--auto-masks", tiny_clipseg_dir, "--device", "cpu"
    )
    assert code == 0, err
    return {"root": root, "photos": photos, "manifest": manifest, "out": out}


def test_pairs_are_every_same_pair_and_a_seeded_cross_sample(pairs):
    rows = [json.loads(line) for line in open(pairs["manifest"])]
    subject = lambda path: os.path.basename(os.path.dirname(path))  # noqa: E731
    same = [r for r in rows if r["same_subject"] == 1]
    cross = [r for r in rows if r["same_subject"] == 0]
    # cat: 2 views -> 1 pair, dog: 3 views -> 3 pairs; the others have one photo.
    assert sorted((subject(r["ref"][0]), os.path.basename(r["ref"][0]), os.path.basename(r["out"])) for r in same) == [
        ("cat", "00.jpg", "01.jpg"),
        ("dog", "00.jpg", "01.jpg"),
        ("dog", "00.jpg", "02.jpg"),
        ("dog", "01.jpg", "02.jpg"),
    ]
    assert len(cross) == len(same) and all(subject(r["ref"][0]) < subject(r["out"]) for r in cross)
    assert len({(r["ref"][0], r["out"]) for r in cross}) == len(cross)
    assert all(r["prompt"] == "" and r["subject"] == subject(r["ref"][0]) for r in rows)
    assert rows[0]["ref_mask"] == ["masks/cat/00.png"] and rows[0]["id"] == "cat/00.jpg~cat/01.jpg"
    assert "8 pairs over 6 subjects: 4 same-subject, 4 cross-subject (seed 0)" in pairs["out"]
    assert read_manifest(pairs["manifest"]).has_identity_labels


def test_pairs_sample_depends_on_the_seed_only(pairs, tiny_clipseg_dir, tmp_path):
    def cross(seed, name):
        code, _, err = call(
            "manifest",
            "pairs",
            pairs["photos"],
            "-o",
            tmp_path / name,
            "--seed",
            seed,
            "--cross-pairs",
            10,
            "--auto-masks",
            tiny_clipseg_dir,
            "--device",
            "cpu",
        )
        assert code == 0, err
        return [line for line in open(tmp_path / name) if line.rstrip().endswith(",0")]

    first, again, other = cross(0, "a.csv"), cross(0, "b.csv"), cross(1, "c.csv")
    assert first == again and first != other and len(first) == len(other) == 10
    # The sample is numpy's choice over the pool, in pool order (subject pairs a < b, then photo x photo).
    pool = [
        (a, pa, b, pb)
        for a, b in [(x, y) for x in sorted(PHOTO_COUNTS) for y in sorted(PHOTO_COUNTS) if x < y]
        for pa in range(PHOTO_COUNTS[a])
        for pb in range(PHOTO_COUNTS[b])
    ]
    picked = sorted(np.random.default_rng(1).choice(len(pool), 10, replace=False))
    assert [line.split(",")[6] for line in other] == [
        f"{a}/{pa:02d}.jpg~{b}/{pb:02d}.jpg" for a, pa, b, pb in (pool[i] for i in picked)
    ]


PHOTO_COUNTS = {"backpack": 1, "cat": 2, "dog": 3, "duck_toy": 1, "red_cartoon": 1, "teapot": 1}


def test_pairs_bad_input_is_one_line(pairs, tmp_path):
    code, out, err = call("manifest", "pairs", pairs["photos"], "-o", tmp_path / "m.csv", "--cross-pairs", 1000)
    one_line_error(code, out, err, "--cross-pairs 1000: only 32 cross-subject pairs exist here; ask for at most 32")
    os.makedirs(tmp_path / "one" / "dog")
    code, out, err = call("manifest", "pairs", tmp_path / "one", "-o", tmp_path / "m.csv")
    one_line_error(code, out, err, "has 0 subject folder(s) with photos: cross-subject pairs need two or more")
    code, out, err = call("manifest", "pairs", tmp_path / "nowhere", "-o", tmp_path / "m.csv")
    one_line_error(code, out, err, "photos folder '")
    assert not (tmp_path / "m.csv").exists()


def test_pairs_score_end_to_end_with_the_auc(pairs, naflex_dir, tmp_path):
    out_dir = tmp_path / "results"
    code, out, err = call(
        "eval", pairs["manifest"], "--model", naflex_dir, *EVAL, "--out-dir", out_dir, "--min-foreground", "0.005"
    )
    assert code == 0, err
    rows = records(out_dir)
    block = json.load(open(out_dir / "summary.json"))["identity"]
    units = [r for r in rows if not r["filtered"] and r["cp"] is not None and r["global_cp"] is not None]
    assert block["n"] == len(units) and block["labelled"] == 8
    for name in ("cp", "global_cp"):
        expected = roc_auc_score([r["same_subject"] for r in units], [r[name] for r in units])
        assert block["metrics"][name]["auc"] == pytest.approx(expected, abs=1e-12)
    assert all(isinstance(r["same_subject"], bool) for r in rows)
    assert "identity discrimination (n=" in out and "cp" in out
    assert table(out_dir / "results.csv")[0]["same_subject"] in ("true", "false")


# ---------------------------------------------------------------- a real DreamBench folder (opt-in)

REAL_DREAMBENCH = os.environ.get("MASC_DREAMBENCH_DIR")


@pytest.mark.skipif(
    not REAL_DREAMBENCH,
    reason="set MASC_DREAMBENCH_DIR to a DreamBench folder (e.g. dreambench-mini) to build a manifest from it",
)
def test_real_dreambench_folder_scores_end_to_end(tiny_clipseg_dir, naflex_dir, tmp_path):
    """The real folder's layout and prompts file, outputs made here from its own photos (crops and flips)."""
    dataset = REAL_DREAMBENCH
    subjects = sorted(d for d in os.listdir(dataset) if os.path.isdir(os.path.join(dataset, d)))
    outputs = tmp_path / "outputs"
    for k, subject in enumerate(subjects):
        views = sorted(os.listdir(os.path.join(dataset, subject)))
        os.makedirs(outputs / "method_a" / subject)
        for prompt in (0, 20):
            image = Image.open(os.path.join(dataset, subject, views[-1])).convert("RGB")
            (ImageOps.mirror(image) if prompt else image).crop((10, 10, image.width - 10, image.height - 10)).save(
                outputs / "method_a" / subject / f"{prompt}_{k % 2}.png"
            )
    manifest = tmp_path / "manifest.csv"
    code, out, err = call(
        "manifest", "dreambench", dataset, outputs, "-o", manifest, "--auto-masks", tiny_clipseg_dir, "--device", "cpu"
    )
    assert code == 0, err
    assert f"{2 * len(subjects)} rows: 1 method, {len(subjects)} subjects" in out
    code, out, err = call(
        "eval", manifest, "--model", naflex_dir, *EVAL, "--out-dir", tmp_path / "results", "--min-foreground", "0"
    )
    assert code == 0, err
    rows = records(tmp_path / "results")
    assert len(rows) == 2 * len(subjects) and all(r["cp"] is not None for r in rows)
