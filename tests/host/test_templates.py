"""The DiT templates in a real ComfyUI, end to end, on tiny random-weight models built by the host's own classes
(``build_dits.py``): workflow 8 (Flux.1 Kontext dev, MaSC Sample Until (Custom) with MaSC Rules and MaSC Prune) and
workflow 9 (Qwen-Image-Edit 2511, MaSC Sample Until), each as shipped but for ``graphs.for_tiny_dits`` (the tiny
models, the text encoders replaced by a test-only conditioning node, 256 px, 4 steps).

For euler (resumed after the judged step) and dpmpp_2m (replayed from step 0), each template's graph with a round
of 2 judged at step 2 and 1 finished:
- the ledger in the report equals the model evaluations counted from outside MaSC;
- the survivor's pixels equal the plain sampler's at its seed (SamplerCustomAdvanced with Random Noise, or KSampler,
  batch 1, on the template's own guider or conditioning);
and with every candidate passing, the run stops after the first candidate; the saved PNGs carry the scores.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import ROOT
from .graphs import check_saved_scores, for_tiny_dits, load, node, of_type, plain_sampler
from .test_custom_sampling import LEDGER, _built
from .test_pruning import counting_server  # noqa: F401 (a fixture: the server with the test-only nodes)

STEPS = 4
TEMPLATES = {"08_flux_kontext_best_of_n": "flux", "09_qwen_image_edit_2511": "qwen_image"}


@pytest.fixture(scope="module")
def dits(host) -> None:
    """Both tiny families in the host's models folders, built by the host's code once, then reused; skipped where the
    host cannot load them."""
    for family in set(TEMPLATES.values()):
        _built(host, family, f"masc-host-test-{family}.safetensors", f"masc-host-test-{family}-vae.safetensors")


class TemplateRun:
    """A template as shipped, made runnable here, its MaSC settings changed, its model evaluations counted."""

    def __init__(self, server, output_dir, name: str, *, sampler_name: str, prune: bool, **rules):
        graph = for_tiny_dits(load(os.path.join(ROOT, "workflows", "api", name + ".json")), steps=STEPS)
        (self.twin,) = of_type(graph, "MaSCSampleUntilCustom") or of_type(graph, "MaSCSampleUntil")
        self.custom = graph[self.twin]["class_type"] == "MaSCSampleUntilCustom"
        (unet,) = of_type(graph, "UNETLoader")
        graph["counter"] = node("HostTestCountModelCalls", model=[unet, 0])
        for n in graph.values():  # every consumer of the loaded model now gets the counted one
            for key, value in n["inputs"].items():
                if value == [unet, 0] and n is not graph["counter"]:
                    n["inputs"][key] = ["counter", 0]
        settings = dict(rules)
        if self.custom:
            (rules_id,) = of_type(graph, "MaSCRules")
            (sampler,) = of_type(graph, "KSamplerSelect")
            graph[rules_id]["inputs"].update(settings)
            graph[sampler]["inputs"]["sampler_name"] = sampler_name
            (prune_id,) = of_type(graph, "MaSCPrune")
            if prune:
                graph[prune_id]["inputs"].update(prune_at=0.5, prune_keep=1)
            else:
                del graph[self.twin]["inputs"]["prune"], graph[prune_id]
        else:
            graph[self.twin]["inputs"].update(
                settings,
                sampler_name=sampler_name,
                seed=1000,
                **(dict(prune_at=0.5, prune_keep=1) if prune else dict(prune_at=0.0)),
            )
        graph["calls"] = node("HostTestModelCalls", after=[self.twin, 6])
        graph["seeds"] = node("PreviewAny", source=[self.twin, 5])
        graph["used"] = node("PreviewAny", source=[self.twin, 4])
        self.graph, self.output_dir = graph, output_dir
        self.entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END)
        assert hostapi.status(self.entry) == "success", hostapi.explain(self.entry)
        self.report = hostapi.ui_text(self.entry, self.twin)
        self.calls = int(hostapi.ui_text(self.entry, "calls"))
        self.seeds = [int(s) for s in hostapi.ui_text(self.entry, "seeds").split(", ") if s]
        self.used = int(hostapi.ui_text(self.entry, "used"))
        (self.save,) = [i for i in of_type(graph, "SaveImage") if graph[i]["inputs"]["images"] == [self.twin, 0]]
        self.pngs = hostapi.saved_images(self.entry, self.save, output_dir)

    def plain_pixels(self, server, seed: int) -> np.ndarray:
        """The plain sampler at ``seed`` (batch 1) on the template's own inputs, decoded by its VAE."""
        graph = {k: v for k, v in self.graph.items() if k not in ("calls", "seeds", "used")}
        inputs = graph[self.twin]["inputs"]
        for removed in [
            i for i, n in graph.items() if n["class_type"] in ("SaveImage", "PreviewAny", "MaSCLogScores")
        ] + [self.twin]:
            del graph[removed]
        plain = plain_sampler(graph, inputs, seed, custom=self.custom)
        graph["decoded"] = node("VAEDecode", samples=plain, vae=inputs["vae"])
        graph["save"] = node("SaveImage", images=["decoded", 0], filename_prefix=f"masc_plain_template_{seed}")
        entry = server.run(graph)
        assert hostapi.status(entry) == "success", hostapi.explain(entry)
        (path,) = hostapi.saved_images(entry, "save", self.output_dir)
        return np.asarray(Image.open(path).convert("RGB"))


PRUNED = dict(rank_by="cp", min_cp=0.999, reject_small_masks=False, accept=1, max_candidates=2, batch_size=2)


@pytest.mark.parametrize("sampler_name, spent, replayed", [("euler", 2 * 2 + 2, 0), ("dpmpp_2m", 2 * 2 + 4, 2)])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_pruned_template_counts_every_evaluation_and_keeps_the_plain_samplers_image(
    counting_server, dits, installed, name, sampler_name, spent, replayed
):
    run = TemplateRun(counting_server, installed["output"], name, sampler_name=sampler_name, prune=True, **PRUNED)
    match = LEDGER.search(run.report)
    assert match, run.report
    assert tuple(int(g or 0) for g in match.groups()) == (spent, 2 * STEPS, 1, 2, replayed), run.report
    assert run.calls == spent, (run.calls, run.report)  # counted outside MaSC
    (seed,) = run.seeds
    (path,) = run.pngs
    candidate, plain = np.asarray(Image.open(path).convert("RGB")), run.plain_pixels(counting_server, seed)
    assert candidate.shape == plain.shape and np.array_equal(candidate, plain), (
        f"{int((candidate != plain).any(-1).sum())} pixels differ from the plain sampler at seed {seed}"
    )
    check_saved_scores(path, run.graph, run.save)


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_template_stops_after_the_first_passing_candidate(counting_server, dits, installed, name):
    run = TemplateRun(
        counting_server,
        installed["output"],
        name,
        sampler_name="euler",
        prune=False,
        rank_by="cp",
        min_cp=-0.9,
        reject_small_masks=False,
        accept=1,
        max_candidates=4,
        batch_size=1,
    )
    assert run.used == 1 and run.seeds == [1000] and run.calls == STEPS, run.report
    assert re.match(r"1 of 1 accepted after 1 of 4 candidates \(stopped early\)", run.report), run.report
    assert len(run.pngs) == 1
