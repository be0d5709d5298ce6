"""Peak memory of the running process, for the reports of ``score``, ``eval`` and ``bench``."""

from __future__ import annotations

import sys

import torch


def peak_rss_mib() -> float | None:
    """The process's peak resident memory in MiB, or None where the platform does not say (Windows)."""
    try:
        import resource
    except ImportError:  # Windows has no resource module
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (2**20 if sys.platform == "darwin" else 1024.0)


def peak_memory(device: str | torch.device | None = None) -> dict:
    """``{"peak_rss_mib": ...}``, plus ``peak_cuda_mib`` (torch's allocator peak) when ``device`` is a CUDA device."""
    report = {"peak_rss_mib": peak_rss_mib()}
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda" and torch.cuda.is_available():
        report["peak_cuda_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return report
