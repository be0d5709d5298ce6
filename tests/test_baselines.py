"""Baselines: same-backbone global CP/PF and PF ablations, CLIP-I, CLIP-T, DINO-I, checked by hand and in an eval
run."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from masc_core.testing import build_clip, build_dino
from conftest import DATA, box_mask, call, load_photo
from eval_manifests import dreambench_rows, write_csv, write_masks
from masc_core import MascEncoder, MascModelError, score_images
from masc_core.evaluation.metrics import same_backbone_scores
from masc_core.models.embedders import ClipEmbedder, DinoEmbedder
from masc_core.metric.masks import grid_weights, hidden_patches
from masc_core.metric.stripping import strip_subject

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return build_clip(str(tmp_path_factory.mktemp("clip") / "tiny-clip"))


@pytest.fixture(scope="module")
def dino_dir(tmp_path_factory):
    return build_dino(str(tmp_path_factory.mktemp("dino") / "tiny-dino"))


def features(output):
    """transformers 4 returns a tensor from get_*_features, 5 a model output."""
    return output if torch.is_tensor(output) else output.pooler_output


def cosine(a, b) -> float:
    return float(F.cosine_similarity(a.float().reshape(1, -1), b.float().reshape(1, -1))[0])


def test_clip_embeddings_are_the_checkpoints(clip_dir):
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel

    embedder = ClipEmbedder.load(clip_dir, device=CPU, dtype=torch.float32, batch_size=2)
    images = [load_photo("dog_00"), load_photo("cat_00"), load_photo("dog_00"), load_photo("teapot_00")]
    got = embedder.images(images)
    assert got.shape == (4, 16) and embedder.forwards == 3  # the repeated photo is embedded once
    assert torch.equal(got[0], got[2])
    model = CLIPModel.from_pretrained(clip_dir).eval()
    pixels = CLIPImageProcessor.from_pretrained(clip_dir)(
        images=[Image.fromarray(i) for i in images], return_tensors="pt"
    )
    with torch.no_grad():
        expected = features(model.get_image_features(pixel_values=pixels["pixel_values"]))
        texts = ["a photo of a dog on the beach", "a red cartoon in the jungle"]
        tokens = AutoTokenizer.from_pretrained(clip_dir)(texts, padding=True, return_tensors="pt")
        expected_text = features(model.get_text_features(**tokens))
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(embedder.texts(texts), expected_text, atol=1e-5)


def test_dino_embedding_is_the_cls_token(dino_dir):
    from transformers import ViTImageProcessor, ViTModel

    embedder = DinoEmbedder.load(dino_dir, device=CPU, dtype=torch.float32)
    images = [load_photo("duck_toy_00"), load_photo("red_cartoon_00")]
    model = ViTModel.from_pretrained(dino_dir, add_pooling_layer=False).eval()
    pixels = ViTImageProcessor.from_pretrained(dino_dir)(
        images=[Image.fromarray(i) for i in images], return_tensors="pt"
    )
    with torch.no_grad():
        expected = model(pixel_values=pixels["pixel_values"]).last_hidden_state[:, 0]
    assert torch.allclose(embedder.images(images), expected, atol=1e-5)


def test_same_backbone_baselines_by_hand(naflex_dir):
    encoder = MascEncoder.load(naflex_dir, device="cpu", max_num_patches=64)
    reference = load_photo("dog_00")
    outs = [load_photo("dog_01"), load_photo("cat_00")[:300], load_photo("teapot_00"), load_photo("dog_02")]
    soft = box_mask(*outs[0].shape[:2])
    soft[: soft.shape[0] // 4] = 100  # 0.39 on the 0..255 scale: background for PF, foreground if misread
    masks = [
        soft,
        None,
        np.full(outs[2].shape[:2], 255, np.uint8),  # everything is subject: no background
        np.zeros(outs[3].shape[:2], np.uint8),  # nothing is subject: no foreground
    ]
    prompts = ["a photo of a dog on the beach", "a dog in the snow", "a dog with a city in the background", "the dog"]
    stripped = [strip_subject(p, "dog") for p in prompts]
    tokens = encoder.encode_images(outs)
    ref_tokens = encoder.encode_images([reference])[0]

    def pool(t, hidden=None):
        hidden = torch.zeros(1, t.tokens.shape[0], dtype=torch.bool) if hidden is None else hidden[None]
        return encoder.pool(t.tokens[None], hidden)[0][0]

    names = ["global_cp", "global_pf", "pf_full_stripped", "pf_bg_unstripped", "pf_fg_unstripped"]
    values, reasons = same_backbone_scores(
        encoder,
        names,
        reference_pooled=pool(ref_tokens)[None],
        outputs=tokens,
        masks=masks,
        prompts=prompts,
        stripped_prompts=stripped,
    )
    text = encoder.encode_texts(prompts)
    text_stripped = encoder.encode_texts(stripped)
    for i, t in enumerate(tokens):
        full = pool(t)
        assert values[i]["global_cp"] == pytest.approx(cosine(full, pool(ref_tokens)), abs=1e-5)
        assert values[i]["global_pf"] == pytest.approx(cosine(full, text[i]), abs=1e-5)
        assert values[i]["pf_full_stripped"] == pytest.approx(cosine(full, text_stripped[i]), abs=1e-5)
    # Background pool with the full prompt = MaSC's PF without stripping.
    masc = score_images(encoder, outs[0], mask=masks[0], prompt=prompts[0], subject=None, cp=False).scores[0]
    assert values[0]["pf_bg_unstripped"] == pytest.approx(masc.pf, abs=1e-5)
    foreground = hidden_patches(grid_weights(soft.astype(np.float32) / 255, tokens[0].grid))
    assert values[0]["pf_fg_unstripped"] == pytest.approx(cosine(pool(tokens[0], ~foreground), text[0]), abs=1e-5)
    assert values[0]["pf_fg_unstripped"] != pytest.approx(values[0]["pf_bg_unstripped"], abs=1e-3)
    assert reasons[0] == {}
    assert values[1]["pf_bg_unstripped"] is None and "no output mask" in reasons[1]["pf_bg_unstripped"]
    assert values[2]["pf_bg_unstripped"] is None and "covers the whole image" in reasons[2]["pf_bg_unstripped"]
    assert values[2]["pf_fg_unstripped"] is not None
    assert values[3]["pf_fg_unstripped"] is None and "no foreground patch" in reasons[3]["pf_fg_unstripped"]
    assert values[3]["pf_bg_unstripped"] is not None


def test_eval_reports_every_baseline_side_by_side(naflex_dir, clip_dir, dino_dir, tmp_path):
    write_masks(str(tmp_path))
    rows = dreambench_rows(references=("dog_00", "cat_00"), methods=("a", "b"), prompts=2, seeds=2, seed=3)
    for row in rows[:8]:  # the dog group: two reference views
        row["ref"] = f"{DATA}/dog_00.jpg|{DATA}/dog_01.jpg"
        row["ref_mask"] = "masks/dog_00.png|masks/dog_01.png"
    manifest = write_csv(str(tmp_path / "m.csv"), rows)
    code, out, err = call(
        "eval",
        manifest,
        "--model",
        naflex_dir,
        "--device",
        "cpu",
        "--max-patches",
        "64",
        "--out-dir",
        tmp_path / "out",
        "--baselines",
        "global",
        "--clip",
        clip_dir,
        "--dino",
        dino_dir,
        "--bootstrap",
        "50",
        "--quiet",
        "--min-foreground",
        "0",
    )
    assert code == 0, err
    results = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    clip = ClipEmbedder.load(clip_dir, device=CPU, dtype=torch.float32)
    dino = DinoEmbedder.load(dino_dir, device=CPU, dtype=torch.float32)
    for row in (results[0], results[9]):
        out_image = np.asarray(Image.open(row["out"]).convert("RGB"))
        views = [np.asarray(Image.open(p).convert("RGB")) for p in row["ref"]]
        c_out, c_views = clip.images([out_image])[0], clip.images(views)
        assert row["clip_i"] == pytest.approx(np.mean([cosine(c_out, v) for v in c_views]), abs=1e-5)
        assert row["clip_t"] == pytest.approx(cosine(c_out, clip.texts([row["prompt"]])[0]), abs=1e-5)
        d_out, d_views = dino.images([out_image])[0], dino.images(views)
        assert row["dino_i"] == pytest.approx(np.mean([cosine(d_out, v) for v in d_views]), abs=1e-5)
    assert len(results[0]["ref"]) == 2 and len(results[0]["cp_per_reference"]) == 2
    summary = json.load(open(tmp_path / "out" / "summary.json"))
    assert list(summary["agreement"]["cp"]["metrics"]) == ["cp", "global_cp", "clip_i", "dino_i"]
    assert list(summary["agreement"]["pf"]["metrics"]) == ["pf", "global_pf", "clip_t"]
    assert summary["metrics"] == ["cp", "global_cp", "clip_i", "dino_i", "pf", "global_pf", "clip_t"]
    for line in ("clip_i", "dino_i", "clip_t"):
        assert f"\n  {line} " in out


def test_baseline_checkpoints_are_checked(clip_dir, dino_dir, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(dino_dir, pickled)
    for name in os.listdir(pickled):
        if name.endswith(".safetensors"):
            os.rename(pickled / name, pickled / "pytorch_model.bin")
    with pytest.raises(MascModelError, match="has no .safetensors weights"):
        DinoEmbedder.load(str(pickled), device=CPU, dtype=torch.float32)
    with pytest.raises(MascModelError, match="holds a 'clip' model: expected vit or dinov2"):
        DinoEmbedder.load(clip_dir, device=CPU, dtype=torch.float32)
    with pytest.raises(MascModelError, match="holds a 'vit' model: expected clip"):
        ClipEmbedder.load(dino_dir, device=CPU, dtype=torch.float32)
    no_processor = tmp_path / "no-processor"
    shutil.copytree(clip_dir, no_processor)
    os.remove(no_processor / "preprocessor_config.json")
    with pytest.raises(MascModelError, match="has no preprocessor_config.json"):
        ClipEmbedder.load(str(no_processor), device=CPU, dtype=torch.float32)
    truncated = tmp_path / "truncated"
    shutil.copytree(dino_dir, truncated)
    from safetensors.torch import load_file, save_file

    weights = load_file(str(truncated / "model.safetensors"))
    save_file(
        {k: v for k, v in weights.items() if "encoder.layer.1." not in k},
        str(truncated / "model.safetensors"),
        metadata={"format": "pt"},
    )
    with pytest.raises(MascModelError, match="lacks .* weights .* the checkpoint is incomplete"):
        DinoEmbedder.load(str(truncated), device=CPU, dtype=torch.float32)
