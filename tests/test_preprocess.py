"""Owned preprocessing equals transformers 5's SigLIP2 processors bit for bit (images and text)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PIL import Image

from conftest import load_photo
from masc_core.models.preprocess import PreprocessSpec, naflex_target_size, prepare_image

transformers = pytest.importorskip("transformers")
pytest.importorskip("torchvision", reason="transformers' image processors need torchvision")
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5
needs_5 = pytest.mark.skipif(not TRANSFORMERS_5, reason="the reference behaviour is transformers 5's")


@needs_5
def test_naflex_target_sizes_equal_the_processors():
    from transformers.models.siglip2.image_processing_siglip2 import get_image_size_for_max_num_patches

    sizes = [1, 7, 15, 16, 17, 100, 224, 333, 512, 768, 1023, 1920, 4000]
    for (h, w), budget in itertools.product(itertools.product(sizes, sizes), [64, 256, 729, 1024]):
        assert naflex_target_size(h, w, 16, budget) == get_image_size_for_max_num_patches(h, w, 16, budget)


def crops():
    dog = load_photo("dog_01")
    return [
        load_photo("teapot_00"),
        dog[:300],
        dog[:, 40:300],
        dog[5:17, 9:500],
        load_photo("red_cartoon_00")[::3, ::2],
    ]


@needs_5
@pytest.mark.parametrize("which", ["naflex", "fixed", "fixed_bicubic"])
def test_pixels_equal_the_processors(which, naflex_dir, fixed_dir, fixed_bicubic_dir):
    import json
    import os

    folder = {"naflex": naflex_dir, "fixed": fixed_dir, "fixed_bicubic": fixed_bicubic_dir}[which]
    processor = transformers.AutoProcessor.from_pretrained(folder).image_processor
    with open(os.path.join(folder, "config.json")) as handle:
        vision = json.load(handle)["vision_config"]
    with open(os.path.join(folder, "preprocessor_config.json")) as handle:
        spec = PreprocessSpec.from_configs(
            naflex=which == "naflex", vision_config=vision, preprocessor_config=json.load(handle)
        )
    for image in crops():
        kwargs = {"max_num_patches": 1024} if which == "naflex" else {}
        expected = processor(images=[Image.fromarray(image)], return_tensors="pt", **kwargs)
        ours = prepare_image(image, spec)
        if which == "naflex":
            rows, cols = expected["spatial_shapes"][0].tolist()
            assert ours.grid == (rows, cols)
            assert np.array_equal(ours.pixels.numpy(), expected["pixel_values"][0, : rows * cols].numpy())
        else:
            assert np.array_equal(ours.pixels.numpy(), expected["pixel_values"][0].numpy())


PROMPTS = [
    "A photo of a Dog ON the beach",
    "",
    "   ",
    "café crème brûlée",
    "emoji 🐶 dog",
    "UPPER lower MiXeD",
    "a " * 80 + "dog",  # longer than 64 tokens: truncated, EOS kept
    "tabs\tand\nnewlines",
    "<eos> in text",
    "numbers 123 4567",
]


@needs_5
@pytest.mark.parametrize("which", ["naflex", "fixed"])
def test_token_ids_equal_the_processors(which, naflex_dir, fixed_dir, naflex_encoder, fixed_encoder):
    folder, encoder = (naflex_dir, naflex_encoder) if which == "naflex" else (fixed_dir, fixed_encoder)
    processor = transformers.AutoProcessor.from_pretrained(folder)
    # The paper's package calls processor(text=..., padding="max_length"); fixed-size processors need
    # the length and truncation spelled out for over-long prompts.
    kwargs = {} if which == "naflex" else {"max_length": 64, "truncation": True}
    expected = processor(text=PROMPTS, padding="max_length", return_tensors="pt", **kwargs)["input_ids"]
    assert np.array_equal(encoder.tokenizer(PROMPTS).numpy(), expected.numpy())
    # NaFlex lowercases (transformers 5's Siglip2Tokenizer), fixed-size does not (Gemma tokenizer).
    assert encoder.tokenizer.lowercase is (which == "naflex")


@pytest.mark.parametrize(
    "budget,message",
    [
        (10**6, "max_patches is 1000000, outside the range this input takes: set it between 16 and 4096"),
        (8, "max_patches is 8, outside the range"),
        (1024.5, "max_patches is 1024.5, not a whole number"),
    ],
)
def test_the_patch_budget_is_held_to_its_range_by_the_library(naflex_dir, budget, message):
    """Whoever calls (a script, the CLI, a node): a budget of 10^6 ran for over ten minutes on one 64x64 image."""
    from masc_core import MascEncoder, MascInputError

    with pytest.raises(MascInputError, match=message):
        MascEncoder.load(naflex_dir, max_num_patches=budget)
