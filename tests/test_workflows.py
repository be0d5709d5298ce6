"""The example workflows: UI format (for the front end) and API format (for /prompt) describe the same graphs.

Without ComfyUI: node signatures come from the pack's INPUT_TYPES and, for
core nodes, from a snapshot of ComfyUI 0.3.64's /object_info
(tests/data/core_node_specs.json). The UI files were also loaded in ComfyUI
0.3.64's real front end (1.27.10) with no missing nodes; this test keeps
them consistent as the nodes evolve (the checks themselves: workflow_specs.py).
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest

from comfy_harness import ROOT
from workflow_specs import (
    FRONTEND_ONLY,
    INPUT_NODE,
    OUTPUT_NODE,
    all_nodes,
    node_specs,
    output_types,
    subgraphs_of,
    ui_to_api,
    widget_slots,
)

UI_FILES = sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json")))
API_DIR = os.path.join(ROOT, "workflows", "api")


@pytest.fixture(scope="module")
def specs():
    return node_specs()


def test_every_workflow_has_both_formats():
    ui_names = {os.path.basename(p) for p in UI_FILES}
    api_names = {os.path.basename(p) for p in glob.glob(os.path.join(API_DIR, "*.json"))}
    assert ui_names == api_names and len(ui_names) >= 4


@pytest.mark.parametrize("path", UI_FILES, ids=[os.path.basename(p) for p in UI_FILES])
def test_ui_workflow_matches_its_api_twin(path, specs):
    with open(path) as handle:
        ui = json.load(handle)
    with open(os.path.join(API_DIR, os.path.basename(path))) as handle:
        api = json.load(handle)
    subgraphs = subgraphs_of(ui)
    unknown = {n["type"] for n in all_nodes(ui)} - set(specs) - set(subgraphs) - FRONTEND_ONLY
    assert not unknown, f"nodes neither in the pack nor in ComfyUI core: {unknown}"
    converted = ui_to_api(ui, specs)
    assert converted == {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()}
    check_link_types(ui["nodes"], ui["links"], specs, subgraphs)
    for subgraph in subgraphs.values():
        links = [
            [x["id"], x["origin_id"], x["origin_slot"], x["target_id"], x["target_slot"], x["type"]]
            for x in subgraph["links"]
        ]
        check_link_types(subgraph["nodes"], links, specs, subgraphs, subgraph)
    assert any(n["type"] == "Note" for n in ui["nodes"]), "each shared workflow explains itself in a Note"


def check_link_types(nodes: list, links: list, specs: dict, subgraphs: dict, inside: dict | None = None) -> None:
    """Every link joins an output and an input of its type; inside a subgraph, its own input and output nodes too."""
    by_id = {n["id"]: n for n in nodes}
    for link_id, origin, origin_slot, target, target_slot, kind in links:
        if origin == INPUT_NODE:
            produced = inside["inputs"][origin_slot]["type"]
        else:
            produced = output_types(by_id[origin], specs, subgraphs)[origin_slot]
        if target == OUTPUT_NODE:
            wanted = inside["outputs"][target_slot]["type"]
        else:
            wanted = by_id[target]["inputs"][target_slot]["type"]
        assert kind in (produced, "*") and wanted in (produced, "*"), f"link {link_id}: {produced} -> {wanted} ({kind})"


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json"))), ids=os.path.basename)
def test_the_packs_nodes_carry_the_registry_id_and_version(path):
    """The front end offers to install a missing pack from each node's cnr_id and ver: kept in step with pyproject."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    with open(path, encoding="utf-8") as handle:
        nodes = json.load(handle)["nodes"]
    ours = [node for node in nodes if node["type"].startswith("MaSC")]
    assert ours
    for node in ours:
        assert (
            node["properties"].get("cnr_id") == project["name"] and node["properties"].get("ver") == project["version"]
        ), node["type"]


MODEL_LOADERS = {  # core loader -> its widgets that name a model file, and the models folder the file belongs in
    "CheckpointLoaderSimple": ({"ckpt_name"}, "checkpoints"),
    "UNETLoader": ({"unet_name"}, "diffusion_models"),
    "VAELoader": ({"vae_name"}, "vae"),
    "CLIPLoader": ({"clip_name"}, "text_encoders"),
    "DualCLIPLoader": ({"clip_name1", "clip_name2"}, "text_encoders"),
}


# The front end fits an opened template to its window and draws nodes as blank boxes below zoom 8/14; at 1600 x 1000
# that held up to about 2,050 x 1,200 graph units (measured in the host suite's browser test, which checks the zoom).
MAX_LAYOUT = (2050, 1200)
TITLE_HEIGHT = 30  # LiteGraph draws a node's title above its pos
# Nodes whose report box grows downwards after a run (by about 25 px a candidate): nothing may sit below them.
GROWS_AFTER_RUN = {"MaSCSampleUntil", "MaSCSampleUntilCustom", "MaSCSweep"}  # a preview and a report appear


def _rectangle(node):
    x, y = node["pos"]
    width, height = node["size"]
    return x, y - TITLE_HEIGHT, x + width, y + height


@pytest.mark.parametrize("path", UI_FILES, ids=[os.path.basename(p) for p in UI_FILES])
def test_a_template_fits_a_window_and_leaves_room_below_nodes_that_grow(path):
    with open(path) as handle:
        nodes = json.load(handle)["nodes"]
    rectangles = {node["id"]: _rectangle(node) for node in nodes}
    left, top = min(r[0] for r in rectangles.values()), min(r[1] for r in rectangles.values())
    right, bottom = max(r[2] for r in rectangles.values()), max(r[3] for r in rectangles.values())
    assert right - left <= MAX_LAYOUT[0] and bottom - top <= MAX_LAYOUT[1], (
        f"layout is {right - left} x {bottom - top} units, over {MAX_LAYOUT}: it opens too small to read"
    )
    for node in nodes:
        if node["type"] not in GROWS_AFTER_RUN:
            continue
        x0, _, x1, y1 = rectangles[node["id"]]
        below = [i for i, r in rectangles.items() if i != node["id"] and r[0] < x1 and r[2] > x0 and r[1] >= y1]
        assert not below, f"nodes {below} sit below node {node['id']} ({node['type']}), which grows after a run"


CPU_ONLY = re.compile(r"CPU only: width (\d+), height (\d+), steps (\d+)")
"""The note's line for a CPU-only machine, which tests/host/test_first_hour.py reads and applies as a person would."""


@pytest.mark.parametrize("path", UI_FILES, ids=[os.path.basename(p) for p in UI_FILES])
def test_a_generation_template_says_what_to_set_on_a_cpu(path):
    """Each template that generates says what to set on a CPU-only machine (in the form the host suite applies), or
    that it needs a GPU (the DiT templates)."""
    with open(path) as handle:
        ui = json.load(handle)
    if not {n["type"] for n in all_nodes(ui)} & set(MODEL_LOADERS):
        return  # nothing is generated: it runs as shipped
    notes = [n["widgets_values"][0] for n in ui["nodes"] if n["type"] == "Note"]
    assert any(CPU_ONLY.search(text) or "Needs a GPU" in text for text in notes), (
        "its note says neither 'CPU only: width W, height H, steps N' nor 'Needs a GPU'"
    )


REPORT_WIDTH = 753
"""The widest a report box makes its node (web/masc_scores.js: 96 columns of 7.3 px, padding, margins and 20 px)."""
REPORTS_AT_FULL_WIDTH = {"MaSCSweep", "MaSCSweepCustom"}  # the sweep's verdict sentence is always wider than 96


@pytest.mark.parametrize("path", UI_FILES, ids=[os.path.basename(p) for p in UI_FILES])
def test_a_node_whose_report_widens_it_is_saved_that_wide(path):
    """After a run the report box widens a node to fit its lines: a sweep saved narrower covers its right-hand
    neighbours (the host suite saw MaSC Sweep over its Save Image nodes by 313 px)."""
    with open(path) as handle:
        nodes = json.load(handle)["nodes"]
    for node in nodes:
        if node["type"] in REPORTS_AT_FULL_WIDTH:
            assert node["size"][0] >= REPORT_WIDTH, f"node {node['id']} ({node['type']}) is {node['size'][0]} wide"


@pytest.mark.parametrize("path", UI_FILES, ids=[os.path.basename(p) for p in UI_FILES])
def test_every_model_file_a_workflow_names_can_be_downloaded_from_its_loader(path, specs):
    """The front end (1.49 and later) offers a missing model's download from the loader's ``models`` property, as core's
    templates carry it; a file named without one opens as a dead end ("... is missing")."""
    with open(path, encoding="utf-8") as handle:
        ui = json.load(handle)
    for node in all_nodes(ui):  # a generator folded into a subgraph keeps its loaders inside
        if node["type"] not in MODEL_LOADERS:
            continue
        names, directory = MODEL_LOADERS[node["type"]]
        values = dict(zip(widget_slots(specs[node["type"]]), node["widgets_values"]))
        offered = {entry["name"]: entry for entry in node["properties"].get("models", [])}
        for name in names:
            file = values[name]
            assert file in offered, f"{node['type']} #{node['id']} names {file} with no download in properties.models"
            entry = offered[file]
            assert entry["directory"] == directory, entry
            assert entry["url"].startswith("https://huggingface.co/") and entry["url"].split("?")[0].endswith(
                "/" + file
            ), entry


SAVED = sorted(
    p
    for p in glob.glob(os.path.join(ROOT, "tests", "data", "saved_workflows", "*.json"))
    if not p.endswith(".api.json")
)
"""Workflows as earlier versions of the pack saved them: they must keep loading, every widget in its place."""


@pytest.mark.parametrize("path", SAVED, ids=os.path.basename)
def test_a_saved_workflow_still_loads_with_every_node_and_widget_in_its_place(path, specs):
    with open(path, encoding="utf-8") as handle:
        ui = json.load(handle)
    unknown = {n["type"] for n in all_nodes(ui)} - set(specs) - set(subgraphs_of(ui)) - FRONTEND_ONLY
    assert not unknown, f"nodes this version no longer defines: {unknown}"
    converted = ui_to_api(ui, specs)  # every widget value where the node now expects it, of its type and range
    assert len(converted) == len([n for n in ui["nodes"] if n["type"] not in FRONTEND_ONLY])


def test_the_every_node_workflow_holds_every_node_the_pack_had_when_it_was_saved(specs):
    """every_node_0.2.0.json: each of the 19 nodes of 0.2.0 with its widgets as the front end saves a new node (the
    declared defaults, in the declared widget order, before the nodes moved to core's V3 schema)."""
    with open(os.path.join(ROOT, "tests", "data", "saved_workflows", "every_node_0.2.0.json"), encoding="utf-8") as f:
        saved = [n["type"] for n in json.load(f)["nodes"]]
    assert len(set(saved)) == len(saved) == 19 and all(t.startswith("MaSC") for t in saved)
