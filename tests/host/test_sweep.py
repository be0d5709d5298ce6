"""MaSC Sweep in a real ComfyUI, on the random SD1.5 with three random LoRA files built at test time by the host's
own key map (``build_loras.py``):

- 3 LoRA files x 2 strengths + the baseline x 2 prompts x 2 seeds: 28 images, every cell's image pixel-identical to
  core's LoraLoader + CLIPTextEncode + KSampler + VAE Decode at its seed (the baseline without LoraLoader), a
  strength above 0 changing the pixels;
- the report, the grid, the chart and the recommended cell's outputs are there; every saved image's PNG names its
  cell, prompt and seed (``read``), and MaSC Log Scores logs one row per image with its cell;
- a LoRA for another model is refused in one line naming the file, before any image is sampled.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import ENCODER_NAME, FOREIGN_LORA, SEGMENTER_NAME, TEST_LORAS, read_scores
from .graphs import node

HERE = os.path.dirname(os.path.abspath(__file__))
SIDE = 128
SEED = 300
PROMPTS = ["a photo of a dog on the beach", "a photo of a dog in the snow"]
FILES = TEST_LORAS
STRENGTHS = (0.5, 1.0)
FOREIGN = FOREIGN_LORA


def _common(sd15: str) -> dict:
    return {
        "ckpt": node("CheckpointLoaderSimple", ckpt_name=sd15),
        "latent": node("EmptyLatentImage", width=SIDE, height=SIDE, batch_size=1),
        "ref": node("LoadImage", image="masc_example_dog_00.jpg"),
        "segmenter": node("MaSCLoadAutoMaskModel", model=SEGMENTER_NAME, device="cpu", precision="fp32"),
        "refmask": node(
            "MaSCAutoMask", subject="dog", threshold=0.4, dilation=0, segmenter=["segmenter", 0], images=["ref", 0]
        ),
        "encoder": node("MaSCLoadEncoder", model=ENCODER_NAME, device="cpu", precision="fp32", max_patches=1024),
    }


def sweep_graph(sd15: str, files: list[str]) -> dict:
    graph = _common(sd15)
    previous = None
    for k, name in enumerate(files):
        chained = {} if previous is None else {"cells": [previous, 0]}
        graph[f"lora{k}"] = node(
            "MaSCSweepLoRA", lora_name=name, strength_model=", ".join(map(str, STRENGTHS)), strength_clip="", **chained
        )
        previous = f"lora{k}"
    graph["sweep"] = node(
        "MaSCSweep",
        model=["ckpt", 0],
        clip=["ckpt", 1],
        vae=["ckpt", 2],
        latent_image=["latent", 0],
        cells=[previous, 0],
        prompts="\n".join(PROMPTS),
        negative="blurry",
        seed=SEED,
        seeds=2,
        steps=1,
        cfg=7.0,
        sampler_name="euler",
        scheduler="normal",
        denoise=1.0,
        encoder=["encoder", 0],
        reference_image=["ref", 0],
        reference_mask=["refmask", 0],
        subject="dog",
        segmenter=["segmenter", 0],
        mask_threshold=0.4,
        pf_margin=0.02,
        confidence=0.95,
        race=False,
    )
    graph["images"] = node("SaveImage", images=["sweep", 7], filename_prefix="masc_sweep_images")
    graph["grid"] = node("SaveImage", images=["sweep", 5], filename_prefix="masc_sweep_grid")
    graph["chart"] = node("SaveImage", images=["sweep", 6], filename_prefix="masc_sweep_chart")
    graph["name"] = node("PreviewAny", source=["sweep", 2])
    graph["log"] = node("MaSCLogScores", scores=["sweep", 9], filename="masc_sweep_test.jsonl", method="")
    return graph


def plain_graph(sd15: str, cells: list, prompt: str, seed: int) -> dict:
    """Core's own chain for each cell ((file, strength), or None for the baseline) at ``prompt`` and ``seed``."""
    graph = {k: v for k, v in _common(sd15).items() if k in ("ckpt", "latent")}
    for k, cell in enumerate(cells):
        model, clip = ["ckpt", 0], ["ckpt", 1]
        if cell is not None:
            graph[f"lora{k}"] = node(
                "LoraLoader", model=model, clip=clip, lora_name=cell[0], strength_model=cell[1], strength_clip=cell[1]
            )
            model, clip = [f"lora{k}", 0], [f"lora{k}", 1]
        graph[f"pos{k}"] = node("CLIPTextEncode", text=prompt, clip=clip)
        graph[f"neg{k}"] = node("CLIPTextEncode", text="blurry", clip=clip)
        graph[f"ks{k}"] = node(
            "KSampler", model=model, seed=seed, steps=1, cfg=7.0, sampler_name="euler", scheduler="normal",
            positive=[f"pos{k}", 0], negative=[f"neg{k}", 0], latent_image=["latent", 0], denoise=1.0,
        )  # fmt: skip
        graph[f"dec{k}"] = node("VAEDecode", samples=[f"ks{k}", 0], vae=["ckpt", 2])
        graph[f"save{k}"] = node("SaveImage", images=[f"dec{k}", 0], filename_prefix=f"masc_plain_cell{k}")
    return graph


CELLS = [None] + [(name, strength) for name in FILES for strength in STRENGTHS]
"""The sweep's cells in its order: the baseline, then each file's strengths in the order chained."""


@pytest.fixture(scope="module")
def swept(server, sd15, loras, installed):
    log = os.path.join(installed["output"], "masc_sweep_test.jsonl")
    if os.path.exists(log):
        os.remove(log)
    entry = server.run(sweep_graph(sd15, loras), timeout=1800, extra_data=hostapi.FROM_FRONT_END)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    return entry


def _pixels(path: str) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def test_every_cell_is_loraloader_and_ksampler_at_its_seed(swept, server, sd15, installed):
    images = hostapi.saved_images(swept, "images", installed["output"])
    assert len(images) == len(CELLS) * len(PROMPTS) * 2
    per_cell = len(PROMPTS) * 2
    for prompt_index, seed_index in ((0, 1), (1, 0)):
        entry = server.run(plain_graph(sd15, CELLS, PROMPTS[prompt_index], SEED + seed_index), timeout=1800)
        assert hostapi.status(entry) == "success", hostapi.explain(entry)
        plain = [_pixels(hostapi.saved_images(entry, f"save{k}", installed["output"])[0]) for k in range(len(CELLS))]
        for k, expected in enumerate(plain):
            mine = _pixels(images[k * per_cell + prompt_index * 2 + seed_index])
            assert mine.shape == expected.shape and np.array_equal(mine, expected), (
                f"cell {CELLS[k]}: {int((mine != expected).any(-1).sum())} pixels differ from LoraLoader + KSampler"
            )
        assert all(not np.array_equal(plain[0], lora) for lora in plain[1:])  # a strength above 0 changes the pixels


def test_the_report_grid_chart_and_recommendation_are_there(swept, installed):
    report = hostapi.ui_text(swept, "sweep")
    lines = report.splitlines()
    assert lines[0].split()[:4] == ["cell", "images", "CP", "PF"]
    assert lines[1].startswith("baseline (no LoRA)") and len(lines) == 1 + len(CELLS) + 2, report
    assert lines[-2].startswith("verdict: ") and lines[-1] == f"images sampled: {len(CELLS) * 4} of {len(CELLS) * 4}"
    (grid,) = hostapi.saved_images(swept, "grid", installed["output"])
    (chart,) = hostapi.saved_images(swept, "chart", installed["output"])
    assert Image.open(chart).size == (1024, 768)
    width, height = Image.open(grid).size
    assert width == 192 + 4 * 192 and height > len(CELLS) * 192
    name = hostapi.ui_text(swept, "name")
    recommended = next(line for line in lines[1:-2] if line.rstrip().endswith("recommended"))
    assert (name == "") == recommended.startswith("baseline"), (name, recommended)
    assert name == "" or name in FILES


def test_every_saved_image_names_its_cell_prompt_and_seed_and_the_log_has_a_row_each(swept, installed):
    images = hostapi.saved_images(swept, "images", installed["output"])
    names = [None] + [f"{os.path.splitext(n)[0]} @ {s:g}" for n, s in CELLS[1:]]
    expected = [
        (names[k] or "baseline (no LoRA)", prompt, SEED + s)
        for k in range(len(CELLS))
        for prompt in PROMPTS
        for s in (0, 1)
    ]
    picked = [0, 5, len(images) - 1]  # the baseline's first, a LoRA cell's, the last
    done = read_scores(*[images[k] for k in picked])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cell_lines = [line.strip() for line in lines if line.startswith("      cell ")]
    assert len(cell_lines) == len(picked), done.stdout
    for k, line in zip(picked, cell_lines):
        cell, prompt, seed = expected[k]
        assert line == f"cell {cell}, prompt {prompt!r}", (k, line)
    seeds = [line.split()[4] for line in lines if line.startswith("  this image: ")]
    assert seeds == [str(expected[k][2]) for k in picked]
    with open(os.path.join(installed["output"], "masc_sweep_test.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    assert [(r["cell"], r["prompt"], r["seed"]) for r in rows] == expected
    assert all(r["node"] == "MaSCSweep" and r["cp"] is not None and r["pf"] is not None for r in rows)


def test_a_lora_for_another_model_is_refused_before_any_image(server, sd15, loras, installed):
    before = set(os.listdir(installed["output"]))
    entry = server.run(sweep_graph(sd15, [loras[0], FOREIGN]), timeout=900)
    error = hostapi.error_of(entry)
    assert error is not None, hostapi.explain(entry)
    message = error["exception_message"].strip()
    assert message.startswith(f"lora_name '{FOREIGN}' patches none of this model's weights"), message
    assert "\n" not in message and installed["output"] not in message and "/models/" not in message
    assert not [f for f in set(os.listdir(installed["output"])) - before if f.startswith("masc_sweep")]


def _defaults(server, node_id: str) -> dict:
    """Every required widget of ``node_id`` at its default, as this core declares it (inputs differ between cores)."""
    info = server.request(f"/object_info/{node_id}")[node_id]["input"]["required"]
    values = {}
    for name, declaration in info.items():
        kind, options = declaration[0], (declaration[1] if len(declaration) > 1 else {})
        if isinstance(kind, list):
            values[name] = options.get("default", kind[0])
        elif kind == "COMBO":
            values[name] = options.get("default", options.get("options", [None])[0])
        elif "default" in options:
            values[name] = options["default"]
    return values


def test_a_lora_trained_in_the_graph_is_a_cell_and_its_images_are_load_lora_models(server, sd15, installed):
    """Core's Train LoRA (2 steps on the reference photo, on CPU) -> MaSC Sweep LoRA Model -> MaSC Sweep, and in
    the same graph core's Load LoRA Model + KSampler + VAE Decode with the same LORA_MODEL: pixel-identical."""
    info = server.request("/object_info")
    if "TrainLoraNode" not in info or "LoraModelLoader" not in info:
        pytest.skip("this ComfyUI has no Train LoRA / Load LoRA Model (core 0.33 has)")
    graph = _common(sd15)
    graph["scaled"] = node(
        "ImageScale", image=["ref", 0], upscale_method="bilinear", width=SIDE, height=SIDE, crop="center"
    )
    graph["encoded"] = node("VAEEncode", pixels=["scaled", 0], vae=["ckpt", 2])
    graph["caption"] = node("CLIPTextEncode", text="a photo of sks dog", clip=["ckpt", 1])
    train = _defaults(server, "TrainLoraNode")
    train.update(model=["ckpt", 0], latents=["encoded", 0], positive=["caption", 0], steps=2, rank=4, seed=0)
    # Core's defaults otherwise (bf16, gradient checkpointing), as template 12 ships them: fp32 without checkpointing
    # took 13 GB on the test SD1.5.
    graph["train"] = node("TrainLoraNode", **train)
    graph["cells"] = node("MaSCSweepLoRAModel", lora=["train", 0], name="trained, 2 steps", strength_model="1.0")
    graph["sweep"] = node(
        "MaSCSweep",
        model=["ckpt", 0], clip=["ckpt", 1], vae=["ckpt", 2], latent_image=["latent", 0], cells=["cells", 0],
        prompts=PROMPTS[0], negative="blurry", seed=SEED, seeds=1, steps=1, cfg=7.0, sampler_name="euler",
        scheduler="normal", denoise=1.0, encoder=["encoder", 0], reference_image=["ref", 0],
        reference_mask=["refmask", 0], subject="dog", segmenter=["segmenter", 0], mask_threshold=0.4,
        pf_margin=0.02, confidence=0.95, race=False,
    )  # fmt: skip
    graph["images"] = node("SaveImage", images=["sweep", 7], filename_prefix="masc_sweep_trained")
    graph["loaded"] = node("LoraModelLoader", model=["ckpt", 0], lora=["train", 0], strength_model=1.0, bypass=False)
    graph["pos"] = node("CLIPTextEncode", text=PROMPTS[0], clip=["ckpt", 1])
    graph["neg"] = node("CLIPTextEncode", text="blurry", clip=["ckpt", 1])
    graph["ks"] = node(
        "KSampler", model=["loaded", 0], seed=SEED, steps=1, cfg=7.0, sampler_name="euler", scheduler="normal",
        positive=["pos", 0], negative=["neg", 0], latent_image=["latent", 0], denoise=1.0,
    )  # fmt: skip
    graph["dec"] = node("VAEDecode", samples=["ks", 0], vae=["ckpt", 2])
    graph["plain"] = node("SaveImage", images=["dec", 0], filename_prefix="masc_plain_trained")
    entry = server.run(graph, timeout=3600)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    baseline, trained = (_pixels(p) for p in hostapi.saved_images(entry, "images", installed["output"]))
    (plain,) = (_pixels(p) for p in hostapi.saved_images(entry, "plain", installed["output"]))
    assert np.array_equal(trained, plain), f"{int((trained != plain).any(-1).sum())} pixels differ from Load LoRA Model"
    assert not np.array_equal(baseline, trained)  # two steps of training changed the model
    report = hostapi.ui_text(entry, "sweep")
    assert "trained, 2 steps @ 1" in report and report.splitlines()[1].startswith("baseline (no LoRA)")
