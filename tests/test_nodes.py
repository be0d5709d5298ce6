"""The node pack without ComfyUI: import as ComfyUI does, node contracts, API workflows, scores = masc_core's."""

from __future__ import annotations

import glob
import inspect
import json
import os

import numpy as np
import pytest
import torch
from PIL import Image

from comfy_harness import CORE_NODES, ROOT, import_pack, run_graph, stand_in_loras, stand_in_sampling
from conftest import box_mask, load_photo

WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, "workflows", "api", "*.json")))


def node_classes(pack):
    return pack.nodes.NODE_CLASS_MAPPINGS


NODE_IDS = (
    "MaSCLoadEncoder MaSCConceptPreservation MaSCPromptFollowing MaSCStripSubject MaSCScore MaSCSelectBest MaSCGate "
    "MaSCLoadAutoMaskModel MaSCAutoMask MaSCLoadSAM3Model MaSCSampleUntil MaSCSampleUntilCustom MaSCRules MaSCPrune "
    "MaSCLogScores MaSCSubject MaSCScoreSubjects MaSCContactSheet MaSCPick MaSCScoreVideo MaSCVideoOptions "
    "MaSCSweepLoRA MaSCSweepLoRAModel MaSCSweep MaSCSweepCustom"
).split()
"""Every node id the pack has published: an id is its class's name, and saved workflows name nodes by id, so a
class renamed (or a node dropped) fails here."""


def test_pack_imports_as_comfyui_loads_it(pack):
    assert list(pack.nodes.NODE_CLASS_MAPPINGS) == list(pack.nodes.NODE_DISPLAY_NAME_MAPPINGS) == NODE_IDS
    assert all(name.startswith("MaSC") for name in pack.nodes.NODE_CLASS_MAPPINGS)  # core ids are never shadowed
    assert pack.nodes.NODE_DISPLAY_NAME_MAPPINGS["MaSCLoadEncoder"] == "Load MaSC Encoder"
    assert pack.nodes.NODE_DISPLAY_NAME_MAPPINGS["MaSCConceptPreservation"] == "MaSC Concept Preservation"
    assert pack.nodes.NODE_DISPLAY_NAME_MAPPINGS["MaSCPromptFollowing"] == "MaSC Prompt Following"
    assert pack.nodes.NODE_DISPLAY_NAME_MAPPINGS["MaSCStripSubject"] == "Strip Subject"
    assert os.path.isfile(os.path.join(ROOT, pack.WEB_DIRECTORY, "masc_scores.js"))
    assert pack.__name__ == ROOT.replace(".", "_x_")


FILE_LISTS = {("MaSCSweepLoRA", "lora_name")}
"""Combos of a model folder's files, as core's LoraLoader's: empty where the folder holds none (as here, outside
ComfyUI)."""


@pytest.mark.parametrize("node_id", sorted(import_pack().nodes.NODE_CLASS_MAPPINGS))
def test_node_contract(pack, node_id, comfy_dirs):
    cls = pack.nodes.NODE_CLASS_MAPPINGS[node_id]
    spec = cls.INPUT_TYPES()
    assert set(spec) <= {"required", "optional", "hidden"} and spec["required"]
    assert cls.CATEGORY == "MaSC" and cls.DESCRIPTION
    # The description is the class's own docstring (not a base's), and a loader's names the Hub id it downloads.
    assert cls.__dict__.get("__doc__") and cls.DESCRIPTION == " ".join(cls.__doc__.split())
    assert getattr(cls, "HUB_ID", "") in cls.DESCRIPTION
    returns = cls.RETURN_TYPES
    assert isinstance(returns, tuple) and all(isinstance(t, str) for t in returns)
    assert len(cls.RETURN_NAMES) == len(returns) == len(cls.OUTPUT_TOOLTIPS)
    function = getattr(cls, cls.FUNCTION)
    parameters = inspect.signature(function).parameters
    names = [p for p in parameters if p != "self"]
    required, optional, hidden = list(spec["required"]), list(spec.get("optional", {})), list(spec.get("hidden", {}))
    if [parameters[n].kind for n in names] != [inspect.Parameter.VAR_KEYWORD]:  # else: every input, by name
        assert sorted(names) == sorted(required + optional + hidden)
        for name in optional + hidden:
            assert parameters[name].default is None, f"optional or hidden input {name} needs a default of None"
    assert set(spec.get("hidden", {}).values()) <= {"EXTRA_PNGINFO", "UNIQUE_ID", "PROMPT"}
    for section in ("required", "optional"):
        for name, entry in spec.get(section, {}).items():
            assert isinstance(entry, tuple) and 1 <= len(entry) <= 2
            kind = entry[0]
            assert isinstance(kind, (str, list)) and (
                not isinstance(kind, list) or kind or (node_id, name) in FILE_LISTS
            )
            assert entry[1].get("tooltip"), f"{node_id}.{name} has no tooltip"
            if "default" in entry[1] and isinstance(kind, list):
                assert entry[1]["default"] in kind
    json.dumps(spec)  # /object_info serializes it


def test_encoder_models_combo_lists_folders_and_the_hub_id(pack, comfy_dirs):
    from_pack = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"].INPUT_TYPES()["required"]["model"][0]
    assert from_pack == ["google/siglip2-so400m-patch16-naflex"]  # local folder listed once, hub id not repeated
    os.makedirs(os.path.join(comfy_dirs["models"], "masc", "not-a-checkpoint"))
    assert (
        "not-a-checkpoint"
        not in pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"].INPUT_TYPES()["required"]["model"][0]
    )


def load_encoder(pack, **overrides):
    options = dict(model="google/siglip2-so400m-patch16-naflex", device="cpu", precision="fp32", max_patches=1024)
    options.update(overrides)
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"]().load(**options)[0]


def test_encoder_is_loaded_once_and_shared(pack, comfy_dirs):
    first = load_encoder(pack)
    assert load_encoder(pack) is first
    assert load_encoder(pack, max_patches=256) is not first


@pytest.mark.parametrize("path", WORKFLOWS, ids=[os.path.basename(p) for p in WORKFLOWS])
def test_api_workflows_run(pack, comfy_dirs, path, tmp_path):
    """Every API workflow runs; the diffusion ones on the harness's stand-in checkpoint, KSampler and VAE."""
    with open(path) as handle:
        graph = json.load(handle)
    types_used = {node["class_type"] for node in graph.values()}
    missing = {t for t in types_used if t not in pack.nodes.NODE_CLASS_MAPPINGS and t not in CORE_NODES}
    assert not missing, f"unknown node types {missing}"
    from importlib import import_module

    blocker = import_module(pack.__name__ + ".nodes.host").ExecutionBlocker
    named = sorted({n["inputs"]["lora_name"] for n in graph.values() if isinstance(n["inputs"].get("lora_name"), str)})
    files = {name: 0.3 * (k + 1) for k, name in enumerate(named)}  # the LoRA files a template names, as stand-ins
    with stand_in_sampling(pack), stand_in_loras(pack, files):
        result = run_graph(
            graph, pack.nodes.NODE_CLASS_MAPPINGS, comfy_dirs["input"], blocker, output_dir=str(tmp_path)
        )
    assert result["shown"] or result["saved"] or result["previews"]
    for node_id, value in result["shown"].items():
        if isinstance(value, float):
            assert not np.isnan(value)
    for paths in result["saved_files"].values():  # every saved PNG carries the scores of the MaSC nodes upstream
        assert paths and all(json.loads(Image.open(p).text["masc"])["nodes"] for p in paths)


def float_image(name):
    return torch.from_numpy(load_photo(name).astype(np.float32) / 255.0)[None]


def test_node_scores_equal_masc_core_on_the_same_pixels(pack, comfy_dirs):
    from masc_core import MascEncoder, score_images

    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    encoder = load_encoder(pack)
    ref, out = float_image("dog_00"), torch.cat([float_image("dog_01"), float_image("cat_00")])
    ref_mask = torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None]
    out_mask = torch.from_numpy(box_mask(512, 512, 0.1, 0.2, 0.9, 0.6, dtype=np.float32))[None]
    prompt = "A photo of a DOG on the beach"
    node = nodes["MaSCScore"]().score(encoder, ref, ref_mask, out, prompt, "dog", heatmaps=True, mask=out_mask)
    cp, pf, scores, stripped = node["result"][:4]
    direct = score_images(
        MascEncoder.load(comfy_dirs["checkpoint"], device="cpu"),
        [load_photo("dog_01"), load_photo("cat_00")],
        reference=load_photo("dog_00"),
        reference_mask=box_mask(512, 512),
        mask=box_mask(512, 512, 0.1, 0.2, 0.9, 0.6),
        prompt=prompt,
        subject="dog",
    )
    assert [s.cp for s in scores.scores] == pytest.approx(direct.cp, abs=1e-6)
    assert [s.pf for s in scores.scores] == pytest.approx(direct.pf, abs=1e-6)
    assert cp == pytest.approx(np.mean(direct.cp), abs=1e-6) and pf == pytest.approx(np.mean(direct.pf), abs=1e-6)
    assert stripped == "A photo of on the beach"
    reference_heatmap, image_heatmap, attention_heatmap, report = node["result"][4:]
    assert reference_heatmap.shape == image_heatmap.shape == attention_heatmap.shape == (2, 512, 512, 3)
    assert report.splitlines()[1].startswith("#0") and "PF text: 'A photo of on the beach'" in report
    assert node["ui"]["text"] == [report]
    # The separate CP and PF nodes agree with MaSC Score, and a batch of one gives that image's value.
    single_cp = nodes["MaSCConceptPreservation"]().score(encoder, ref, ref_mask, out[:1], heatmaps=False)["result"][0]
    single_pf = nodes["MaSCPromptFollowing"]().score(encoder, out[:1], out_mask, prompt, "dog", heatmaps=False)[
        "result"
    ][0]
    assert single_cp == pytest.approx(direct.cp[0], abs=1e-6) and single_pf == pytest.approx(direct.pf[0], abs=1e-6)


def pack_errors(pack):
    """The pack's own copy of masc_core's errors (ComfyUI imports masc_core inside the pack)."""
    from importlib import import_module

    return import_module(pack.__name__ + ".masc_core.errors")


def test_empty_reference_mask_from_load_image_is_explained(pack, comfy_dirs):
    MascInputError = pack_errors(pack).MascInputError
    encoder = load_encoder(pack)
    with pytest.raises(MascInputError, match="empty 64x64 mask Load Image gives"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCConceptPreservation"]().score(
            encoder, float_image("dog_00"), torch.zeros(1, 64, 64), float_image("dog_01"), heatmaps=False
        )


def test_batch_counts_that_do_not_fit_name_the_input(pack, comfy_dirs):
    MascInputError = pack_errors(pack).MascInputError
    encoder = load_encoder(pack)
    images = torch.cat([float_image("dog_01")] * 3)
    with pytest.raises(MascInputError, match="mask has 2 masks for 3 images"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCPromptFollowing"]().score(
            encoder, images, torch.ones(2, 64, 64), "p", "dog", heatmaps=False
        )


def test_missing_output_mask_is_stated_in_the_report(pack, comfy_dirs):
    encoder = load_encoder(pack)
    out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]().score(
        encoder, float_image("dog_00"), torch.ones(1, 64, 64), float_image("dog_01"), "a dog", "dog", heatmaps=False
    )
    assert np.isnan(out["result"][1])
    assert "no output mask given" in out["result"][-1]


def scored_batch(pack, count=4):
    encoder = load_encoder(pack)
    photos = ["dog_01", "cat_00", "dog_02", "teapot_00"][:count]
    images = torch.cat([float_image(p) for p in photos])
    masks = torch.from_numpy(
        np.stack([box_mask(512, 512, 0.1, 0.1, 0.1 + 0.2 * (i + 1), 0.5, np.float32) for i in range(count)])
    )
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]().score(
        encoder,
        float_image("dog_00"),
        torch.from_numpy(box_mask(512, 512, dtype=np.float32)),
        images,
        "a dog in the snow",
        "dog",
        heatmaps=False,
        mask=masks,
    )
    return node["result"][2], images, masks


def test_select_best_carries_latents_and_masks_in_rank_order(pack, comfy_dirs):
    scores, images, masks = scored_batch(pack)
    latent = {
        "samples": torch.arange(4, dtype=torch.float32).view(4, 1, 1, 1).expand(4, 4, 8, 8).clone(),
        "batch_index": [10, 11, 12, 13],
    }
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSelectBest"]()
    result = node.select(scores, images, "cp", 1.0, 1.0, 2, -1.0, -1.0, False, 0.05, latent=latent, mask=masks)[
        "result"
    ]
    chosen_images, chosen_latent, chosen_mask, best, indices, ranking = result
    order = sorted(range(4), key=lambda i: -scores.scores[i].cp)[:2]
    assert best == order[0] and indices == f"{order[0]}, {order[1]}"
    assert torch.equal(chosen_images, images[order])
    assert chosen_latent["samples"][:, 0, 0, 0].tolist() == [float(i) for i in order]
    assert chosen_latent["batch_index"] == [10 + i for i in order]
    assert torch.equal(chosen_mask, masks[order])
    assert ranking.splitlines()[1].split()[1] == str(order[0])


def test_select_best_and_gate_block_downstream_when_nothing_passes(pack, comfy_dirs):
    from importlib import import_module

    blocker = import_module(pack.__name__ + ".nodes.host").ExecutionBlocker
    scores, images, _ = scored_batch(pack)
    select = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSelectBest"]().select(
        scores, images, "cp", 1.0, 1.0, 1, 0.9999, -1.0, False, 0.05
    )
    images_out, latent_out, mask_out, best, indices, ranking = select["result"]
    assert all(isinstance(v, blocker) and v.message is None for v in (images_out, latent_out, mask_out))
    assert best == -1 and "no image passed" in ranking
    gate = pack.nodes.NODE_CLASS_MAPPINGS["MaSCGate"]().gate(scores, images, 0.9999, -1.0, False, 0.05)
    assert isinstance(gate["result"][0], blocker) and gate["result"][3] == 0
    assert "0 of 4 passed; downstream nodes skipped" in gate["result"][4]


def test_gate_passes_what_clears_the_thresholds(pack, comfy_dirs):
    scores, images, masks = scored_batch(pack)
    cps = [s.cp for s in scores.scores]
    threshold = sorted(cps)[1] + 1e-9  # the two best pass
    fractions = [s.foreground_fraction for s in scores.scores]
    gate = pack.nodes.NODE_CLASS_MAPPINGS["MaSCGate"]().gate(scores, images, threshold, -1.0, True, 0.09, mask=masks)[
        "result"
    ]
    expected = [i for i in range(4) if cps[i] >= threshold and fractions[i] >= 0.09]
    assert gate[3] == len(expected) and torch.equal(gate[0], images[expected])
    assert torch.equal(gate[2], masks[expected])
    with pytest.raises(pack_errors(pack).MascInputError, match="images has 3 images but scores has 4"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCGate"]().gate(scores, images[:3], 0.5, -1.0, False, 0.05)


def load_segmenter(pack):
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadAutoMaskModel"]().load("CIDAS/clipseg-rd64-refined", "cpu", "fp32")[
        0
    ]


def test_auto_mask_node_masks_a_batch_and_feeds_scoring(pack, comfy_dirs):
    from masc_core.models.clipseg import ClipSegSegmenter

    segmenter = load_segmenter(pack)
    assert load_segmenter(pack) is segmenter
    images = torch.cat([float_image("dog_01"), float_image("cat_00")])
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCAutoMask"]()
    masks, preview, report = node.mask(segmenter, images, "dog", 0.5, 0)["result"]
    assert masks.shape == (2, 512, 512) and set(torch.unique(masks).tolist()) == {0.0, 1.0}  # non-trivial masks
    assert preview.shape == (2, 512, 512, 3)
    direct = ClipSegSegmenter.load(
        os.path.join(comfy_dirs["models"], "clipseg", "CIDAS", "clipseg-rd64-refined"), device="cpu"
    ).masks([load_photo("dog_01"), load_photo("cat_00")], "dog", threshold=0.5)
    assert torch.equal(masks, torch.stack(direct))
    for i, line in enumerate(report.splitlines()):
        assert line.startswith(f"#{i}: mask covers {100 * float(masks[i].mean()):.1f}%")
    looser = node.mask(segmenter, images, "dog", 0.2, 0)["result"][0]
    grown = node.mask(segmenter, images, "dog", 0.5, 6)["result"][0]
    assert looser.sum() >= masks.sum() and grown.sum() >= masks.sum()
    score = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]().score(
        load_encoder(pack),
        float_image("dog_00"),
        torch.from_numpy(box_mask(512, 512, dtype=np.float32)),
        images,
        "a dog",
        "dog",
        heatmaps=False,
        mask=grown,
    )["result"][2]
    assert [s.foreground_fraction for s in score.scores] == pytest.approx([float(m.mean()) for m in grown], abs=1e-6)


def test_strip_subject_node(pack):
    out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCStripSubject"]().strip(
        "a photo of a sks dog on the beach", "sks dog, dog"
    )
    assert out["result"] == ("a photo of on the beach",) and out["ui"]["text"] == ["a photo of on the beach"]


# --- ComfyUI's --fp16-intermediates (float16 IMAGE/MASK/LATENT tensors) ------------------------------------


@pytest.mark.parametrize("path", WORKFLOWS, ids=[os.path.basename(p) for p in WORKFLOWS])
def test_api_workflows_score_the_same_with_float16_intermediates(pack, comfy_dirs, path):
    """Load Image's float16 pixels round back to the file's bytes: every report and value is unchanged."""
    from importlib import import_module

    with open(path) as handle:
        graph = json.load(handle)
    if {node["class_type"] for node in graph.values()} & {
        "KSampler",
        "MaSCSampleUntil",
        "MaSCSampleUntilCustom",
        "MaSCSweep",
        "SamplerCustomAdvanced",
    }:
        pytest.skip(
            "float16 latents change the generated pixels themselves (every node's float16 path is checked below)"
        )
    blocker = import_module(pack.__name__ + ".nodes.host").ExecutionBlocker
    full = run_graph(graph, pack.nodes.NODE_CLASS_MAPPINGS, comfy_dirs["input"], blocker)
    half = run_graph(
        graph, pack.nodes.NODE_CLASS_MAPPINGS, comfy_dirs["input"], blocker, intermediate_dtype=torch.float16
    )
    assert {k: v.get("text") for k, v in half["ui"].items()} == {k: v.get("text") for k, v in full["ui"].items()}
    assert half["shown"] == full["shown"] and half["blocked"] == full["blocked"]


def score_batch(node_result: dict):
    """The MASC_SCORES output of a scoring node's result."""
    return next(value for value in node_result["result"] if hasattr(value, "scores"))


def test_every_node_accepts_float16_images_masks_and_latents(pack, comfy_dirs):
    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    encoder = load_encoder(pack)
    ref, out = float_image("dog_00"), torch.cat([float_image("dog_01"), float_image("cat_00")])
    ref_mask = torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None]
    out_mask = torch.from_numpy(
        np.stack([box_mask(512, 512, 0.1, 0.2, 0.9, 0.6 + 0.1 * i, np.float32) for i in range(2)])
    )

    def both(call):
        """The node's result with float32 tensors and with float16 ones."""
        return call(lambda t: t), call(lambda t: t.half())

    for name, call in {
        "MaSCConceptPreservation": lambda c: nodes[name]().score(
            encoder, c(ref), c(ref_mask), c(out), heatmaps=True, mask=c(out_mask)
        ),
        "MaSCPromptFollowing": lambda c: nodes[name]().score(
            encoder, c(out), c(out_mask), "a dog on the beach", "dog", heatmaps=True
        ),
        "MaSCScore": lambda c: nodes[name]().score(
            encoder, c(ref), c(ref_mask), c(out), "a dog", "dog", heatmaps=True, mask=c(out_mask)
        ),
    }.items():
        full, half = both(call)
        assert [s.to_dict() for s in score_batch(half).scores] == [s.to_dict() for s in score_batch(full).scores], name
        assert half["ui"]["text"] == full["ui"]["text"], name
    scores = nodes["MaSCScore"]().score(encoder, ref, ref_mask, out, "a dog", "dog", heatmaps=False, mask=out_mask)[
        "result"
    ][2]
    latent = {"samples": torch.randn(2, 4, 8, 8), "batch_index": [5, 6]}
    select = nodes["MaSCSelectBest"]().select
    for run in (
        lambda c: select(
            scores,
            c(out),
            "cp",
            1.0,
            1.0,
            2,
            -1.0,
            -1.0,
            False,
            0.05,
            latent={**latent, "samples": c(latent["samples"])},
            mask=c(out_mask),
        ),
        lambda c: nodes["MaSCGate"]().gate(
            scores,
            c(out),
            -1.0,
            -1.0,
            False,
            0.05,
            latent={**latent, "samples": c(latent["samples"])},
            mask=c(out_mask),
        ),
    ):
        full, half = both(run)
        assert half["ui"]["text"] == full["ui"]["text"]
        assert torch.equal(half["result"][0].float(), full["result"][0].half().float())  # images carried as given
        assert torch.equal(half["result"][1]["samples"].float(), full["result"][1]["samples"].half().float())
        assert half["result"][1]["batch_index"] == full["result"][1]["batch_index"]
    segmenter = load_segmenter(pack)
    full, half = both(lambda c: nodes["MaSCAutoMask"]().mask(segmenter, c(out), "dog", 0.5, 0))
    assert torch.equal(half["result"][0], full["result"][0]) and half["result"][2] == full["result"][2]


def test_thumbnails_on_the_node_are_the_image_outputs_at_preview_size(pack, comfy_dirs, tmp_path, monkeypatch):
    """One rendered map feeds both the IMAGE output (image size) and the thumbnail (at most 512 px)."""
    host = pack.nodes.host
    monkeypatch.setenv(host.PREVIEW_DIR_ENV, str(tmp_path / "previews"))
    encoder = load_encoder(pack)
    wide = torch.from_numpy(
        np.asarray(Image.fromarray(load_photo("dog_01")).resize((1100, 600)), dtype=np.float32) / 255.0
    )[None]
    outputs = torch.cat([wide, torch.flip(wide, dims=[2])])
    ref_mask = torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None]
    out_mask = torch.from_numpy(box_mask(600, 1100, dtype=np.float32))[None]
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]()
    scored = node.score(
        encoder, float_image("dog_00"), ref_mask, outputs, "a dog on the beach", "dog", heatmaps=True, mask=out_mask
    )
    image_heatmap = scored["result"][5]
    assert image_heatmap.shape == (2, 600, 1100, 3)
    shown = scored["ui"]["images"]
    assert [entry["type"] for entry in shown] == ["temp", "temp"]
    for entry, rendered in zip(shown, image_heatmap):
        thumbnail = np.asarray(Image.open(tmp_path / "previews" / entry["filename"]).convert("RGB"))
        assert thumbnail.shape == (279, 512, 3)
        pixels = np.rint(rendered.numpy() * 255.0).astype(np.uint8)
        assert np.array_equal(thumbnail, np.asarray(host.preview_thumbnail(pixels)))
    # Heatmaps off: the outputs themselves, captioned, at the same size; the file names do not collide.
    plain = node.score(
        encoder, float_image("dog_00"), ref_mask, outputs, "a dog on the beach", "dog", heatmaps=False, mask=out_mask
    )
    names = [entry["filename"] for entry in plain["ui"]["images"]]
    assert len(names) == 2 and not set(names) & {entry["filename"] for entry in shown}
    thumbnail = np.asarray(Image.open(tmp_path / "previews" / names[0]).convert("RGB"))
    assert thumbnail.shape == (279, 512, 3)
    source = np.asarray(host.preview_thumbnail(np.rint(outputs[0].numpy() * 255.0).astype(np.uint8)))
    assert np.array_equal(thumbnail[60:], source[60:]) and not np.array_equal(
        thumbnail[:20], source[:20]
    )  # caption band on top


def test_previews_are_written_only_where_asked_outside_comfyui(pack, monkeypatch):
    host = pack.nodes.host
    monkeypatch.delenv(host.PREVIEW_DIR_ENV, raising=False)
    assert host.save_previews([np.zeros((40, 30, 3), np.uint8)], "masc_test") == []
    assert host.thumbnail_size(1024, 1024) == (512, 512) and host.thumbnail_size(1100, 600) == (512, 279)
    assert host.thumbnail_size(300, 200) == (300, 200) and host.thumbnail_size(700, 3000) == (119, 512)


def test_image_batches_are_the_pictures_over_255(pack):
    pictures = [load_photo("cat_00"), load_photo("cat_01")]
    batch = pack.nodes.convert.to_comfy_image_batch(pictures)
    assert batch.dtype == torch.float32 and batch.shape == (2, 512, 512, 3)
    assert torch.equal(batch, torch.from_numpy(np.stack(pictures)).float() / 255.0)


def test_sam3_loader_feeds_auto_mask_with_the_same_masks_as_the_library(pack, comfy_dirs):
    """Load MaSC SAM3 Model lists models/sam3 folders; its MASC_SEGMENTER is the CLIPSeg loader's type to Auto Mask."""
    from masc_core.models.sam3 import Sam3Segmenter

    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    loader = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadSAM3Model"]
    assert loader.INPUT_TYPES()["required"]["model"][0][:1] == ["tiny-sam3"]
    assert loader.INPUT_TYPES()["required"]["model"][0][-1] == "facebook/sam3"
    segmenter = loader().load("tiny-sam3", "cpu", "fp32", 0.5)[0]
    assert loader().load("tiny-sam3", "cpu", "fp32", 0.5)[0] is segmenter  # shared per settings
    stricter = loader().load("tiny-sam3", "cpu", "fp32", 0.9)[0]
    assert stricter is not segmenter and stricter.core.score_threshold == 0.9
    images = torch.cat([float_image("dog_01"), float_image("cat_00")])
    masks, preview, report = pack.nodes.NODE_CLASS_MAPPINGS["MaSCAutoMask"]().mask(segmenter, images, "dog", 0.5, 0)[
        "result"
    ]
    direct = Sam3Segmenter.load(os.path.join(comfy_dirs["models"], "sam3", "tiny-sam3"), device="cpu")
    assert torch.equal(
        masks, torch.stack(direct.masks([load_photo("dog_01"), load_photo("cat_00")], "dog", threshold=0.5))
    )
    assert 0 < float(masks.mean()) < 1 and preview.shape == (2, 512, 512, 3)
    assert report.splitlines()[0].startswith(f"#0: mask covers {100 * float(masks[0].mean()):.1f}%")
    with pytest.raises(pack_errors(pack).MascInputError, match="score_threshold is 1.5"):
        loader().load("tiny-sam3", "cpu", "fp32", 1.5)  # a value over a link is held to the widget's range
