"""Mask seconds per image, CLIPSeg and SAM3, at their real sizes with random weights, on this machine's CPU.

``python -m benchmarks masks`` builds (once, under --workdir) a CLIPSeg with CIDAS/clipseg-rd64-refined's widths and
depths and a SAM3 with facebook/sam3's vision tower (ViT-L-sized, 32 layers, 1008 px input; its DETR heads are
smaller than the real ones, which cost little beside the tower), and masks the shared photos (or the repo's) with
each: the seconds per image of ``Segmenter.masks`` for one subject name, after one warm-up image. Random weights
give meaningless masks at the real compute cost.

This is what a segmenter adds per candidate in MaSC Sample Until, and per image and source in the mask-source
study (``eval --mask-sources``), whose SigLIP2 encodings are shared by every source.
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np
from PIL import Image

from .output import set_command

SHARED_PHOTOS = "/work/shared/data/dreambench-mini"
REPO_PHOTOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "dreambench")


def photos(count: int) -> list[np.ndarray]:
    paths = sorted(glob.glob(os.path.join(SHARED_PHOTOS, "*", "*.jpg"))) or sorted(
        glob.glob(os.path.join(REPO_PHOTOS, "*.jpg"))
    )
    return [np.asarray(Image.open(p).convert("RGB")) for p in paths[: count + 1]]


def build(workdir: str) -> dict[str, str]:
    from masc_core.testing import build_clipseg_checkpoint, build_sam3_checkpoint

    folders = {
        "clipseg": os.path.join(workdir, "clipseg-base-random"),
        "sam3": os.path.join(workdir, "sam3-base-random"),
    }
    if not os.path.isfile(os.path.join(folders["clipseg"], "model.safetensors")):
        build_clipseg_checkpoint(folders["clipseg"], seed=0, size="base")
    if not os.path.isfile(os.path.join(folders["sam3"], "model.safetensors")):
        build_sam3_checkpoint(folders["sam3"], seed=0, size="base")
    return folders


def measure(args) -> dict:
    import torch

    from masc_core import load_segmenter

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    folders = build(args.workdir)
    images = photos(args.images)
    results = {
        "images": len(images) - 1,
        "image_size": list(images[0].shape[:2]),
        "threads": torch.get_num_threads(),
        "families": {},
    }
    for family, folder in folders.items():
        segmenter = load_segmenter(folder, device="cpu", precision="fp32", batch_size=1)
        parameters = sum(p.numel() for p in segmenter.model.parameters())
        segmenter.masks(images[:1], "dog")  # warm-up
        started = time.perf_counter()
        for image in images[1:]:
            segmenter.masks(image, "dog")
        seconds = (time.perf_counter() - started) / max(1, len(images) - 1)
        results["families"][family] = {
            "input": list(segmenter.spec.image_size),
            "parameters_m": parameters / 1e6,
            "seconds_per_image": seconds,
        }
    return results


def table(results: dict) -> str:
    lines = [
        f"mask seconds per image (CPU, {results['threads']} threads, fp32, {results['images']} photos of "
        f"{results['image_size'][1]}x{results['image_size'][0]}, one name, random weights at the real sizes)",
        "| segmenter | input | parameters | s / image |",
        "| --- | ---: | ---: | ---: |",
    ]
    for family, entry in results["families"].items():
        side = entry["input"][0]
        lines.append(f"| {family} | {side} px | {entry['parameters_m']:.0f} M | {entry['seconds_per_image']:.2f} |")
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "masks", help="mask seconds per image, CLIPSeg and SAM3 at their real sizes (random weights, CPU)"
    )
    parser.add_argument("--images", type=int, default=4, help="photos timed after the warm-up (default 4)")
    parser.add_argument(
        "--workdir", default=os.path.join("benchmarks", ".work"), help="where the two checkpoints are built once"
    )
    set_command(parser, measure, table)
