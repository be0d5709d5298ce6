"""MaSC Sweep and MaSC Sweep LoRA without ComfyUI: the stand-in model and sampler (comfy_harness) with stand-in LoRA
files, each a direction in latent space; every image checked against the stand-in KSampler at its seed, and every
refusal made before the first image."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from comfy_harness import StandInClip, StandInModel, StandInVAE, ksampler, stand_in_loras, stand_in_sampling
from comfy_harness import Noise_EmptyNoise, Noise_RandomNoise, StandInGuider, StandInLoraModel, StandInSampler
from comfy_harness import basic_scheduler, sampler_custom_advanced, text_conditioning
from conftest import box_mask
from test_sample_until import float_image, models  # noqa: F401 - the encoder and segmenter fixture, shared

FILES = {"run/dog-000004.safetensors": 0.3, "run/dog-000008.safetensors": 0.6, "teapot.safetensors": -0.6}
PROMPTS = "a dog on the beach\na dog in the snow"


def cells(pack, *chain):
    """Chained MaSC Sweep LoRA nodes: (lora_name, strength_model[, strength_clip]) each."""
    node, value = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSweepLoRA"](), None
    for lora, strengths, *clip in chain:
        value = node.cells(lora, strengths, clip[0] if clip else "", cells=value)[0]
    return value


def sweep_inputs(models, value, **changes):
    inputs = dict(
        model=StandInModel(),
        clip=StandInClip(),
        vae=StandInVAE(),
        latent_image={"samples": torch.zeros(1, 4, 16, 16)},
        cells=value,
        prompts=PROMPTS,
        negative="blurry",
        seed=100,
        seeds=2,
        steps=2,
        cfg=7.0,
        sampler_name="euler",
        scheduler="normal",
        denoise=1.0,
        encoder=models["encoder"],
        reference_image=float_image("dog_00"),
        reference_mask=torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None],
        subject="dog",
        segmenter=models["segmenter"],
        mask_threshold=0.4,
        pf_margin=2.0,
        confidence=0.95,
        race=False,
        mask_subject="dog",
        unique_id="5",
        extra_pnginfo={},
    )
    inputs.update(changes)
    return inputs


def run(pack, inputs):
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCSweep"]().sweep(**inputs)["result"]


def expected_image(shift, prompt, seed):
    """The stand-in's LoraLoader + CLIPTextEncode + KSampler + VAE Decode at ``seed``."""
    model = StandInModel() if shift is None else StandInLoraModel(shift)
    latent = {"samples": torch.zeros(1, 4, 16, 16)}
    out = ksampler(
        None, model, seed, 2, 7.0, "euler", "normal", text_conditioning(prompt), text_conditioning("blurry"), latent
    )
    return StandInVAE().decode(out[0]["samples"])


def test_every_image_is_the_plain_nodes_and_the_dog_lora_is_recommended(pack, models):
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES):
        value = cells(pack, ("run/dog-000004.safetensors", "1.0"), ("run/dog-000008.safetensors", "0.5, 1.0"),
                      ("teapot.safetensors", "1.0"))  # fmt: skip
        model, clip, lora, strength_model, strength_clip, grid, chart, images, report, scores = run(
            pack, sweep_inputs(models, value)
        )
    shifts = [None, 0.3, 0.6 * 0.5, 0.6, -0.6]  # baseline, then the cells in the order chained
    prompts = PROMPTS.splitlines()
    assert images.shape[0] == len(shifts) * 2 * 2 and len(backend.calls) == 20  # one KSampler call per image
    k = 0
    for shift in shifts:
        for prompt in prompts:
            for seed in (100, 101):
                assert torch.allclose(images[k : k + 1], expected_image(shift, prompt, seed), atol=0), (shift, prompt)
                k += 1
    assert lora.startswith("run/dog-") and lora != "teapot.safetensors"
    assert isinstance(model, StandInLoraModel) and model.shift == pytest.approx(FILES[lora] * strength_model)
    assert strength_clip == strength_model
    assert grid.shape[0] == 1 and chart.shape[1:] == (768, 1024, 3)
    assert "verdict: " in report and "images sampled: 20 of 20" in report
    assert "teapot @ 1" in report and "baseline (no LoRA)" in report


def test_every_image_is_in_the_png_metadata_and_the_score_log_with_its_cell(pack, models, tmp_path, capsys):
    from comfy_harness import save_image
    from masc_core.cli import main

    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        value = cells(pack, ("run/dog-000004.safetensors", "1.0"), ("teapot.safetensors", "0.5"))
        inputs = sweep_inputs(models, value, unique_id="12")
        *_, images, report, scores = run(pack, inputs)
    names = ["baseline (no LoRA)", "run/dog-000004 @ 1", "teapot @ 0.5"]
    pairs = [(p, s) for p in PROMPTS.splitlines() for s in (100, 101)]
    entry = inputs["extra_pnginfo"]["masc"]["nodes"]["12"]
    assert entry["node"] == "MaSCSweep" and len(entry["images"]) == images.shape[0] == 12
    for k, image in enumerate(entry["images"]):
        assert (image["cell"], (image["prompt"], image["seed"])) == (names[k // 4], pairs[k % 4])
    recommended = [i["verdict"] for i in entry["images"] if i["verdict"] == "recommended"]
    assert len(recommended) == 4  # the recommended cell's four images say so
    ctx = {"saved": {}, "saved_files": {}, "node_id": "13", "output_dir": str(tmp_path), "prompt": {}}
    save_image(dict(ctx, extra_pnginfo=inputs["extra_pnginfo"]), images[5:6], "sweep")
    assert main(["read", ctx["saved_files"]["13"][0]]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith("  this image: #5  seed 101  CP ")
    assert printed[2] == "      cell run/dog-000004 @ 1, prompt 'a dog on the beach'"
    log = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, "sweep.jsonl", "")["result"]
    rows = [json.loads(line) for line in open(os.path.join(os.environ["MASC_OUTPUT_DIR"], log[0]))][-12:]
    assert [(r["cell"], r["prompt"], r["seed"]) for r in rows] == [(names[k // 4], *pairs[k % 4]) for k in range(12)]
    assert [r["cp"] for r in rows] == pytest.approx([i["cp"] for i in entry["images"]])


def test_the_baseline_recommended_gives_back_the_input_model(pack, models):
    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        value = cells(pack, ("teapot.safetensors", "1.0"))
        inputs = sweep_inputs(models, value)
        model, clip, lora, strength_model, strength_clip, *_ = run(pack, inputs)
    assert lora == "" and strength_model == strength_clip == 0.0
    assert model is inputs["model"] and clip is inputs["clip"]


@pytest.mark.parametrize(
    "change, expected",
    [
        (dict(prompts="  \n "), "prompts has 0 lines"),
        (dict(prompts="a dog\na dog"), "prompts repeats 'a dog'"),
        (dict(seeds=64, prompts="\n".join(f"p{i}" for i in range(9))), "images, over the 512 one run samples"),
        (dict(latent_image={"samples": torch.zeros(2, 4, 16, 16)}), "latent_image must be ONE image latent"),
        (dict(latent_image={"samples": torch.zeros(1, 4, 3, 16, 16)}), "video latents are not swept yet"),
        (dict(reference_mask=torch.zeros(1, 512, 512)), "reference_mask is empty"),
        (dict(confidence=0.9999), "confidence"),
    ],
)
def test_a_sweep_that_cannot_run_is_refused_before_the_first_image(pack, models, change, expected):
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES):
        value = cells(pack, ("teapot.safetensors", "1.0"))
        with pytest.raises(Exception, match=expected.replace("(", r"\(").replace(")", r"\)")) as caught:
            run(pack, sweep_inputs(models, value, **change))
    assert backend.calls == [] and len(str(caught.value).splitlines()) == 1


def test_a_lora_for_another_model_is_refused_before_the_first_image(pack, models):
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES, foreign=("teapot.safetensors",)) as loras:
        value = cells(pack, ("run/dog-000004.safetensors", "1.0"), ("teapot.safetensors", "1.0"))
        with pytest.raises(Exception, match="'teapot.safetensors' patches none of this model's weights"):
            run(pack, sweep_inputs(models, value))
    assert backend.calls == [] and loras.checked == ["run/dog-000004.safetensors", "teapot.safetensors"]


@pytest.mark.parametrize(
    "chain, expected",
    [
        ([("teapot.safetensors", "1.0, nan")], "is not a strength from -100 to 100"),
        ([("teapot.safetensors", "1e9")], "is not a strength from -100 to 100"),
        ([("teapot.safetensors", "0.5, 0.5")], "lists 0.5 twice"),
        ([("teapot.safetensors", "0")], "strength 0 and 0 is the baseline's image"),
        ([("teapot.safetensors", "1"), ("teapot.safetensors", "1.0")], "teapot @ 1 is in the sweep twice"),
        ([("teapot.safetensors", "0.5, 1", "1, 2, 3")], "strength_clip lists 3 strengths for 2"),
        ([("teapot.safetensors", "one")], "'one' is not a number"),
        ([("not-there.safetensors", "1")], "lora_name"),
    ],
)
def test_strengths_and_files_a_workflow_carries_are_checked_by_the_node(pack, chain, expected):
    with stand_in_loras(pack, FILES):
        with pytest.raises(Exception, match=expected) as caught:
            cells(pack, *chain)
    assert len(str(caught.value).splitlines()) == 1


def test_clip_strengths_one_for_all_or_one_each(pack):
    with stand_in_loras(pack, FILES):
        one = cells(pack, ("teapot.safetensors", "0.5, 1", "0.25"))
        each = cells(pack, ("teapot.safetensors", "0.5, 1", "0.1, 0.2"))
    assert [(c.strength_model, c.strength_clip) for c in one] == [(0.5, 0.25), (1.0, 0.25)]
    assert [(c.strength_model, c.strength_clip) for c in each] == [(0.5, 0.1), (1.0, 0.2)]


def test_racing_stops_the_cell_that_cannot_win_and_keeps_the_verdict(pack, models):
    """8 seeds x 2 prompts: after 4 rounds the teapot cell (CP far below the dog cells') stops being sampled."""
    chain = [("run/dog-000008.safetensors", "1.0"), ("teapot.safetensors", "1.0")]
    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        full = run(pack, sweep_inputs(models, cells(pack, *chain), seeds=8))
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES):
        raced = run(pack, sweep_inputs(models, cells(pack, *chain), seeds=8, race=True))
    assert raced[2] == full[2] == "run/dog-000008.safetensors"
    assert len(backend.calls) < 3 * 16 and raced[7].shape[0] == len(backend.calls)
    assert "round " in raced[8] and f"images sampled: {len(backend.calls)} of 48" in raced[8]


def test_the_command_line_agrees_with_the_node_on_the_same_images(pack, models, comfy_dirs, naflex_dir, tmp_path):
    """The node's images and its segmenter's masks saved as ``p<N>_s<SEED>.png`` folders, one per cell: ``python -m
    masc_core sweep`` on them prints the node's report, row for row (the same scores, intervals and verdict)."""
    from PIL import Image

    from conftest import call, photo_path
    from masc_core.io.images import to_rgb_uint8

    chain = [("run/dog-000008.safetensors", "1.0"), ("teapot.safetensors", "1.0")]
    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        result = run(pack, sweep_inputs(models, cells(pack, *chain), pf_margin=0.02))
    images, report = result[7], result[8]
    names = ["baseline (no LoRA)", "run/dog-000008 @ 1", "teapot @ 1"]
    segmenter = models["segmenter"].ready()
    prompts = PROMPTS.splitlines()
    args = []
    k = 0
    for c, name in enumerate(names):
        folder = tmp_path / f"cell{c}"
        folder.mkdir()
        for number in (1, 2):
            for seed in (100, 101):
                picture = to_rgb_uint8(images[k])
                (mask,) = segmenter.masks([picture], "dog", threshold=0.4)
                Image.fromarray(picture).save(folder / f"p{number}_s{seed}.png")
                Image.fromarray((mask.numpy() * 255).astype(np.uint8)).save(folder / f"p{number}_s{seed}_mask.png")
                k += 1
        args += ["--cell", f"{name}={folder}"]
    reference_mask = tmp_path / "reference_mask.png"
    Image.fromarray(box_mask(512, 512)).save(reference_mask)
    code, out, err = call(
        "sweep", "--model", naflex_dir, "--device", "cpu", "--ref", photo_path("dog_00"), "--ref-mask", reference_mask,
        "--subject", "dog", "--prompt", prompts[0], "--prompt", prompts[1], "--baseline", names[0], *args,
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == report.splitlines()[:-1]  # all but "images sampled: 12 of 12"


def trained(pack, shift, name, strengths, value=None):
    """MaSC Sweep LoRA Model on a stand-in LORA_MODEL ({"shift": tensor}, as Train LoRA's dict of tensors)."""
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSweepLoRAModel"]()
    return node.cells({"shift": torch.tensor(shift)}, name, strengths, cells=value)[0]


def test_an_in_memory_lora_is_a_cell_beside_the_files_and_patches_as_load_lora_model(pack, models):
    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        value = trained(pack, 0.6, "trained, step 40", "0.5, 1", cells(pack, ("teapot.safetensors", "1.0")))
        result = run(pack, sweep_inputs(models, value))
    model, clip, lora, strength_model, strength_clip, grid, chart, images, report, scores = result
    shifts = [None, -0.6, 0.3, 0.6]  # baseline, teapot @ 1, trained @ 0.5, trained @ 1
    k = 0
    for shift in shifts:
        for prompt in PROMPTS.splitlines():
            for seed in (100, 101):
                assert torch.allclose(images[k : k + 1], expected_image(shift, prompt, seed), atol=0), (shift, prompt)
                k += 1
    assert "trained, step 40 @ 0.5" in report and "trained, step 40 @ 1 " in report
    assert lora.startswith("trained, step 40") and strength_clip == 0.0
    assert model.shift == pytest.approx(0.6 * strength_model) and clip is not None
    assert {c for c in scores.context.cells} == {
        "baseline (no LoRA)", "teapot @ 1", "trained, step 40 @ 0.5", "trained, step 40 @ 1"
    }  # fmt: skip


@pytest.mark.parametrize(
    "lora, name, expected",
    [
        ({}, "step 40", "lora is not a LoRA's weights: connect Train LoRA's 'lora' output"),
        ("a string", "step 40", "lora is not a LORA_MODEL .'a string' arrived.: connect Train LoRA's 'lora'"),
        ({"w": [1.0]}, "step 40", "lora holds list under a key, not weight names and tensors"),
        ({"w": torch.tensor([float("nan")])}, "step 40", "lora's weight 'w' holds NaN or infinity"),
        ({"shift": torch.tensor(0.6)}, "  ", "name is empty"),
        ({"shift": torch.tensor(0.6)}, "x" * 81, "name must be one line of at most 80"),
        ({"shift": torch.tensor(0.6)}, "two\nlines", "name must be one line"),
    ],
)
def test_a_lora_model_of_the_wrong_shape_is_one_line(pack, lora, name, expected):
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSweepLoRAModel"]()
    with pytest.raises(Exception, match=expected.replace("(", r"\(")) as caught:
        node.cells(lora, name, "1.0")
    assert len(str(caught.value).splitlines()) == 1


def test_the_same_lora_model_name_and_strength_twice_is_refused_where_it_is_added(pack):
    with stand_in_loras(pack, FILES):
        first = trained(pack, 0.6, "step 40", "1")
        with pytest.raises(Exception, match="step 40 @ 1 is in the sweep twice"):
            trained(pack, 0.6, "step 40", "0.5, 1", first)


def custom_inputs(models, value, guider=None, **changes):
    """MaSC Sweep (Custom)'s inputs: MaSC Sweep's without KSampler's widgets, with NOISE / GUIDER / SAMPLER / SIGMAS
    (a CFG Guider at cfg 7 on the stand-in model, its negative "blurry" as wired)."""
    inputs = sweep_inputs(models, value, negative="")
    for name in ("model", "seed", "steps", "cfg", "sampler_name", "scheduler", "denoise"):
        del inputs[name]
    guider = guider or StandInGuider(StandInModel(), text_conditioning("wired"), text_conditioning("blurry"), 7.0)
    inputs.update(
        noise=Noise_RandomNoise(100), guider=guider, sampler=StandInSampler("euler"), sigmas=basic_scheduler(2)
    )
    inputs.update(changes)
    return inputs


def run_custom(pack, inputs):
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCSweepCustom"]().sweep(**inputs)["result"]


def expected_custom_image(shift, prompt, seed, negative="blurry"):
    """The stand-in's LoraLoader + CLIPTextEncode + CFG Guider + SamplerCustomAdvanced + VAE Decode at ``seed``."""
    model = StandInModel() if shift is None else StandInLoraModel(shift)
    guider = StandInGuider(model, text_conditioning(prompt), text_conditioning(negative), 7.0)
    latent = {"samples": torch.zeros(1, 4, 16, 16)}
    out = sampler_custom_advanced(
        None, Noise_RandomNoise(seed), guider, StandInSampler("euler"), basic_scheduler(2), latent
    )
    return StandInVAE().decode(out[0]["samples"])


def test_the_custom_twin_samples_each_cell_as_sampler_custom_advanced_and_agrees_with_the_sweep(pack, models):
    chain = [("run/dog-000004.safetensors", "1.0"), ("teapot.safetensors", "0.5, 1.0")]
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES):
        value = cells(pack, *chain)
        inputs = custom_inputs(models, value, unique_id="21")
        model, clip, lora, strength_model, strength_clip, grid, chart, images, report, scores = run_custom(pack, inputs)
        plain = run(pack, sweep_inputs(models, value))
    shifts = [None, 0.3, -0.6 * 0.5, -0.6]
    assert images.shape[0] == 16 and len(backend.calls) == 16 + 16  # one call per image, each node
    k = 0
    for shift in shifts:
        for prompt in PROMPTS.splitlines():
            for seed in (100, 101):  # the NOISE's seed, then + 1
                assert torch.equal(images[k : k + 1], expected_custom_image(shift, prompt, seed)), (shift, prompt, seed)
                k += 1
    # The same cells, prompts, seeds and CFG as MaSC Sweep's KSampler: the same images, report and recommendation.
    assert torch.equal(images, plain[7]) and report == plain[8] and lora == plain[2]
    assert isinstance(model, StandInLoraModel) and model.shift == pytest.approx(FILES[lora] * strength_model)
    assert inputs["guider"].model_patcher.__class__ is StandInModel  # the graph's guider untouched
    entry = inputs["extra_pnginfo"]["masc"]["nodes"]["21"]
    assert entry["node"] == "MaSCSweepCustom" and len(entry["images"]) == 16


def test_the_custom_twin_encodes_a_negative_text_with_each_cells_clip_else_keeps_the_wired_one(pack, models):
    with stand_in_sampling(pack), stand_in_loras(pack, FILES):
        value = cells(pack, ("teapot.safetensors", "1.0"))
        wired = run_custom(pack, custom_inputs(models, value))[7]
        typed = run_custom(pack, custom_inputs(models, value, negative="  low quality \n"))[7]
    prompt = PROMPTS.splitlines()[0]
    assert torch.equal(wired[:1], expected_custom_image(None, prompt, 100, negative="blurry"))
    assert torch.equal(typed[4:5], expected_custom_image(-0.6, prompt, 100, negative="low quality"))
    assert not torch.equal(wired, typed)


class OtherPacksGuider(StandInGuider):
    """Another pack's guider: it may sample in its own way, so a sweep cannot re-prompt it."""


@pytest.mark.parametrize(
    "change, expected",
    [
        (dict(noise=Noise_EmptyNoise()), "noise has no seed to count up from"),
        (dict(sigmas=torch.zeros(1)), "sigmas is (1,), not a schedule"),
        ("other guider", "guider is a OtherPacksGuider, which a sweep cannot give each cell's model"),
        ("basic guider", "negative is set, but the guider (StandInGuider) has no negative to put it in"),
        (dict(prompts=""), "prompts has 0 lines"),
    ],
)
def test_the_custom_twin_refuses_what_it_cannot_sweep_before_the_first_image(pack, models, change, expected):
    with stand_in_sampling(pack) as backend, stand_in_loras(pack, FILES):
        value = cells(pack, ("teapot.safetensors", "1.0"))
        if change == "other guider":
            guider = OtherPacksGuider(StandInModel(), text_conditioning("x"), text_conditioning("y"), 7.0)
            inputs = custom_inputs(models, value, guider=guider)
        elif change == "basic guider":  # a typed negative the guider has no place for: never silently dropped
            guider = StandInGuider(StandInModel(), text_conditioning("x"), None, 1.0)
            inputs = custom_inputs(models, value, guider=guider, negative="blurry")
        else:
            inputs = custom_inputs(models, value, **change)
        with pytest.raises(Exception) as caught:
            run_custom(pack, inputs)
    message = str(caught.value)
    assert message.startswith(expected) or expected in message, message
    assert backend.calls == [] and len(message.splitlines()) == 1
