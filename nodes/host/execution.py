"""What running a node needs from ComfyUI: devices and dtypes, ModelPatcher memory management, the shared models,
the progress bar, Cancel, and the previews shown on a node.

Inside ComfyUI a loaded model is registered with a ModelPatcher, so it shares VRAM with diffusion models; outside
it the same calls work with plain equivalents (the model moved to its device, no bar, no interrupt).
"""

from __future__ import annotations

import os
import weakref
from typing import Callable

import torch

from ...masc_core.io.images import preview_thumbnail, thumbnail_size
from ...masc_core.models.devices import PRECISION_CHOICES, resolve_device, resolve_dtype
from .comfy import IN_COMFYUI, comfy_utils, folder_paths, model_management, model_patcher, prompt_server
from .models import checkpoint_folder, register_model_folders

DEVICE_INPUT = (
    ["auto", "cpu", "cuda"],
    {"default": "auto", "tooltip": "auto follows ComfyUI (GPU unless started with --cpu)."},
)


def precision_input(note: str = "") -> tuple:
    return (list(PRECISION_CHOICES), {"default": "auto", "tooltip": "auto: fp32 on CPU, bf16 or fp16 on GPU." + note})


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

    def __init__(self, core, compute_device: torch.device, name: str = ""):
        self.core = core
        self.compute_device = compute_device
        self.name = name
        """The model as the loader's combo named it (a folder under models/<kind>, or a Hub id)."""
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


def load_shared(
    kind: str, name: str, hub_id: str, device: str, precision: str, build: Callable, *options
) -> ManagedModel:
    """Load a checkpoint once per (kind, name, device, precision, options) and share it.

    ``name`` is a folder the loader lists under models/<kind>, or ``hub_id`` (the pack's own checkpoint,
    downloaded into models/<kind>/<owner>--<name>); ``checkpoint_folder`` refuses anything else.
    ``build(path_or_id, device, dtype, download_dir)`` makes the masc_core object; it is created on the
    offload device and moved to the compute device by ComfyUI when a node needs it.
    """
    register_model_folders()
    key = (kind, name, device, precision, *options)
    cached = _LOADED.get(key)
    if cached is not None:
        return cached
    folder, download_dir = checkpoint_folder(kind, name, hub_id)
    compute = load_device(device)
    dtype = pick_dtype(precision, compute)
    managed = ManagedModel(build(folder or name, offload_device(), dtype, download_dir), compute, name)
    _LOADED[key] = managed
    return managed


def show_text(node_id, text: str) -> None:
    """``text`` on the running node (core's progress text, ComfyUI 0.33 and later; older cores and outside ComfyUI:
    nothing)."""
    server = prompt_server() if IN_COMFYUI else None
    send = getattr(server, "send_progress_text", None)
    if send is not None and node_id is not None:
        send(text, str(node_id))


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


def interrupt_callback() -> Callable[[int, int], None]:
    """``progress(done, total)`` that only honours Cancel (for work inside a node that drives its own bar)."""
    return lambda done, total: check_interrupt()


PREVIEW_DIR_ENV = "MASC_PREVIEW_DIR"
"""Outside ComfyUI, previews are written only when this environment variable names a folder (benchmarks, scripts)."""


def _preview_folder(prefix: str, width: int, height: int) -> tuple[str, str, int, str] | None:
    """(folder, file name stem, first counter, subfolder) for a node's previews, or None where none are kept."""
    if IN_COMFYUI:
        directory = folder_paths.get_temp_directory()
        full_folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(
            prefix, directory, width, height
        )
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
