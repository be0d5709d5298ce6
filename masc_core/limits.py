"""The ranges of the numbers a caller may set, one place for the library, the command line and the nodes.

A node's widget declares these ranges, and ComfyUI holds a value typed into
the widget to them; a value that arrives over a link (a primitive node, any
node with an any-typed output, a hand-edited API prompt) reaches the node as
sent. So the library checks them itself where the number sets a cost (a
patch budget of 10^6 runs for hours on one small image) and the nodes check
every declared range (``nodes/inputs.py``) with the message made here.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from .errors import MascInputError
from .safe_text import shown


def out_of_range(name: str, value, low, high) -> str:
    """The one-line refusal of a number outside low..high (either bound may be None)."""
    if low is not None and high is not None:
        allowed = (
            f"between {low:g} and {high:g}"
            if isinstance(low, float) or isinstance(high, float)
            else f"between {low} and {high}"
        )
    elif low is not None:
        allowed = f"at least {low:g}" if isinstance(low, float) else f"at least {low}"
    else:
        allowed = f"at most {high:g}" if isinstance(high, float) else f"at most {high}"
    return f"{name} is {shown(value)}, outside the range this input takes: set it {allowed}"


@dataclass(frozen=True)
class IntRange:
    """An integer setting's allowed values, low..high inclusive."""

    name: str
    low: int
    high: int

    def check(self, value) -> int:
        """``value`` as an int, or a one-line MascInputError naming the setting."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise MascInputError(
                f"{self.name} is {shown(value)}, not a whole number: set it between {self.low} and {self.high}"
            )
        if not self.low <= value <= self.high:
            raise MascInputError(out_of_range(self.name, value, self.low, self.high))
        return int(value)


MAX_PATCHES = IntRange("max_patches", 16, 4096)
"""NaFlex patch budget per image (the paper: 1024). Cost grows with its square in attention."""
ACCEPT = IntRange("accept", 1, 4096)
"""How many candidates MaSC Sample Until keeps."""
MAX_CANDIDATES = IntRange("max_candidates", 1, 4096)
"""MaSC Sample Until's budget of candidates."""
BATCH_SIZE = IntRange("batch_size", 1, 64)
"""Candidates sampled per round."""
TOP_K = IntRange("top_k", 1, 4096)
"""How many images MaSC Select Best keeps."""
EVERY_NTH_FRAME = IntRange("every_nth_frame", 1, 1024)
"""A clip's frames scored: every n-th, from the first."""
MAX_FRAMES = IntRange("max_frames", 1, 1024)
"""At most this many frames of a clip are scored (one vision forward each), spread evenly over the clip."""
TRIM_LATENT = IntRange("trim_latent", 0, 1024)
"""Latent frames cut from the start of a video candidate before decoding (WanVaceToVideo's reference frames)."""
