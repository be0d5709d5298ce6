"""MaSC Sample Until (Custom) in a real ComfyUI, on a tiny random-weight Flux built by the host's own classes
(``build_dits.py``: hidden 256, two heads, one double and one single block; the host's UNETLoader detects it as
Flux) in a Flux.1 Kontext-shaped graph: the reference photo is VAE-encoded into ReferenceLatent, FluxGuidance,
core's guiders, KSampler Select / a Sampler... node, Basic Scheduler and Random Noise. Text comes from a test-only
conditioning node (no T5 here). 256 px, 4 steps.

- pruning (a round of 4 judged at step 2, 1 finished): the ledger in the report equals the model evaluations counted
  from outside MaSC, for euler (resumed) and dpmpp_2m (replayed); the survivor's pixels equal SamplerCustomAdvanced's
  at its seed (Random Noise seed + i, batch 1);
- the twin and MaSC Sample Until, given the same settings (CFG Guider at cfg 1 = what KSampler builds), give the same
  seeds, ledger and pixels;
- Dual CFG Guider with Sampler Euler Ancestral (its options set, so none of the samplers pruning's tables name) is
  replayed and still pixel-identical to SamplerCustomAdvanced;
- a low threshold stops after the first candidate; Disable Noise, or pruning a sampler that picks its own steps, is
  one line before anything is sampled.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import ENCODER_NAME, HERE, write_json
from .graphs import node
from .test_pruning import counting_server  # noqa: F401 (a fixture: the server with the test-only nodes)

SEED = 2000
PROMPT = "a photo of sks dog on the beach"
SUBJECT = "sks dog, dog"
STEPS = 4
FLUX = "masc-host-test-flux.safetensors"
FLUX_VAE = "masc-host-test-flux-vae.safetensors"
SD3 = "masc-host-test-sd3.safetensors"
SD3_VAE = "masc-host-test-sd3-vae.safetensors"
RULES = dict(
    rank_by="cp",
    cp_weight=1.0,
    pf_weight=1.0,
    min_cp=0.999,
    min_pf=-1.0,
    reject_small_masks=False,
    min_foreground=0.05,
    on_uncertain="keep but mark",
    on_blend="report",
    accept=1,
    max_candidates=4,
    batch_size=4,
    on_shortfall="return best",
)
LEDGER = re.compile(
    r"(\d+) of (\d+) model evaluations(?:, [\d.]+x fewer)? \((\d+) of (\d+) candidates pruned(?:; (\d+) evaluations "
    r"replayed)?\)"
)
"""The ledger line of a report; "x fewer" is absent when replays spent as much as sampling everything."""


def _built(host, family: str, unet: str, vae: str) -> str:
    """A tiny model and its VAE in the host's models folders, built by the host's code once, then reused."""
    if not os.path.isfile(os.path.join(host.models("diffusion_models"), unet)) or not os.path.isfile(
        os.path.join(host.models("vae"), vae)
    ):
        built = host.run_python(os.path.join(HERE, "build_dits.py"), host.dir, os.path.join(host.dir, "models"), family)
        assert built.returncode == 0, (
            f"building {family} with the host's code failed:\n{built.stdout}\n{built.stderr[-4000:]}"
        )
        print(built.stdout.strip())
    # The host's own loader decides whether a tiny model of this family can exist there (0.3.64's detection fixes
    # Flux's width at 3072: only a full-size Flux loads).
    loads = host.run_python(
        "-c",
        "import sys; sys.argv = ['x', '--cpu']; import comfy.cli_args; comfy.cli_args.args.cpu = True; "
        "import comfy.sd; comfy.sd.load_diffusion_model("
        f"{os.path.join(host.models('diffusion_models'), unet)!r})",
    )
    if loads.returncode != 0:
        pytest.skip(
            f"ComfyUI {host.label} cannot load a tiny {family} (its model detection fixes the width): "
            f"{loads.stderr.strip().splitlines()[-1][:200]}"
        )
    return unet


@pytest.fixture(scope="module")
def flux(host) -> str:
    return _built(host, "flux", FLUX, FLUX_VAE)


@pytest.fixture(scope="module")
def sd3(host) -> str:
    return _built(host, "sd3", SD3, SD3_VAE)


def kontext_graph(
    *,
    guider: str = "basic",
    sampler: dict | None = None,
    twin: str = "custom",
    prune: dict | None = None,
    count_calls: bool = True,
    family: str = "flux",
    **rules,
) -> dict:
    """A Flux.1 Kontext-shaped best-of-N graph, as core's Kontext template wires the generator, with MaSC's twin (or
    MaSC Sample Until) where the sampler was. Node ids are fixed: "twin" samples, "calls" counts, "save" saves.
    ``family`` "sd3": an SD3 text-to-image graph instead (no reference latent, no Flux guidance, a real negative)."""
    settings = dict(RULES, **rules)
    g = {
        "unet": node("UNETLoader", unet_name=FLUX, weight_dtype="default"),
        "vae": node("VAELoader", vae_name=FLUX_VAE),
        "photo": node("LoadImage", image="masc_example_dog_00.jpg"),
        "photo_mask": node("LoadImageMask", image="masc_example_dog_00_mask.png", channel="red"),
        "scaled": node(
            "ImageScale", image=["photo", 0], upscale_method="bilinear", width=256, height=256, crop="center"
        ),
        "encoded": node("VAEEncode", pixels=["scaled", 0], vae=["vae", 0]),
        "text": node("HostTestConditioning", text=PROMPT, width=64, tokens=8, pooled=768),
        "reference": node("ReferenceLatent", conditioning=["text", 0], latent=["encoded", 0]),
        "guided": node("FluxGuidance", conditioning=["reference", 0], guidance=2.5),
        "negative": node("ConditioningZeroOut", conditioning=["guided", 0]),
        "latent": node("EmptySD3LatentImage", width=256, height=256, batch_size=1),
        "encoder": node("MaSCLoadEncoder", model=ENCODER_NAME, device="auto", precision="auto", max_patches=1024),
    }
    if family == "sd3":
        g["unet"]["inputs"]["unet_name"], g["vae"]["inputs"]["vae_name"] = SD3, SD3_VAE
        g["text"] = node("HostTestConditioning", text=PROMPT, width=64, tokens=8, pooled=2048)
        g["guided"] = g["text"]
        g["negative"] = node("HostTestConditioning", text="blurry, low quality", width=64, tokens=8, pooled=2048)
        for unused in ("reference", "encoded", "scaled"):
            del g[unused]
    g["model"] = node("HostTestCountModelCalls", model=["unet", 0]) if count_calls else g["unet"]
    masc = dict(
        latent_image=["latent", 0],
        vae=["vae", 0],
        encoder=["encoder", 0],
        prompt=PROMPT,
        subject=SUBJECT,
        reference_image=["photo", 0],
        reference_mask=["photo_mask", 0],
    )
    if twin == "custom":
        if guider == "basic":
            g["guider"] = node("BasicGuider", model=["model", 0], conditioning=["guided", 0])
        elif guider == "cfg":
            g["guider"] = node(
                "CFGGuider",
                model=["model", 0],
                positive=["guided", 0],
                negative=["negative", 0],
                cfg=4.5 if family == "sd3" else 1.0,
            )
        else:
            g["guider"] = node(
                "DualCFGGuider",
                model=["model", 0],
                cond1=["guided", 0],
                cond2=["text", 0],
                negative=["negative", 0],
                cfg_conds=2.0,
                cfg_cond2_negative=1.5,
                style="regular",
            )
        g["sampler"] = node(**sampler) if sampler else node("KSamplerSelect", sampler_name="euler")
        g["sigmas"] = node("BasicScheduler", model=["model", 0], scheduler="simple", steps=STEPS, denoise=1.0)
        g["noise"] = node("RandomNoise", noise_seed=SEED)
        g["rules"] = node("MaSCRules", **settings)
        masc.update(
            noise=["noise", 0],
            guider=["guider", 0],
            sampler=["sampler", 0],
            sigmas=["sigmas", 0],
            rules=["rules", 0],
            mask_subject="",
            mask_threshold=0.4,
        )
        if prune:
            g["prune"] = node("MaSCPrune", **prune)
            masc["prune"] = ["prune", 0]
        g["twin"] = node("MaSCSampleUntilCustom", **masc)
    else:
        sampler_name = (sampler or {}).get("sampler_name", "euler")
        masc.update(
            model=["model", 0],
            positive=["guided", 0],
            negative=["negative", 0],
            seed=SEED,
            steps=STEPS,
            cfg=1.0,
            sampler_name=sampler_name,
            scheduler="simple",
            denoise=1.0,
            mask_subject="",
            mask_threshold=0.4,
            **{k: v for k, v in settings.items() if k not in ("on_blend", "on_uncertain")},
            on_blend=settings["on_blend"],
            on_uncertain=settings["on_uncertain"],
            **{k: v for k, v in (prune or {}).items()},
        )
        g["twin"] = node("MaSCSampleUntil", **masc)
    if count_calls:
        g["calls"] = node("HostTestModelCalls", after=["twin", 6])
    g["used"] = node("PreviewAny", source=["twin", 4])
    g["seeds"] = node("PreviewAny", source=["twin", 5])
    g["save"] = node("SaveImage", images=["twin", 0], filename_prefix=f"masc_custom_{twin}_{guider}")
    return g


class Run:
    def __init__(self, server, output_dir, **options):
        self.graph = kontext_graph(**options)
        self.entry = server.run(self.graph, extra_data=hostapi.FROM_FRONT_END)
        assert hostapi.status(self.entry) == "success", hostapi.explain(self.entry)
        self.report = hostapi.ui_text(self.entry, "twin")
        self.used = int(hostapi.ui_text(self.entry, "used"))
        self.seeds = [int(s) for s in hostapi.ui_text(self.entry, "seeds").split(", ") if s]
        self.pngs = hostapi.saved_images(self.entry, "save", output_dir)
        self.calls = int(hostapi.ui_text(self.entry, "calls")) if "calls" in self.graph else None

    def ledger(self) -> tuple[int, ...]:
        match = LEDGER.search(self.report)
        assert match, self.report
        return tuple(int(g or 0) for g in match.groups())


def plain_pixels(server, run: Run, seed: int, output_dir: str) -> np.ndarray:
    """SamplerCustomAdvanced (Random Noise at ``seed``) on the run's own guider, sampler, sigmas and latent, decoded."""
    graph = {
        k: v for k, v in run.graph.items() if k not in ("twin", "calls", "used", "seeds", "save", "rules", "prune")
    }
    graph["noise"] = node("RandomNoise", noise_seed=seed)
    graph["plain"] = node(
        "SamplerCustomAdvanced",
        noise=["noise", 0],
        guider=["guider", 0],
        sampler=["sampler", 0],
        sigmas=["sigmas", 0],
        latent_image=["latent", 0],
    )
    graph["decoded"] = node("VAEDecode", samples=["plain", 0], vae=["vae", 0])
    graph["save"] = node("SaveImage", images=["decoded", 0], filename_prefix=f"masc_plain_custom_{seed}")
    entry = server.run(graph)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    (path,) = hostapi.saved_images(entry, "save", output_dir)
    return np.asarray(Image.open(path).convert("RGB"))


def assert_same_pixels(path: str, expected: np.ndarray, seed: int) -> None:
    candidate = np.asarray(Image.open(path).convert("RGB"))
    assert candidate.shape == expected.shape and np.array_equal(candidate, expected), (
        f"{int((candidate != expected).any(-1).sum())} pixels differ from SamplerCustomAdvanced at seed {seed}"
    )


@pytest.mark.parametrize("sampler_name, spent, replayed", [("euler", 4 * 2 + 2, 0), ("dpmpp_2m", 4 * 2 + 4, 2)])
def test_pruning_counts_every_evaluation_and_the_survivor_is_sampler_custom_advanceds_image(
    counting_server, flux, installed, sampler_name, spent, replayed
):
    run = Run(
        counting_server,
        installed["output"],
        sampler=dict(class_type="KSamplerSelect", sampler_name=sampler_name),
        prune=dict(prune_at=0.5, prune_keep=1, prune_study=False),
    )
    assert run.ledger() == (spent, 4 * STEPS, 3, 4, replayed) and run.calls == spent, (run.calls, run.report)
    assert run.used == 4 and len(run.seeds) == 1 and SEED <= run.seeds[0] < SEED + 4
    (path,) = run.pngs
    assert_same_pixels(path, plain_pixels(counting_server, run, run.seeds[0], installed["output"]), run.seeds[0])


def test_the_twin_and_sample_until_give_the_same_seeds_ledger_and_pixels(counting_server, flux, installed):
    prune = dict(prune_at=0.5, prune_keep=2, prune_study=False)
    twin = Run(counting_server, installed["output"], guider="cfg", prune=prune, accept=2)
    today = Run(counting_server, installed["output"], twin="sample_until", prune=prune, accept=2)
    assert twin.seeds == today.seeds and len(twin.seeds) == 2
    assert twin.ledger() == today.ledger() and twin.calls == today.calls == twin.ledger()[0]

    def settled(report: str) -> list[str]:  # every line but the measured time
        return [line for line in report.splitlines() if not line.startswith("time: ")]

    assert settled(twin.report) == settled(today.report)
    for mine, theirs in zip(twin.pngs, today.pngs):
        assert np.array_equal(
            np.asarray(Image.open(mine).convert("RGB")), np.asarray(Image.open(theirs).convert("RGB"))
        )


@pytest.mark.parametrize("sampler_name, spent, replayed", [("euler", 4 * 2 + 2, 0), ("dpmpp_2m", 4 * 2 + 4, 2)])
def test_sd3_with_cfg_guider_prunes_exactly(counting_server, sd3, installed, sampler_name, spent, replayed):
    """An SD3 (MMDiT, two joint blocks) text-to-image graph: CFG Guider at cfg 4.5 with a real negative."""
    run = Run(
        counting_server,
        installed["output"],
        family="sd3",
        guider="cfg",
        sampler=dict(class_type="KSamplerSelect", sampler_name=sampler_name),
        prune=dict(prune_at=0.5, prune_keep=1, prune_study=False),
    )
    assert run.ledger() == (spent, 4 * STEPS, 3, 4, replayed) and run.calls == spent, (run.calls, run.report)
    (path,) = run.pngs
    assert_same_pixels(path, plain_pixels(counting_server, run, run.seeds[0], installed["output"]), run.seeds[0])


def test_a_dual_cfg_guider_and_a_sampler_with_options_are_replayed_exactly(counting_server, flux, installed):
    run = Run(
        counting_server,
        installed["output"],
        guider="dual",
        sampler=dict(class_type="SamplerEulerAncestral", eta=0.7, s_noise=1.0),
        prune=dict(prune_at=0.5, prune_keep=1, prune_study=False),
    )
    spent, in_full, pruned, candidates, replayed = run.ledger()
    assert (pruned, candidates, replayed) == (3, 4, 2) and spent == run.calls == 4 * 2 + 4
    assert "is not one of core's samplers that resume exactly after a split" in run.report
    (path,) = run.pngs
    assert_same_pixels(path, plain_pixels(counting_server, run, run.seeds[0], installed["output"]), run.seeds[0])


def _run_seconds(entry: dict) -> float:
    """Execution start to success, from the history's status messages (ComfyUI's own timestamps, in ms)."""
    stamps = {name: data.get("timestamp") for name, data in entry["status"]["messages"]}
    return (stamps["execution_success"] - stamps["execution_start"]) / 1000


@pytest.mark.parametrize("guider", ["cfg", "basic"])
def test_a_plain_round_with_a_core_guider_is_one_call_and_within_one_level_of_one_by_one(
    counting_server, flux, installed, out_dir, guider
):
    """A round of 4 with core's CFG Guider (cfg 1) or Basic Guider and euler: one guider.sample call per round (4 model
    evaluations in all) against rounds of 1 (16). The same candidates, seeds and order; the pixels as MaSC Sample
    Until's batched rounds are to KSampler's batch of one: on a CPU a batched matmul rounds differently, so a few
    pixels differ by one level (measured: 19 of 65,536 at one seed, none at the others). The differences and the
    seconds of each run go to twin-batching-<guider>.json in the suite's output (docs/performance.md keeps them)."""
    settings = dict(guider=guider, accept=4, max_candidates=4, min_cp=0.999)
    Run(counting_server, installed["output"], batch_size=1, **dict(settings, accept=1, max_candidates=1))  # warm
    runs = [Run(counting_server, installed["output"], batch_size=size, **settings) for size in (4, 1, 4, 1)]
    batched, single = runs[0], runs[1]
    assert (batched.calls, single.calls) == (STEPS, 4 * STEPS), (batched.calls, single.calls)
    assert batched.seeds == single.seeds and sorted(batched.seeds) == list(range(SEED, SEED + 4))
    differ = {}
    for seed, mine, theirs in zip(batched.seeds, batched.pngs, single.pngs):
        a = np.asarray(Image.open(mine).convert("RGB")).astype(int)
        b = np.asarray(Image.open(theirs).convert("RGB")).astype(int)
        differ[seed] = {"pixels": int((a != b).any(-1).sum()), "largest": int(np.abs(a - b).max())}
    write_json(
        os.path.join(out_dir, f"twin-batching-{guider}.json"),
        {
            # The faster of two runs each, after a warm-up (the models loaded, the reference encoded).
            "batched_seconds": min(_run_seconds(r.entry) for r in runs[0::2]),
            "one_by_one_seconds": min(_run_seconds(r.entry) for r in runs[1::2]),
            "differences": differ,
        },
    )
    assert all(d["largest"] <= 1 and d["pixels"] <= 256 * 256 // 100 for d in differ.values()), differ


def test_a_low_threshold_stops_after_the_first_candidate(counting_server, flux, installed):
    run = Run(counting_server, installed["output"], min_cp=-0.9, batch_size=1, max_candidates=4)
    assert run.used == 1 and run.seeds == [SEED] and run.calls == STEPS
    assert run.report.splitlines()[0] == "1 of 1 accepted after 1 of 4 candidates (stopped early)", run.report
    assert_same_pixels(run.pngs[0], plain_pixels(counting_server, run, SEED, installed["output"]), SEED)


def test_disable_noise_and_an_unsplittable_sampler_are_one_line_before_sampling(counting_server, flux, installed):
    graph = kontext_graph()
    graph["noise"] = node("DisableNoise")
    entry = counting_server.run(graph)
    error = hostapi.error_of(entry)
    assert error and error["node_id"] == "twin", hostapi.explain(entry)
    assert error["exception_message"].startswith("noise has no seed to count up from (Disable Noise?)"), (
        hostapi.explain(entry)
    )
    graph = kontext_graph(
        sampler=dict(class_type="KSamplerSelect", sampler_name="dpm_adaptive"),
        prune=dict(prune_at=0.5, prune_keep=1, prune_study=False),
    )
    entry = counting_server.run(graph)
    error = hostapi.error_of(entry)
    assert error and "sampler dpm_adaptive chooses its own steps" in error["exception_message"], hostapi.explain(entry)
    assert "\n" not in error["exception_message"].strip()
