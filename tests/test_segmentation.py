"""Built-in masks: shapes, thresholds, dilation, names, batching, transformers parity, bad inputs, CLI.

The conventions (shapes, values, thresholds, names, batching, bad inputs, feeding MaSC) are tested on both
families behind the one ``Segmenter`` interface (``any_segmenter``: CLIPSeg and SAM3); parity with
transformers, checkpoint checks and the CLI are CLIPSeg's here (SAM3's are in tests/test_sam3.py).

A tiny random-weight CLIPSeg checkpoint is built here (masc_core.testing)
in the layout of CIDAS/clipseg-rd64-refined; no network, no real weights.
Its masks are meaningless but not trivial: probabilities spread over 0..1
and depend on the image and on the prompt.
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

from conftest import ROOT, load_photo
from masc_core import ClipSegSegmenter, MascInputError, MascModelError, score_images
from masc_core.cli import main
from masc_core.models.preprocess import prepare_image
from masc_core.metric.masks import dilate_mask

transformers = pytest.importorskip("transformers")
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5
# Probabilities of one image computed in batches of other sizes differ in the
# last float32 bits (the convolution kernels change with the batch size).
BATCH_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def clipseg_dir(tmp_path_factory) -> str:
    from masc_core.testing import build_clipseg_checkpoint

    return build_clipseg_checkpoint(os.path.join(tmp_path_factory.mktemp("clipseg"), "tiny-clipseg-rd16"), seed=0)


@pytest.fixture(scope="module")
def segmenter(clipseg_dir) -> ClipSegSegmenter:
    return ClipSegSegmenter.load(clipseg_dir, device="cpu")


@pytest.fixture(scope="module", params=["clipseg", "sam3"])
def any_segmenter(request, segmenter, tiny_sam3_dir):
    """Each built-in family behind the one Segmenter interface: the conventions tests run on both."""
    if request.param == "clipseg":
        return segmenter
    if not TRANSFORMERS_5:
        pytest.skip("SAM3 needs transformers 5")
    from masc_core import Sam3Segmenter

    return Sam3Segmenter.load(tiny_sam3_dir, device="cpu")


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    dog = load_photo("dog_01")
    return {
        "dog": load_photo("dog_00"),
        "cat": load_photo("cat_00"),
        "wide": dog[100:260, :],
        "tall": dog[:, 150:310],
        "tiny": dog[7:44, 11:64],
    }


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and message
    return message


# ---------------------------------------------------------------------- shapes and values


def test_one_image_of_each_kind_gives_one_mask_at_its_size(any_segmenter, photos):
    image = photos["wide"]
    kinds = {
        "numpy uint8": image,
        "PIL RGBA": Image.fromarray(image).convert("RGBA"),
        "ComfyUI IMAGE": torch.from_numpy(image[None].astype(np.float32) / 255.0),
    }
    expected = any_segmenter.probabilities(image, "dog")[0]
    for kind, value in kinds.items():
        masks = any_segmenter.masks(value, "dog")
        probabilities = any_segmenter.probabilities(value, "dog")
        assert len(masks) == 1 and len(probabilities) == 1, kind
        assert masks[0].shape == probabilities[0].shape == image.shape[:2], kind
        assert masks[0].dtype == probabilities[0].dtype == torch.float32 and masks[0].device.type == "cpu"
        assert torch.equal(probabilities[0], expected), kind


def test_a_batch_gives_one_mask_per_image_and_stacks_to_a_mask_batch(any_segmenter, photos):
    batch = torch.from_numpy(np.stack([photos["dog"], photos["cat"], photos["dog"][:, ::-1]]).astype(np.float32) / 255)
    masks = any_segmenter.masks(batch, "dog")
    assert len(masks) == 3
    assert torch.stack(masks).shape == (3, 512, 512)


def test_mixed_sizes_each_get_their_own_size(any_segmenter, photos):
    images = [photos[k] for k in ("dog", "wide", "tall", "tiny")]
    for probabilities in (any_segmenter.probabilities(images, "dog"), any_segmenter.masks(images, "dog")):
        assert [tuple(p.shape) for p in probabilities] == [i.shape[:2] for i in images]


def test_probabilities_lie_in_0_1_and_masks_are_0_or_1(any_segmenter, photos):
    images = [photos["dog"], photos["tiny"]]
    for p in any_segmenter.probabilities(images, "dog"):
        assert float(p.min()) >= 0.0 and float(p.max()) <= 1.0
        assert float(p.std()) > 0.05  # the test model gives non-trivial maps
    for m in any_segmenter.masks(images, "dog"):
        assert set(torch.unique(m).tolist()) <= {0.0, 1.0}


# ---------------------------------------------------------------------- threshold and dilation


def test_higher_thresholds_keep_fewer_pixels(any_segmenter, photos):
    image = photos["dog"]
    counts = [int(any_segmenter.masks(image, "dog", threshold=t)[0].sum()) for t in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == image.shape[0] * image.shape[1]  # threshold 0 keeps everything
    assert counts[-1] <= 0.01 * counts[0]  # threshold 1 keeps (nearly) nothing
    assert 0 < counts[2] < counts[0]


def test_mask_is_probability_at_or_above_threshold(any_segmenter, photos):
    probabilities = any_segmenter.probabilities(photos["cat"], "dog")[0]
    threshold = float(probabilities.median())  # a value that occurs: >= matters
    mask = any_segmenter.masks(photos["cat"], "dog", threshold=threshold)[0]
    assert torch.equal(mask, (probabilities >= threshold).float())


def test_dilation_grows_the_mask_by_whole_pixels(any_segmenter, photos):
    image = photos["wide"]
    plain = any_segmenter.masks(image, "dog", threshold=0.7)[0]
    assert 0 < int(plain.sum()) < plain.numel()
    grown = any_segmenter.masks(image, "dog", threshold=0.7, dilation=3)[0]
    assert torch.all(grown >= plain) and int(grown.sum()) > int(plain.sum())
    assert torch.equal(any_segmenter.masks(image, "dog", threshold=0.7, dilation=0)[0], plain)
    # A square of side 2 * 3 + 1 around each foreground pixel, computed naively.
    padded = np.pad(plain.numpy(), 3)
    rows, cols = plain.shape
    expected = np.max([padded[dy : dy + rows, dx : dx + cols] for dy in range(7) for dx in range(7)], axis=0)
    assert np.array_equal(grown.numpy(), expected)


def test_dilation_of_a_single_pixel_and_beyond_the_image():
    mask = torch.zeros(9, 11)
    mask[4, 5] = 1
    grown = dilate_mask(mask, 2)
    assert int(grown.sum()) == 25 and torch.all(grown[2:7, 3:8] == 1)
    assert torch.all(dilate_mask(mask, 1000) == 1)
    assert torch.all(dilate_mask(torch.zeros(5, 5), 3) == 0)


# ---------------------------------------------------------------------- names and batching


def test_several_names_give_the_per_pixel_maximum(any_segmenter, photos):
    images = [photos["dog"], photos["tall"]]
    dog = any_segmenter.probabilities(images, "dog")
    toy = any_segmenter.probabilities(images, "a red duck toy")
    both = any_segmenter.probabilities(images, "dog, a red duck toy")
    as_list = any_segmenter.probabilities(images, ["dog", "a red duck toy"])
    for d, t, b, listed in zip(dog, toy, both, as_list):
        assert float((d - t).abs().mean()) > 0.05  # the prompt matters
        torch.testing.assert_close(b, torch.maximum(d, t), atol=BATCH_TOLERANCE, rtol=0)
        assert torch.equal(b, listed)


def test_duplicate_names_and_spacing_do_not_change_the_result(any_segmenter, photos):
    once = any_segmenter.probabilities(photos["dog"], "dog")[0]
    assert torch.equal(any_segmenter.probabilities(photos["dog"], " dog ,DOG,, ")[0], once)


def test_batch_equals_one_by_one_and_progress_is_reported(any_segmenter, photos):
    images = [photos[k] for k in ("dog", "wide", "cat", "tiny", "tall")]
    singles = [any_segmenter.probabilities(image, "dog, cat")[0] for image in images]
    chunked = type(any_segmenter)(
        any_segmenter.model, any_segmenter.info, any_segmenter.spec, any_segmenter.tokenizer, batch_size=2
    )
    calls = []
    batched = chunked.probabilities(images, "dog, cat", progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]
    for one, many in zip(singles, batched):
        torch.testing.assert_close(many, one, atol=BATCH_TOLERANCE, rtol=0)


def test_vision_runs_once_per_image_whatever_the_number_of_names(any_segmenter, photos):
    counting = type(any_segmenter)(any_segmenter.model, any_segmenter.info, any_segmenter.spec, any_segmenter.tokenizer)
    counting.masks([photos["dog"], photos["cat"], photos["tiny"]], "sks dog, dog, puppy")
    assert counting.forward_counts == {"images": 3, "texts": 3, "pairs": 9}


def test_a_progress_callback_can_cancel(any_segmenter, photos):
    def cancel(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        any_segmenter.masks([photos["dog"], photos["cat"]], "dog", progress=cancel)


# ---------------------------------------------------------------------- parity with transformers


def test_logits_equal_transformers_forward(segmenter, photos):
    """Same pixels and ids into CLIPSegForImageSegmentation.forward: same logits.

    One image and one prompt per call, so both sides run every layer on
    batches of the same size (see BATCH_TOLERANCE for why that matters).
    """
    for image in (photos["dog"], photos["wide"], photos["tiny"]):
        pixels = prepare_image(image, segmenter.spec).pixels[None]
        for prompt in ["dog", "a photo of a red Duck toy!"]:
            ids, attention = segmenter.tokenizer([prompt])
            with torch.no_grad():
                expected = segmenter.model(input_ids=ids, attention_mask=attention, pixel_values=pixels).logits
            ours = segmenter._logits(pixels, segmenter._text_embeddings([prompt]))[:, 0]
            assert expected.shape == ours.shape == (1, 352, 352)
            torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_several_names_match_transformers_pairs(segmenter, photos):
    """Several names: transformers' forward on (image, name) pairs, image repeated per name."""
    images, names = [photos["dog"], photos["cat"]], ["dog", "cat toy"]
    pixels = torch.stack([prepare_image(i, segmenter.spec).pixels for i in images])
    ids, attention = segmenter.tokenizer(names)
    with torch.no_grad():
        expected = segmenter.model(
            input_ids=ids.repeat(2, 1),
            attention_mask=attention.repeat(2, 1),
            pixel_values=pixels.repeat_interleave(2, 0),
        ).logits.reshape(2, 2, 352, 352)
    ours = segmenter._logits(pixels, segmenter._text_embeddings(names))
    torch.testing.assert_close(ours, expected, atol=1e-3, rtol=0)  # batch sizes differ: see BATCH_TOLERANCE


PROMPTS = [
    "dog",
    "sks dog",
    "A Photo of a DOG",
    "  dog\t\n toy  ",
    "don't stop",
    "café crème",
    "emoji 🐶 dog",
    "numbers 123 4567",
    "c++ & <tags>!!",
    "dog " * 90,  # longer than 77 tokens: truncated, <|endoftext|> kept
]


def test_token_ids_equal_transformers_tokenizer(clipseg_dir, segmenter, tmp_path):
    tokenizer = transformers.AutoTokenizer.from_pretrained(clipseg_dir)
    expected = tokenizer(PROMPTS, padding=True, truncation=True, max_length=77, return_tensors="pt")
    ids, attention = segmenter.tokenizer(PROMPTS)
    assert torch.equal(ids, expected["input_ids"]) and torch.equal(attention, expected["attention_mask"])
    assert ids.shape[1] == 77 and int(ids[-1, -1]) == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    # Folders with vocab.json + merges.txt only give the same ids.
    from masc_core.models.tokenizers import ClipTextTokenizer

    legacy = tmp_path / "legacy"
    shutil.copytree(clipseg_dir, legacy)
    os.remove(legacy / "tokenizer.json")
    legacy_ids, _ = ClipTextTokenizer.from_folder(str(legacy), max_length=77)(PROMPTS)
    assert torch.equal(legacy_ids, ids)


@pytest.mark.skipif(not TRANSFORMERS_5, reason="the reference pixels are transformers 5's (torchvision)")
def test_pixels_equal_transformers_processor(clipseg_dir, segmenter, photos):
    pytest.importorskip("torchvision", reason="transformers 5's image processors need torchvision")
    processor = transformers.AutoProcessor.from_pretrained(clipseg_dir)
    for name, image in photos.items():
        expected = processor(images=[Image.fromarray(image)], return_tensors="pt")["pixel_values"][0]
        assert torch.equal(prepare_image(image, segmenter.spec).pixels, expected), name


# ---------------------------------------------------------------------- checkpoints


def test_hugging_face_cache_folder_and_describe(clipseg_dir, photos, tmp_path):
    repo = tmp_path / "models--CIDAS--clipseg-rd64-refined"
    shutil.copytree(clipseg_dir, repo / "snapshots" / "0123abc")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    loaded = ClipSegSegmenter.load(str(repo), device="cpu")
    assert loaded.describe() == {
        "model": str(repo),
        "kind": "clipseg",
        "image_size": [352, 352],
        "device": "cpu",
        "precision": "float32",
    }
    assert loaded.to("cpu") is loaded and loaded.device.type == "cpu"


def test_weights_masks_never_read_may_be_missing(clipseg_dir, segmenter, photos, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "no-contrastive-head"
    shutil.copytree(clipseg_dir, folder)
    weights = load_file(str(folder / "model.safetensors"))
    for key in ("clip.logit_scale", "clip.visual_projection.weight"):
        del weights[key]
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    loaded = ClipSegSegmenter.load(str(folder), device="cpu")
    # Same weights, other tensors in memory: equal up to float32 rounding.
    torch.testing.assert_close(
        loaded.probabilities(photos["tiny"], "dog")[0],
        segmenter.probabilities(photos["tiny"], "dog")[0],
        atol=1e-5,
        rtol=0,
    )


@pytest.fixture(scope="module")
def broken_checkpoints(clipseg_dir, naflex_dir, tmp_path_factory) -> dict[str, str]:
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("broken-clipseg")

    def variant(name, drop=(), config=None):
        folder = root / name
        shutil.copytree(clipseg_dir, folder)
        for file in drop:
            os.remove(folder / file)
        if config:
            values = json.loads((folder / "config.json").read_text())
            values.update(config)
            (folder / "config.json").write_text(json.dumps(values))
        return folder

    no_weights = variant("no-weights", drop=["model.safetensors"])
    (no_weights / "pytorch_model.bin").write_bytes(b"0")
    missing = variant("missing-weights")
    weights = load_file(str(missing / "model.safetensors"))
    del weights["decoder.film_mul.weight"], weights["decoder.film_add.weight"]
    save_file(weights, str(missing / "model.safetensors"), metadata={"format": "pt"})
    file = root / "a-file.json"
    file.write_text("{}")
    return {
        "siglip": naflex_dir,
        "no_config": str(variant("no-config", drop=["config.json"])),
        "no_weights": str(no_weights),
        "no_tokenizer": str(variant("no-tokenizer", drop=["tokenizer.json", "merges.txt"])),
        "no_preprocessor": str(variant("no-preprocessor", drop=["preprocessor_config.json"])),
        "missing_weights": str(missing),
        "bad_layers": str(variant("bad-layers", config={"extract_layers": [3, 6, 9]})),
        "nowhere": str(root / "nowhere"),
        "file": str(file),
    }


@pytest.mark.parametrize(
    "key,message",
    [
        (
            "siglip",
            "holds a 'siglip2' model, not CLIPSeg: built-in masks need a CLIPSeg checkpoint such as "
            "CIDAS/clipseg-rd64-refined",
        ),
        ("no_config", "has no config.json"),
        ("no_weights", "has no .safetensors weights (found pytorch_model.bin): only safetensors are loaded"),
        ("no_tokenizer", "has no tokenizer.json (nor vocab.json + merges.txt)"),
        ("no_preprocessor", "has no preprocessor_config.json"),
        ("missing_weights", "lacks 2 weights (decoder.film_add.weight, decoder.film_mul.weight)"),
        ("bad_layers", "has extract_layers [3, 6, 9] for a 4-layer vision tower"),
        ("nowhere", "CLIPSeg model '{nowhere}' does not exist"),
        ("file", "is a file: pass the checkpoint's folder"),
    ],
)
def test_bad_checkpoints_raise_one_line(broken_checkpoints, key, message):
    with pytest.raises(MascModelError) as error:
        ClipSegSegmenter.load(broken_checkpoints[key], device="cpu")
    assert message.format(**broken_checkpoints) in one_line(error)


def test_no_model_named():
    with pytest.raises(MascModelError) as error:
        ClipSegSegmenter.load("  ")
    assert "no CLIPSeg model given" in one_line(error)


# ---------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"subject": ""}, "subject is empty: give the subject's name"),
        ({"subject": " , ,"}, "subject is empty"),
        ({"subject": None}, "subject is a NoneType"),
        ({"subject": 3}, "subject is a int"),
        ({"threshold": 1.5}, "threshold 1.5 is outside 0..1"),
        ({"threshold": -0.1}, "threshold -0.1 is outside 0..1"),
        ({"threshold": float("nan")}, "threshold nan is not a number"),
        ({"threshold": "0.4"}, "threshold '0.4' is not a number"),
        ({"threshold": True}, "threshold True is not a number"),
        ({"dilation": -2}, "dilation -2 is negative"),
        ({"dilation": 1.5}, "dilation 1.5 is not a whole number of pixels"),
        ({"images": []}, "images is an empty list"),
        ({"images": np.zeros((8, 8, 2), np.uint8)}, "images has shape (8, 8, 2)"),
        ({"images": np.full((8, 8, 3), 3.0, np.float32)}, "images has float values in [0, 3], expected 0..1"),
        ({"images": [np.zeros((8, 8, 3), np.uint8), "dog.png"]}, "unsupported image type str"),
    ],
)
def test_bad_inputs_raise_one_line_naming_the_input(any_segmenter, photos, kwargs, message):
    arguments = {"images": photos["tiny"], "subject": "dog", **kwargs}
    before = dict(any_segmenter.forward_counts)
    with pytest.raises(MascInputError) as error:
        any_segmenter.masks(**arguments)
    assert message in one_line(error)
    assert any_segmenter.forward_counts == before  # refused before any forward pass


def test_fractional_dilation_that_is_whole_is_accepted(any_segmenter, photos):
    assert torch.equal(
        any_segmenter.masks(photos["tiny"], "dog", dilation=2.0)[0],
        any_segmenter.masks(photos["tiny"], "dog", dilation=2)[0],
    )


# ---------------------------------------------------------------------- with MaSC


def test_segmenter_masks_feed_score_images(any_segmenter, naflex_encoder, photos):
    """As a ComfyUI graph does: masks of the reference and of an IMAGE batch, then CP/PF."""
    reference = photos["dog"]
    outputs = torch.from_numpy(
        np.stack([load_photo("dog_01"), load_photo("dog_02"), photos["cat"]]).astype(np.float32) / 255
    )
    reference_mask = any_segmenter.masks(reference, "dog")[0]
    output_masks = torch.stack(any_segmenter.masks(outputs, "dog"))
    batch = score_images(
        naflex_encoder,
        outputs,
        reference=reference,
        reference_mask=reference_mask,
        mask=output_masks,
        prompt="a photo of a dog on the beach",
        subject="dog",
    )
    assert abs(batch.references[0].foreground_fraction - float(reference_mask.mean())) < 1e-6
    for score, mask in zip(batch.scores, output_masks):
        assert score.cp is not None and score.pf is not None, (score.cp_undefined, score.pf_undefined)
        assert -1.0 <= score.cp <= 1.0 and -1.0 <= score.pf <= 1.0
        assert abs(score.foreground_fraction - float(mask.mean())) < 1e-6
        assert score.small_foreground == (float(mask.mean()) < 0.05)


def test_small_masks_raise_the_papers_flag(any_segmenter, naflex_encoder, photos):
    image = photos["cat"]
    probabilities = any_segmenter.probabilities(image, "dog")[0]
    flags = {}
    for share in (0.02, 0.5):  # thresholds keeping about 2% and about 50% of the pixels
        threshold = float(torch.quantile(probabilities.flatten(), 1.0 - share))
        mask = any_segmenter.masks(image, "dog", threshold=threshold)[0]
        batch = score_images(naflex_encoder, image, mask=mask, prompt="a cat", subject="dog")
        flags[share] = (batch.scores[0].small_foreground, batch.scores[0].foreground_fraction)
    assert flags[0.02][0] is True and flags[0.02][1] < 0.05
    assert flags[0.5][0] is False and flags[0.5][1] > 0.3


# ---------------------------------------------------------------------- CLI


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def image_files(photos, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mask-cli-images")
    paths = {}
    for name in ("dog", "wide", "tiny"):
        paths[name] = str(root / f"{name}.png")
        Image.fromarray(photos[name]).save(paths[name])
    other = root / "other"
    other.mkdir()
    paths["dog_again"] = str(other / "dog.jpg")
    Image.fromarray(photos["cat"]).save(paths["dog_again"])
    return paths


def test_cli_writes_one_png_mask_per_image(capsys, clipseg_dir, segmenter, photos, image_files, tmp_path):
    out_dir = tmp_path / "masks"
    images = [image_files[k] for k in ("dog", "wide", "tiny")]
    code, out, err = run_cli(
        capsys,
        "mask",
        "--model",
        clipseg_dir,
        "--device",
        "cpu",
        "--image",
        *images,
        "--subject",
        "sks dog, dog",
        "--threshold",
        "0.5",
        "--dilate",
        "2",
        "--out-dir",
        str(out_dir),
    )
    assert code == 0, err
    assert sorted(os.listdir(out_dir)) == ["dog_mask.png", "tiny_mask.png", "wide_mask.png"]
    expected = segmenter.masks([photos[k] for k in ("dog", "wide", "tiny")], "sks dog, dog", threshold=0.5, dilation=2)
    lines = out.splitlines()
    for name, mask, line in zip(("dog", "wide", "tiny"), expected, lines):
        written = np.asarray(Image.open(out_dir / f"{name}_mask.png"))
        assert written.shape == photos[name].shape[:2] and written.dtype == np.uint8
        assert np.array_equal(written, mask.numpy().astype(np.uint8) * 255)
        assert line.startswith(str(out_dir / f"{name}_mask.png")) and f"{100 * float(mask.mean()):.1f}%" in line
    assert len(lines) == 3


def test_cli_writes_one_mask_per_subject_per_image_with_several_subjects(
    capsys, clipseg_dir, segmenter, photos, image_files, tmp_path
):
    out_dir = tmp_path / "masks"
    code, out, err = run_cli(
        capsys,
        "mask",
        "--model",
        clipseg_dir,
        "--device",
        "cpu",
        "--image",
        image_files["dog"],
        image_files["wide"],
        "--subject",
        "sks dog, dog",
        "--subject",
        "Cat",
        "--out-dir",
        str(out_dir),
    )
    assert code == 0, err
    assert sorted(os.listdir(out_dir)) == [
        "dog_cat_mask.png",
        "dog_sks_dog_mask.png",
        "wide_cat_mask.png",
        "wide_sks_dog_mask.png",
    ]
    for names, slug in (("sks dog, dog", "sks_dog"), ("Cat", "cat")):
        expected = segmenter.masks([photos["dog"], photos["wide"]], names)
        for stem, mask in zip(("dog", "wide"), expected):
            assert np.array_equal(
                np.asarray(Image.open(out_dir / f"{stem}_{slug}_mask.png")), mask.numpy().astype(np.uint8) * 255
            )
    assert len(out.splitlines()) == 4
    code, _, err = run_cli(
        capsys,
        "mask",
        "--model",
        clipseg_dir,
        "--device",
        "cpu",
        "--image",
        image_files["dog"],
        "--subject",
        "cat",
        "--subject",
        "CAT, kitten",
        "--out-dir",
        str(tmp_path / "again"),
    )
    assert code == 2 and "two --subject values would both be written as _cat_mask.png" in err


@pytest.mark.parametrize(
    "change,message",
    [
        (("--image", "missing"), "--image '{missing}' does not exist"),
        (("--threshold", "2"), "--threshold 2.0 is outside 0..1"),
        (("--dilate", "-1"), "--dilate -1 is negative"),
        (("--subject", " "), "--subject is empty"),
        (("--model", "siglip"), "not CLIPSeg"),
        (("--image", "same_stem"), "would both be written as dog_mask.png"),
        (("--out-dir", "file"), "--out-dir '{file}' is a file"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(capsys, clipseg_dir, naflex_dir, image_files, tmp_path, change, message):
    out_dir = tmp_path / "masks"
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    values = {"missing": str(tmp_path / "nope.png"), "siglip": naflex_dir, "file": str(a_file)}
    args = {"--model": clipseg_dir, "--image": [image_files["dog"]], "--subject": "dog", "--out-dir": str(out_dir)}
    option, key = change
    if key == "same_stem":
        args["--image"] = [image_files["dog"], image_files["dog_again"]]
    elif option == "--image":
        args["--image"] = [values[key]]
    else:
        args[option] = values.get(key, key)
    argv = ["mask", "--device", "cpu"]
    for option_name, value in args.items():
        argv += [option_name, *(value if isinstance(value, list) else [value])]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert message.format(**values) in err
    assert not out_dir.exists()


def test_cli_entry_point_prints_no_traceback(tmp_path, image_files):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "masc_core",
            "mask",
            "--model",
            str(tmp_path),
            "--image",
            image_files["dog"],
            "--subject",
            "dog",
            "--out-dir",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines() == [
        f"error: segmentation model folder '{tmp_path}' has no config.json: pass a CLIPSeg or SAM3 checkpoint folder "
        "(the one holding config.json and model.safetensors)"
    ]


# ---------------------------------------------------------------------- other transformers


ALT_PYTHON = os.environ.get("MASC_ALT_PYTHON")
_ALT_SCRIPT = """
import sys, numpy as np
from PIL import Image
from masc_core import ClipSegSegmenter
segmenter = ClipSegSegmenter.load(sys.argv[1], device="cpu")
images = [np.asarray(Image.open(p).convert("RGB")) for p in sys.argv[3:]]
probabilities = segmenter.probabilities(images, "sks dog, dog")
np.savez(sys.argv[2], *[p.numpy() for p in probabilities])
"""


@pytest.mark.skipif(
    not ALT_PYTHON,
    reason="set MASC_ALT_PYTHON to an interpreter with the other transformers major version (.ci/run does)",
)
def test_probabilities_do_not_depend_on_the_installed_transformers(
    clipseg_dir, segmenter, photos, image_files, tmp_path
):
    images = [image_files[k] for k in ("dog", "wide", "tiny", "dog_again")]
    target = tmp_path / "alt.npz"
    completed = subprocess.run(
        [ALT_PYTHON, "-c", _ALT_SCRIPT, clipseg_dir, str(target), *images], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    there = np.load(target)
    here = segmenter.probabilities([np.asarray(Image.open(p).convert("RGB")) for p in images], "sks dog, dog")
    # The other interpreter also runs another torch (2.13 against 2.14.1), whose CPU kernels round differently: seen
    # up to 1.2e-5 on one machine and under 1e-5 on another. The bound allows that rounding and no more: one grey
    # level of an input pixel (1/255) is 4e-3.
    for key, ours in zip(there.files, here):
        assert np.abs(there[key] - ours.numpy()).max() <= 1e-4
