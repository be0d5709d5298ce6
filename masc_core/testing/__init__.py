"""Random-weight checkpoints in Hugging Face layout, for tests and benchmarks (as ``numpy.testing`` ships with numpy).

- ``build_checkpoint`` / ``train_tokenizer``: SigLIP2 (NaFlex or fixed-size; tiny, base or so400m);
- ``build_clipseg_checkpoint`` / ``build_sam3_checkpoint``: CLIPSeg and SAM3, for the built-in masks;
- ``build_clip`` / ``build_dino`` (``testing.baselines``): CLIP and DINO, for the baselines;
- ``testing.videos``: crafted videos (each frame its own size behind one header; a header's false frame count).

Nothing here is imported by the rest of the package; no network is used.
"""

from .baselines import build_clip, build_dino
from .checkpoints import build_checkpoint, train_tokenizer
from .clipseg_checkpoint import build_clipseg_checkpoint
from .sam3_checkpoint import build_sam3_checkpoint

__all__ = [
    "build_checkpoint",
    "build_clip",
    "build_clipseg_checkpoint",
    "build_dino",
    "build_sam3_checkpoint",
    "train_tokenizer",
]
