"""Built-in text-prompted masks: Load MaSC Auto Mask Model (CLIPSeg), Load MaSC SAM3 Model, MaSC Auto Mask.

Both loaders give the one MASC_SEGMENTER type (``masc_core.models.segmenters.Segmenter``): MaSC Auto Mask and
MaSC Sample Until's segmenter take either. SAM3 is the paper's mask source; the paper found CLIPSeg masks as
good for MaSC (appendix 6.1), so a best-of-N graph can mask every generated image without another node pack.
"""

from __future__ import annotations

import torch

from .declarations import MaSCNode
from .declarations import float_input, int_input
from ..masc_core.metric.heatmaps import mask_overlay
from ..masc_core.defaults import DEFAULT_MASK_THRESHOLD, MIN_FOREGROUND_FRACTION
from ..masc_core.metric.masks import foreground_fraction
from ..masc_core.models.clipseg import CLIPSEG_MODEL_ID, ClipSegSegmenter
from ..masc_core.defaults import SAM3_SCORE_THRESHOLD
from ..masc_core.models.sam3 import SAM3_MODEL_ID, Sam3Segmenter
from . import host
from ..masc_core.io.images import to_rgb_uint8_list
from .convert import to_comfy_image_batch
from .loaders import CheckpointLoader
from .types import MASC_SEGMENTER, Output


class MaSCLoadAutoMaskModel(CheckpointLoader):
    """Loads a CLIPSeg checkpoint (Hugging Face folder) for MaSC Auto Mask. Put checkpoint folders in
    ComfyUI/models/clipseg/; choosing CIDAS/clipseg-rd64-refined downloads it when the machine is online."""

    SEARCH_ALIASES = ["clipseg", "segmentation model"]
    OUTPUTS = (Output(MASC_SEGMENTER, "segmenter", "The loaded CLIPSeg model; connect it to MaSC Auto Mask nodes."),)
    KIND, HUB_ID = "clipseg", CLIPSEG_MODEL_ID
    MODEL_TOOLTIP = "A CLIPSeg folder under models/clipseg, or the usual Hub id (downloaded once into models/clipseg)."

    def build(self, path, offload, dtype, download_dir, progress):
        return ClipSegSegmenter.load(
            path, device=offload, precision=dtype, download_dir=download_dir, progress=progress
        )

    def load(self, model: str, device: str, precision: str):  # the node's inputs by name (ComfyUI calls it with them)
        return self.load_checkpoint(model, device, precision)


class MaSCLoadSAM3Model(CheckpointLoader):
    """Loads a SAM3 checkpoint (transformers Hugging Face folder, the paper's mask source) for MaSC Auto Mask and MaSC
    Sample Until. Put checkpoint folders in ComfyUI/models/sam3/. facebook/sam3 is gated: request access on its Hub page
    and log in (hf auth login) before choosing it, or copy the folder in. Needs transformers 5."""

    SEARCH_ALIASES = ["sam3", "segment anything", "segmentation model", "auto mask"]
    OUTPUTS = (
        Output(MASC_SEGMENTER, "segmenter", "The loaded SAM3 model; connect it wherever a MaSC segmenter goes."),
    )
    KIND, HUB_ID = "sam3", SAM3_MODEL_ID
    MODEL_TOOLTIP = (
        f"A SAM3 folder under models/sam3, or {SAM3_MODEL_ID} (gated: accept its licence on the Hub and log in; "
        "downloaded once)."
    )

    @classmethod
    def option_inputs(cls) -> dict:
        return {
            "score_threshold": float_input(
                SAM3_SCORE_THRESHOLD,
                0.0,
                1.0,
                "Instances SAM3 scores at least this join the subject's mask (their union), as "
                "core SAM3 Detect's threshold.",
                step=0.01,
            ),
        }

    def build(self, path, offload, dtype, download_dir, progress, score_threshold=SAM3_SCORE_THRESHOLD):
        return Sam3Segmenter.load(
            path,
            device=offload,
            precision=dtype,
            download_dir=download_dir,
            score_threshold=score_threshold,
            progress=progress,
        )

    def load(self, model: str, device: str, precision: str, score_threshold: float):  # the node's inputs by name
        return self.load_checkpoint(model, device, precision, score_threshold=float(score_threshold))


class MaSCAutoMask(MaSCNode):
    """Masks the subject in every image of a batch with CLIPSeg or SAM3 (whichever loader feeds it), prompted by the
    subject's name (white = subject). Feeds the mask inputs of the MaSC scoring nodes; use it for the reference too, or
    bring masks from elsewhere."""

    SEARCH_ALIASES = ["clipseg", "sam3", "segment", "text mask", "subject mask"]
    OUTPUT_NODE = True
    FUNCTION = "mask"
    OUTPUTS = (
        Output("MASK", "mask", "One 0/1 mask per image, at the image's size."),
        Output("IMAGE", "preview", "The images with their masks tinted red."),
        Output("STRING", "report", "Share of each image the mask covers, with a flag below the paper's 5% filter."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "segmenter": (
                    MASC_SEGMENTER,
                    {"tooltip": "From Load MaSC Auto Mask Model (CLIPSeg) or Load MaSC SAM3 Model."},
                ),
                "images": ("IMAGE", {"tooltip": "The images to mask (a batch is masked in one pass)."}),
                "subject": (
                    "STRING",
                    {
                        "default": "",
                        "tooltip": "What to mask, usually the subject's class name ('dog'); several names "
                        "comma-separated ('dog, puppy') are combined.",
                    },
                ),
                "threshold": float_input(
                    DEFAULT_MASK_THRESHOLD,
                    0.0,
                    1.0,
                    "A pixel is the subject when the segmenter's probability is at least this (SAM3: "
                    "the merged instances' mask probability).",
                    step=0.01,
                ),
                "dilation": int_input(
                    0, 0, 256, "Grow each mask by this many pixels (hides the subject's soft edges from PF)."
                ),
            }
        }

    def mask(self, segmenter, images, subject, threshold, dilation):
        arrays = to_rgb_uint8_list(images, "images")
        model = segmenter.ready()
        masks = model.masks(
            arrays, subject, threshold=threshold, dilation=dilation, progress=host.progress_callback(len(arrays))
        )
        batch = torch.stack(masks)
        lines, previews = [], []
        for index, (image, mask) in enumerate(zip(arrays, masks)):
            share = foreground_fraction(mask.numpy())
            flag = "  below the 5% filter: subject probably not rendered" if share < MIN_FOREGROUND_FRACTION else ""
            lines.append(f"#{index}: mask covers {100 * share:.1f}%{flag}")
            previews.append(mask_overlay(image, mask.numpy(), f"#{index}  mask {100 * share:.1f}%"))
        report = "\n".join(lines)
        return {
            "ui": {"images": host.save_previews(previews, "masc_mask"), "text": [report]},
            "result": (batch, to_comfy_image_batch(previews), report),
        }
