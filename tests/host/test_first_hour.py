"""A newcomer's first hour on a real ComfyUI, offline: only the model folders README names, every template as shipped.

The server runs with HF_HUB_OFFLINE=1 (``hostapi.start_server``). The models are put exactly where README says
(models/masc/siglip2-so400m-patch16-naflex, models/clipseg/clipseg-rd64-refined, and for templates 3, 4 and 7 the
SD1.5 file in models/checkpoints); every template whose generator files are present then runs with no setting
changed, except what its own note says to set on a CPU-only machine ("CPU only: ..."), which this test reads from
the note and applies as a person would. The time each run takes is written to ``first_hour.json`` in the session's
output folder: the figures the notes quote come from there.

Set MASC_HOST_README_SIGLIP2 / MASC_HOST_README_CLIPSEG to folders of real-size random checkpoints
(``masc_core.testing``: ``build_checkpoint(size="so400m")``, ``build_clipseg_checkpoint(size="base")``) to measure
with the real shapes; by default the suite's tiny ones stand in.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from . import hostapi
from .conftest import ROOT, write_json
from .graphs import load, needs_text_encoders

README_FOLDERS = {"masc": "siglip2-so400m-patch16-naflex", "clipseg": "clipseg-rd64-refined"}
SD15_FILE = "v1-5-pruned-emaonly-fp16.safetensors"
CPU_ONLY = re.compile(r"CPU only: width (\d+), height (\d+), steps (\d+)(?:, (batch_size|max_candidates|seeds) (\d+))?")
"""The line a generation template's note gives for a CPU-only machine."""


@pytest.fixture(scope="module")
def readme_models(host, installed, tiny_models, sd15, loras):
    """README's folders, and nothing under the Hub ids' other names (the tiny checkpoints stand in for the real
    ones)."""
    sources = {
        "masc": os.environ.get("MASC_HOST_README_SIGLIP2") or tiny_models["encoder"],
        "clipseg": os.environ.get("MASC_HOST_README_CLIPSEG") or tiny_models["segmenter"],
    }
    placed = []
    for kind, name in README_FOLDERS.items():
        target = os.path.join(host.models(kind), name)
        if os.path.islink(target) and os.readlink(target) == os.path.abspath(sources[kind]):
            os.remove(target)  # this test's own link, left by a run that was stopped before its teardown
        assert not os.path.lexists(target), f"{target} exists: this test places README's folders itself"
        os.symlink(os.path.abspath(sources[kind]), target)
        placed.append(target)
    checkpoint = os.path.join(host.models("checkpoints"), SD15_FILE)
    if not os.path.lexists(checkpoint):
        os.symlink(os.path.realpath(os.path.join(host.models("checkpoints"), sd15)), checkpoint)
        placed.append(checkpoint)
    yield placed
    for target in placed:
        os.remove(target)


def ui_workflow(api_path: str) -> dict:
    return load(os.path.join(ROOT, "workflows", os.path.basename(api_path)))


def cpu_settings(api_path: str) -> dict | None:
    """What the template's note says to set on a CPU-only machine, or None (it runs as shipped)."""
    notes = [n["widgets_values"][0] for n in ui_workflow(api_path)["nodes"] if n["type"] == "Note"]
    found = [CPU_ONLY.search(text) for text in notes]
    found = [match for match in found if match]
    if not found:
        return None
    width, height, steps, name, value = found[0].groups()
    settings = {"width": int(width), "height": int(height), "steps": int(steps)}
    if name:
        settings[name] = int(value)
    return settings


def as_a_person_sets_it(graph: dict, settings: dict) -> dict:
    for spec in graph.values():
        inputs, kind = spec["inputs"], spec["class_type"]
        if kind in ("EmptyLatentImage", "ImageScale"):  # ImageScale: the training photos of template 12
            inputs.update(width=settings["width"], height=settings["height"])
            if "batch_size" in settings:
                inputs["batch_size"] = settings["batch_size"]
        if isinstance(inputs.get("steps"), int):
            inputs["steps"] = settings["steps"]
        if kind == "MaSCRules" and "max_candidates" in settings:
            inputs["max_candidates"] = settings["max_candidates"]
        if kind == "MaSCSweep" and "seeds" in settings:
            inputs["seeds"] = settings["seeds"]
    return graph


def generator_files(graph: dict) -> list[str]:
    """The generator's model files a graph names (checkpoints, diffusion models, text encoders, VAEs)."""
    names = []
    for spec in graph.values():
        for key in ("ckpt_name", "unet_name", "clip_name", "clip_name1", "clip_name2", "vae_name"):
            if isinstance(spec["inputs"].get(key), str):
                names.append(spec["inputs"][key])
    return names


def present(host, name: str) -> bool:
    return any(
        os.path.exists(os.path.join(host.models(kind), name))
        for kind in ("checkpoints", "diffusion_models", "unet", "text_encoders", "clip", "vae")
    )


API = sorted(f for f in os.listdir(os.path.join(ROOT, "workflows", "api")) if f.endswith(".json"))


@pytest.mark.parametrize("name", API)
def test_a_template_runs_as_shipped_from_readmes_folders_offline(server, host, readme_models, out_dir, name):
    path = os.path.join(ROOT, "workflows", "api", name)
    graph = load(path)
    lacking = sorted({spec["class_type"] for spec in graph.values()} - set(server.request("/object_info")))
    if lacking:  # template 12 names 0.33's Train LoRA nodes (docs/limitations.md)
        pytest.skip(f"ComfyUI {host.label} has no {', '.join(lacking)}: the template needs a newer core")
    missing = [f for f in generator_files(graph) if not present(host, f)]
    if missing or needs_text_encoders(graph):
        pytest.skip(f"its generator's files are not here ({', '.join(missing) or 'text encoders'}): a GPU template")
    settings = cpu_settings(path)
    if generator_files(graph):
        assert settings, f"{name}: a generation template's note must say what to set on a CPU-only machine"
        graph = as_a_person_sets_it(graph, settings)
    started = time.monotonic()
    entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END, timeout=3600)
    seconds = time.monotonic() - started
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    record = os.path.join(out_dir, "first_hour.json")
    times = json.load(open(record)) if os.path.exists(record) else {}
    times[name] = {"seconds": round(seconds, 1), "cpu_settings": settings}
    write_json(record, times)
    print(f"{name}: {seconds:.1f} s with {settings or 'the shipped settings'}")
    if name.startswith("1_"):  # Strip Subject shows the text PF encodes, connected or not
        (strip,) = [i for i, spec in graph.items() if spec["class_type"] == "MaSCStripSubject"]
        assert hostapi.ui_text(entry, strip) == "a photo of on the beach", hostapi.ui_text(entry, strip)


def test_the_readme_names_the_folders_this_test_uses():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    for kind, name in README_FOLDERS.items():
        assert f"models/{kind}/{name}/" in readme
    assert f"models/checkpoints/{SD15_FILE}" in readme
