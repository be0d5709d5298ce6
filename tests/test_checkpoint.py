"""Checkpoint loading: architecture from config (not name), safetensors only, clear errors, precision, Hub ids."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import PROMPT, box_mask, load_photo
from masc_core import MascEncoder, MascModelError, score_images


def copy_as(source: str, tmp_path, name: str) -> str:
    target = os.path.join(tmp_path, name)
    shutil.copytree(source, target)
    return target


def test_architecture_comes_from_config_not_name(tmp_path, naflex_dir, fixed_dir):
    naflex = MascEncoder.load(copy_as(naflex_dir, tmp_path, "siglip2-base-patch16-224"), device="cpu")
    fixed = MascEncoder.load(copy_as(fixed_dir, tmp_path, "siglip2-so400m-patch16-naflex"), device="cpu")
    assert naflex.describe()["kind"] == "naflex" and naflex.spec.max_num_patches == 1024
    assert fixed.describe()["kind"] == "fixed" and fixed.spec.image_size == (224, 224)
    assert naflex.model.naflex and not fixed.model.naflex
    assert type(naflex.model.vision_model.embeddings).__name__ == "NaflexEmbeddings"
    assert type(fixed.model.vision_model.embeddings).__name__ == "FixedEmbeddings"


def test_sharded_safetensors_load(tmp_path, naflex_dir, naflex_encoder):
    import transformers

    model = transformers.Siglip2Model.from_pretrained(naflex_dir)
    sharded = os.path.join(tmp_path, "sharded")
    model.save_pretrained(sharded, max_shard_size="300KB", safe_serialization=True)
    for name in os.listdir(naflex_dir):
        if (
            not name.endswith((".safetensors", "config.json"))
            or name == "preprocessor_config.json"
            or name.startswith("tokenizer")
        ):
            shutil.copy(os.path.join(naflex_dir, name), sharded)
    assert len([n for n in os.listdir(sharded) if n.endswith(".safetensors")]) > 1
    encoder = MascEncoder.load(sharded, device="cpu")
    ref = load_photo("dog_00")
    kwargs = dict(
        reference=ref, reference_mask=box_mask(512, 512), mask=box_mask(512, 512), prompt=PROMPT, subject="dog"
    )
    reference_weights = naflex_encoder.model.state_dict()
    assert all(torch.equal(tensor, reference_weights[name]) for name, tensor in encoder.model.state_dict().items())
    assert score_images(encoder, ref, **kwargs).scores[0].pf == pytest.approx(
        score_images(naflex_encoder, ref, **kwargs).scores[0].pf, abs=1e-6
    )


def edit_json(folder: str, name: str, change) -> None:
    path = os.path.join(folder, name)
    with open(path) as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w") as handle:
        json.dump(data, handle)


@pytest.mark.parametrize(
    "breakage,message",
    [
        ("drop_weight", "lacks 1 weights"),
        ("bad_shape", "config.json asks vision_config.intermediate_size = 96, but model.safetensors holds"),
        ("truncated", "could not be read"),
        ("no_tokenizer", "has no tokenizer.json"),
        ("siglip_v1", "SigLIP (v1) checkpoint"),
        ("vision_only", "without both vision_config and text_config"),
        ("bad_json", "is not valid JSON"),
        ("no_head", "no attention-pooling head"),
        ("file", "is a file"),
    ],
)
def test_broken_checkpoints_get_one_line_errors(tmp_path, naflex_dir, breakage, message):
    folder = copy_as(naflex_dir, tmp_path, "broken")
    target = folder
    if breakage == "drop_weight":
        weights = load_file(os.path.join(folder, "model.safetensors"))
        weights.pop("vision_model.head.probe")
        save_file(weights, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    elif breakage == "bad_shape":
        edit_json(folder, "config.json", lambda d: d["vision_config"].update(intermediate_size=96))
    elif breakage == "truncated":
        path = os.path.join(folder, "model.safetensors")
        with open(path, "rb") as handle:
            head = handle.read(4096)
        with open(path, "wb") as handle:
            handle.write(head)
    elif breakage == "no_tokenizer":
        os.remove(os.path.join(folder, "tokenizer.json"))
    elif breakage == "siglip_v1":
        edit_json(folder, "tokenizer_config.json", lambda d: d.update(tokenizer_class="SiglipTokenizer"))
    elif breakage == "vision_only":
        edit_json(folder, "config.json", lambda d: d.pop("text_config"))
    elif breakage == "bad_json":
        with open(os.path.join(folder, "config.json"), "w") as handle:
            handle.write("{not json")
    elif breakage == "no_head":
        edit_json(folder, "config.json", lambda d: d["vision_config"].update(vision_use_head=False))
    elif breakage == "file":
        target = os.path.join(folder, "config.json")
    with pytest.raises(MascModelError) as error:
        MascEncoder.load(target, device="cpu")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_hub_id_that_cannot_be_fetched_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MascModelError) as error:
        MascEncoder.load("masc-tests/no-such-model", device="cpu", cache_dir=str(tmp_path))
    text = str(error.value)
    assert text.startswith("could not get 'masc-tests/no-such-model' from the Hugging Face Hub") and "\n" not in text


def test_precision_and_device(naflex_dir, naflex_encoder):
    bf16 = MascEncoder.load(naflex_dir, device="auto", precision="bf16")
    assert bf16.dtype == torch.bfloat16
    assert bf16.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    ref = load_photo("dog_00")
    out = load_photo("dog_01")
    kwargs = dict(
        reference=ref, reference_mask=box_mask(512, 512), mask=box_mask(512, 512), prompt=PROMPT, subject="dog"
    )
    low = score_images(bf16, out, **kwargs).scores[0]
    full = score_images(naflex_encoder, out, **kwargs).scores[0]
    assert low.cp == pytest.approx(full.cp, abs=0.02) and low.pf == pytest.approx(full.pf, abs=0.05)
    assert MascEncoder.load(naflex_dir, precision="auto", device="cpu").dtype == torch.float32


def test_patch_budget_is_configurable(naflex_dir):
    encoder = MascEncoder.load(naflex_dir, device="cpu", max_num_patches=256)
    out = load_photo("dog_01")
    score = score_images(encoder, out, mask=box_mask(512, 512), prompt=PROMPT, subject="dog").scores[0]
    assert score.grid == (16, 16)


def test_folder_digest_with_weight_samples_tells_apart_weights_of_the_same_size(tmp_path, naflex_dir):
    from masc_core.models.checkpoints import folder_digest

    copy = tmp_path / "copy"
    shutil.copytree(naflex_dir, copy)
    changed = tmp_path / "changed"
    shutil.copytree(naflex_dir, changed)
    weights = changed / "model.safetensors"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(255 - b for b in data[middle : middle + 4])  # same size, other weights
    weights.write_bytes(bytes(data))
    assert folder_digest(naflex_dir) == folder_digest(str(copy)) == folder_digest(str(changed))  # eval's cheap identity
    sampled = [folder_digest(str(f), sample_bytes=65536) for f in (naflex_dir, copy, changed)]
    assert sampled[0] == sampled[1] != sampled[2]
