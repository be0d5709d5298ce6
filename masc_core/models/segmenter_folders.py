"""Which segmenter a checkpoint folder holds, and loading it: CLIPSeg or SAM3, told apart by config.json.

``load_segmenter`` is what the CLI (``mask``), the manifest builders (``--auto-masks``) and the mask-source study
call: the family comes from the folder's config.json ``model_type`` (never its name), so one option takes either.
"""

from __future__ import annotations

import os

from ..errors import MascModelError
from . import checkpoints
from .clipseg import CLIPSEG_MODEL_ID, ClipSegSegmenter
from .sam3 import SAM3_MODEL_ID, Sam3Segmenter
from .segmenters import Segmenter

SEGMENTER_KINDS = ("clipseg", "sam3")
"""The segmenter families."""

MODEL_TYPES = {"clipseg": "clipseg", "sam3": "sam3", "sam3_video": "sam3"}
"""config.json ``model_type`` -> family (a SAM3 video checkpoint holds the image detector too)."""

FAMILIES = {"clipseg": ClipSegSegmenter, "sam3": Sam3Segmenter}


def segmenter_kind(folder: str, source: str | None = None) -> str:
    """The family of the checkpoint in ``folder`` ("clipseg" or "sam3"), from config.json's ``model_type``."""
    config_path = os.path.join(folder, "config.json")
    label = source or folder
    if not os.path.isfile(config_path):
        raise MascModelError(
            f"segmentation model folder '{label}' has no config.json: pass a CLIPSeg or SAM3 checkpoint folder "
            "(the one holding config.json and model.safetensors)"
        )
    model_type = str(checkpoints.read_config(config_path, "config").get("model_type") or "")
    kind = MODEL_TYPES.get(model_type)
    if kind is None:
        raise MascModelError(
            f"segmentation model folder '{label}' holds a '{model_type or 'unknown'}' model, not CLIPSeg or SAM3: "
            "masks need a CLIPSeg checkpoint (CIDAS/clipseg-rd64-refined) or a SAM3 one (facebook/sam3)"
        )
    return kind


def default_threshold(kind: str) -> float:
    """The pixel threshold ``kind``'s segmenter uses when given none (its ``default_threshold``)."""
    return FAMILIES[kind].default_threshold


def load_segmenter(model: str | os.PathLike, *, kind: str | None = None, **options) -> Segmenter:
    """Load a CLIPSeg or SAM3 checkpoint (a folder, or a Hub id) as a ``Segmenter``.

    ``kind`` ("clipseg" or "sam3") is read from the folder's config.json when not given; a Hub id needs it
    unless it is one of the two usual ids. ``options`` go to the family's ``load`` (device, precision,
    batch_size, cache_dir, download_dir; SAM3 also ``score_threshold``).
    """
    name = os.fspath(model)
    if kind is None:
        if os.path.isdir(name):
            kind = segmenter_kind(checkpoints.snapshot_folder(name), name)
        elif name in (CLIPSEG_MODEL_ID, SAM3_MODEL_ID):
            kind = "clipseg" if name == CLIPSEG_MODEL_ID else "sam3"
        else:
            kind = "clipseg"  # the family whose loader then words the error for this name
    if kind not in FAMILIES:
        raise MascModelError(f"segmenter kind '{kind}' is not one of {', '.join(SEGMENTER_KINDS)}")
    if kind == "clipseg":
        options.pop("score_threshold", None)
    return FAMILIES[kind].load(name, **options)
