"""Shared fixtures: random-weight SigLIP2 checkpoints built here, real photos, masks.

No network: the checkpoints are built with transformers configs and a
tokenizer trained with ``tokenizers``, saved in Hugging Face layout, and
loaded through the real loading code.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

import numpy as np
import pytest
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DATA = os.path.join(ROOT, "tests", "data", "dreambench")


def call(*argv) -> tuple[int, str, str]:
    """``python -m masc_core ARGV`` run in this process: the exit code, stdout and stderr."""
    from masc_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def read_bytes(folder, name) -> bytes:
    """The bytes of file ``name`` in ``folder`` (to compare result files byte for byte)."""
    with open(os.path.join(folder, name), "rb") as handle:
        return handle.read()


PROMPT = "A photo of a Dog ON the beach, next to a red ball"


def photo_path(name: str) -> str:
    return os.path.join(DATA, f"{name}.jpg")


def load_photo(name: str) -> np.ndarray:
    return np.asarray(Image.open(photo_path(name)).convert("RGB"))


def box_mask(height: int, width: int, top=0.25, left=0.25, bottom=0.75, right=0.75, dtype=np.uint8) -> np.ndarray:
    """A rectangle of foreground (255 or 1.0) on background."""
    mask = np.zeros((height, width), dtype=dtype)
    value = 255 if dtype == np.uint8 else 1
    mask[int(top * height) : int(bottom * height), int(left * width) : int(right * width)] = value
    return mask


@pytest.fixture(scope="session")
def tokenizer():
    from masc_core.testing import train_tokenizer

    return train_tokenizer()


@pytest.fixture(scope="session")
def checkpoint_root(tmp_path_factory):
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="session")
def naflex_dir(checkpoint_root, tokenizer) -> str:
    from masc_core.testing import build_checkpoint

    return build_checkpoint(
        os.path.join(checkpoint_root, "tiny-siglip2-naflex"), naflex=True, tokenizer=tokenizer, seed=1
    )


@pytest.fixture(scope="session")
def fixed_dir(checkpoint_root, tokenizer) -> str:
    from masc_core.testing import build_checkpoint

    return build_checkpoint(
        os.path.join(checkpoint_root, "tiny-siglip2-fixed-224"), naflex=False, tokenizer=tokenizer, seed=2
    )


@pytest.fixture(scope="session")
def fixed_bicubic_dir(checkpoint_root, tokenizer) -> str:
    from masc_core.testing import build_checkpoint

    return build_checkpoint(
        os.path.join(checkpoint_root, "tiny-siglip2-fixed-256-bicubic"),
        naflex=False,
        image_size=256,
        resample=3,
        tokenizer=tokenizer,
        seed=3,
    )


@pytest.fixture(scope="session")
def naflex_encoder(naflex_dir):
    from masc_core import MascEncoder

    return MascEncoder.load(naflex_dir, device="cpu")


@pytest.fixture(scope="session")
def fixed_encoder(fixed_dir):
    from masc_core import MascEncoder

    return MascEncoder.load(fixed_dir, device="cpu")


@pytest.fixture(params=["naflex", "fixed"])
def encoder(request, naflex_encoder, fixed_encoder):
    """Each test using it runs on both architectures."""
    return naflex_encoder if request.param == "naflex" else fixed_encoder


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """Real photos (and crops of other aspect ratios) with masks, as files."""
    root = tmp_path_factory.mktemp("files")
    paths = {}
    for name in ["dog_00", "dog_01", "dog_02", "cat_00", "teapot_00", "red_cartoon_00"]:
        image = load_photo(name)
        paths[name] = photo_path(name)
        mask_path = os.path.join(root, f"{name}_mask.png")
        Image.fromarray(box_mask(*image.shape[:2])).save(mask_path)
        paths[name + "_mask"] = mask_path
    crops = {"wide": (0, 0, 512, 288), "tall": (64, 0, 448, 512), "odd": (3, 17, 500, 390)}
    for label, box in crops.items():
        image = Image.open(photo_path("dog_01")).convert("RGB").crop(box)
        path = os.path.join(root, f"dog_01_{label}.png")
        image.save(path)
        paths[f"dog_01_{label}"] = path
        mask_path = os.path.join(root, f"dog_01_{label}_mask.png")
        Image.fromarray(box_mask(image.height, image.width, 0.2, 0.3, 0.9, 0.7)).save(mask_path)
        paths[f"dog_01_{label}_mask"] = mask_path
    return paths


@pytest.fixture(scope="session")
def tiny_clipseg_dir(checkpoint_root) -> str:
    """A tiny random-weight CLIPSeg checkpoint (the layout of CIDAS/clipseg-rd64-refined), for built-in masks."""
    from masc_core.testing import build_clipseg_checkpoint

    return build_clipseg_checkpoint(os.path.join(checkpoint_root, "tiny-clipseg"), seed=0)


@pytest.fixture(scope="session")
def tiny_sam3_dir(checkpoint_root) -> str:
    """A tiny random-weight SAM3 checkpoint (transformers Sam3Model, facebook/sam3's layout), for SAM3 masks."""
    from masc_core.testing import build_sam3_checkpoint

    return build_sam3_checkpoint(os.path.join(checkpoint_root, "tiny-sam3"), seed=0)


@pytest.fixture(scope="session")
def pack():
    """The node pack, imported as ComfyUI imports it (tests/comfy_harness.py)."""
    from comfy_harness import import_pack

    return import_pack()


@pytest.fixture(scope="session")
def comfy_dirs(tmp_path_factory, naflex_dir, tiny_clipseg_dir, tiny_sam3_dir):
    """A models dir with the test checkpoints under the paper's names, an input dir with photos and masks, an output
    dir."""
    import shutil

    root = tmp_path_factory.mktemp("comfy")
    target = root / "models" / "masc" / "google" / "siglip2-so400m-patch16-naflex"
    shutil.copytree(naflex_dir, target)
    shutil.copytree(tiny_clipseg_dir, root / "models" / "clipseg" / "CIDAS" / "clipseg-rd64-refined")
    shutil.copytree(tiny_sam3_dir, root / "models" / "sam3" / "tiny-sam3")
    inputs = root / "input"
    inputs.mkdir()
    for name in ["dog_00", "dog_01", "dog_02", "cat_00"]:
        shutil.copy(photo_path(name), inputs / f"{name}.jpg")
        Image.fromarray(box_mask(512, 512)).save(inputs / f"{name}_mask.png")
    # The workflows load the shipped examples (masc_example_*), which the pack copies into the input folder at load.
    from comfy_harness import import_pack
    from importlib import import_module

    assert import_module(import_pack().__name__ + ".nodes.host").copy_example_inputs(str(inputs))
    outputs = root / "output"
    outputs.mkdir()
    os.environ["MASC_MODELS_DIR"] = str(root / "models")
    os.environ["MASC_OUTPUT_DIR"] = str(outputs)
    return {"models": str(root / "models"), "input": str(inputs), "output": str(outputs), "checkpoint": str(target)}
