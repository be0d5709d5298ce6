"""Masks for benchmarks that have none (DreamBench): made once with a built-in segmenter, reused after.

Each image a manifest names gets a mask file in the masks folder (beside the
manifest by default), at a path the builder chooses from the image's place
in the benchmark, so the next run finds it and makes only the missing ones.
The segmenter (CLIPSeg or SAM3, told apart by the checkpoint's config.json)
is prompted with the subject's class word ("dog", "stuffed animal"), as the
paper prompts SAM3 with the concept's name; the paper finds CLIPSeg's masks
score as well (appendix 6.1).

``masks.json`` in the masks folder records which segmenter (family,
checkpoint digest, SAM3's instance score threshold), threshold and dilation
made them: asking for another one while
masks from the first are there is refused (mixing two segmenters' masks in
one evaluation would quietly change the numbers). Each mask is written
atomically, so a killed run leaves whole masks only, and the rerun goes on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import groupby
from typing import Callable, Sequence

import numpy as np
from PIL import Image

from ...io import files
from ...errors import MascInputError
from ...io.images import load_image_file
from ...metric.masks import check_dilation, check_threshold
from ...models import checkpoints
from ...models.clipseg import CLIPSEG_MODEL_ID
from ...defaults import SAM3_SCORE_THRESHOLD
from ...models.segmenter_folders import default_threshold, load_segmenter, segmenter_kind
from .common import MaskJob, problems_error

SIDECAR = "masks.json"
IMAGES_PER_STEP = 16
"""Images read, segmented and written per step (bounds memory)."""


@dataclass(frozen=True)
class AutoMaskOptions:
    """How missing masks are made: ``segmenter`` None means they must all exist already."""

    segmenter: str | None = None
    threshold: float | None = None
    """Pixel threshold; None: the family's (CLIPSeg 0.4, SAM3 0.5)."""
    dilation: int = 0
    device: str = "auto"
    precision: str = "fp32"
    batch_size: int = 8
    score_threshold: float = SAM3_SCORE_THRESHOLD
    """SAM3 only: an instance joins the mask when its score is at least this."""


@dataclass
class MaskReport:
    folder: str
    made: int
    reused: int
    kind: str | None = None
    """The segmenter family that was asked for (None: no --auto-masks, every mask was there)."""

    def line(self) -> str:
        made_with = {"clipseg": " with CLIPSeg", "sam3": " with SAM3"}.get(self.kind or "", "")
        return f"masks in '{self.folder}': {self.made} made{made_with}, {self.reused} reused"


def _identity(options: AutoMaskOptions) -> tuple[str, dict]:
    folder, source = checkpoints.resolve(
        options.segmenter, what="--auto-masks segmentation model", example=CLIPSEG_MODEL_ID
    )
    kind = segmenter_kind(folder, source)
    threshold = default_threshold(kind) if options.threshold is None else options.threshold
    identity = {
        "segmenter": source,
        "kind": kind,
        "digest": checkpoints.folder_digest(folder),
        "threshold": float(threshold),
        "dilation": int(options.dilation),
    }
    if kind == "sam3":
        identity["score_threshold"] = float(options.score_threshold)
    return folder, identity


def _check_sidecar(masks_dir: str, identity: dict) -> bool:
    """True when ``masks.json`` is there (and matches; a mismatch is a one-line error)."""
    path = os.path.join(masks_dir, SIDECAR)
    if not os.path.exists(path):
        return False
    made_by = files.read_json(path, "masks record")
    if any(made_by.get(key) != identity.get(key) for key in ("digest", "threshold", "dilation", "score_threshold")):
        raise MascInputError(
            f"the masks in '{masks_dir}' were made by '{made_by.get('segmenter')}' at threshold "
            f"{made_by.get('threshold')} "
            f"(dilation {made_by.get('dilation')}), not by '{identity['segmenter']}' at threshold "
            f"{identity['threshold']} "
            f"(dilation {identity['dilation']}): ask for the same, or give another --masks-dir (or delete that one) to "
            "remake them"
        )
    return True


def _write_mask(mask: np.ndarray, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        files.replace_atomically(
            path, lambda temporary: Image.fromarray((mask * 255).astype(np.uint8)).save(temporary, format="PNG")
        )
    except OSError as exc:
        raise MascInputError(f"mask '{path}' could not be written ({exc}): pick a writable --masks-dir") from None


def ensure_masks(
    jobs: Sequence[MaskJob],
    masks_dir: str,
    options: AutoMaskOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> MaskReport:
    """Make the masks of ``jobs`` that do not exist yet (with the CLIPSeg or SAM3 checkpoint ``options.segmenter``),
    reuse the others."""
    missing = [job for job in jobs if not os.path.isfile(job.mask)]
    if options.segmenter is None:
        if missing:
            raise problems_error(
                f"masks folder '{masks_dir}'",
                "masks are missing" if len(missing) > 1 else "mask is missing",
                [job.mask for job in missing],
                "pass --auto-masks SEGMENTER (a CLIPSeg or SAM3 checkpoint folder) to make them, or put your own masks "
                "(white = subject) at those paths",
            )
        return MaskReport(masks_dir, 0, len(jobs))
    threshold = None if options.threshold is None else check_threshold(options.threshold, "--mask-threshold")
    dilation = check_dilation(options.dilation, "--mask-dilate")
    score_threshold = check_threshold(options.score_threshold, "--score-threshold")
    folder, identity = _identity(
        AutoMaskOptions(options.segmenter, threshold, dilation, score_threshold=score_threshold)
    )
    recorded = _check_sidecar(masks_dir, identity)
    if not missing:
        return MaskReport(masks_dir, 0, len(jobs), identity["kind"])
    segmenter = load_segmenter(
        folder,
        kind=identity["kind"],
        device=options.device,
        precision=options.precision,
        batch_size=options.batch_size,
        score_threshold=score_threshold,
    )
    if not recorded:
        os.makedirs(masks_dir, exist_ok=True)
        files.write_json(os.path.join(masks_dir, SIDECAR), identity)
    done = 0
    for prompt, group in groupby(sorted(missing, key=lambda job: job.prompt), key=lambda job: job.prompt):
        group = list(group)
        for start in range(0, len(group), IMAGES_PER_STEP):
            step = group[start : start + IMAGES_PER_STEP]
            images = [load_image_file(job.image, "image to mask") for job in step]
            for job, mask in zip(
                step, segmenter.masks(images, prompt, threshold=identity["threshold"], dilation=dilation)
            ):
                _write_mask(mask.numpy(), job.mask)
            done += len(step)
            if progress:
                progress(done, len(missing))
    return MaskReport(masks_dir, len(missing), len(jobs) - len(missing), identity["kind"])
