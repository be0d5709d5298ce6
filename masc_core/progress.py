"""The progress callback that long-running calls (encoding, masking) take."""

from __future__ import annotations

from typing import Callable

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each batch of images; may raise to cancel
(ComfyUI's interrupt check does)."""


def stages(progress: ProgressCallback | None, total: int) -> Callable[[], None]:
    """``step()`` that reports one more of ``total`` stages done to ``progress`` (which may raise to cancel).

    Loading a model is a few stages (folder checked, tokenizer, weights built, placed); a Cancel pressed during one is
    honoured when it ends, not after the whole load.
    """
    done = [0]

    def step() -> None:
        done[0] += 1
        if progress is not None:
            progress(min(done[0], total), total)

    return step
