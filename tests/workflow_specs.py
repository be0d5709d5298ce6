"""What the shipped UI graphs (workflows and subgraph blueprints) are checked against, without ComfyUI.

Node signatures come from the pack's INPUT_TYPES and, for core nodes, from a snapshot of ComfyUI 0.3.64's
/object_info (tests/data/core_node_specs.json). ``widget_slots`` knows the front end's order of a node's
widget values; ``ui_to_api`` turns a UI graph into the API graph the front end would queue.
"""

from __future__ import annotations

import json
import os

from comfy_harness import ROOT, import_pack

FRONTEND_ONLY = {"Note", "MarkdownNote"}
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


def widget_slots(spec: dict) -> list:
    """Names of the widget values in a UI node's widgets_values, in the front end's order (None = not an input)."""
    slots, upload = [], False
    for section in ("required", "optional"):
        for name, entry in spec["input"].get(section, {}).items():
            kind = entry[0]
            options = entry[1] if len(entry) > 1 else {}
            if isinstance(kind, list) or kind in WIDGET_TYPES:
                slots.append(name)
                if kind == "INT" and (options.get("control_after_generate") or name in ("seed", "noise_seed")):
                    slots.append(None)  # the 'control after generate' value
                upload = upload or bool(options.get("image_upload"))
    if upload:
        slots.append(None)  # the upload button's value
    return slots


def check_value(node_type: str, name: str, value, entry) -> None:
    kind = entry[0]
    options = entry[1] if len(entry) > 1 else {}
    where = f"{node_type}.{name} = {value!r}"
    if isinstance(kind, list):  # an empty list: a folder with no files outside ComfyUI (models/loras), any name
        assert value in kind or (not kind and isinstance(value, str) and value), where
    elif kind in ("INT", "FLOAT"):
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
        assert options.get("min", value) <= value <= options.get("max", value), where
    elif kind == "BOOLEAN":
        assert isinstance(value, bool), where
    elif kind in ("STRING", "COMBO"):
        assert isinstance(value, str), where


INPUT_NODE, OUTPUT_NODE = -10, -20
"""A subgraph's own input and output nodes, as the front end numbers them in a subgraph's links."""


def subgraphs_of(ui: dict) -> dict:
    """The subgraph definitions of a UI graph, by id (a subgraph node's ``type`` is its definition's id)."""
    return {subgraph["id"]: subgraph for subgraph in ui.get("definitions", {}).get("subgraphs", [])}


def all_nodes(ui: dict) -> list:
    """Every node of a UI graph: the root's and those inside each subgraph definition."""
    return list(ui["nodes"]) + [node for subgraph in subgraphs_of(ui).values() for node in subgraph["nodes"]]


def output_types(node: dict, specs: dict, subgraphs: dict) -> list:
    if node["type"] in subgraphs:
        return [entry["type"] for entry in subgraphs[node["type"]]["outputs"]]
    return specs[node["type"]]["output"]


def _links(links: list) -> dict:
    """Link id -> (origin, origin slot, target, target slot, type), for the root's lists and a subgraph's dicts."""
    if links and isinstance(links[0], dict):
        return {l["id"]: (l["origin_id"], l["origin_slot"], l["target_id"], l["target_slot"], l["type"]) for l in links}
    return {link[0]: tuple(link[1:6]) for link in links}


def ui_to_api(ui: dict, specs: dict) -> dict:
    """The API graph the front end queues for a UI graph: subgraph nodes replaced by the nodes inside them, ids
    prefixed with the subgraph node's (``"50:3"``), their inputs wired through to what feeds the subgraph node."""
    api = {}
    _flatten(ui["nodes"], _links(ui["links"]), "", {}, subgraphs_of(ui), specs, api)
    return api


def _flatten(nodes: list, links: dict, prefix: str, boundary: dict, subgraphs: dict, specs: dict, api: dict) -> None:
    by_id = {node["id"]: node for node in nodes}

    def source(origin, slot):
        if origin == INPUT_NODE:
            return boundary.get(slot)
        node = by_id[origin]
        if node["type"] in subgraphs:
            inner = subgraphs[node["type"]]
            inner_links = _links(inner["links"])
            (found,) = [link for link in inner_links.values() if link[2] == OUTPUT_NODE and link[3] == slot]
            return _inner_source(inner, f"{prefix}{origin}:", found[0], found[1], subgraphs, feeds_of(node))
        return [f"{prefix}{origin}", slot]

    def feeds_of(node):
        return {
            index: source(*links[slot["link"]][:2])
            for index, slot in enumerate(node.get("inputs", []))
            if slot.get("link") is not None
        }

    for node in nodes:
        if node["type"] in FRONTEND_ONLY:
            continue
        if node["type"] in subgraphs:
            inner = subgraphs[node["type"]]
            _flatten(
                inner["nodes"], _links(inner["links"]), f"{prefix}{node['id']}:", feeds_of(node), subgraphs, specs, api
            )
            continue
        spec = specs[node["type"]]
        linked = {
            slot["name"]: source(*links[slot["link"]][:2])
            for slot in node.get("inputs", [])
            if slot.get("link") is not None
        }
        linked = {name: value for name, value in linked.items() if value is not None}
        values = node.get("widgets_values") or []
        slots = widget_slots(spec)
        assert len(values) == len(slots), (
            f"{node['type']} #{node['id']}: {len(values)} widget values for {len(slots)} widgets"
        )
        entries = {**spec["input"].get("required", {}), **spec["input"].get("optional", {})}
        inputs = {}
        for name, value in zip(slots, values):
            if name is None or name in linked:
                continue
            check_value(node["type"], name, value, entries[name])
            inputs[name] = value
        inputs.update(linked)
        api[f"{prefix}{node['id']}"] = {"class_type": node["type"], "inputs": inputs}


def _inner_source(subgraph: dict, prefix: str, origin, slot, subgraphs: dict, boundary: dict):
    """Where a subgraph's output comes from: an inner node's output, or (passed straight through) its input's feed."""
    if origin == INPUT_NODE:
        return boundary.get(slot)
    node = {node["id"]: node for node in subgraph["nodes"]}[origin]
    if node["type"] in subgraphs:
        raise NotImplementedError("a subgraph inside a subgraph: not used by the shipped graphs")
    return [f"{prefix}{origin}", slot]


def node_specs() -> dict:
    """Every node type a shipped graph may use: core's (snapshot) and the pack's, as /object_info lists them."""
    with open(os.path.join(ROOT, "tests", "data", "core_node_specs.json")) as handle:
        core = json.load(handle)["nodes"]
    pack = import_pack()
    ours = {
        name: {"input": cls.INPUT_TYPES(), "output": list(cls.RETURN_TYPES)}
        for name, cls in pack.nodes.NODE_CLASS_MAPPINGS.items()
    }
    return {**core, **ours}
