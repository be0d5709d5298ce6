"""The progress callback that long-running calls (encoding, masking) take."""

from __future__ import annotations

from typing import Callable

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each batch of images; may raise to cancel
(ComfyUI's interrupt check does)."""
