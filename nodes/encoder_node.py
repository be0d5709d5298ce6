"""Load MaSC Encoder: one SigLIP2 checkpoint, shared by every MaSC node, under ComfyUI's memory management."""

from __future__ import annotations

from ..masc_core.limits import MAX_PATCHES
from ..masc_core.models.checkpoints import PAPER_MODEL_ID
from ..masc_core.models.encoder import MascEncoder
from .declarations import int_input
from .loaders import CheckpointLoader
from .types import MASC_ENCODER, Output


class MaSCLoadEncoder(CheckpointLoader):
    """Loads a SigLIP2 checkpoint (Hugging Face folder) for MaSC scoring. Put checkpoint folders in ComfyUI/models/masc/
    (or a path set in extra_model_paths.yaml under 'masc'). The paper uses google/siglip2-so400m-patch16-naflex;
    choosing that name downloads it when the machine is online."""

    SEARCH_ALIASES = ["siglip", "siglip2", "clip vision", "load masc"]
    OUTPUTS = (Output(MASC_ENCODER, "encoder", "The loaded SigLIP2 encoder; connect it to every MaSC scoring node."),)
    KIND, HUB_ID = "masc", PAPER_MODEL_ID
    MODEL_TOOLTIP = "A checkpoint folder under models/masc, or the paper's Hub id (downloaded once into models/masc)."
    PRECISION_NOTE = " fp32 reproduces the paper's package exactly."

    @classmethod
    def option_inputs(cls) -> dict:
        return {
            "max_patches": int_input(
                1024,
                MAX_PATCHES.low,
                MAX_PATCHES.high,
                "NaFlex patch budget per image (the paper: 1024). Fixed-size checkpoints ignore it.",
                step=16,
            ),
        }

    def build(self, path, offload, dtype, download_dir, progress, max_patches):
        return MascEncoder.load(
            path,
            device=offload,
            precision=dtype,
            max_num_patches=int(max_patches),
            download_dir=download_dir,
            progress=progress,
        )

    def load(self, model: str, device: str, precision: str, max_patches: int):
        return self.load_checkpoint(model, device, precision, max_patches=int(max_patches))
