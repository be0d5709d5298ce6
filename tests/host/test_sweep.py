"""MaSC Sweep in a real ComfyUI, on the random SD1.5 with three random LoRA files built at test time by the host's
own key map (``build_loras.py``):

- 3 LoRA files x 2 strengths + the baseline x 2 prompts x 2 seeds: 28 images, every cell's image pixel-identical to
  core's LoraLoader + CLIPTextEncode + KSampler + VAE Decode at its seed (the baseline without LoraLoader), a
  strength above 0 changing the pixels;
- the report, the grid, the chart and the recommended cell's outputs are there; every saved image's PNG names its
  cell, prompt and seed (``read``), and MaSC Log Scores logs one row per image with its cell;
- a LoRA for another model is refused in one line naming the file, before any image is sampled;
- a LoRA trained in the graph by core's Train LoRA is a cell whose images are Load LoRA Model's;
- MaSC Sweep (Custom) on a tiny random Flux conditioned by the SD1.5's CLIP-L (``build_dits.py flux_clip_l``), with
  three random LoRA files for it and a LoRA trained in the graph: every cell pixel-identical to core's LoraLoader (or
  Load LoRA Model) + CLIP Text Encode + FluxGuidance + Basic Guider + SamplerCustomAdvanced at its seed; a guider it
  cannot re-prompt refused in one line before any image.
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


def lora_chain(graph: dict, files: list[str]) -> str:
    """A MaSC Sweep LoRA node per file at ``STRENGTHS``, chained in order; the last node's id."""
    previous = None
    for k, name in enumerate(files):
        chained = {} if previous is None else {"cells": [previous, 0]}
        graph[f"lora{k}"] = node(
            "MaSCSweepLoRA", lora_name=name, strength_model=", ".join(map(str, STRENGTHS)), strength_clip="", **chained
        )
        previous = f"lora{k}"
    return previous


def sweep_graph(sd15: str, files: list[str]) -> dict:
    graph = _common(sd15)
    previous = lora_chain(graph, files)
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


FLUX_CLIP_L = "masc-host-test-flux_clip_l.safetensors"
FLUX_CLIP_L_VAE = "masc-host-test-flux_clip_l-vae.safetensors"
FLUX_LORAS = [f"masc-test-flux-epoch{k}.safetensors" for k in (1, 2, 3)]
FLUX_SIDE = 128
FLUX_STEPS = 2


@pytest.fixture(scope="module")
def flux_loras(host, installed):
    """The tiny Flux whose text input is CLIP-L's width (the test SD1.5's CLIP encodes its prompts) and three random
    LoRA files for it, keyed as the host's loader maps them; the LoRAs removed after."""
    from .test_custom_sampling import _built

    unet = _built(host, "flux_clip_l", FLUX_CLIP_L, FLUX_CLIP_L_VAE)
    folder = host.models("loras")
    built = host.run_python(
        os.path.join(HERE, "build_loras.py"),
        host.dir,
        os.path.join(host.models("diffusion_models"), unet),
        folder,
        "masc-test-flux",
    )
    assert built.returncode == 0, f"building the Flux LoRAs failed:\n{built.stdout}\n{built.stderr[-4000:]}"
    yield FLUX_LORAS
    for name in FLUX_LORAS + ["masc-test-flux-foreign.safetensors"]:
        if os.path.lexists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))


def flux_generator(graph: dict, model: list, clip: list, prompt: str, key: str) -> list:
    """Core's Flux chain on ``model`` and ``clip``: CLIP Text Encode -> FluxGuidance -> Basic Guider (the node ids
    end in ``key``); the guider's link."""
    graph[f"text{key}"] = node("CLIPTextEncode", text=prompt, clip=clip)
    graph[f"guided{key}"] = node("FluxGuidance", conditioning=[f"text{key}", 0], guidance=3.5)
    graph[f"guider{key}"] = node("BasicGuider", model=model, conditioning=[f"guided{key}", 0])
    return [f"guider{key}", 0]


def flux_sweep_graph(sd15: str, files: list[str], train: dict | None = None) -> dict:
    """Tiny Flux + the SD1.5's CLIP-L: the LoRA files x 2 strengths swept by MaSC Sweep (Custom). With ``train``
    (Train LoRA's inputs): also a LoRA trained in the graph by core's Train LoRA, and core's own chain for every cell
    at two (prompt, seed) pairs: LoraLoader (or Load LoRA Model) -> the Flux chain -> SamplerCustomAdvanced -> VAE
    Decode."""
    graph = {k: v for k, v in _common(sd15).items() if k not in ("latent",)}
    graph["unet"] = node("UNETLoader", unet_name=FLUX_CLIP_L, weight_dtype="default")
    graph["vae"] = node("VAELoader", vae_name=FLUX_CLIP_L_VAE)
    graph["latent"] = node("EmptySD3LatentImage", width=FLUX_SIDE, height=FLUX_SIDE, batch_size=1)
    graph["noise"] = node("RandomNoise", noise_seed=SEED)
    graph["ksampler"] = node("KSamplerSelect", sampler_name="euler")
    graph["sigmas"] = node("BasicScheduler", model=["unet", 0], scheduler="simple", steps=FLUX_STEPS, denoise=1.0)
    previous = lora_chain(graph, files)
    if train is not None:
        # Core's Train LoRA on the tiny Flux: the reference photo's latent, its caption by the CLIP-L.
        graph["scaled"] = node(
            "ImageScale", image=["ref", 0], upscale_method="bilinear", width=FLUX_SIDE, height=FLUX_SIDE, crop="center"
        )
        graph["encoded"] = node("VAEEncode", pixels=["scaled", 0], vae=["vae", 0])
        graph["caption"] = node("CLIPTextEncode", text="a photo of sks dog", clip=["ckpt", 1])
        train = dict(train, model=["unet", 0], latents=["encoded", 0], positive=["caption", 0], steps=2, rank=4, seed=0)
        graph["train"] = node("TrainLoraNode", **train)
        graph["trained"] = node(
            "MaSCSweepLoRAModel", lora=["train", 0], name="trained", strength_model="1.0", cells=[previous, 0]
        )
        previous = "trained"
    guider = flux_generator(graph, ["unet", 0], ["ckpt", 1], PROMPTS[0], "")
    graph["sweep"] = node(
        "MaSCSweepCustom",
        noise=["noise", 0], guider=guider, sampler=["ksampler", 0], sigmas=["sigmas", 0], clip=["ckpt", 1],
        vae=["vae", 0], latent_image=["latent", 0], cells=[previous, 0], prompts="\n".join(PROMPTS), negative="",
        seeds=2, encoder=["encoder", 0], reference_image=["ref", 0], reference_mask=["refmask", 0], subject="dog",
        segmenter=["segmenter", 0], mask_threshold=0.4, pf_margin=0.02, confidence=0.95, race=False,
    )  # fmt: skip
    graph["images"] = node("SaveImage", images=["sweep", 7], filename_prefix="masc_sweep_flux")
    graph["grid"] = node("SaveImage", images=["sweep", 5], filename_prefix="masc_sweep_flux_grid")
    graph["chart"] = node("SaveImage", images=["sweep", 6], filename_prefix="masc_sweep_flux_chart")
    graph["name"] = node("PreviewAny", source=["sweep", 2])
    for k, cell in enumerate(FLUX_CELLS if train is not None else ()):
        model, clip = ["unet", 0], ["ckpt", 1]
        if cell == "trained":
            graph[f"plainlora{k}"] = node(
                "LoraModelLoader", model=model, lora=["train", 0], strength_model=1.0, bypass=False
            )
            model = [f"plainlora{k}", 0]
        elif cell is not None:
            graph[f"plainlora{k}"] = node(
                "LoraLoader", model=model, clip=clip, lora_name=cell[0], strength_model=cell[1], strength_clip=cell[1]
            )
            model, clip = [f"plainlora{k}", 0], [f"plainlora{k}", 1]
        for prompt_index, seed_index in FLUX_CHECKED:
            key = f"{k}_{prompt_index}_{seed_index}"
            plain_guider = flux_generator(graph, model, clip, PROMPTS[prompt_index], f"plain{key}")
            graph[f"noise{key}"] = node("RandomNoise", noise_seed=SEED + seed_index)
            graph[f"custom{key}"] = node(
                "SamplerCustomAdvanced", noise=[f"noise{key}", 0], guider=plain_guider, sampler=["ksampler", 0],
                sigmas=["sigmas", 0], latent_image=["latent", 0],
            )  # fmt: skip
            graph[f"dec{key}"] = node("VAEDecode", samples=[f"custom{key}", 0], vae=["vae", 0])
            graph[f"save{key}"] = node("SaveImage", images=[f"dec{key}", 0], filename_prefix=f"masc_plain_flux{key}")
    return graph


FLUX_CELLS = [None] + [(name, strength) for name in FLUX_LORAS for strength in STRENGTHS] + ["trained"]
"""The custom sweep's cells in its order: the baseline, each file's strengths, the LoRA trained in the graph."""
FLUX_CHECKED = ((0, 0), (1, 1))
"""The (prompt, seed) pairs core's own chain samples for every cell (the sweep's first prompt is the guider's)."""


def test_the_custom_twin_on_a_tiny_flux_is_sampler_custom_advanced_for_every_cell(server, sd15, flux_loras, installed):
    """Every cell of MaSC Sweep (Custom), LoRA files and a LoRA trained by core's Train LoRA, pixel-identical to
    LoraLoader / Load LoRA Model + CLIP Text Encode + FluxGuidance + Basic Guider + SamplerCustomAdvanced at its seed
    (the second prompt re-encoded in the guider's place); the report, grid and chart there."""
    info = server.request("/object_info")
    if "TrainLoraNode" not in info or "LoraModelLoader" not in info:
        pytest.skip("this ComfyUI has no Train LoRA / Load LoRA Model (core 0.33 has)")
    entry = server.run(flux_sweep_graph(sd15, flux_loras, _defaults(server, "TrainLoraNode")), timeout=3600)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    images = hostapi.saved_images(entry, "images", installed["output"])
    assert len(images) == len(FLUX_CELLS) * len(PROMPTS) * 2
    plain_by_cell = []
    for k, cell in enumerate(FLUX_CELLS):
        for prompt_index, seed_index in FLUX_CHECKED:
            key = f"{k}_{prompt_index}_{seed_index}"
            (path,) = hostapi.saved_images(entry, f"save{key}", installed["output"])
            expected = _pixels(path)
            mine = _pixels(images[k * len(PROMPTS) * 2 + prompt_index * 2 + seed_index])
            assert mine.shape == expected.shape and np.array_equal(mine, expected), (
                f"cell {cell}, prompt {prompt_index}, seed +{seed_index}: {int((mine != expected).any(-1).sum())} "
                "pixels differ from core's chain"
            )
            plain_by_cell.append(expected)
    baseline = plain_by_cell[0]
    assert all(not np.array_equal(baseline, other) for other in plain_by_cell[2::2])  # every LoRA changes the pixels
    report = hostapi.ui_text(entry, "sweep")
    lines = report.splitlines()
    assert lines[1].startswith("baseline (no LoRA)") and "trained @ 1" in report, report
    assert lines[-1] == f"images sampled: {len(images)} of {len(images)}"
    (chart,) = hostapi.saved_images(entry, "chart", installed["output"])
    assert Image.open(chart).size == (1024, 768)
    assert len(hostapi.saved_images(entry, "grid", installed["output"])) == 1
    name = hostapi.ui_text(entry, "name")
    assert name in ["", "trained"] + FLUX_LORAS


@pytest.mark.parametrize(
    "case, expected",
    [
        ("dual cfg", "guider is a Guider_DualCFG with the conditionings"),
        ("negative on basic", "negative is set, but the guider (Guider_Basic) has no negative to put it in"),
    ],
)
def test_a_guider_the_custom_twin_cannot_reprompt_is_one_line_before_any_image(
    server, sd15, flux_loras, installed, case, expected
):
    """Dual CFG Guider (its middle conditioning means something a sweep cannot re-prompt), and a negative text typed
    for the Basic Guider, which has no negative to put it in (never dropped without a word): each one line."""
    graph = flux_sweep_graph(sd15, flux_loras[:2])
    if case == "dual cfg":
        graph["dual"] = node(
            "DualCFGGuider", model=["unet", 0], cond1=["guided", 0], cond2=["text", 0], negative=["text", 0],
            cfg_conds=2.0, cfg_cond2_negative=1.5, style="regular",
        )  # fmt: skip
        graph["sweep"]["inputs"]["guider"] = ["dual", 0]
    else:
        graph["sweep"]["inputs"]["negative"] = "blurry"
    before = set(os.listdir(installed["output"]))
    entry = server.run(graph, timeout=900)
    error = hostapi.error_of(entry)
    assert error is not None, hostapi.explain(entry)
    message = error["exception_message"].strip()
    assert message.startswith(expected), message
    assert "\n" not in message and installed["output"] not in message
    assert not [f for f in set(os.listdir(installed["output"])) - before if f.startswith("masc_sweep_flux")]
