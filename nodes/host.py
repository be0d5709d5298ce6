"""What the nodes need from ComfyUI, with stand-ins when ComfyUI is absent.

Inside ComfyUI these are ComfyUI's own facilities (model folders, memory
management, progress bar, interrupts, execution blocking, temp previews).
Outside it (the pack's tests, scripts) the same calls work with plain
equivalents, so the node code has a single path.
"""

from __future__ import annotations

import os
import weakref
from typing import Callable

import torch

from ..masc_core.models.checkpoints import looks_like_hub_id
from ..masc_core.models.devices import PRECISION_CHOICES, resolve_device, resolve_dtype

try:  # ComfyUI's modules are importable only inside ComfyUI.
    import folder_paths  # type: ignore
    import comfy.model_management as model_management  # type: ignore
    import comfy.model_patcher as model_patcher  # type: ignore
    import comfy.utils as comfy_utils  # type: ignore

    IN_COMFYUI = True
except ImportError:  # pragma: no cover - exercised by the tests without ComfyUI
    folder_paths = model_management = model_patcher = comfy_utils = None
    IN_COMFYUI = False

try:
    from comfy_execution.graph_utils import ExecutionBlocker  # type: ignore
except ImportError:

    class ExecutionBlocker:  # noqa: D401 - same contract as ComfyUI's
        """Stand-in for ComfyUI's ExecutionBlocker: an output value that blocks its consumers."""

        def __init__(self, message):
            self.message = message


MODEL_FOLDERS = {"masc": "SigLIP2 checkpoints for MaSC", "clipseg": "CLIPSeg checkpoints for MaSC Auto Mask"}


def _standalone_models_dir() -> str:
    """Outside ComfyUI: $MASC_MODELS_DIR, else ./models."""
    return os.environ.get("MASC_MODELS_DIR", os.path.join(os.getcwd(), "models"))


def register_model_folders() -> None:
    """Add models/masc and models/clipseg to ComfyUI's model folders.

    ``add_model_folder_path`` keeps the paths a user's extra_model_paths.yaml
    already gave these keys (assigning folder_names_and_paths would wipe them).
    """
    if not IN_COMFYUI:
        return
    for key in MODEL_FOLDERS:
        folder_paths.add_model_folder_path(key, os.path.join(folder_paths.models_dir, key))


def model_roots(kind: str) -> list[str]:
    """Folders searched for checkpoints of ``kind`` ("masc" or "clipseg")."""
    if IN_COMFYUI:
        try:
            return list(folder_paths.get_folder_paths(kind))
        except KeyError:
            return [os.path.join(folder_paths.models_dir, kind)]
    return [os.path.join(_standalone_models_dir(), kind)]


def list_checkpoints(kind: str) -> list[str]:
    """Checkpoint folders (holding config.json) under the model roots, as names relative to a root.

    One or two levels deep, so both models/masc/<name> and
    models/masc/<owner>/<name> work.
    """
    found: list[str] = []
    for root in model_roots(kind):
        if not os.path.isdir(root):
            continue
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            if not os.path.isdir(path) or entry.startswith("."):
                continue
            if os.path.isfile(os.path.join(path, "config.json")):
                found.append(entry)
                continue
            for sub in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, sub, "config.json")):
                    found.append(f"{entry}/{sub}")
    return list(dict.fromkeys(found))


def checkpoint_choices(kind: str, hub_id: str) -> list[str]:
    """A loader's model combo: local checkpoint folders, then the Hub id (unless a local folder has that name)."""
    local = list_checkpoints(kind)
    return local + ([hub_id] if hub_id not in local else [])


DEVICE_INPUT = (["auto", "cpu", "cuda"], {"default": "auto", "tooltip": "auto follows ComfyUI (GPU unless started with --cpu)."})


def precision_input(note: str = "") -> tuple:
    return (list(PRECISION_CHOICES), {"default": "auto", "tooltip": "auto: fp32 on CPU, bf16 or fp16 on GPU." + note})


def find_checkpoint(kind: str, name: str) -> str | None:
    """The folder of a listed checkpoint name, or None (then the name may be a Hub id)."""
    for root in model_roots(kind):
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    return None


def download_folder(kind: str, repo_id: str) -> str:
    """Where a Hub checkpoint is downloaded: models/<kind>/<owner>--<name>."""
    return os.path.join(model_roots(kind)[0], repo_id.replace("/", "--"))


def load_device(choice: str) -> torch.device:
    """The device a model computes on: ComfyUI's choice for 'auto' (honours --cpu)."""
    if choice == "auto":
        if IN_COMFYUI:
            return model_management.get_torch_device()
        return resolve_device("auto")
    return resolve_device(choice)


def offload_device() -> torch.device:
    """Where a model waits while others use the GPU."""
    if IN_COMFYUI:
        return model_management.text_encoder_offload_device()
    return torch.device("cpu")


def pick_dtype(choice: str, device: torch.device) -> torch.dtype:
    """fp32 on CPU; on GPU bf16 or fp16 where ComfyUI judges them usable, else fp32."""
    if choice != "auto" or device.type == "cpu" or not IN_COMFYUI:
        return resolve_dtype(choice, device)
    if model_management.should_use_bf16(device):
        return torch.bfloat16
    if model_management.should_use_fp16(device):
        return torch.float16
    return torch.float32


class MascModelHolder(torch.nn.Module):
    """A thin module around a transformers model, for ComfyUI's ModelPatcher.

    ModelPatcher assigns ``model.device``; a transformers PreTrainedModel has a
    read-only ``device`` property, so it cannot be patched directly.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device):
        super().__init__()
        self.wrapped = model
        self.device = device


def make_patcher(model: torch.nn.Module, load: torch.device, offload: torch.device):
    """A ModelPatcher managing ``model`` (None outside ComfyUI)."""
    if not IN_COMFYUI:
        return None
    holder = MascModelHolder(model, offload)
    return model_patcher.ModelPatcher(holder, load_device=load, offload_device=offload)


def load_for_inference(patcher, fallback_device: torch.device, module: torch.nn.Module) -> None:
    """Make sure the model sits on its compute device, making room as ComfyUI decides.

    transformers layers are not comfy.ops layers, so partial (low-VRAM) loading
    cannot work: the model is always loaded in full.
    """
    if patcher is not None:
        model_management.load_models_gpu([patcher], force_full_load=True)
    else:
        module.to(fallback_device)


class ManagedModel:
    """A loaded masc_core model (encoder or segmenter) plus ComfyUI's handle on its weights.

    Inside ComfyUI the torch module is registered with a ModelPatcher, so it
    shares VRAM with diffusion models: ComfyUI offloads it when they need
    room, and ``ready()`` loads it back before use. This object keeps the
    strong reference ComfyUI's model list does not (it holds patchers weakly).
    """

    def __init__(self, core, compute_device: torch.device):
        self.core = core
        self.compute_device = compute_device
        self.patcher = make_patcher(core.model, compute_device, offload_device())

    def ready(self):
        """The masc_core object, with its weights on the compute device."""
        load_for_inference(self.patcher, self.compute_device, self.core.model)
        return self.core

    def __repr__(self) -> str:
        info = self.core.describe()
        return f"{type(self.core).__name__}({info['model']}, {info['precision']}, {self.compute_device})"


# Same inputs -> the same loaded model, for as long as some graph holds it.
_LOADED: "weakref.WeakValueDictionary[tuple, ManagedModel]" = weakref.WeakValueDictionary()


def load_shared(kind: str, name: str, device: str, precision: str, build: Callable, *options) -> ManagedModel:
    """Load a checkpoint once per (kind, name, device, precision, options) and share it.

    ``build(path_or_id, device, dtype, download_dir)`` makes the masc_core
    object; it is created on the offload device and moved to the compute
    device by ComfyUI when a node needs it. A Hub id is downloaded into
    models/<kind>/<owner>--<name>.
    """
    register_model_folders()
    key = (kind, name, device, precision, *options)
    cached = _LOADED.get(key)
    if cached is not None:
        return cached
    folder = find_checkpoint(kind, name)
    compute = load_device(device)
    dtype = pick_dtype(precision, compute)
    download_dir = download_folder(kind, name) if folder is None and looks_like_hub_id(name) else None
    managed = ManagedModel(build(folder or name, offload_device(), dtype, download_dir), compute)
    _LOADED[key] = managed
    return managed


def check_interrupt() -> None:
    """Raise ComfyUI's interrupt exception if the user pressed Cancel."""
    if IN_COMFYUI:
        model_management.throw_exception_if_processing_interrupted()


def progress_callback(total_hint: int | None = None) -> Callable[[int, int], None]:
    """``progress(done, total)`` that drives ComfyUI's progress bar and honours interrupts."""
    bar = comfy_utils.ProgressBar(total_hint or 1) if IN_COMFYUI else None

    def update(done: int, total: int) -> None:
        check_interrupt()
        if bar is not None:
            bar.update_absolute(done, total)

    return update


PREVIEW_SIZE = 512
"""Longest side of the thumbnails shown on a node (IMAGE outputs keep the image's size)."""
PREVIEW_DIR_ENV = "MASC_PREVIEW_DIR"
"""Outside ComfyUI, previews are written only when this environment variable names a folder (benchmarks, scripts)."""


def thumbnail_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) of a picture's thumbnail: at most PREVIEW_SIZE on the longest side, aspect kept."""
    longest = max(width, height)
    if longest <= PREVIEW_SIZE:
        return width, height
    return max(1, round(width * PREVIEW_SIZE / longest)), max(1, round(height * PREVIEW_SIZE / longest))


def preview_thumbnail(pixels):
    """An RGB uint8 picture as a PIL thumbnail (``thumbnail_size``)."""
    from PIL import Image

    picture = Image.fromarray(pixels)
    size = thumbnail_size(*picture.size)
    if size == picture.size:
        return picture
    factor = picture.width // size[0]
    if (size[0] * factor, size[1] * factor) == picture.size:
        return picture.reduce(factor)  # 1024 -> 512 and the like: a box average, the cheapest good reduction
    return picture.resize(size, Image.Resampling.BOX)


def _preview_folder(prefix: str, width: int, height: int) -> tuple[str, str, int, str] | None:
    """(folder, file name stem, first counter, subfolder) for a node's previews, or None where none are kept."""
    if IN_COMFYUI:
        directory = folder_paths.get_temp_directory()
        full_folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(prefix, directory, width, height)
        return full_folder, filename, counter, subfolder
    directory = os.environ.get(PREVIEW_DIR_ENV)
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    return directory, prefix, 1 + sum(1 for name in os.listdir(directory) if name.startswith(prefix + "_")), ""


def save_previews(images: list, prefix: str) -> list[dict]:
    """Save uint8 RGB pictures as thumbnails in ComfyUI's temp folder; entries for a node's ``ui.images``.

    Thumbnails are at most PREVIEW_SIZE pixels on their longest side (PNG,
    ComfyUI's fast compression level); outside ComfyUI nothing is written
    unless $MASC_PREVIEW_DIR names a folder.
    """
    if not images:
        return []
    height, width = images[0].shape[:2]
    target = _preview_folder(prefix, *thumbnail_size(width, height))
    if target is None:
        return []
    folder, filename, counter, subfolder = target
    entries = []
    for index, pixels in enumerate(images):
        name = f"{filename}_{counter + index:05}_.png"
        preview_thumbnail(pixels).save(os.path.join(folder, name), compress_level=1)
        entries.append({"filename": name, "subfolder": subfolder, "type": "temp"})
    return entries
