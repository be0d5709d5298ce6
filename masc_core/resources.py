"""Memory of the running process: its peak for the reports of ``score``, ``eval`` and ``bench``, and handing freed
heap back to the system between Sample Until's rounds."""

from __future__ import annotations

import ctypes
import ctypes.util
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


_LIBC_TRIM = None  # glibc's malloc_trim, looked up once; False where there is none


def release_freed_memory() -> bool:
    """Hand the C heap's freed pages back to the system (glibc's ``malloc_trim(0)``); False where there is no glibc.

    Why: a long unattended run frees large working buffers every round (decoded candidates, previews), and glibc keeps
    freed heap pages mapped for reuse. Which of them it can reuse depends on how the threads interleaved, so without a
    trim the process's resident memory drifts upward with the number of rounds (measured: +15 to +197 MiB between a
    budget of 32 and one of 256 in two runs of the same code, docs/performance.md). A trim costs about a millisecond.
    """
    global _LIBC_TRIM
    if _LIBC_TRIM is None:
        _LIBC_TRIM = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _LIBC_TRIM = libc.malloc_trim  # absent from musl: AttributeError
                _LIBC_TRIM.argtypes, _LIBC_TRIM.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):
                _LIBC_TRIM = False
    if not _LIBC_TRIM:
        return False
    _LIBC_TRIM(0)
    return True
