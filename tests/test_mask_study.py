"""`eval --mask-sources`: the paper's segmentation-sensitivity study (its Tables 6 and 7) on real-layout fixtures.

Two fixtures: DreamBench++'s layout with two rater groups (agreement per source) and identity pairs of the
shared DreamBench photos (AUC per source). The sources are the tests' random CLIPSeg and SAM3 and the
manifests' own masks. What is checked:

- each source's alpha, rho and AUC equal the agreement and discrimination code (and the krippendorff and
  scikit-learn packages) computed directly on that source's column over the intersected keys;
- the intersection is exactly the keys valid under every source, and a source failing on a key drops it for all;
- SigLIP2 runs once per image whatever the number of sources (the sources reuse its encodings), MaSC's own
  columns are the bytes of a plain eval, and a source whose masks are the manifest's gives its scores exactly;
- resume, shards + merge give the single run's study; bad options are one line.
"""

from __future__ import annotations

import csv
import json
import os

import krippendorff
import numpy as np
import pytest
from PIL import Image
from scipy import stats
from sklearn.metrics import roc_auc_score

from benchmark_layouts import dreambench_plus
from conftest import call
from masc_core.evaluation import agreement
from masc_core.evaluation.mask_study import CHOICES, column, parse_sources

pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")

SHARED = "/work/shared/data/dreambench-mini"
SHARED_PHOTOS = os.environ.get("MASC_SHARED_PHOTOS", SHARED)
FAST = ["--device", "cpu", "--max-patches", "64", "--chunk-size", "4", "--bootstrap", "50", "--quiet"]
SOURCES = "sam3,clipseg,manifest"


def read_results(folder) -> list[dict]:
    with open(os.path.join(folder, "results.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def study_args(sam3, clipseg):
    return ["--mask-sources", SOURCES, "--sam3", sam3, "--clipseg", clipseg]


def valid(row: dict, source: str, aspect: str, minimum: float = 0.05) -> bool:
    """Written out again from the definition (not the module's code): mask shares and a defined score."""
    if row[column(source, aspect)] is None:
        return False
    if source == "manifest":
        return row["out_foreground"] >= minimum and all(f >= minimum for f in row["ref_foreground"])
    return row[f"out_fg_{source}"] >= minimum and row[f"ref_fg_{source}"] >= minimum


@pytest.fixture(scope="module")
def plus(tmp_path_factory, tiny_clipseg_dir, tiny_sam3_dir, naflex_dir):
    """DreamBench++'s layout, its manifest (masks by the tiny CLIPSeg), the study and a plain eval of it."""
    root = tmp_path_factory.mktemp("study-plus")
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
    code, out, err = call(
        "eval",
        manifest,
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        root / "study",
        *study_args(tiny_sam3_dir, tiny_clipseg_dir),
    )
    assert code == 0, err
    plain = call("eval", manifest, "--model", naflex_dir, *FAST, "--out-dir", root / "plain")
    assert plain[0] == 0, plain[2]
    return {"root": root, "manifest": manifest, "study": root / "study", "plain": root / "plain", "out": out}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, tiny_clipseg_dir, tiny_sam3_dir, naflex_dir):
    """Identity pairs of the shared photos (8 subjects x 3 views), masks by the tiny CLIPSeg, and the study."""
    if not os.path.isdir(SHARED_PHOTOS):
        pytest.skip(f"the shared photos are not at {SHARED_PHOTOS} (set MASC_SHARED_PHOTOS)")
    root = tmp_path_factory.mktemp("study-pairs")
    manifest = root / "pairs.csv"
    code, out, err = call(
        "manifest", "pairs", SHARED_PHOTOS, "-o", manifest, "--auto-masks", tiny_clipseg_dir, "--device", "cpu"
    )
    assert code == 0, err
    code, out, err = call(
        "eval",
        manifest,
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        root / "study",
        *study_args(tiny_sam3_dir, tiny_clipseg_dir),
    )
    assert code == 0, err
    return {"root": root, "manifest": manifest, "study": root / "study", "out": out}


# ---------------------------------------------------------------- the figures


def test_alpha_and_rho_per_source_equal_the_agreement_code_on_the_intersection(plus):
    rows = read_results(plus["study"])
    block = json.load(open(plus["study"] / "summary.json"))["mask_sources"]
    assert block["sources"] == ["sam3", "clipseg", "manifest"] and block["baseline"] == "sam3"
    for aspect in ("cp", "pf"):
        table = block["aspects"][aspect]
        keys = [r for r in rows if all(valid(r, s, aspect) for s in ("sam3", "clipseg", "manifest"))]
        assert table["keys"] == len(keys) > 5 and table["rows"] == len(rows)
        rated = [r for r in keys if r[f"human_{aspect}"] is not None]
        human = np.array([r[f"human_{aspect}"] for r in rated])
        first = None
        for source in ("sam3", "clipseg", "manifest"):
            entry = table["sources"][source]
            values = np.array([r[column(source, aspect)] for r in rated])
            mapped = agreement.fit_mapping(values, (0.0, 4.0), "minmax").apply(values)
            alpha = krippendorff.alpha(np.stack([human, mapped]), level_of_measurement="interval")
            rho = stats.spearmanr(values, human).statistic
            assert entry["n"] == len(keys) and entry["rated"] == len(rated)
            assert entry["krippendorff_alpha"] == pytest.approx(alpha, abs=1e-9), (aspect, source)
            assert entry["spearman"] == pytest.approx(rho, abs=1e-9), (aspect, source)
            assert entry["mean"] == pytest.approx(np.mean([r[column(source, aspect)] for r in keys]), abs=1e-12)
            first = first or entry
            assert entry["delta"]["krippendorff_alpha"] == pytest.approx(
                entry["krippendorff_alpha"] - first["krippendorff_alpha"]
            )
    assert "mask sources (deltas from sam3" in plus["out"] and "CP: " in plus["out"] and "PF: " in plus["out"]
    assert os.path.isfile(plus["study"] / "plot_mask_sources.png")


def test_identity_auc_per_source_equals_scikit_learn_on_the_intersection(pairs):
    rows = read_results(pairs["study"])
    table = json.load(open(pairs["study"] / "summary.json"))["mask_sources"]["aspects"]["cp"]
    keys = [r for r in rows if all(valid(r, s, "cp") for s in ("sam3", "clipseg", "manifest"))]
    assert table["keys"] == len(keys) and len({r["same_subject"] for r in keys}) == 2
    for source in ("sam3", "clipseg", "manifest"):
        expected = roc_auc_score([r["same_subject"] for r in keys], [r[column(source, "cp")] for r in keys])
        assert table["sources"][source]["auc"] == pytest.approx(expected, abs=1e-12), source
        assert table["sources"][source]["pairs"] == len(keys)
    assert table["sources"]["manifest"]["auc"] > 0.5  # random weights still carry identity on real photos


# ---------------------------------------------------------------- the intersection


def test_a_source_that_fails_on_a_key_drops_it_for_every_source(
    plus, naflex_dir, tiny_sam3_dir, tiny_clipseg_dir, tmp_path
):
    """Blank one row's own output mask: the manifest source fails there, and the key leaves every source's figures."""
    with open(plus["manifest"], newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    folder = os.path.dirname(plus["manifest"])
    victim = 4
    blank = os.path.join(folder, "masks", "blank.png")
    Image.fromarray(np.zeros((64, 64), np.uint8)).save(blank)
    table[victim]["out_mask"] = "masks/blank.png"
    edited = os.path.join(folder, "edited.csv")
    with open(edited, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    out_dir = tmp_path / "edited"
    code, out, err = call(
        "eval", edited, "--model", naflex_dir, *FAST, "--out-dir", out_dir, *study_args(tiny_sam3_dir, tiny_clipseg_dir)
    )
    assert code == 0, err
    rows = read_results(out_dir)
    before = json.load(open(plus["study"] / "summary.json"))["mask_sources"]["aspects"]
    after = json.load(open(out_dir / "summary.json"))["mask_sources"]["aspects"]
    for aspect in ("cp", "pf"):
        assert valid(rows[victim], "sam3", aspect) and valid(rows[victim], "clipseg", aspect)  # they masked it fine
        assert not valid(rows[victim], "manifest", aspect)
        was_valid = all(valid(read_results(plus["study"])[victim], s, aspect) for s in ("sam3", "clipseg", "manifest"))
        assert after[aspect]["keys"] == before[aspect]["keys"] - was_valid
        assert after[aspect]["dropped"]["manifest"] == before[aspect]["dropped"]["manifest"] + 1
        for source in ("sam3", "clipseg"):  # their own rows are unchanged: only the shared subset shrank
            assert after[aspect]["dropped"][source] == before[aspect]["dropped"][source]
            assert after[aspect]["sources"][source]["n"] == after[aspect]["keys"]
    original = read_results(plus["study"])
    for aspect in ("cp", "pf"):
        keys_after = {r["row"] for r in rows if all(valid(r, s, aspect) for s in ("sam3", "clipseg", "manifest"))}
        keys_before = {r["row"] for r in original if all(valid(r, s, aspect) for s in ("sam3", "clipseg", "manifest"))}
        assert keys_after == keys_before - {victim}


def test_a_higher_filter_shrinks_the_intersection_to_the_keys_every_source_keeps(
    plus, naflex_dir, tiny_sam3_dir, tiny_clipseg_dir, tmp_path
):
    def smallest_share(row):
        return min(
            row["out_foreground"],
            *row["ref_foreground"],
            *(row[f"{k}_fg_{s}"] for k in ("out", "ref") for s in ("sam3", "clipseg")),
        )

    # The median of each key's smallest mask share over the sources: about half the keys fail under some source.
    minimum = round(float(np.median([smallest_share(r) for r in read_results(plus["study"])])), 3)
    out_dir = tmp_path / "strict"
    code, out, err = call(
        "eval",
        plus["manifest"],
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        out_dir,
        "--min-foreground",
        str(minimum),
        *study_args(tiny_sam3_dir, tiny_clipseg_dir),
    )
    assert code == 0, err
    rows = read_results(out_dir)
    block = json.load(open(out_dir / "summary.json"))["mask_sources"]
    assert block["min_foreground"] == minimum
    for aspect in ("cp", "pf"):
        expected = [r for r in rows if all(valid(r, s, aspect, minimum) for s in ("sam3", "clipseg", "manifest"))]
        assert block["aspects"][aspect]["keys"] == len(expected)
        assert 0 < len(expected) < len(rows)  # some keys fail under some source, some pass under all


# ---------------------------------------------------------------- the cost


def test_siglip_runs_once_per_image_and_masc_columns_are_a_plain_evals(plus):
    study = json.load(open(plus["study"] / "timing.json"))["forwards"]
    plain = json.load(open(plus["plain"] / "timing.json"))["forwards"]
    assert study["siglip_images"] == plain["siglip_images"] and study["siglip_texts"] == plain["siglip_texts"]
    assert study["sam3_images"] == study["clipseg_images"] == plain["siglip_images"]  # one mask per image per source
    for here, there in zip(read_results(plus["study"]), read_results(plus["plain"])):
        for key in ("cp", "pf", "cp_per_reference", "encoded_prompt", "out_foreground", "ref_foreground"):
            assert here[key] == there[key], key


def test_a_source_with_the_manifests_masks_gives_the_manifests_scores(
    tiny_clipseg_dir, tiny_sam3_dir, naflex_dir, tmp_path
):
    """Masks written by `mask` with the same CLIPSeg and prompt: the clipseg source reproduces cp and pf exactly."""
    from conftest import photo_path

    photos = {"dog_00": "dog", "dog_01": "dog", "dog_02": "dog", "cat_00": "cat", "cat_01": "cat"}
    for photo, subject in photos.items():
        code, out, err = call(
            "mask",
            "--model",
            tiny_clipseg_dir,
            "--device",
            "cpu",
            "--image",
            photo_path(photo),
            "--subject",
            subject,
            "--out-dir",
            tmp_path / "masks",
        )
        assert code == 0, err
    manifest = tmp_path / "m.csv"
    rows = [
        ("dog_00", "dog_01", "a dog on the beach"),
        ("dog_00", "dog_02", "a dog in the snow"),
        ("cat_00", "cat_01", "a cat on a red rug"),
    ]
    with open(manifest, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ref", "ref_mask", "out", "out_mask", "prompt", "subject"])
        for ref, out_photo, prompt in rows:
            writer.writerow(
                [
                    photo_path(ref),
                    f"masks/{ref}_mask.png",
                    photo_path(out_photo),
                    f"masks/{out_photo}_mask.png",
                    prompt,
                    photos[ref],
                ]
            )
    code, out, err = call(
        "eval",
        manifest,
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        tmp_path / "r",
        "--mask-sources",
        "clipseg,manifest",
        "--clipseg",
        tiny_clipseg_dir,
    )
    assert code == 0, err
    for row in read_results(tmp_path / "r"):
        assert row["cp_clipseg"] == row["cp"] and row["pf_clipseg"] == row["pf"]
        assert row["out_fg_clipseg"] == row["out_foreground"] and row["ref_fg_clipseg"] == row["ref_foreground"][0]
    table = json.load(open(tmp_path / "r" / "summary.json"))["mask_sources"]["aspects"]["cp"]
    assert table["sources"]["manifest"]["delta"]["mean"] == 0.0


# ---------------------------------------------------------------- resume, shards


def test_resume_and_shards_give_the_single_runs_study(plus, naflex_dir, tiny_sam3_dir, tiny_clipseg_dir, tmp_path):
    args = ["eval", plus["manifest"], "--model", naflex_dir, *FAST, *study_args(tiny_sam3_dir, tiny_clipseg_dir)]
    code, out, err = call(*args, "--out-dir", plus["study"])  # again: nothing left to score
    assert code == 0 and out == plus["out"], err
    run = json.load(open(plus["study"] / "timing.json"))
    assert run["rows_scored"] == 0 and not any(run["forwards"].values())
    for index in range(2):
        code, _, err = call(*args, "--out-dir", tmp_path / "sharded", "--shard", f"{index}/2")
        assert code == 0, err
    code, out, err = call("merge", tmp_path / "sharded", "--quiet")
    assert code == 0, err
    single = json.load(open(plus["study"] / "summary.json"))
    merged = json.load(open(tmp_path / "sharded" / "summary.json"))
    assert merged["mask_sources"] == single["mask_sources"]


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    "given,message",
    [
        ("clipseg", "--mask-sources compares sources: give two or more"),
        ("clipseg,foo", "--mask-sources: 'foo' is not a mask source: use clipseg, sam3, manifest"),
        ("sam3,sam3", "--mask-sources names a source twice"),
    ],
)
def test_bad_sources_are_one_line(given, message):
    with pytest.raises(Exception) as error:
        parse_sources(given)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert parse_sources(" SAM3, manifest ") == ("sam3", "manifest") and set(CHOICES) == {"clipseg", "sam3", "manifest"}


def test_a_source_folder_that_is_not_one_is_refused_before_scoring(plus, naflex_dir, tiny_clipseg_dir, tmp_path):
    code, out, err = call(
        "eval",
        plus["manifest"],
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        tmp_path / "x",
        "--mask-sources",
        "sam3,manifest",
        "--sam3",
        tiny_clipseg_dir,
    )
    assert code == 2 and err.count("\n") == 1 and "holds a 'clipseg' model, not SAM3" in err, err
    assert not (tmp_path / "x").exists()
