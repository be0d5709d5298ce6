"""Choosing the device and the floating-point precision."""

from __future__ import annotations

import torch

from ..defaults import PRECISION_CHOICES
from ..errors import MascInputError

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; anything else is checked to exist."""
    if isinstance(device, torch.device):
        return device
    name = (device or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(name)
    except RuntimeError:
        raise MascInputError(f"device '{device}' is not a torch device: use auto, cpu, cuda, cuda:N or mps") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise MascInputError(
            f"device '{device}' was asked for but CUDA is not available here: use --device cpu or auto"
        )
    if resolved.type == "mps" and not mps_available():
        raise MascInputError(f"device '{device}' was asked for but MPS is not available here: use --device cpu or auto")
    return resolved


def resolve_dtype(precision: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """'auto' is fp32 on CPU (fast and exact there), bf16 on GPUs that have it, else fp16."""
    if isinstance(precision, torch.dtype):
        return precision
    name = (precision or "fp32").strip().lower()
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device.type == "mps":
            return torch.float16
        return torch.float32
    if name not in DTYPES:
        raise MascInputError(f"precision '{precision}' is unknown: use one of {', '.join(PRECISION_CHOICES)}")
    return DTYPES[name]


def place(
    module: torch.nn.Module, device: str | torch.device | None, precision: str | torch.dtype | None
) -> torch.nn.Module:
    """``module`` moved to the resolved device and precision (every loader ends with this)."""
    target = resolve_device(device)
    return module.to(device=target, dtype=resolve_dtype(precision, target))


class ModelPlacement:
    """Device and precision of a wrapper's ``self.model``, and moving it.

    ComfyUI moves the underlying module between GPU and CPU behind the
    wrapper's back, so both are read from the parameters, never stored.
    """

    model: torch.nn.Module

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def to(self, device: str | torch.device):
        """Move the model; returns self."""
        self.model.to(device)
        return self
