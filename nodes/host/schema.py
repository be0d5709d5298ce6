"""The pack's nodes on core's V3 schema: ``io.ComfyNode`` classes from a pinned ``comfy_api`` version.

Each node keeps one declaration, its ``INPUT_TYPES`` / ``RETURN_TYPES`` / ``RETURN_NAMES`` / ``OUTPUT_TOOLTIPS``
(the same dictionaries the unit tests run, built from ``nodes/declarations.py``); ``v3_node`` turns it into core's
``io.Schema`` input by input, in order, so node ids, input names, types, defaults, ranges and widget order are
those saved workflows hold, by construction. ``execute`` calls the node's one method with the inputs and the hidden
values core keeps on ``cls.hidden``. Core reads a pack the V3 way only when its root module has no
``NODE_CLASS_MAPPINGS`` and a ``comfy_entrypoint`` (ComfyUI's ``nodes.load_custom_node``).

``comfy_api.v0_0_2`` is the pinned version (``latest`` is marked unstable); it exists from ComfyUI 0.3.64 on.
"""

from __future__ import annotations

import dataclasses
import logging

try:  # ComfyUI 0.3.64 and later; None elsewhere (the unit tests run the node classes directly)
    from comfy_api.v0_0_2 import ComfyExtension, io
except ImportError:  # outside ComfyUI, or a core older than the pack supports
    ComfyExtension = io = None

OLDEST_CORE = "0.3.64"
"""The oldest ComfyUI the pack supports: the first with ``comfy_api.v0_0_2`` and every io type the nodes use."""

_SOCKETS = {
    "IMAGE": "Image",
    "MASK": "Mask",
    "LATENT": "Latent",
    "MODEL": "Model",
    "CLIP": "Clip",
    "VAE": "Vae",
    "CONDITIONING": "Conditioning",
    "NOISE": "Noise",
    "GUIDER": "Guider",
    "SAMPLER": "Sampler",
    "SIGMAS": "Sigmas",
    "INT": "Int",
    "FLOAT": "Float",
    "STRING": "String",
    "BOOLEAN": "Boolean",
}
_HIDDEN = {"EXTRA_PNGINFO": "extra_pnginfo", "UNIQUE_ID": "unique_id", "PROMPT": "prompt"}


def _hidden_inputs(declared: dict) -> dict:
    """A V1 "hidden" section (``{"unique_id": "UNIQUE_ID"}``; a tuple also allowed) as input name -> core's name."""
    return {name: _HIDDEN[value if isinstance(value, str) else value[0]] for name, value in declared.items()}


def available() -> bool:
    """Whether this ComfyUI offers the pinned V3 API."""
    return io is not None


def io_type(kind: str):
    """Core's io class for a V1 type name; the pack's own types (MASC_*) as ``io.Custom``."""
    name = _SOCKETS.get(kind)
    return getattr(io, name) if name else io.Custom(kind)


def schema_input(name: str, entry: tuple, optional: bool):
    """One V1 input declaration ``(type or choices, options)`` as core's io input, with the same options."""
    kind, options = entry[0], dict(entry[1]) if len(entry) > 1 else {}
    common = dict(optional=optional, tooltip=options.pop("tooltip", None))
    if isinstance(kind, list):
        return io.Combo.Input(name, options=list(kind), default=options.get("default"), **common)
    if kind in ("INT", "FLOAT", "STRING", "BOOLEAN"):
        allowed = {
            "INT": ("default", "min", "max", "step", "control_after_generate"),
            "FLOAT": ("default", "min", "max", "step", "round"),
            "STRING": ("default", "multiline"),
            "BOOLEAN": ("default",),
        }[kind]
        unknown = set(options) - set(allowed)
        if unknown:  # a declaration this translation would silently drop: refuse at load, not in a saved workflow
            raise ValueError(f"input {name}: options {sorted(unknown)} have no V3 translation here")
        return io_type(kind).Input(name, **common, **options)
    return io_type(kind).Input(name, **common)


def schema_of(node_id: str, display_name: str, node_class) -> "io.Schema":
    """The node's V3 schema, from its V1 declaration (every input in order; outputs named and explained)."""
    declared = node_class.INPUT_TYPES()
    inputs = [
        schema_input(name, entry, optional=section == "optional")
        for section in ("required", "optional")
        for name, entry in declared.get(section, {}).items()
    ]
    names = getattr(node_class, "RETURN_NAMES", node_class.RETURN_TYPES)
    tooltips = getattr(node_class, "OUTPUT_TOOLTIPS", [None] * len(names))
    outputs = [
        io_type(kind).Output(display_name=name, tooltip=tip)
        for kind, name, tip in zip(node_class.RETURN_TYPES, names, tooltips)
    ]
    hidden = [getattr(io.Hidden, name) for name in _hidden_inputs(declared.get("hidden", {})).values()]
    fields = dict(
        node_id=node_id,
        display_name=display_name,
        category=node_class.CATEGORY,
        description=node_class.DESCRIPTION,
        inputs=inputs,
        outputs=outputs,
        hidden=hidden,
        is_output_node=bool(getattr(node_class, "OUTPUT_NODE", False)),
        # A node's SEARCH_ALIASES: words the node library's search finds it by (0.33 and later; older cores ignore it).
        search_aliases=list(getattr(node_class, "SEARCH_ALIASES", [])),
    )
    known = {field.name for field in dataclasses.fields(io.Schema)}  # 0.3.64's Schema has no search_aliases
    return io.Schema(**{key: value for key, value in fields.items() if key in known})


def v3_node(node_id: str, display_name: str, node_class) -> type:
    """A ``io.ComfyNode`` for a node class: its schema from the declaration, ``execute`` calling its method."""
    declared_hidden = _hidden_inputs(node_class.INPUT_TYPES().get("hidden", {}))

    def define_schema(cls):
        return schema_of(node_id, display_name, node_class)

    def execute(cls, **inputs):
        hidden = {name: getattr(cls.hidden, attribute, None) for name, attribute in declared_hidden.items()}
        return node_output(getattr(node_class(), node_class.FUNCTION)(**{**hidden, **inputs}))

    members = {
        "define_schema": classmethod(define_schema),
        "execute": classmethod(execute),
        "IMPLEMENTATION": node_class,
        "__doc__": node_class.__doc__,
        "__module__": node_class.__module__,
    }
    if hasattr(node_class, "IS_CHANGED"):  # V1's IS_CHANGED is V3's fingerprint_inputs

        def fingerprint_inputs(cls, **inputs):
            return node_class.IS_CHANGED(**inputs)

        members["fingerprint_inputs"] = classmethod(fingerprint_inputs)
    return type(node_id, (io.ComfyNode,), members)


def node_output(returned):
    """A node method's return (a tuple, or ``{"ui": ..., "result": ...}``) as core's ``io.NodeOutput``.

    Built here rather than left to core: 0.3.64's ``NodeOutput.from_dict`` passes ``args=`` to a constructor that
    takes them positionally, so a plain dict returned from ``execute`` fails there."""
    if isinstance(returned, dict):
        return io.NodeOutput(*returned.get("result", ()), ui=returned.get("ui"))
    return io.NodeOutput(*returned)


def extension(node_classes: dict, display_names: dict):
    """The ``ComfyExtension`` a ``comfy_entrypoint`` returns: every node as a V3 node."""
    nodes = [v3_node(node_id, display_names[node_id], cls) for node_id, cls in node_classes.items()]

    class MaSCExtension(ComfyExtension):
        async def get_node_list(self):
            return list(nodes)

    return MaSCExtension()


def explain_missing_api() -> None:
    """One line on a core too old for the pack (instead of failing at import)."""
    logging.warning(
        "MaSC for ComfyUI needs ComfyUI %s or later (comfy_api.v0_0_2, the V3 node schema): update ComfyUI; "
        "no MaSC node is loaded",
        OLDEST_CORE,
    )
