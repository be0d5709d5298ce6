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
    if isinstance(kind, list):
        assert value in kind, where
    elif kind in ("INT", "FLOAT"):
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
        assert options.get("min", value) <= value <= options.get("max", value), where
    elif kind == "BOOLEAN":
        assert isinstance(value, bool), where
    elif kind in ("STRING", "COMBO"):
        assert isinstance(value, str), where


def ui_to_api(ui: dict, specs: dict) -> dict:
    links = {link[0]: link for link in ui["links"]}
    api = {}
    for node in ui["nodes"]:
        if node["type"] in FRONTEND_ONLY:
            continue
        spec = specs[node["type"]]
        inputs = {}
        linked = {}
        for slot in node.get("inputs", []):
            if slot.get("link") is not None:
                origin = links[slot["link"]]
                linked[slot["name"]] = [str(origin[1]), origin[2]]
        values = node.get("widgets_values") or []
        slots = widget_slots(spec)
        assert len(values) == len(slots), (
            f"{node['type']} #{node['id']}: {len(values)} widget values for {len(slots)} widgets"
        )
        entries = {**spec["input"].get("required", {}), **spec["input"].get("optional", {})}
        for name, value in zip(slots, values):
            if name is None or name in linked:
                continue
            check_value(node["type"], name, value, entries[name])
            inputs[name] = value
        inputs.update(linked)
        api[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return api


def node_specs() -> dict:
    """Every node type a shipped graph may use: core's (snapshot) and the pack's, as /object_info lists them."""
    with open(os.path.join(ROOT, "tests", "data", "core_node_specs.json")) as handle:
        core = json.load(handle)["nodes"]
    pack = import_pack()
    ours = {
        name: {"input": cls.INPUT_TYPES(), "output": list(cls.RETURN_TYPES)}
        for name, cls in pack.NODE_CLASS_MAPPINGS.items()
    }
    return {**core, **ours}
