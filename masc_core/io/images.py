"""Turning the image types users hold into RGB uint8 arrays.

Accepted: PIL images (any mode), numpy arrays and torch tensors, either
uint8 (0..255) or float (0..1), shaped [H,W], [H,W,C] or, for batches,
[B,H,W,C] (ComfyUI's IMAGE layout). C may be 1, 3 or 4.

Conventions, chosen to agree with what the paper's package sees when it is
handed a PIL image and calls ``image.convert("RGB")``:

- An alpha channel is dropped, not composited (PIL's RGBA->RGB).
- Grayscale is replicated to three channels.
- Float images are quantized to uint8 by rounding. A float image that came
  from an 8-bit file (ComfyUI's LoadImage divides by 255) gets its exact
  bytes back, so a graph scores a loaded file exactly as the CLI scores the
  file; a generated image is scored as it would be once saved as PNG.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from ..errors import MascInputError, first_line
from .files import check_regular_file

IMAGE_SUFFIX_HINT = "use a PNG, JPEG or WebP image"
MAX_PIXELS = Image.MAX_IMAGE_PIXELS
"""Largest image decoded (PIL's decompression-bomb limit, about 89 million pixels: 9,500 x 9,400)."""


def tensor_to_numpy(value: Any) -> Any:
    """A torch tensor (any device; float16/bfloat16 widened to float32) as numpy; anything else unchanged.

    ComfyUI hands over float16 tensors with --fp16-intermediates and GPU
    tensors with --gpu-only: both arrive here.
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
            tensor = tensor.float()
        return tensor.numpy()
    return value


def _as_numpy(value: Any) -> np.ndarray:
    """numpy view of a numpy array or a (CPU or device) torch tensor."""
    value = tensor_to_numpy(value)
    if isinstance(value, np.ndarray):
        return value
    raise MascInputError(
        f"unsupported image type {type(value).__name__}: pass a PIL image, a numpy array or a torch tensor"
    )


def float_to_uint8(array: np.ndarray, name: str) -> np.ndarray:
    """Quantize a float array in 0..1 to uint8 by rounding."""
    if not np.all(np.isfinite(array)):
        raise MascInputError(f"{name} contains NaN or infinite values: check the node or file that produced it")
    low, high = float(array.min(initial=0.0)), float(array.max(initial=0.0))
    if low < -1e-3 or high > 1.0 + 1e-3:
        raise MascInputError(
            f"{name} has float values in [{low:.3g}, {high:.3g}], expected 0..1: "
            "divide 0..255 data by 255 or pass it as uint8"
        )
    return np.clip(np.rint(array.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)


def to_rgb_uint8(image: Any, name: str = "image") -> np.ndarray:
    """One image as a contiguous [H, W, 3] uint8 array."""
    if isinstance(image, Image.Image):
        return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))
    array = _as_numpy(image)
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4):
        raise MascInputError(
            f"{name} has shape {tuple(array.shape)}: expected [H,W], [H,W,C] or [1,H,W,C] with C in 1, 3, 4"
        )
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise MascInputError(f"{name} is empty (shape {tuple(array.shape)}): pass an image with pixels")
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    elif np.issubdtype(array.dtype, np.floating):
        array = float_to_uint8(array, name)
    elif array.dtype != np.uint8:
        if array.min(initial=0) < 0 or array.max(initial=0) > 255:
            raise MascInputError(f"{name} has integer values outside 0..255: pass uint8 or float 0..1 data")
        array = array.astype(np.uint8)
    channels = array.shape[2]
    if channels == 1:
        array = np.repeat(array, 3, axis=2)
    elif channels == 4:
        array = array[:, :, :3]
    return np.ascontiguousarray(array)


def to_rgb_uint8_list(images: Any, name: str = "images") -> list[np.ndarray]:
    """A batch ([B,H,W,C] array/tensor, or a sequence of images) as a list of [H,W,3] uint8."""
    if isinstance(images, (list, tuple)):
        if not images:
            raise MascInputError(f"{name} is an empty list: pass at least one image")
        return [to_rgb_uint8(img, f"{name}[{i}]") for i, img in enumerate(images)]
    if isinstance(images, Image.Image):
        return [to_rgb_uint8(images, name)]
    array = _as_numpy(images)
    if array.ndim == 4:
        if array.shape[0] == 0:
            raise MascInputError(f"{name} is an empty batch: pass at least one image")
        return [to_rgb_uint8(array[i], f"{name}[{i}]") for i in range(array.shape[0])]
    return [to_rgb_uint8(array, name)]


def too_many_pixels(width: int, height: int) -> str | None:
    """Why an image of this size is not decoded (the phrase after its name), or None: the one bomb guard."""
    if width * height <= MAX_PIXELS:
        return None
    return f"is {width}x{height} pixels, more than the {MAX_PIXELS:,} read here (a decompression-bomb guard)"


def open_quietly(path: str) -> Image.Image:
    """``Image.open`` without PIL's bomb warning: the caller refuses images over MAX_PIXELS in one line itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(path)


def _open_image(path: str | os.PathLike, name: str) -> Image.Image:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MascInputError(f"{name} '{path}' does not exist: check the path")
    if os.path.isdir(path):
        raise MascInputError(f"{name} '{path}' is a folder, not an image file: pass the image's path")
    check_regular_file(path, name)
    try:
        image = open_quietly(path)
        width, height = image.size
        too_big = too_many_pixels(width, height)  # checked before decoding: a tiny file can claim billions of pixels
        if too_big:
            raise MascInputError(f"{name} '{path}' {too_big}: downscale it")
        image.load()
    except MascInputError:
        raise
    except UnidentifiedImageError:
        raise MascInputError(f"{name} '{path}' is not an image PIL can read: {IMAGE_SUFFIX_HINT}") from None
    except Image.DecompressionBombError:  # past twice the limit, PIL refuses at open
        raise MascInputError(
            f"{name} '{path}' claims more than {2 * MAX_PIXELS:,} pixels (a decompression bomb): pass a real image"
        ) from None
    except Exception as exc:  # PIL reports damaged files with many types (OSError, SyntaxError, ValueError, zlib.error)
        raise MascInputError(f"{name} '{path}' could not be read ({first_line(exc)}): check the file") from None
    # Apply the EXIF orientation, as ComfyUI's LoadImage does, so a photo is
    # scored the way it is displayed and the way its mask was drawn.
    return ImageOps.exif_transpose(image)


def load_image_file(path: str | os.PathLike, name: str = "image") -> np.ndarray:
    """Read an image file as [H, W, 3] uint8 (alpha dropped, EXIF orientation applied)."""
    return to_rgb_uint8(_open_image(path, name), name)


def load_mask_file(path: str | os.PathLike, name: str = "mask") -> np.ndarray:
    """Read a mask file as [H, W] uint8 luminance; white (non-zero) is foreground."""
    image = _open_image(path, name)
    return np.asarray(image.convert("L"), dtype=np.uint8)


PREVIEW_SIZE = 512
"""Longest side of the thumbnails shown on a node (IMAGE outputs keep the image's size)."""


def thumbnail_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) of a picture's thumbnail: at most PREVIEW_SIZE on the longest side, aspect kept."""
    longest = max(width, height)
    if longest <= PREVIEW_SIZE:
        return width, height
    return max(1, round(width * PREVIEW_SIZE / longest)), max(1, round(height * PREVIEW_SIZE / longest))


def preview_thumbnail(pixels: np.ndarray) -> Image.Image:
    """An RGB uint8 picture as a PIL thumbnail (``thumbnail_size``)."""
    picture = Image.fromarray(pixels)
    size = thumbnail_size(*picture.size)
    if size == picture.size:
        return picture
    factor = picture.width // size[0]
    if (size[0] * factor, size[1] * factor) == picture.size:
        return picture.reduce(factor)  # 1024 -> 512 and the like: a box average, the cheapest good reduction
    return picture.resize(size, Image.Resampling.BOX)
