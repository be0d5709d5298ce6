"""A new user's first hour: the shipped workflows as opened, the models where README puts them, errors as sentences.

- A loader set to a Hub id uses that model's folder when it is already in models/<kind> (README's name, the Hub's
  owner/name, or a download's owner--name) and never touches the network then; offline without it, the line says
  which folder to create and what goes in it.
- A refusal reaches ComfyUI as ``MascInputError: <sentence>`` (no module path, which is the pack's folder path) and
  its console traceback is dropped; any other error keeps its traceback.
- Every node of every shipped UI workflow runs: it is an output node or feeds one (ComfyUI runs nothing else).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import traceback
from importlib import import_module

import pytest

from comfy_harness import import_pack
from workflow_specs import node_specs, ui_to_api

PACK = import_pack()
NODES = PACK.nodes.NODE_CLASS_MAPPINGS
SPECS = node_specs()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUB_ID = "google/siglip2-so400m-patch16-naflex"


def module(name: str):
    return import_module(f"{PACK.__name__}.{name}")


@pytest.mark.parametrize(
    "folder_name, max_patches",
    [
        ("siglip2-so400m-patch16-naflex", 304),  # README's name
        ("google/siglip2-so400m-patch16-naflex", 320),  # the Hub's owner/name
        ("google--siglip2-so400m-patch16-naflex", 336),  # where a download puts it
    ],
)
def test_a_hub_id_uses_the_folder_already_in_models_and_never_the_network(
    folder_name, max_patches, naflex_dir, tmp_path, monkeypatch, comfy_dirs
):
    models = tmp_path / "models"
    shutil.copytree(naflex_dir, models / "masc" / folder_name)
    monkeypatch.setenv("MASC_MODELS_DIR", str(models))
    checkpoints = module("masc_core.models.checkpoints")
    monkeypatch.setattr(
        checkpoints, "download", lambda *a, **k: pytest.fail("the network was asked for a model on disk")
    )
    encoder = NODES["MaSCLoadEncoder"]().load(model=HUB_ID, device="cpu", precision="fp32", max_patches=max_patches)[0]
    assert os.path.samefile(encoder.core.info.folder, models / "masc" / folder_name)


def test_offline_without_the_folder_the_line_says_which_folder_to_create(tmp_path, monkeypatch, comfy_dirs):
    import huggingface_hub

    monkeypatch.setenv("MASC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **k: (_ for _ in ()).throw(OSError("offline")))
    errors = module("masc_core.errors")
    with pytest.raises(errors.MascModelError) as refused:
        NODES["MaSCLoadAutoMaskModel"]().load(model="CIDAS/clipseg-rd64-refined", device="cpu", precision="fp32")
    assert str(refused.value) == (
        "could not get 'CIDAS/clipseg-rd64-refined' from the Hugging Face Hub (offline): check the id and the network, "
        "or create the folder models/clipseg/clipseg-rd64-refined holding the files of "
        "https://huggingface.co/CIDAS/clipseg-rd64-refined (config.json, the .safetensors weights, the tokenizer and "
        "preprocessor files) and run again"
    )


def comfy_type_name(kind: type) -> str:
    """What ComfyUI's execution.py (full_type_name) shows before an exception's message."""
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def refused_by_a_node():
    errors = module("masc_core.errors")
    with pytest.raises(errors.MascInputError) as refused:
        NODES["MaSCStripSubject"]().strip(prompt="a dog", subject=7)
    return refused.value


def test_a_refusal_reaches_comfyui_sentence_first():
    error = refused_by_a_node()
    assert comfy_type_name(type(error)) == "MascInputError"  # before: '<the pack's folder path>.masc_core.errors...'
    assert isinstance(error, module("masc_core.errors").MascInputError)
    assert str(error) == "subject is 7, not text: connect a STRING or type the text"


def test_the_console_keeps_one_line_for_a_refusal_and_every_traceback_of_anything_else():
    refusals = module("nodes.host.refusals")
    logger = logging.getLogger("masc-test-console")
    logger.propagate = False
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    refusals.quiet_console(logger)
    refusals.quiet_console(logger)  # a second copy of the pack installs no second filter
    assert len(logger.filters) == 1
    for error in (refused_by_a_node(), RuntimeError("a bug")):
        try:
            raise error
        except Exception as ex:
            # What ComfyUI's execution.py logs for a node's exception.
            logger.error(f"!!! Exception during processing !!! {ex}")
            logger.error(traceback.format_exc())
    assert seen[0] == "!!! Exception during processing !!! subject is 7, not text: connect a STRING or type the text"
    assert seen[1] == "!!! Exception during processing !!! a bug"
    assert len(seen) == 3 and seen[2].startswith("Traceback") and seen[2].rstrip().endswith("RuntimeError: a bug")


# ---------------------------------------------------------------- the shipped workflows

UI_WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json")))
CORE_OUTPUT_NODES = {
    "SaveImage",
    "PreviewImage",
    "PreviewAny",
    "SaveAnimatedWEBP",
    "SaveVideo",
    "SaveWEBM",
    "LossGraphNode",
    "SaveLoRA",
}
"""Core's output nodes the workflows use (OUTPUT_NODE in ComfyUI's nodes.py and comfy_extras; Plot Loss Graph and Save
LoRA Weights are ``is_output_node`` in 0.33's nodes_train.py)."""
FRONT_END_ONLY = {"Note", "MarkdownNote", "PrimitiveNode", "Reroute"}
"""Nodes the front end keeps to itself (never sent to the server)."""


def is_output(kind: str) -> bool:
    node_class = NODES.get(kind)
    return kind in CORE_OUTPUT_NODES or bool(node_class is not None and getattr(node_class, "OUTPUT_NODE", False))


@pytest.mark.parametrize("path", UI_WORKFLOWS, ids=os.path.basename)
def test_every_node_of_a_shipped_workflow_runs_or_feeds_an_output(path):
    """ComfyUI runs only output nodes and what feeds them: workflow 1's Strip Subject stayed empty after Run."""
    with open(path, encoding="utf-8") as handle:
        workflow = json.load(handle)
    graph = ui_to_api(workflow, SPECS)  # what the front end queues: subgraph nodes opened into the nodes inside
    feeds = {node_id: set() for node_id in graph}  # node -> the nodes its outputs reach
    for node_id, node in graph.items():
        for value in node["inputs"].values():
            if isinstance(value, list):
                feeds[value[0]].add(node_id)
    running = {node_id for node_id, node in graph.items() if is_output(node["class_type"])}
    grown = True
    while grown:
        grown = False
        for node_id, targets in feeds.items():
            if node_id not in running and targets & running:
                running.add(node_id)
                grown = True
    idle = sorted(f"{node['class_type']} #{node_id}" for node_id, node in graph.items() if node_id not in running)
    assert not idle, idle
