"""Text-prompted subject masks: the one interface every segmenter family offers, and loading by folder.

MaSC needs a foreground mask for the reference (CP) and for each output (PF); the metric does not care where it
comes from (the paper, appendix 6.1: SAM3, CLIPSeg, Grounded-SAM2 and OWLv2 + SAM2 move CP's alpha by at most
0.012 and PF's by 0.005). Two families are built in, behind one interface:

- ``clipseg`` (:mod:`masc_core.models.clipseg`): CLIPSeg, one probability per pixel from a 352 px decoder;
- ``sam3`` (:mod:`masc_core.models.sam3`): SAM3, the paper's own mask source, instances above a score merged.

A ``Segmenter`` supplies ``_iter_probabilities`` (one [H, W] map per image at its size, the per-pixel maximum over
the subject's names); ``probabilities`` and ``masks`` (threshold, dilation) are written here once, so the CLI,
the manifest builders and the nodes treat both families alike. ``load_segmenter`` picks the family from the
folder's config.json ``model_type`` (never its name): :mod:`masc_core.models.segmenter_folders`.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
import torch

from ..io.images import to_rgb_uint8_list
from ..defaults import DEFAULT_MASK_THRESHOLD
from ..metric.masks import check_dilation, check_threshold, dilate_mask, threshold_mask
from ..metric.stripping import subject_prompts
from ..progress import ProgressCallback
from .devices import ModelPlacement
from .preprocess import prepare_image


class Segmenter(ModelPlacement):
    """A loaded text-prompted segmentation model: images and a subject's names in, one mask per image out.

    Results are float32 CPU tensors [H, W] at each image's own size; the model can be moved with ``to``
    (ComfyUI moves it between GPU and CPU), inputs follow the model's device.
    """

    kind = ""
    """The family ("clipseg" or "sam3")."""

    default_threshold = DEFAULT_MASK_THRESHOLD
    """The pixel threshold ``masks`` uses when given none (CLIPSeg 0.4; SAM3 0.5, its processor's)."""

    def probabilities(
        self,
        images: Any,
        subject: str | Sequence[str],
        *,
        progress: ProgressCallback | None = None,
    ) -> list[torch.Tensor]:
        """Per pixel, the probability (0..1) that it shows the subject.

        images: one image, a list, or a [B,H,W,C] batch (PIL, numpy or torch; uint8 or float 0..1; RGBA and
            grayscale accepted).
        subject: the subject's name, the model's text prompt; several names ("sks dog, dog" or a list) give the
            per-pixel maximum over names.
        progress: ``progress(done, total)`` after each batch of images.

        Returns one float32 CPU tensor [H, W] per image, always a list (images of a ComfyUI batch share a size,
        so ``torch.stack`` makes the [B, H, W] MASK batch).
        """
        names = subject_prompts(subject)
        arrays = to_rgb_uint8_list(images, "images")
        return [p.cpu() for p in self._iter_probabilities(arrays, names, progress)]

    def masks(
        self,
        images: Any,
        subject: str | Sequence[str],
        *,
        threshold: float | None = None,
        dilation: int = 0,
        progress: ProgressCallback | None = None,
    ) -> list[torch.Tensor]:
        """0/1 subject masks (float32 CPU tensors [H, W], one per image, at its size).

        A pixel is foreground when its probability (see :meth:`probabilities`) is >= ``threshold`` (0..1; 0 keeps
        every pixel; None: the family's ``default_threshold``). ``dilation`` then grows the mask by that many pixels in
        every direction, which helps PF
        hide the subject's soft edges.
        """
        threshold = check_threshold(self.default_threshold if threshold is None else threshold)
        dilation = check_dilation(dilation)
        names = subject_prompts(subject)
        arrays = to_rgb_uint8_list(images, "images")
        return [
            dilate_mask(threshold_mask(p, threshold), dilation).cpu()
            for p in self._iter_probabilities(arrays, names, progress)
        ]

    def describe(self) -> dict:
        """Name, family, input size, device and precision, for logs and reports."""
        return {
            "model": self.info.source,
            "kind": self.kind,
            "image_size": list(self.spec.image_size),
            "device": str(self.device),
            "precision": str(self.dtype).replace("torch.", ""),
        }

    def _iter_probabilities(
        self, arrays: Sequence[np.ndarray], names: Sequence[str], progress: ProgressCallback | None
    ) -> Iterator[torch.Tensor]:
        """Probability maps [H, W] on the model's device, image by image, batch by batch: the names are encoded
        once (``_encode_names``), each batch of ``batch_size`` prepared images goes through ``_batch_maps``."""
        texts = self._encode_names(names)
        total = len(arrays)
        for start in range(0, total, self.batch_size):
            chunk = arrays[start : start + self.batch_size]
            pixels = torch.stack([prepare_image(image, self.spec).pixels for image in chunk])
            yield from self._batch_maps(pixels, chunk, texts)
            if progress is not None:
                progress(start + len(chunk), total)

    def _encode_names(self, names: Sequence[str]):
        """The names as the model's text side needs them (once per call)."""
        raise NotImplementedError

    def _batch_maps(self, pixels: torch.Tensor, chunk: Sequence[np.ndarray], texts) -> Iterator[torch.Tensor]:
        """One [H, W] probability map per image of ``chunk`` (``pixels`` its prepared batch), max over the names."""
        raise NotImplementedError
