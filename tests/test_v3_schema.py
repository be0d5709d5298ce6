"""The nodes on core's V3 schema (``nodes/host/schema.py``), without ComfyUI.

Core's ``comfy_api`` is not installable outside ComfyUI, so ``io`` is replaced here by a recorder with the
constructor signatures of ComfyUI 0.33's ``comfy_api.latest._io`` (the parts the pack uses). What is checked: the
schema made for every node reproduces its declaration (ids, order, types, every option, hidden inputs, outputs),
``execute`` calls the node with core's hidden values, and the root module offers ``comfy_entrypoint`` and no
``NODE_CLASS_MAPPINGS`` (with one, core loads a pack the V1 way). The host suite checks the same against the real
``/object_info`` (tests/host/test_install.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import importlib

import pytest

from comfy_harness import import_pack


class _Input:
    def __init__(self, id, *, optional=False, tooltip=None, **options):
        self.id, self.optional, self.tooltip, self.options = id, optional, tooltip, options


class _Output:
    def __init__(self, id=None, display_name=None, tooltip=None, is_output_list=False):
        self.display_name, self.tooltip = display_name, tooltip


def _io_type(name):
    return type(name, (), {"io_type": name, "Input": type("Input", (_Input,), {"kind": name}), "Output": _Output})


class _Hidden(str, enum.Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"


@dataclasses.dataclass
class _Schema:
    node_id: str
    display_name: str = None
    category: str = "sd"
    inputs: list = dataclasses.field(default_factory=list)
    outputs: list = dataclasses.field(default_factory=list)
    hidden: list = dataclasses.field(default_factory=list)
    description: str = ""
    search_aliases: list = dataclasses.field(default_factory=list)
    is_output_node: bool = False


class _ComfyNode:
    hidden = None


class _NodeOutput:
    def __init__(self, *args, ui=None):
        self.args, self.ui = args, ui


class _FakeIO:
    Schema, Hidden, ComfyNode, NodeOutput = _Schema, _Hidden, _ComfyNode, _NodeOutput

    def __getattr__(self, name):
        return _io_type(name.upper())

    @staticmethod
    def Custom(name):
        return _io_type(name)


class _Extension:
    pass


@pytest.fixture
def schema(monkeypatch):
    pack = import_pack()
    module = importlib.import_module(pack.__name__ + ".nodes.host.schema")
    monkeypatch.setattr(module, "io", _FakeIO())
    monkeypatch.setattr(module, "ComfyExtension", _Extension)
    return module


def _as_declared(item) -> tuple:
    """A recorded io input back as the V1 entry it stands for."""
    kind = item.kind
    options = dict(item.options)
    if kind == "COMBO":
        choices = options.pop("options")
        options = {k: v for k, v in options.items() if v is not None}
        return (choices, {"tooltip": item.tooltip, **options})
    return (kind, {"tooltip": item.tooltip, **options})


def test_every_node_schema_is_its_declaration(schema):
    pack = import_pack()
    for node_id, cls in pack.nodes.NODE_CLASS_MAPPINGS.items():
        made = schema.schema_of(node_id, pack.nodes.NODE_DISPLAY_NAME_MAPPINGS[node_id], cls)
        declared = cls.INPUT_TYPES()
        for section in ("required", "optional"):
            ours = [item for item in made.inputs if item.optional == (section == "optional")]
            entries = declared.get(section, {})
            assert [item.id for item in ours] == list(entries), f"{node_id} {section}: names or order"
            for item in ours:
                kind, options = entries[item.id][0], entries[item.id][1]
                assert _as_declared(item) == (kind, options), f"{node_id}.{item.id}"
        assert [h.value for h in made.hidden] == list(declared.get("hidden", {}).values())
        assert [o.display_name for o in made.outputs] == list(cls.RETURN_NAMES)
        assert [o.tooltip for o in made.outputs] == list(cls.OUTPUT_TOOLTIPS)
        assert made.description == cls.DESCRIPTION and made.category == "MaSC"
        assert made.is_output_node == bool(getattr(cls, "OUTPUT_NODE", False))
        assert made.search_aliases == list(cls.SEARCH_ALIASES)


def test_an_option_with_no_translation_is_refused_not_dropped(schema):
    with pytest.raises(ValueError, match="forceInput"):
        schema.schema_input("x", ("INT", {"default": 1, "forceInput": True}), optional=False)


def test_execute_calls_the_node_with_cores_hidden_values(schema):
    calls = []

    class Node:
        CATEGORY, DESCRIPTION, FUNCTION = "MaSC", "d", "run"
        RETURN_TYPES, RETURN_NAMES, OUTPUT_TOOLTIPS = ("STRING",), ("text",), ("t",)

        @classmethod
        def INPUT_TYPES(cls):
            return {
                "required": {"text": ("STRING", {"default": "", "tooltip": "t"})},
                "hidden": {"extra_pnginfo": "EXTRA_PNGINFO", "unique_id": "UNIQUE_ID"},
            }

        def run(self, text, extra_pnginfo=None, unique_id=None):
            calls.append((text, extra_pnginfo, unique_id))
            return (text,)

    made = schema.v3_node("MaSCTest", "MaSC Test", Node)
    made.hidden = type("Hidden", (), {"extra_pnginfo": {"workflow": {}}, "unique_id": "7"})()
    out = made.execute(text="hi")
    assert out.args == ("hi",) and out.ui is None
    assert calls == [("hi", {"workflow": {}}, "7")]
    shown = schema.node_output({"ui": {"text": ["report"]}, "result": ("a", 2)})
    assert shown.args == ("a", 2) and shown.ui == {"text": ["report"]}
    assert made.__name__ == "MaSCTest" and made.IMPLEMENTATION is Node and not hasattr(made, "fingerprint_inputs")


def test_masc_pick_is_never_cached_as_v3_fingerprint(schema):
    pack = import_pack()
    made = schema.v3_node("MaSCPick", "MaSC Pick", pack.nodes.NODE_CLASS_MAPPINGS["MaSCPick"])
    first = made.fingerprint_inputs(keep=1)
    assert first != first  # NaN: core's cache never equals it, so a pick is asked again


def test_the_root_module_offers_the_entry_point_and_no_v1_mappings(schema, monkeypatch):
    pack = import_pack()
    assert not hasattr(pack, "NODE_CLASS_MAPPINGS") and not hasattr(pack, "NODE_DISPLAY_NAME_MAPPINGS")
    extension = schema.extension(pack.nodes.NODE_CLASS_MAPPINGS, pack.nodes.NODE_DISPLAY_NAME_MAPPINGS)
    listed = asyncio.run(extension.get_node_list())
    assert [node.__name__ for node in listed] == list(pack.nodes.NODE_CLASS_MAPPINGS)
    assert all(issubclass(node, _ComfyNode) for node in listed)
