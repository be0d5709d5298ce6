"""The subgraph blueprints in subgraphs/: well-formed as the front end reads them, and the graphs they stand for.

ComfyUI after 0.3.64 serves a pack's ``subgraphs/*.json`` at ``/global_subgraphs``; the front end lists each as
a node named after its file, under "Subgraph Blueprints/<category>". A blueprint's root graph is one subgraph
node whose type is the id of the one subgraph it defines. The server never sees a subgraph: the front end
queues the nodes inside it, ids prefixed with the subgraph node's ("5:12"), their inputs wired through.
``flatten`` does the same here, so a blueprint placed in a graph runs through the harness and must give what
the same nodes wired by hand give. (The host suite does it in the real front end.)
"""

from __future__ import annotations

import glob
import json
import os
import tomllib
from importlib import import_module

import pytest

from comfy_harness import ROOT, run_graph
from workflow_specs import check_value, node_specs, widget_slots

BLUEPRINTS = sorted(glob.glob(os.path.join(ROOT, "subgraphs", "*.json")))
NAMES = [os.path.splitext(os.path.basename(p))[0] for p in BLUEPRINTS]
INPUT_NODE, OUTPUT_NODE = -10, -20
HUB_IDS = {
    "MaSCLoadEncoder": "google/siglip2-so400m-patch16-naflex",
    "MaSCLoadAutoMaskModel": "CIDAS/clipseg-rd64-refined",
}


def load(name: str) -> dict:
    with open(os.path.join(ROOT, "subgraphs", name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def parts(blueprint: dict) -> tuple[dict, dict]:
    """The root's one subgraph node and the subgraph it instantiates."""
    (outer,) = blueprint["nodes"]
    (subgraph,) = blueprint["definitions"]["subgraphs"]
    return outer, subgraph


@pytest.fixture(scope="module")
def specs():
    return node_specs()


def test_the_two_blueprints_ship():
    assert set(NAMES) >= {"MaSC best-of-N", "MaSC score a pair"}


@pytest.mark.parametrize("name", NAMES)
def test_blueprint_is_one_subgraph_node_with_a_description_category_and_aliases(name):
    blueprint = load(name)
    outer, subgraph = parts(blueprint)
    assert outer["type"] == subgraph["id"] and blueprint["links"] == []
    assert subgraph["name"] == outer["title"] == name  # the front end shows the file's name: all three agree
    assert subgraph["category"] == "MaSC"
    description = subgraph["description"]
    assert 40 <= len(description) <= 600 and blueprint["extra"]["BlueprintDescription"] == description
    aliases = blueprint["extra"]["BlueprintSearchAliases"]
    assert aliases and all(isinstance(a, str) and a == a.strip().lower() for a in aliases)


@pytest.mark.parametrize("name", NAMES)
def test_inner_nodes_are_known_with_valid_widget_values_and_the_packs_registry_id(name, specs):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    _, subgraph = parts(load(name))
    for node in subgraph["nodes"]:
        spec = specs[node["type"]]
        slots = widget_slots(spec)
        values = node["widgets_values"]
        assert len(values) == len(slots), f"{node['type']} #{node['id']}: {len(values)} values for {len(slots)} widgets"
        entries = {**spec["input"].get("required", {}), **spec["input"].get("optional", {})}
        for slot, value in zip(slots, values):
            if slot is not None:
                check_value(node["type"], slot, value, entries[slot])
        if node["type"] in HUB_IDS:  # what a user has (or downloads): never a test checkpoint's name
            assert values[0] == HUB_IDS[node["type"]]
        if node["type"].startswith("MaSC"):
            assert (node["properties"]["cnr_id"], node["properties"]["ver"]) == (project["name"], project["version"])


@pytest.mark.parametrize("name", NAMES)
def test_links_join_matching_types_and_every_input_and_output_is_used(name, specs):
    outer, subgraph = parts(load(name))
    nodes = {node["id"]: node for node in subgraph["nodes"]}
    inputs, outputs = subgraph["inputs"], subgraph["outputs"]
    fed = {(link["target_id"], link["target_slot"]) for link in subgraph["links"]}
    for link in subgraph["links"]:
        if link["origin_id"] == INPUT_NODE:
            produced = inputs[link["origin_slot"]]["type"]
            assert link["id"] in inputs[link["origin_slot"]]["linkIds"]
        else:
            produced = specs[nodes[link["origin_id"]]["type"]]["output"][link["origin_slot"]]
        if link["target_id"] == OUTPUT_NODE:
            wanted = outputs[link["target_slot"]]["type"]
            assert link["id"] in outputs[link["target_slot"]]["linkIds"]
        else:
            slot = nodes[link["target_id"]]["inputs"][link["target_slot"]]
            assert slot["link"] == link["id"]
            wanted = slot["type"]
        assert produced == link["type"] == wanted, f"link {link['id']}: {produced} -> {wanted}"
    assert all(entry["linkIds"] for entry in inputs + outputs), "an input or output of the subgraph leads nowhere"
    for node in subgraph["nodes"]:  # every required non-widget input inside is wired
        required = specs[node["type"]]["input"]["required"]
        for index, slot in enumerate(node["inputs"]):
            if slot["name"] in required and not slot.get("widget"):
                assert (node["id"], index) in fed, f"{node['type']}.{slot['name']} is not connected"
    # The node a user places mirrors the subgraph's inputs and outputs; text inputs show as its widgets.
    assert [(i["name"], i["type"]) for i in outer["inputs"]] == [(i["name"], i["type"]) for i in inputs]
    assert [(o["name"], o["type"]) for o in outer["outputs"]] == [(o["name"], o["type"]) for o in outputs]
    widgets = [i["name"] for i in outer["inputs"] if i.get("widget")]
    assert widgets == [i["name"] for i in inputs if i["type"] == "STRING"] and len(outer["widgets_values"]) == len(
        widgets
    )


def flatten(blueprint: dict, at: str, wired: dict, specs: dict) -> dict:
    """The API nodes the front end queues for a blueprint placed as node ``at``.

    ``wired``: for each subgraph input, a link ``[node, slot]`` or a value (a text input typed into the widget).
    Returns the inner nodes as ``"at:id"``; a link to the placed node's output ``k`` becomes ``outputs_of(k)``.
    """
    _, subgraph = parts(blueprint)
    nodes = {node["id"]: node for node in subgraph["nodes"]}
    by_target = {(link["target_id"], link["target_slot"]): link for link in subgraph["links"]}
    names = [entry["name"] for entry in subgraph["inputs"]]
    graph = {}
    for node in subgraph["nodes"]:
        slots = widget_slots(specs[node["type"]])
        inputs = {slot: value for slot, value in zip(slots, node["widgets_values"]) if slot is not None}
        for index, slot in enumerate(node["inputs"]):
            link = by_target.get((node["id"], index))
            if link is None:
                continue
            if link["origin_id"] == INPUT_NODE:
                source = wired.get(names[link["origin_slot"]])
                if source is None:
                    inputs.pop(slot["name"], None)  # an optional input left open stays open inside
                else:
                    inputs[slot["name"]] = source
            else:
                inputs[slot["name"]] = [f"{at}:{link['origin_id']}", link["origin_slot"]]
        graph[f"{at}:{node['id']}"] = {"class_type": node["type"], "inputs": inputs}
        assert nodes[node["id"]] is node
    return graph


def output_of(blueprint: dict, at: str, name: str) -> list:
    """Where the placed node's output ``name`` comes from inside."""
    _, subgraph = parts(blueprint)
    index = [entry["name"] for entry in subgraph["outputs"]].index(name)
    (link,) = [link for link in subgraph["links"] if link["target_id"] == OUTPUT_NODE and link["target_slot"] == index]
    return [f"{at}:{link['origin_id']}", link["origin_slot"]]


def _run(pack, comfy_dirs, graph):
    blocker = import_module(pack.__name__ + ".nodes.host").ExecutionBlocker
    return run_graph(graph, pack.nodes.NODE_CLASS_MAPPINGS, comfy_dirs["input"], blocker)


LOADS = {
    "1": {"class_type": "LoadImage", "inputs": {"image": "dog_00.jpg"}},
    "2": {"class_type": "LoadImageMask", "inputs": {"image": "dog_00_mask.png", "channel": "red"}},
    "3": {"class_type": "LoadImage", "inputs": {"image": "dog_01.jpg"}},
    "4": {"class_type": "LoadImageMask", "inputs": {"image": "dog_01_mask.png", "channel": "red"}},
    "5": {"class_type": "LoadImage", "inputs": {"image": "cat_00.jpg"}},
    "6": {"class_type": "ImageBatch", "inputs": {"image1": ["3", 0], "image2": ["5", 0]}},
}
ENCODER = {
    "class_type": "MaSCLoadEncoder",
    "inputs": {"model": HUB_IDS["MaSCLoadEncoder"], "device": "auto", "precision": "auto", "max_patches": 1024},
}
PROMPT = "a photo of a dog on the beach"


def test_score_a_pair_gives_what_masc_score_wired_by_hand_gives(pack, comfy_dirs, specs):
    blueprint = load("MaSC score a pair")
    placed = flatten(
        blueprint,
        "9",
        {
            "reference_image": ["1", 0],
            "reference_mask": ["2", 0],
            "image": ["3", 0],
            "mask": ["4", 0],
            "prompt": PROMPT,
            "subject": "dog",
        },
        specs,
    )
    by_hand = {
        "20": ENCODER,
        "21": {
            "class_type": "MaSCScore",
            "inputs": {
                "encoder": ["20", 0],
                "reference_image": ["1", 0],
                "reference_mask": ["2", 0],
                "image": ["3", 0],
                "mask": ["4", 0],
                "prompt": PROMPT,
                "subject": "dog",
                "heatmaps": True,
            },
        },
    }
    ran = _run(pack, comfy_dirs, {**LOADS, **placed, **by_hand})
    outputs = ran["outputs"]
    returned = dict(zip(pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"].RETURN_NAMES, outputs["21"]))
    for name in ("cp", "pf", "stripped_prompt", "report"):
        source = output_of(blueprint, "9", name)
        assert outputs[source[0]][source[1]] == returned[name], name
    heatmap = output_of(blueprint, "9", "image_heatmap")
    assert (outputs[heatmap[0]][heatmap[1]] == returned["image_heatmap"]).all()
    assert returned["stripped_prompt"] == "a photo of on the beach"


def test_best_of_n_keeps_what_auto_masks_score_and_select_best_wired_by_hand_keep(pack, comfy_dirs, specs):
    blueprint = load("MaSC best-of-N")
    latent = {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 2}}
    placed = flatten(
        blueprint,
        "9",
        {"images": ["6", 0], "latent": ["7", 0], "reference_image": ["1", 0], "prompt": PROMPT, "subject": "dog"},
        specs,
    )
    inner = {
        node["inputs"].get("images", [None])[0] for node in placed.values() if node["class_type"] == "MaSCAutoMask"
    }
    assert inner == {"1", "6"}, "the segmenter masks the reference and the candidates"
    segmenter = {
        "class_type": "MaSCLoadAutoMaskModel",
        "inputs": {"model": HUB_IDS["MaSCLoadAutoMaskModel"], "device": "auto", "precision": "auto"},
    }
    masks = {"threshold": 0.4, "dilation": 0, "subject": "dog", "segmenter": ["30", 0]}
    by_hand = {
        "7": latent,
        "20": ENCODER,
        "30": segmenter,
        "31": {"class_type": "MaSCAutoMask", "inputs": {**masks, "images": ["1", 0]}},
        "32": {"class_type": "MaSCAutoMask", "inputs": {**masks, "images": ["6", 0]}},
        "33": {
            "class_type": "MaSCScore",
            "inputs": {
                "encoder": ["20", 0],
                "reference_image": ["1", 0],
                "reference_mask": ["31", 0],
                "image": ["6", 0],
                "mask": ["32", 0],
                "prompt": PROMPT,
                "subject": "dog",
                "heatmaps": True,
            },
        },
        "34": {
            "class_type": "MaSCSelectBest",
            "inputs": {
                "scores": ["33", 2],
                "images": ["6", 0],
                "latent": ["7", 0],
                "mask": ["32", 0],
                "rank_by": "both",
                "cp_weight": 1.0,
                "pf_weight": 1.0,
                "top_k": 1,
                "min_cp": -1.0,
                "min_pf": -1.0,
                "reject_small_masks": True,
                "min_foreground": 0.05,
            },
        },
    }
    outputs = _run(pack, comfy_dirs, {**LOADS, **placed, **by_hand})["outputs"]
    returned = dict(zip(pack.nodes.NODE_CLASS_MAPPINGS["MaSCSelectBest"].RETURN_NAMES, outputs["34"]))
    for name in ("images", "mask"):
        source = output_of(blueprint, "9", name)
        assert outputs[source[0]][source[1]].equal(returned[name]), name
    source = output_of(blueprint, "9", "ranking")
    assert outputs[source[0]][source[1]] == returned["ranking"] and "selected" in returned["ranking"]
    source = output_of(blueprint, "9", "latent")
    assert outputs[source[0]][source[1]]["batch_index"] == returned["latent"]["batch_index"]
    scores = output_of(blueprint, "9", "scores")
    assert outputs[scores[0]][scores[1]].cp == outputs["33"][2].cp


def test_best_of_n_runs_without_latents(pack, comfy_dirs, specs):
    """latent is optional (a batch of images from anywhere): left open, Select Best gets none and still picks."""
    placed = flatten(
        load("MaSC best-of-N"),
        "9",
        {"images": ["6", 0], "reference_image": ["1", 0], "prompt": PROMPT, "subject": "dog"},
        specs,
    )
    outputs = _run(pack, comfy_dirs, {**LOADS, **placed})["outputs"]
    source = output_of(load("MaSC best-of-N"), "9", "images")
    assert outputs[source[0]][source[1]].shape[0] == 1
