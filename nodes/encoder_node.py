"""Load MaSC Encoder: one SigLIP2 checkpoint, shared by every MaSC node, under ComfyUI's memory management."""

from __future__ import annotations

import weakref

import torch

from ..masc_core.checkpoint import PAPER_MODEL_ID, looks_like_hub_id
from ..masc_core.encoder import MascEncoder
from . import host

MASC_ENCODER = "MASC_ENCODER"
CATEGORY = "MaSC"


class ManagedEncoder:
    """The MASC_ENCODER value: a loaded ``MascEncoder`` plus ComfyUI's handle on its weights.

    Inside ComfyUI the model is registered with a ModelPatcher, so it shares
    VRAM with diffusion models: ComfyUI offloads it when they need room, and
    ``ready()`` loads it back before scoring. This object keeps the strong
    reference ComfyUI's model list does not (it holds patchers weakly).
    """

    def __init__(self, encoder: MascEncoder, patcher, compute_device: torch.device):
        self.encoder = encoder
        self.patcher = patcher
        self.compute_device = compute_device

    def ready(self) -> MascEncoder:
        """The encoder, with its weights on the compute device."""
        host.load_for_inference(self.patcher, self.compute_device, self.encoder.model)
        return self.encoder

    def __repr__(self) -> str:
        info = self.encoder.describe()
        return f"MASC_ENCODER({info['model']}, {info['kind']}, {info['precision']}, {self.compute_device})"


# Same inputs -> the same loaded model, for as long as some graph holds it.
_LOADED: "weakref.WeakValueDictionary[tuple, ManagedEncoder]" = weakref.WeakValueDictionary()


class MaSCLoadEncoder:
    """Node: Load MaSC Encoder."""

    DESCRIPTION = (
        "Loads a SigLIP2 checkpoint (Hugging Face folder) for MaSC scoring. Put checkpoint folders in "
        "ComfyUI/models/masc/ (or a path set in extra_model_paths.yaml under 'masc'). The paper uses "
        f"{PAPER_MODEL_ID}; choosing that name downloads it when the machine is online."
    )
    CATEGORY = CATEGORY
    RETURN_TYPES = (MASC_ENCODER,)
    RETURN_NAMES = ("encoder",)
    OUTPUT_TOOLTIPS = ("The loaded SigLIP2 encoder; connect it to every MaSC scoring node.",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        local = host.list_checkpoints("masc")
        choices = local + [name for name in [PAPER_MODEL_ID] if name not in local]
        return {
            "required": {
                "model": (choices, {"tooltip": "A checkpoint folder under models/masc, or the paper's Hub id (downloaded once into models/masc)."}),
                "device": (["auto", "cpu", "cuda"], {"default": "auto", "tooltip": "auto follows ComfyUI (GPU unless started with --cpu)."}),
                "precision": (
                    ["auto", "fp32", "bf16", "fp16"],
                    {"default": "auto", "tooltip": "auto: fp32 on CPU, bf16 or fp16 on GPU. fp32 reproduces the paper's package exactly."},
                ),
                "max_patches": (
                    "INT",
                    {"default": 1024, "min": 16, "max": 4096, "step": 16, "tooltip": "NaFlex patch budget per image (the paper: 1024). Fixed-size checkpoints ignore it."},
                ),
            }
        }

    def load(self, model: str, device: str, precision: str, max_patches: int):
        host.register_model_folders()
        key = (model, device, precision, int(max_patches))
        cached = _LOADED.get(key)
        if cached is not None:
            return (cached,)
        folder = host.find_checkpoint("masc", model)
        compute = host.load_device(device)
        offload = host.offload_device()
        dtype = host.pick_dtype(precision, compute)
        download_dir = host.download_folder("masc", model) if folder is None and looks_like_hub_id(model) else None
        encoder = MascEncoder.load(
            folder or model,
            device=offload,
            precision=dtype,
            max_num_patches=int(max_patches),
            download_dir=download_dir,
        )
        managed = ManagedEncoder(encoder, host.make_patcher(encoder.model, compute, offload), compute)
        _LOADED[key] = managed
        return (managed,)
