"""The example workflows: UI format (for the front end) and API format (for /prompt) describe the same graphs.

Without ComfyUI: node signatures come from the pack's INPUT_TYPES and, for
core nodes, from a snapshot of ComfyUI 0.3.64's /object_info
(tests/data/core_node_specs.json). The UI files were also loaded in ComfyUI
0.3.64's real front end (1.27.10) with no missing nodes; this test keeps
them consistent as the nodes evolve.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from comfy_harness import ROOT, import_pack

UI_FILES = sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json")))
API_DIR = os.path.join(ROOT, "workflows", "api")
FRONTEND_ONLY = {"Note", "MarkdownNote"}
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


@pytest.fixture(scope="module")
def specs():
    with open(os.path.join(ROOT, "tests", "data", "core_node_specs.json")) as handle:
        core = json.load(handle)["nodes"]
    pack = import_pack()
    ours = {
        name: {"input": cls.INPUT_TYPES(), "output": list(cls.RETURN_TYPES)}
        for name, cls in pack.NODE_CLASS_MAPPINGS.items()
    }
    return {**core, **ours}


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
        assert len(values) == len(slots), f"{node['type']} #{node['id']}: {len(values)} widget values for {len(slots)} widgets"
        entries = {**spec["input"].get("required", {}), **spec["input"].get("optional", {})}
        for name, value in zip(slots, values):
            if name is None or name in linked:
                continue
            check_value(node["type"], name, value, entries[name])
            inputs[name] = value
        inputs.update(linked)
        api[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return api


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
    unknown = {n["type"] for n in ui["nodes"]} - set(specs) - FRONTEND_ONLY
    assert not unknown, f"nodes neither in the pack nor in ComfyUI core: {unknown}"
    converted = ui_to_api(ui, specs)
    assert converted == {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()}
    nodes = {n["id"]: n for n in ui["nodes"]}
    for link_id, origin, origin_slot, target, target_slot, kind in ui["links"]:
        produced = specs[nodes[origin]["type"]]["output"][origin_slot]
        wanted = nodes[target]["inputs"][target_slot]["type"]
        assert kind in (produced, "*") and wanted in (produced, "*"), f"link {link_id}: {produced} -> {wanted} ({kind})"
    assert any(n["type"] == "Note" for n in ui["nodes"]), "each shared workflow explains itself in a Note"


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
        assert node["properties"].get("cnr_id") == project["name"] and node["properties"].get("ver") == project["version"], node["type"]
