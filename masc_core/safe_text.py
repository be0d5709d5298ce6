"""Text from elsewhere (a PNG's metadata, a shared workflow's values), made safe to print and to quote in errors.

A crafted file can hold terminal control sequences (clear the screen, set
the clipboard with OSC 52, move the cursor) or line breaks that forge an
extra line of output. ``printable`` escapes every such character as
``\\xNN`` / ``\\uNNNN`` so what reaches a terminal, a log line or a node's
report is exactly one line of visible characters; ``shown`` also shortens a
value for quoting in a one-line error.
"""

from __future__ import annotations

import unicodedata
from typing import Any

_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Characters that reorder the text around them (a line that displays other than it reads)."""


def _escaped(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(character: str) -> bool:
    # Cc: C0/C1 controls (ESC, CR, LF, BEL, CSI ...) and DEL; Zl/Zp: U+2028/U+2029 break lines too.
    return unicodedata.category(character) in ("Cc", "Zl", "Zp") or character in _BIDI_CONTROLS


def printable(text: Any) -> str:
    """``text`` (any value, as ``str``) with control, line-breaking and reordering characters escaped."""
    text = str(text)
    if text.isprintable():  # the common case, in C
        return text
    return "".join(_escaped(c) if _unsafe(c) else c for c in text)


def shown(value: Any, limit: int = 80) -> str:
    """A value quoted for a one-line error: repr for non-strings, escaped, at most ``limit`` characters."""
    text = printable(value if isinstance(value, str) else repr(value))
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"'{text}'" if isinstance(value, str) else text
