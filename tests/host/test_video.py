"""Subject-driven video in a real ComfyUI: workflow 10 (Wan 2.1 VACE reference-to-video, MaSC Sample Until) and the
custom twin, on a tiny random-weight Wan 2.1 VACE built by the host's own classes (``build_dits.py wan_vace``: width
256, two heads, one block and one VACE block; the host detects it as WAN21_Vace) with the Wan 2.1 VAE at width 32.
Text comes from the test-only conditioning node (UMT5's width, 4096); the clip is 128 x 128, 9 frames, 4 steps.

- the template as shipped (``graphs.for_tiny_dits``) stops after the first passing clip and saves it as an animated
  WebP whose metadata holds MaSC's entry with the clip's frames;
- pruning (a round of 2 judged at step 2, 1 finished), in the template and in the twin (CFG Guider): the ledger equals
  the model evaluations counted from outside MaSC, and the kept clip's frames equal the plain sampler's at its seed
  (KSampler or SamplerCustomAdvanced, then Trim Video Latent and VAE Decode, as core's template decodes), for euler
  (resumed) and dpmpp_2m (replayed);
- MaSC Score Video on the kept frames gives the per-frame CP the run recorded for that clip.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import ROOT
from .graphs import VIDEO_SIZE, for_tiny_dits, load, node, of_type, plain_sampler
from .test_custom_sampling import LEDGER, _built
from .test_pruning import counting_server  # noqa: F401 (a fixture: the server with the test-only nodes)

STEPS = 4
TEMPLATE = "10_wan_vace_best_of_n"
FRAMES = VIDEO_SIZE["length"]


@pytest.fixture(scope="module")
def wan(host) -> str:
    return _built(host, "wan_vace", "masc-host-test-wan_vace.safetensors", "masc-host-test-wan_vace-vae.safetensors")


def template_graph() -> dict:
    return for_tiny_dits(load(os.path.join(ROOT, "workflows", "api", TEMPLATE + ".json")), steps=STEPS)


def as_twin(graph: dict, sampler_name: str, prune: bool, rules: dict) -> dict:
    """The template with MaSC Sample Until (Custom) in place of MaSC Sample Until: CFG Guider, KSampler Select, Basic
    Scheduler and Random Noise with the same model, conditioning, cfg, steps and seed; MaSC Rules and MaSC Prune."""
    (twin,) = of_type(graph, "MaSCSampleUntil")
    inputs = graph[twin]["inputs"]
    graph["guider"] = node(
        "CFGGuider", model=inputs["model"], positive=inputs["positive"], negative=inputs["negative"], cfg=inputs["cfg"]
    )
    graph["sampler"] = node("KSamplerSelect", sampler_name=sampler_name)
    graph["sigmas"] = node("BasicScheduler", model=inputs["model"], scheduler="simple", steps=STEPS, denoise=1.0)
    graph["noise"] = node("RandomNoise", noise_seed=1000)
    names = ("rank_by", "cp_weight", "pf_weight", "min_cp", "min_pf", "reject_small_masks", "min_foreground")
    settings = {k: inputs[k] for k in names}
    settings.update(on_uncertain="keep but mark", on_blend="report", on_shortfall="return best")
    settings.update(accept=inputs["accept"], max_candidates=inputs["max_candidates"], batch_size=inputs["batch_size"])
    settings.update(rules)
    graph["rules"] = node("MaSCRules", **settings)
    custom = {
        k: inputs[k]
        for k in ("latent_image", "vae", "encoder", "prompt", "subject", "reference_image", "reference_mask")
    }
    custom.update(segmenter=inputs["segmenter"], video=inputs["video"], mask_subject="", mask_threshold=0.4)
    custom.update(noise=["noise", 0], guider=["guider", 0], sampler=["sampler", 0], sigmas=["sigmas", 0])
    custom["rules"] = ["rules", 0]
    if prune:
        graph["prune"] = node("MaSCPrune", prune_at=0.5, prune_keep=1, prune_study=False)
        custom["prune"] = ["prune", 0]
    graph[twin] = node("MaSCSampleUntilCustom", **custom)
    return graph


class VideoRun:
    """Workflow 10 (or its twin) run here: its model evaluations counted, its kept frames saved as PNGs too."""

    def __init__(self, server, output_dir, *, twin: bool, sampler_name: str, prune: bool, extend=None, **rules):
        graph = template_graph()
        if twin:
            graph = as_twin(graph, sampler_name, prune, rules)
        (self.twin,) = of_type(graph, "MaSCSampleUntilCustom") or of_type(graph, "MaSCSampleUntil")
        if not twin:
            graph[self.twin]["inputs"].update(
                rules,
                sampler_name=sampler_name,
                scheduler="simple",
                **(dict(prune_at=0.5, prune_keep=1) if prune else dict(prune_at=0.0)),
            )
        (unet,) = of_type(graph, "UNETLoader")
        graph["counter"] = node("HostTestCountModelCalls", model=[unet, 0])
        for n in graph.values():  # every consumer of the loaded model gets the counted one
            for key, value in n["inputs"].items():
                if value == [unet, 0] and n is not graph["counter"]:
                    n["inputs"][key] = ["counter", 0]
        graph["calls"] = node("HostTestModelCalls", after=[self.twin, 6])
        graph["seeds"] = node("PreviewAny", source=[self.twin, 5])
        graph["used"] = node("PreviewAny", source=[self.twin, 4])
        graph["frames"] = node("SaveImage", images=[self.twin, 0], filename_prefix="masc_video_frames")
        if extend is not None:
            extend(graph, self.twin)
        self.graph, self.output_dir = graph, output_dir
        self.entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END)
        assert hostapi.status(self.entry) == "success", hostapi.explain(self.entry)
        self.report = hostapi.ui_text(self.entry, self.twin)
        self.calls = int(hostapi.ui_text(self.entry, "calls"))
        self.seeds = [int(s) for s in hostapi.ui_text(self.entry, "seeds").split(", ") if s]
        self.used = int(hostapi.ui_text(self.entry, "used"))
        self.frames = [
            np.asarray(Image.open(p).convert("RGB")) for p in hostapi.saved_images(self.entry, "frames", output_dir)
        ]
        (self.webp_node,) = of_type(graph, "SaveAnimatedWEBP")

    def plain_frames(self, server, seed: int) -> list[np.ndarray]:
        """The plain sampler at ``seed`` on the run's own inputs, trimmed and decoded as core's VACE template does."""
        graph = {k: v for k, v in self.graph.items() if k not in ("calls", "seeds", "used", "frames")}
        inputs = graph[self.twin]["inputs"]
        for removed in [
            i for i, n in graph.items() if n["class_type"] in ("SaveAnimatedWEBP", "PreviewAny", "MaSCLogScores")
        ] + [self.twin, "rules", "prune"]:
            graph.pop(removed, None)
        plain = plain_sampler(graph, inputs, seed, custom="guider" in graph)  # the twin: its guider, sampler, sigmas
        (options,) = of_type(self.graph, "MaSCVideoOptions")
        graph["trimmed"] = node(
            "TrimVideoLatent", samples=plain, trim_amount=self.graph[options]["inputs"]["trim_latent"]
        )
        graph["decoded"] = node("VAEDecode", samples=["trimmed", 0], vae=inputs["vae"])
        graph["save"] = node("SaveImage", images=["decoded", 0], filename_prefix=f"masc_plain_video_{seed}")
        entry = server.run(graph)
        assert hostapi.status(entry) == "success", hostapi.explain(entry)
        return [np.asarray(Image.open(p).convert("RGB")) for p in hostapi.saved_images(entry, "save", self.output_dir)]


PRUNED = dict(rank_by="cp", min_cp=0.999, reject_small_masks=False, accept=1, max_candidates=2, batch_size=2)


@pytest.mark.parametrize("twin", [False, True], ids=["template", "twin"])
@pytest.mark.parametrize("sampler_name, spent, replayed", [("euler", 2 * 2 + 2, 0), ("dpmpp_2m", 2 * 2 + 4, 2)])
def test_pruned_video_counts_every_evaluation_and_keeps_the_plain_samplers_clip(
    counting_server, wan, installed, twin, sampler_name, spent, replayed
):
    run = VideoRun(counting_server, installed["output"], twin=twin, sampler_name=sampler_name, prune=True, **PRUNED)
    match = LEDGER.search(run.report)
    assert match, run.report
    assert tuple(int(g or 0) for g in match.groups()) == (spent, 2 * STEPS, 1, 2, replayed), run.report
    assert run.calls == spent, (run.calls, run.report)  # counted outside MaSC
    (seed,) = run.seeds
    plain = run.plain_frames(counting_server, seed)
    assert len(run.frames) == len(plain) == FRAMES, (len(run.frames), len(plain))
    for t, (frame, expected) in enumerate(zip(run.frames, plain)):
        assert frame.shape == expected.shape and np.array_equal(frame, expected), (
            f"frame {t}: {int((frame != expected).any(-1).sum())} pixels differ from the plain sampler at seed {seed}"
        )


def test_the_template_stops_at_the_first_passing_clip_and_saves_it_with_its_scores(counting_server, wan, installed):
    run = VideoRun(
        counting_server,
        installed["output"],
        twin=False,
        sampler_name="euler",
        prune=False,
        rank_by="cp",
        min_cp=-0.9,
        min_pf=-1.0,
        reject_small_masks=False,
        accept=1,
        max_candidates=4,
        batch_size=1,
    )
    assert run.used == 1 and run.seeds == [1000] and run.calls == STEPS, run.report
    assert re.match(r"1 of 1 accepted after 1 of 4 candidates \(stopped early\)", run.report), run.report
    assert len(run.frames) == FRAMES
    rows = clip_rows(saved_masc_entry(run, installed["output"]))
    assert rows and all(row["total_frames"] == FRAMES and row["worst_frame"] is not None for row in rows), rows


def saved_masc_entry(run: VideoRun, output_dir: str) -> dict:
    """MaSC's entry in the kept clip's animated WebP (core writes each extra_pnginfo key into an EXIF tag)."""
    (webp,) = hostapi.saved_images(run.entry, run.webp_node, output_dir)
    with Image.open(
        webp
    ) as clip:  # (its frame count is not checked: WebP merges identical frames, as a tiny Wan's are)
        entries = [v for v in clip.getexif().values() if isinstance(v, str) and v.startswith("masc:")]
    assert entries, "the animated WebP carries no masc entry"
    return json.loads(entries[0].split(":", 1)[1])


def clip_rows(value) -> list[dict]:
    """Every ``clip`` summary anywhere in MaSC's saved entry."""
    if isinstance(value, dict):
        found = [value["clip"]] if isinstance(value.get("clip"), dict) else []
        return found + [row for v in value.values() for row in clip_rows(v)]
    if isinstance(value, list):
        return [row for v in value for row in clip_rows(v)]
    return []


def test_masc_score_video_on_the_kept_frames_gives_the_runs_per_frame_cp(counting_server, wan, installed):
    """MaSC Score Video on the clip the run kept (as IMAGE frames and as core's VIDEO) gives the run's per-frame CP."""

    def add_score_video(graph, twin):
        inputs = graph[twin]["inputs"]
        (options,) = of_type(graph, "MaSCVideoOptions")
        graph["video"] = node(
            "MaSCScoreVideo",
            encoder=inputs["encoder"],
            reference_image=inputs["reference_image"],
            reference_mask=inputs["reference_mask"],
            frames=[twin, 0],
            prompt=inputs["prompt"],
            subject=inputs["subject"],
            every_nth_frame=graph[options]["inputs"]["every_nth_frame"],
            max_frames=graph[options]["inputs"]["max_frames"],
        )
        # The same frames as core's VIDEO (Create Video), into the same socket.
        graph["as_video"] = node("CreateVideo", images=[twin, 0], fps=16.0)
        graph["video_of_core"] = dict(graph["video"], inputs=dict(graph["video"]["inputs"], frames=["as_video", 0]))

    run = VideoRun(
        counting_server,
        installed["output"],
        twin=False,
        sampler_name="euler",
        prune=False,
        extend=add_score_video,
        rank_by="cp",
        min_cp=-0.9,
        reject_small_masks=False,
        accept=1,
        max_candidates=1,
        batch_size=1,
    )
    video_report = hostapi.ui_text(run.entry, "video")
    assert hostapi.ui_text(run.entry, "video_of_core") == video_report  # a VIDEO scores as its frames do
    scored = {int(k): float(cp) for k, cp in re.findall(r"^frame (\d+)\s+([+-]\d\.\d{4})", video_report, flags=re.M)}
    (clip,) = [row for row in clip_rows(saved_masc_entry(run, installed["output"])) if "frames" in row]
    recorded = {f["frame"]: f["cp"] for f in clip["frames"]}
    assert sorted(scored) == sorted(recorded) and len(scored) > 1, (video_report, clip)
    assert all(abs(scored[k] - recorded[k]) <= 5e-5 for k in scored), (scored, recorded)
    assert clip["worst_frame"] == min(recorded, key=recorded.get)
