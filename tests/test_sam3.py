"""SAM3 masks: transformers parity, how instances are merged, loading by folder, the CLI and the manifest builders.

A tiny random-weight SAM3 (transformers ``Sam3Model``, facebook/sam3's layout) is built by
``masc_core.testing.build_sam3_checkpoint`` and loaded through the real loading code; its masks are meaningless
but depend on the image and the prompt. The conventions shared with CLIPSeg (shapes, values, thresholds, names,
batching, bad inputs) are in tests/test_segmentation.py, run on both families.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import ROOT, call, load_photo
from masc_core import ClipSegSegmenter, MascInputError, MascModelError, Sam3Segmenter, load_segmenter
from masc_core.models.sam3 import merge_instances
from masc_core.models.segmenter_folders import segmenter_kind

transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:  # pragma: no cover - the main suite runs transformers 5
    pytest.skip(
        "SAM3 needs transformers 5 (the 4.57 line is checked in test_sam3_needs_transformers_5)",
        allow_module_level=True,
    )

ALT_PYTHON = os.environ.get("MASC_ALT_PYTHON")
PHOTOS = ("dog_00", "cat_00", "teapot_00")


@pytest.fixture(scope="module")
def sam3(tiny_sam3_dir) -> Sam3Segmenter:
    return Sam3Segmenter.load(tiny_sam3_dir, device="cpu")


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    return {name: load_photo(name) for name in PHOTOS}


def one_line(error) -> str:
    message = str(error.value)
    assert "\n" not in message and message
    return message


# ---------------------------------------------------------------------- parity with transformers


@pytest.mark.parametrize("prompt", ["dog", "a red teapot"])
def test_masks_equal_transformers_processor_and_instance_post_processing(sam3, tiny_sam3_dir, photos, prompt):
    """Sam3Processor + Sam3Model + post_process_instance_segmentation, instances unioned: the same masks."""
    processor = transformers.Sam3Processor.from_pretrained(tiny_sam3_dir)
    model = transformers.Sam3Model.from_pretrained(tiny_sam3_dir).eval()
    for name, image in photos.items():
        inputs = processor(images=[Image.fromarray(image)], text=prompt, return_tensors="pt")
        with torch.no_grad():
            output = model(**inputs)
        result = processor.post_process_instance_segmentation(
            output, threshold=0.5, mask_threshold=0.5, target_sizes=[image.shape[:2]]
        )[0]
        # transformers keeps scores > threshold, MaSC >= threshold: equal unless a score is exactly 0.5.
        assert len(result["masks"]) > 0, name  # the test model finds instances
        expected = result["masks"].amax(dim=0).float()
        ours = sam3.masks(image, prompt)[0]
        assert torch.equal(ours, expected), (name, float((ours != expected).float().mean()))


def test_pixels_and_token_ids_equal_transformers(sam3, tiny_sam3_dir, photos):
    from masc_core.models.preprocess import prepare_image

    processor = transformers.Sam3Processor.from_pretrained(tiny_sam3_dir)
    for image in photos.values():
        expected = processor(images=[Image.fromarray(image)], return_tensors="pt")["pixel_values"][0]
        torch.testing.assert_close(prepare_image(image, sam3.spec).pixels, expected, atol=1e-6, rtol=0)
    for text in ("dog", "sks dog", "a duck toy floating on top of water"):
        tokens = processor(text=text, return_tensors="pt")
        ids, attention = sam3.tokenizer([text])
        assert torch.equal(ids, tokens["input_ids"]) and torch.equal(attention, tokens["attention_mask"]), text


def test_vision_once_per_image_text_once_per_name(sam3, photos):
    counting = Sam3Segmenter(sam3.model, sam3.info, sam3.spec, sam3.tokenizer, batch_size=2)
    counting.masks(list(photos.values()), "sks dog, dog")
    assert counting.forward_counts == {"images": 3, "texts": 2, "pairs": 6}


# ---------------------------------------------------------------------- instances


def test_instances_at_or_above_the_score_are_merged_and_none_gives_an_empty_mask():
    masks = torch.zeros(3, 4, 4)
    masks[0, :2, :2] = 0.9  # scores 0.7: kept
    masks[1, 2:, 2:] = 0.8  # scores 0.5: kept (at the threshold)
    masks[2] = 1.0  # scores 0.2: dropped
    merged = merge_instances(torch.tensor([0.7, 0.5, 0.2]), masks, 0.5, (8, 8))
    assert merged.shape == (8, 8)
    assert float(merged[0, 0]) == pytest.approx(0.9) and float(merged[7, 7]) == pytest.approx(0.8)
    assert float(merged[0, 7]) == 0.0  # the dropped instance covered it
    assert torch.equal(merge_instances(torch.tensor([0.1, 0.2]), masks[:2], 0.5, (5, 6)), torch.zeros(5, 6))


def test_the_score_threshold_decides_which_instances_count(tiny_sam3_dir, photos):
    image = photos["dog_00"]
    covered = []
    for threshold in (0.0, 0.5, 0.9, 1.0):
        segmenter = Sam3Segmenter.load(tiny_sam3_dir, device="cpu", score_threshold=threshold)
        covered.append(float(segmenter.masks(image, "dog")[0].mean()))
    assert covered == sorted(covered, reverse=True) and covered[0] > covered[1] > 0
    assert covered[-1] == 0.0  # no instance scores 1: an empty mask, which the 5% filter drops


def test_bad_score_threshold_is_one_line(tiny_sam3_dir):
    for value in (1.5, -0.1, float("nan"), "0.5"):
        with pytest.raises(MascInputError) as error:
            Sam3Segmenter.load(tiny_sam3_dir, device="cpu", score_threshold=value)
        assert "score_threshold" in one_line(error)


# ---------------------------------------------------------------------- loading


def test_load_segmenter_reads_the_family_from_config(tiny_sam3_dir, tiny_clipseg_dir, naflex_dir):
    assert segmenter_kind(tiny_sam3_dir) == "sam3" and segmenter_kind(tiny_clipseg_dir) == "clipseg"
    assert isinstance(load_segmenter(tiny_sam3_dir, device="cpu"), Sam3Segmenter)
    assert isinstance(load_segmenter(tiny_clipseg_dir, device="cpu", score_threshold=0.3), ClipSegSegmenter)
    with pytest.raises(MascModelError) as error:
        load_segmenter(naflex_dir)
    assert "holds a 'siglip2' model, not CLIPSeg or SAM3" in one_line(error) or "not CLIPSeg or SAM3" in one_line(error)
    with pytest.raises(MascModelError) as error:
        Sam3Segmenter.load(tiny_clipseg_dir)
    assert "holds a 'clipseg' model, not SAM3" in one_line(error)


def test_describe_and_a_video_checkpoint_config(sam3, tiny_sam3_dir, tmp_path, photos):
    assert sam3.describe() == {
        "model": tiny_sam3_dir,
        "kind": "sam3",
        "image_size": [224, 224],
        "score_threshold": 0.5,
        "device": "cpu",
        "precision": "float32",
    }
    # A sam3_video checkpoint nests the image detector's config: the detector loads from it.
    video = tmp_path / "sam3-video"
    shutil.copytree(tiny_sam3_dir, video)
    config = json.load(open(video / "config.json"))
    json.dump({"model_type": "sam3_video", "detector_config": config}, open(video / "config.json", "w"))
    assert segmenter_kind(str(video)) == "sam3"
    info = Sam3Segmenter.load(str(video), device="cpu").info
    assert info.model_type == "sam3_video" and info.backbone_config["image_size"] == 224


@pytest.mark.parametrize(
    "remove,message",
    [
        ("tokenizer", "has no tokenizer.json (nor vocab.json + merges.txt)"),
        ("weights", "has no .safetensors weights"),
    ],
)
def test_broken_folders_are_one_line(tiny_sam3_dir, tmp_path, remove, message):
    folder = tmp_path / "broken"
    shutil.copytree(tiny_sam3_dir, folder)
    names = {"tokenizer": ["tokenizer.json", "vocab.json"], "weights": ["model.safetensors"]}[remove]
    for name in names:
        os.remove(folder / name)
    with pytest.raises(MascModelError) as error:
        Sam3Segmenter.load(str(folder))
    assert message in one_line(error)


def test_the_gated_checkpoint_offline_says_how_to_get_it(tmp_path):
    """facebook/sam3 is gated: a failed download names the licence, the login and the folder."""
    image = tmp_path / "dog.png"
    Image.fromarray(load_photo("dog_00")).save(image)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "masc_core",
            "mask",
            "--model",
            "facebook/sam3",
            "--image",
            str(image),
            "--subject",
            "dog",
            "--out-dir",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf")),
    )
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert "facebook/sam3 is gated" in line and "hf auth login" in line and "SAM License" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(
    not ALT_PYTHON, reason="set MASC_ALT_PYTHON to an interpreter with transformers 4.57 (.ci/run does)"
)
def test_sam3_needs_transformers_5(tiny_sam3_dir, tiny_clipseg_dir, tmp_path):
    """Under transformers 4.57 (no Sam3Model) SAM3 is one line; CLIPSeg from the same command still works."""
    image = tmp_path / "dog.png"
    Image.fromarray(load_photo("dog_00")).save(image)
    base = [ALT_PYTHON, "-m", "masc_core", "mask", "--image", str(image), "--subject", "dog", "--device", "cpu"]
    completed = subprocess.run(
        base + ["--model", tiny_sam3_dir, "--out-dir", str(tmp_path / "sam3")], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert "SAM3 needs transformers >= 5 (this is 4." in line and "use a CLIPSeg segmenter" in line
    completed = subprocess.run(
        base + ["--model", tiny_clipseg_dir, "--out-dir", str(tmp_path / "clipseg")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr


# ---------------------------------------------------------------------- the CLI and the builders


def test_mask_command_takes_a_sam3_folder(tiny_sam3_dir, sam3, photos, tmp_path):
    files = []
    for name in ("dog_00", "cat_00"):
        files.append(str(tmp_path / f"{name}.png"))
        Image.fromarray(photos[name]).save(files[-1])
    code, out, err = call(
        "mask",
        "--model",
        tiny_sam3_dir,
        "--device",
        "cpu",
        "--image",
        *files,
        "--subject",
        "dog",
        "--subject",
        "cat",
        "--out-dir",
        tmp_path / "masks",
    )
    assert code == 0, err
    for name in ("dog_00", "cat_00"):
        for subject in ("dog", "cat"):
            written = np.asarray(Image.open(tmp_path / "masks" / f"{name}_{subject}_mask.png"))
            expected = sam3.masks(photos[name], subject)[0].numpy().astype(np.uint8) * 255  # SAM3's pixel default: 0.5
            assert np.array_equal(written, expected), (name, subject)
    stricter = Sam3Segmenter.load(tiny_sam3_dir, device="cpu", score_threshold=0.9)
    code, out, err = call(
        "mask",
        "--model",
        tiny_sam3_dir,
        "--device",
        "cpu",
        "--image",
        files[0],
        "--subject",
        "dog",
        "--score-threshold",
        "0.9",
        "--out-dir",
        tmp_path / "strict",
    )
    assert code == 0, err
    written = np.asarray(Image.open(tmp_path / "strict" / "dog_00_mask.png"))
    assert np.array_equal(written, stricter.masks(photos["dog_00"], "dog")[0].numpy().astype(np.uint8) * 255)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "masc_core",
            "mask",
            "--model",
            tiny_sam3_dir,
            "--image",
            files[0],
            "--subject",
            "dog",
            "--score-threshold",
            "2",
            "--out-dir",
            str(tmp_path / "bad"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 2 and "--score-threshold: 2 must be a number from 0 to 1" in completed.stderr


def test_manifest_auto_masks_with_sam3_are_recorded_and_never_mixed(tiny_sam3_dir, tiny_clipseg_dir, tmp_path):
    photos_dir = tmp_path / "photos"
    for subject in ("dog", "cat"):
        (photos_dir / subject).mkdir(parents=True)
        for view in ("00", "01"):
            name = (
                f"{subject}_{view}"
                if os.path.exists(os.path.join(ROOT, "tests", "data", "dreambench", f"{subject}_{view}.jpg"))
                else f"{subject}_00"
            )
            Image.fromarray(load_photo(name)).save(photos_dir / subject / f"{view}.png")
    manifest = tmp_path / "pairs.csv"
    code, out, err = call(
        "manifest", "pairs", photos_dir, "-o", manifest, "--auto-masks", tiny_sam3_dir, "--device", "cpu"
    )
    assert code == 0, err
    assert "4 made with SAM3, 0 reused" in out
    record = json.load(open(tmp_path / "masks" / "masks.json"))
    assert record["kind"] == "sam3" and record["threshold"] == 0.5 and record["score_threshold"] == 0.5
    code, out, err = call(
        "manifest", "pairs", photos_dir, "-o", manifest, "--auto-masks", tiny_clipseg_dir, "--device", "cpu"
    )
    assert code == 2 and "were made by '" in err and "give another --masks-dir" in err
    code, out, err = call(
        "manifest", "pairs", photos_dir, "-o", manifest, "--auto-masks", tiny_sam3_dir, "--score-threshold", "0.8"
    )
    assert code == 2 and "were made by '" in err  # another instance threshold would mix two segmentations
