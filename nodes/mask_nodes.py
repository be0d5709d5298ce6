"""Built-in text-prompted masks: Load MaSC Auto Mask Model and MaSC Auto Mask (CLIPSeg).

The paper found CLIPSeg masks as good as SAM3's for MaSC (appendix 6.1), so
a best-of-N graph can mask every generated image without another node pack.
"""

from __future__ import annotations

import numpy as np
import torch

from ..masc_core import heatmaps as render
from ..masc_core.masks import MIN_FOREGROUND_FRACTION
from ..masc_core.segmentation import CLIPSEG_MODEL_ID, DEFAULT_THRESHOLD, ClipSegSegmenter
from . import host
from .convert import comfy_images, to_comfy_image_batch
from .encoder_node import CATEGORY

MASC_SEGMENTER = "MASC_SEGMENTER"
_MASK_COLOR = np.array([255, 64, 64], dtype=np.float32)


class MaSCLoadAutoMaskModel:
    """Node: Load MaSC Auto Mask Model."""

    DESCRIPTION = (
        "Loads a CLIPSeg checkpoint (Hugging Face folder) for MaSC Auto Mask. Put checkpoint folders in "
        f"ComfyUI/models/clipseg/; choosing {CLIPSEG_MODEL_ID} downloads it when the machine is online."
    )
    CATEGORY = CATEGORY
    RETURN_TYPES = (MASC_SEGMENTER,)
    RETURN_NAMES = ("segmenter",)
    OUTPUT_TOOLTIPS = ("The loaded CLIPSeg model; connect it to MaSC Auto Mask nodes.",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": (
                    host.checkpoint_choices("clipseg", CLIPSEG_MODEL_ID),
                    {"tooltip": "A CLIPSeg folder under models/clipseg, or the usual Hub id (downloaded once into models/clipseg)."},
                ),
                "device": host.DEVICE_INPUT,
                "precision": host.precision_input(),
            }
        }

    def load(self, model: str, device: str, precision: str):
        def build(path, offload, dtype, download_dir):
            return ClipSegSegmenter.load(path, device=offload, precision=dtype, download_dir=download_dir)

        return (host.load_shared("clipseg", model, device, precision, build),)


def mask_overlay(image: np.ndarray, mask: np.ndarray, label: str) -> np.ndarray:
    """The image with the mask tinted red and a caption (coverage), for previews."""
    weight = mask[..., None].astype(np.float32) * 0.55
    tinted = image.astype(np.float32) * (1.0 - weight) + _MASK_COLOR * weight
    return render.with_caption(np.clip(np.rint(tinted), 0, 255).astype(np.uint8), label)


class MaSCAutoMask:
    """Node: MaSC Auto Mask."""

    DESCRIPTION = (
        "Masks the subject in every image of a batch with CLIPSeg, prompted by the subject's name (white = subject). "
        "Feeds the mask inputs of the MaSC scoring nodes; use it for the reference too, or bring masks from elsewhere."
    )
    CATEGORY = CATEGORY
    OUTPUT_NODE = True
    FUNCTION = "mask"
    RETURN_TYPES = ("MASK", "IMAGE", "STRING")
    RETURN_NAMES = ("mask", "preview", "report")
    OUTPUT_TOOLTIPS = (
        "One 0/1 mask per image, at the image's size.",
        "The images with their masks tinted red.",
        "Share of each image the mask covers, with a flag below the paper's 5% filter.",
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "segmenter": (MASC_SEGMENTER, {"tooltip": "From Load MaSC Auto Mask Model."}),
                "images": ("IMAGE", {"tooltip": "The images to mask (a batch is masked in one pass)."}),
                "subject": ("STRING", {"default": "", "tooltip": "What to mask, usually the subject's class name ('dog'); several names comma-separated ('dog, puppy') are combined."}),
                "threshold": ("FLOAT", {"default": DEFAULT_THRESHOLD, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": "A pixel is the subject when CLIPSeg's probability is at least this."}),
                "dilation": ("INT", {"default": 0, "min": 0, "max": 256, "tooltip": "Grow each mask by this many pixels (hides the subject's soft edges from PF)."}),
            }
        }

    def mask(self, segmenter, images, subject, threshold, dilation):
        arrays = comfy_images(images, "images")
        model = segmenter.ready()
        masks = model.masks(arrays, subject, threshold=threshold, dilation=dilation, progress=host.progress_callback(len(arrays)))
        batch = torch.stack(masks)
        lines, previews = [], []
        for index, (image, mask) in enumerate(zip(arrays, masks)):
            share = float(mask.mean())
            flag = "  below the 5% filter: subject probably not rendered" if share < MIN_FOREGROUND_FRACTION else ""
            lines.append(f"#{index}: mask covers {100 * share:.1f}%{flag}")
            previews.append(mask_overlay(image, mask.numpy(), f"#{index}  mask {100 * share:.1f}%"))
        report = "\n".join(lines)
        return {
            "ui": {"images": host.save_previews(previews, "masc_mask"), "text": [report]},
            "result": (batch, to_comfy_image_batch(previews), report),
        }
