"""Run the pack without ComfyUI: import it as ComfyUI does and execute API-format graphs.

- ``import_pack``: loads the repository as a package named after its folder
  path, the way ComfyUI's ``load_custom_node`` does, with a decoy top-level
  ``nodes`` module in place (ComfyUI has its own), so an absolute import of
  ``nodes`` inside the pack would pick the wrong module and fail the tests.
- ``CORE_NODES``: small stand-ins for the core nodes the example workflows
  use, behaving as ComfyUI's do for these inputs (LoadImage's MASK is
  1 - alpha, or an empty 64x64 without alpha; LoadImageMask reads one
  channel; ImageBatch resizes the second batch to the first).
- ``run_graph``: validates widget values against INPUT_TYPES, executes the
  nodes in dependency order, and propagates ExecutionBlocker values as
  ComfyUI does (a node with a blocked input is skipped, its outputs blocked).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import numpy as np
import torch
from PIL import Image, ImageOps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_pack(path: str = ROOT):
    """Import the pack from its folder as ComfyUI 0.3.64 does (module name = folder path)."""
    sys.modules.setdefault("nodes", types.ModuleType("nodes"))  # ComfyUI's own top-level 'nodes'
    name = path.replace(".", "_x_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class LoadImage:
    def __init__(self, input_dir):
        self.input_dir = input_dir

    def run(self, image):
        picture = ImageOps.exif_transpose(Image.open(os.path.join(self.input_dir, image)))
        rgb = torch.from_numpy(np.asarray(picture.convert("RGB"), dtype=np.float32) / 255.0)[None]
        if "A" in picture.getbands():
            mask = 1.0 - torch.from_numpy(np.asarray(picture.getchannel("A"), dtype=np.float32) / 255.0)
        else:
            mask = torch.zeros(64, 64)
        return rgb, mask[None]


class LoadImageMask:
    def __init__(self, input_dir):
        self.input_dir = input_dir

    def run(self, image, channel):
        picture = ImageOps.exif_transpose(Image.open(os.path.join(self.input_dir, image))).convert("RGBA")
        band = channel[0].upper()
        mask = torch.from_numpy(np.asarray(picture.getchannel(band), dtype=np.float32) / 255.0)
        return (1.0 - mask if band == "A" else mask)[None],


def image_batch(image1, image2):
    if image1.shape[1:] != image2.shape[1:]:
        resized = torch.nn.functional.interpolate(image2.movedim(-1, 1), size=image1.shape[1:3], mode="bilinear")
        image2 = resized.movedim(1, -1)
    return (torch.cat([image1, image2]),)


def record(kind: str):
    """An output node that keeps what it received in ctx[kind][node_id]."""

    def node(ctx, **inputs):
        value = inputs.get("source", inputs.get("images"))
        ctx[kind][ctx["node_id"]] = value
        return ()

    return node


CORE_NODES = {
    "LoadImage": lambda ctx, **kw: LoadImage(ctx["input_dir"]).run(**kw),
    "LoadImageMask": lambda ctx, **kw: LoadImageMask(ctx["input_dir"]).run(**kw),
    "ImageBatch": lambda ctx, **kw: image_batch(**kw),
    "PrimitiveStringMultiline": lambda ctx, value: (value,),
    "PreviewAny": record("shown"),
    "PreviewImage": record("previews"),
    "SaveImage": record("saved"),
}


def validate_widget(node_type: str, name: str, value, spec) -> None:
    kind, options = spec[0], (spec[1] if len(spec) > 1 else {})
    where = f"{node_type}.{name}={value!r}"
    if isinstance(kind, list):
        assert value in kind, f"{where} is not one of {kind}"
    elif kind == "INT":
        assert isinstance(value, int) and options.get("min", value) <= value <= options.get("max", value), where
    elif kind == "FLOAT":
        assert isinstance(value, (int, float)) and options.get("min", value) <= value <= options.get("max", value), where
    elif kind == "BOOLEAN":
        assert isinstance(value, bool), where
    elif kind == "STRING":
        assert isinstance(value, str), where
    else:
        raise AssertionError(f"{where}: a {kind} input must be a link")


def as_intermediate(value, dtype):
    """What ComfyUI's --fp16-intermediates does to the IMAGE and MASK tensors core nodes hand over."""
    if dtype is None:
        return value
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    if isinstance(value, dict) and isinstance(value.get("samples"), torch.Tensor):
        return {**value, "samples": value["samples"].to(dtype)}
    return value


def run_graph(graph: dict, mappings: dict, input_dir: str, blocker_type, intermediate_dtype=None) -> dict:
    """Execute an API-format graph; returns what preview/save nodes received and each node's outputs.

    ``intermediate_dtype`` (e.g. torch.float16) casts what the core stand-ins produce, as ComfyUI's
    --fp16-intermediates does, so the pack's nodes receive such tensors.
    """
    ctx = {"input_dir": input_dir, "shown": {}, "previews": {}, "saved": {}, "outputs": {}, "ui": {}, "blocked": set()}
    order, seen = [], set()

    def visit(node_id):
        if node_id in seen:
            return
        seen.add(node_id)
        for value in graph[node_id]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                visit(value[0])
        order.append(node_id)

    for node_id in graph:
        visit(node_id)
    for node_id in order:
        node = graph[node_id]
        node_type = node["class_type"]
        kwargs, blocked = {}, False
        for name, value in node["inputs"].items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                value = ctx["outputs"][value[0]][value[1]]
                blocked = blocked or isinstance(value, blocker_type)
            kwargs[name] = value
        if node_type in mappings:
            cls = mappings[node_type]
            spec = cls.INPUT_TYPES()
            for section in ("required", "optional"):
                for name, entry in spec.get(section, {}).items():
                    if section == "required":
                        assert name in kwargs, f"{node_type} misses required input {name}"
                    raw = node["inputs"].get(name)
                    if name in node["inputs"] and not isinstance(raw, list):
                        validate_widget(node_type, name, raw, entry)
        if blocked:
            ctx["blocked"].add(node_id)
            width = len(mappings[node_type].RETURN_TYPES) if node_type in mappings else 1
            ctx["outputs"][node_id] = tuple(blocker_type(None) for _ in range(width))
            continue
        if node_type in mappings:
            cls = mappings[node_type]
            returned = getattr(cls(), cls.FUNCTION)(**kwargs)
            if isinstance(returned, dict):
                ctx["ui"][node_id] = returned.get("ui", {})
                returned = returned["result"]
        else:
            ctx["node_id"] = node_id
            returned = tuple(as_intermediate(v, intermediate_dtype) for v in CORE_NODES[node_type](ctx, **kwargs))
        ctx["outputs"][node_id] = tuple(returned)
    return ctx
