"""Image preprocessing for SigLIP2, owned here so scores do not depend on transformers.

transformers 5 moved SigLIP2's image processors from PIL to torchvision;
4.x used PIL by default. The two resize differently, so the same photo gave
different scores depending on the installed transformers. This module
reproduces the transformers 5 (torchvision) pipeline with torch alone:

1. RGB uint8 [H, W, 3] -> [3, H, W].
2. Resize with antialiasing, on the uint8 data: torchvision resizes uint8
   natively on CPUs with AVX2/AVX512 or ARM64 (and always for bicubic), and
   otherwise in float32 with rounding back to uint8; the same dispatch is
   used here, so the pixels match torchvision's bit for bit.
   - NaFlex: to the largest patch-aligned size with at most
     ``max_num_patches`` patches, aspect ratio kept (binary search on the
     scale, as the SigLIP2 processor does).
   - Fixed-size: to the checkpoint's ``size``.
3. Rescale (x / 255) and normalize ((x - mean) / std), fused as
   (x - mean * 255) / (std * 255) in float32.
4. NaFlex only: cut into patches, [Hp * Wp, patch * patch * 3], row-major.

Preprocessing always runs on the CPU, whatever device the model is on, so
the model sees the same pixels on every machine.
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import MascModelError
from ..limits import MAX_PATCHES

DEFAULT_MAX_NUM_PATCHES = 1024
"""NaFlex patch budget of the paper (32 x 32 patches for a square image)."""

# PIL resampling codes as found in preprocessor_config.json.
_RESAMPLE_CODES = {0: "nearest", 2: "bilinear", 3: "bicubic"}
_RESAMPLE_NAMES = {"nearest": "nearest", "bilinear": "bilinear", "bicubic": "bicubic"}


@dataclass(frozen=True)
class PreprocessSpec:
    """How a checkpoint wants its images; read from preprocessor_config.json."""

    naflex: bool
    patch_size: int
    max_num_patches: int = DEFAULT_MAX_NUM_PATCHES
    image_size: tuple[int, int] | None = None
    resample: str = "bilinear"
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    rescale_factor: float = 1.0 / 255.0
    do_rescale: bool = True
    do_normalize: bool = True

    @classmethod
    def from_configs(
        cls,
        *,
        naflex: bool,
        vision_config: dict,
        preprocessor_config: dict,
        max_num_patches: int | None = None,
    ) -> "PreprocessSpec":
        """Build the spec of a checkpoint from its config.json vision part and preprocessor_config.json."""
        patch_size = int(vision_config.get("patch_size") or preprocessor_config.get("patch_size") or 16)
        resample_value = preprocessor_config.get("resample", 2)
        if isinstance(resample_value, str):
            resample = _RESAMPLE_NAMES.get(resample_value.lower())
        else:
            resample = _RESAMPLE_CODES.get(int(resample_value))
        if resample is None:
            raise MascModelError(
                f"preprocessor_config.json asks for resample={resample_value!r}; only nearest (0), "
                "bilinear (2) and bicubic (3) are supported"
            )
        kwargs = dict(
            naflex=naflex,
            patch_size=patch_size,
            resample=resample,
            image_mean=tuple(float(v) for v in preprocessor_config.get("image_mean", (0.5, 0.5, 0.5))),
            image_std=tuple(float(v) for v in preprocessor_config.get("image_std", (0.5, 0.5, 0.5))),
            rescale_factor=float(preprocessor_config.get("rescale_factor", 1.0 / 255.0)),
            do_rescale=bool(preprocessor_config.get("do_rescale", True)),
            do_normalize=bool(preprocessor_config.get("do_normalize", True)),
        )
        if naflex:
            # Held to its range here, whoever calls: attention's cost grows with its square.
            budget = DEFAULT_MAX_NUM_PATCHES if max_num_patches is None else MAX_PATCHES.check(max_num_patches)
            return cls(max_num_patches=budget, **kwargs)
        size = preprocessor_config.get("size") or {}
        height = size.get("height") or size.get("shortest_edge") or vision_config.get("image_size")
        width = size.get("width") or size.get("shortest_edge") or vision_config.get("image_size")
        if not height or not width:
            raise MascModelError(
                "the checkpoint gives no input size (preprocessor_config.json 'size' or config image_size)"
            )
        if int(height) % patch_size or int(width) % patch_size:
            raise MascModelError(f"input size {height}x{width} is not a multiple of the patch size {patch_size}")
        return cls(image_size=(int(height), int(width)), **kwargs)

    def grid_for(self, height: int, width: int) -> tuple[int, int]:
        """Patch grid (rows, columns) an image of this size is encoded on."""
        if self.naflex:
            th, tw = naflex_target_size(height, width, self.patch_size, self.max_num_patches)
        else:
            th, tw = self.image_size
        return th // self.patch_size, tw // self.patch_size


def naflex_target_size(height: int, width: int, patch_size: int, max_num_patches: int) -> tuple[int, int]:
    """Largest patch-aligned (height, width) with at most ``max_num_patches`` patches.

    Binary search over one scale factor applied to both sides, each side
    rounded up to a multiple of the patch (and at least one patch), as the
    SigLIP2 NaFlex processor does; the search constants are the processor's
    so the result is identical for every input size.
    """

    def scaled(scale: float, size: int) -> int:
        value = math.ceil(size * scale / patch_size) * patch_size
        return int(max(patch_size, value))

    eps = 1e-5
    low, high = eps / 10, 100.0
    while (high - low) >= eps:
        mid = (low + high) / 2
        rows = scaled(mid, height) / patch_size
        cols = scaled(mid, width) / patch_size
        if rows * cols <= max_num_patches:
            low = mid
        else:
            high = mid
    return scaled(low, height), scaled(low, width)


def _native_uint8_bilinear() -> bool:
    """Whether torchvision would resize uint8 bilinearly without a float round trip."""
    capability = torch.backends.cpu.get_cpu_capability()
    return capability in ("AVX2", "AVX512") or platform.machine() in ("aarch64", "arm64")


def resize_uint8(image: torch.Tensor, size: tuple[int, int], resample: str) -> torch.Tensor:
    """Antialiased resize of a [3, H, W] (or [B, 3, H, W]) uint8 tensor, torchvision-exact."""
    if tuple(image.shape[-2:]) == tuple(size):
        return image
    batch = image if image.ndim == 4 else image[None]
    if resample == "nearest":
        out = F.interpolate(batch, size=list(size), mode="nearest-exact")
    else:
        native = resample == "bicubic" or _native_uint8_bilinear()
        if native:
            out = F.interpolate(batch, size=list(size), mode=resample, align_corners=False, antialias=True)
        else:
            out = F.interpolate(batch.float(), size=list(size), mode=resample, align_corners=False, antialias=True)
            if resample == "bicubic":
                out = out.clamp_(0, 255)
            out = out.round_().to(torch.uint8)
    return out if image.ndim == 4 else out[0]


def normalize(image: torch.Tensor, spec: PreprocessSpec) -> torch.Tensor:
    """uint8 [..., 3, H, W] -> float32, rescaled and normalized as the processor does."""
    pixels = image.to(torch.float32)
    if spec.do_rescale and spec.do_normalize:
        # transformers fuses the two steps; doing the same keeps the float
        # rounding identical.
        mean = torch.tensor(spec.image_mean, dtype=torch.float32) * (1.0 / spec.rescale_factor)
        std = torch.tensor(spec.image_std, dtype=torch.float32) * (1.0 / spec.rescale_factor)
        return (pixels - mean[:, None, None]) / std[:, None, None]
    if spec.do_normalize:
        mean = torch.tensor(spec.image_mean, dtype=torch.float32)
        std = torch.tensor(spec.image_std, dtype=torch.float32)
        return (pixels - mean[:, None, None]) / std[:, None, None]
    if spec.do_rescale:
        return pixels * spec.rescale_factor
    return pixels


def patchify(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """[C, H, W] -> [Hp * Wp, patch * patch * C], patches row-major, pixels (row, col, channel)."""
    channels, height, width = image.shape
    rows, cols = height // patch_size, width // patch_size
    patches = image.reshape(channels, rows, patch_size, cols, patch_size)
    return patches.permute(1, 3, 2, 4, 0).reshape(rows * cols, -1)


@dataclass
class PreparedImage:
    """One image ready for the vision tower."""

    pixels: torch.Tensor
    """NaFlex: [Hp * Wp, P * P * 3]; fixed-size: [3, H, W]. float32, CPU."""

    grid: tuple[int, int]
    """Patch grid (rows, columns)."""


def prepare_image(image: np.ndarray, spec: PreprocessSpec) -> PreparedImage:
    """An RGB uint8 [H, W, 3] array as the vision tower's input."""
    if not image.flags.writeable:
        image = image.copy()
    chw = torch.from_numpy(image).permute(2, 0, 1).contiguous()
    height, width = chw.shape[-2:]
    if spec.naflex:
        target = naflex_target_size(height, width, spec.patch_size, spec.max_num_patches)
    else:
        target = spec.image_size
    resized = resize_uint8(chw, target, spec.resample)
    pixels = normalize(resized, spec)
    grid = (target[0] // spec.patch_size, target[1] // spec.patch_size)
    if spec.naflex:
        pixels = patchify(pixels, spec.patch_size)
    return PreparedImage(pixels=pixels, grid=grid)
