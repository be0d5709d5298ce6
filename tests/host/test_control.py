"""Cancel, free, float16 intermediates and the model patcher, in a real ComfyUI."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from . import hostapi
from .conftest import EXAMPLE_PREFIX, HERE, server_args, write_json
from .graphs import API_WORKFLOWS, for_cpu, load, node
from .test_mistakes import _cp_graph
from .test_workflows import check_design_card

LONG_BATCH = 800
SIDE = 96


def long_batch_graph(count: int) -> dict:
    """CP of ``count`` distinct small images (noise added to copies of one photo: the encoder caches repeats)."""
    graph = _cp_graph()
    graph["4"] = node("ImageAddNoise", image=["11", 0], seed=7, strength=0.3)
    graph["10"] = node("LoadImage", image=EXAMPLE_PREFIX + "dog_01.jpg")
    graph["12"] = node(
        "ImageScale", image=["10", 0], upscale_method="bilinear", width=SIDE, height=SIDE, crop="disabled"
    )
    graph["11"] = node("RepeatImageBatch", image=["12", 0], amount=count)
    return graph


def _progress(messages, prompt_id: str, node_id: str) -> list[tuple[float, int, int]]:
    return [
        (at, data["value"], data["max"])
        for at, data in messages.of_type("progress", prompt_id)
        if data.get("node") == node_id
    ]


def test_cancel_stops_a_long_batch_at_the_next_batch_boundary(server, out_dir):
    messages = hostapi.Messages(server)
    try:
        prompt_id = server.queue(long_batch_graph(LONG_BATCH))
        deadline = time.monotonic() + 600
        while not [p for p in _progress(messages, prompt_id, "5") if p[1] >= 24]:
            assert time.monotonic() < deadline, "the batch never started encoding"
            time.sleep(0.05)
        server.request("/interrupt", {})
        cancelled_at = time.monotonic()
        entry = server.wait(prompt_id)
        progress = _progress(messages, prompt_id, "5")
    finally:
        messages.close()
    write_json(os.path.join(out_dir, "interrupt-progress.json"), progress)
    assert hostapi.was_interrupted(entry), hostapi.explain(entry)
    values = [value for _, value, _ in progress]
    total = progress[-1][2]
    steps = sorted({b - a for a, b in zip(values, values[1:]) if b > a})
    assert values[-1] < total / 2, f"ran on after the cancel: {values[-1]} of {total}"
    # Progress moves one encoder batch at a time, and after the cancel at most the batch already running reports.
    assert steps and steps[0] >= 2, steps
    after = [value for at, value, _ in progress if at > cancelled_at]
    assert len(after) <= 1, f"batches finished after the cancel: {after}"
    interrupted = [at for at, _ in messages.of_type("execution_interrupted", prompt_id)]
    batch_seconds = (progress[-1][0] - progress[0][0]) / max(1, len(progress) - 1)
    assert interrupted and interrupted[0] - cancelled_at <= 5 * batch_seconds + 2.0, (
        interrupted,
        cancelled_at,
        batch_seconds,
    )


def test_free_unloads_and_the_next_run_loads_again(server):
    graph = _cp_graph()
    first = server.run(graph)
    assert hostapi.status(first) == "success", hostapi.explain(first)
    loads = server.log().count("Requested to load MascModelHolder")
    server.request("/free", {"unload_models": True, "free_memory": True})
    time.sleep(2.0)  # the worker applies the flags between prompts
    second = server.run(graph)
    assert hostapi.status(second) == "success", hostapi.explain(second)
    assert hostapi.ui_text(second, "6") == hostapi.ui_text(first, "6")
    assert server.log().count("Requested to load MascModelHolder") > loads, (
        "the encoder was not loaded again after /free"
    )


def test_models_stay_on_the_legacy_model_patcher_with_dynamic_vram(host, installed):
    probed = host.run_python(os.path.join(HERE, "probe_patcher.py"), host.dir, host.pack_dir, timeout=600)
    assert probed.returncode == 0, probed.stderr[-4000:]
    found = json.loads(probed.stdout.strip().splitlines()[-1])
    assert found["legacy"] and not found["core_patcher_used"] and found["loaded"], found
    assert found["is_dynamic"] in (False, None), found


def _has_flag(host, flag: str) -> bool:
    with open(os.path.join(host.dir, "comfy", "cli_args.py"), encoding="utf-8") as handle:
        return re.search(r"add_argument\(\s*['\"]" + re.escape(flag) + r"['\"]", handle.read()) is not None


@pytest.fixture(scope="module")
def fp16_server(host, installed, out_dir):
    if not _has_flag(host, "--fp16-intermediates"):
        pytest.skip(f"ComfyUI {host.label} has no --fp16-intermediates")
    started = hostapi.start_server(
        host.python,
        host.dir,
        server_args(host, installed, "--fp16-intermediates"),
        os.path.join(out_dir, "server-fp16.log"),
    )
    yield started
    started.stop()


def test_float16_intermediates_score_as_float32(fp16_server, installed, tiny_models, out_dir):
    """Load Image hands the nodes float16 IMAGE/MASK tensors: same pixels, same scores (the design card, <= 1e-5)."""
    check_design_card(fp16_server, installed, tiny_models, os.path.join(out_dir, "history-design-card-fp16.json"))


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in API_WORKFLOWS
        if not {"CheckpointLoaderSimple", "UNETLoader"} & {n["class_type"] for n in load(p).values()}
    ],
    ids=lambda p: os.path.basename(p),
)
def test_float16_intermediates_run_every_workflow_without_diffusion(fp16_server, path):
    entry = fp16_server.run(for_cpu(load(path)))
    assert hostapi.status(entry) == "success", hostapi.explain(entry)


LARGE_ENCODER_NAME = "masc-host-test-siglip2-so400m"


@pytest.fixture(scope="module")
def large_encoder(host, installed, out_dir):
    """A SigLIP2 of the real so400m size (4.3 GB in fp32: its load takes seconds), in models/masc for this module.

    MASC_HOST_LARGE_SIGLIP2 names one built before (``masc_core.testing.build_checkpoint(..., size="so400m")``);
    otherwise it is built here, once per session folder.
    """
    source = os.environ.get("MASC_HOST_LARGE_SIGLIP2") or os.path.join(out_dir, "siglip2-so400m")
    if not os.path.isfile(os.path.join(source, "config.json")):
        from masc_core.testing import build_checkpoint

        build_checkpoint(source, size="so400m")
    target = os.path.join(host.models("masc"), LARGE_ENCODER_NAME)
    if os.path.lexists(target):
        os.remove(target)
    os.symlink(os.path.abspath(source), target)
    yield LARGE_ENCODER_NAME
    os.remove(target)


def test_cancel_during_a_load_ends_the_load_as_an_interruption(server, large_encoder):
    """Cancel pressed while Load MaSC Encoder reads a large checkpoint: the load stops at its next stage and the
    prompt ends interrupted at the loader (before: the whole load ran on, and the prompt ended at a later node)."""
    graph = _cp_graph(large_encoder)
    graph["1"]["inputs"]["max_patches"] = 1008  # a setting no other test loads with: a fresh load, not the cache
    messages = hostapi.Messages(server)
    try:
        prompt_id = server.queue(graph)
        deadline = time.monotonic() + 600
        while not [d for _, d in messages.of_type("executing", prompt_id) if d.get("node") == "1"]:
            assert time.monotonic() < deadline, "the loader never started"
            time.sleep(0.02)
        server.request("/interrupt", {})
        entry = server.wait(prompt_id)
        interrupted = [d for _, d in messages.of_type("execution_interrupted", prompt_id)]
    finally:
        messages.close()
    kinds = [kind for kind, _ in entry["status"].get("messages", [])]
    assert hostapi.was_interrupted(entry) and "execution_error" not in kinds, hostapi.explain(entry)
    assert interrupted and interrupted[0].get("node_id") == "1", interrupted  # at the loader, not after it
    assert "5" not in entry.get("outputs", {})  # nothing after the loader ran
