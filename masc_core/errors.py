"""Errors that reach users as one clear line.

Every error raised on bad input says which input was wrong, what was wrong
with it and what to do about it, in a single line. Callers (the CLI, the
ComfyUI nodes) print ``str(error)`` and never a traceback. A message often
quotes a value from a file or a shared workflow, so it is escaped here, once
(``safe_text.printable``): no terminal control sequence reaches a console.
"""

from .safe_text import printable


class MascError(Exception):
    """Base class of the errors this package raises on purpose."""

    def __init__(self, message: str):
        # One line, always: a multi-line message would be cut by the UIs; and visible characters only.
        super().__init__(printable(" ".join(str(message).split())))


class MascInputError(MascError, ValueError):
    """An input (image, mask, prompt, option) cannot be used as given."""


class MascModelError(MascError):
    """A checkpoint is missing, incomplete or not a SigLIP/SigLIP2 model."""


def first_line(exc: BaseException) -> str:
    """An exception's first line (or its type): third-party errors reach users as one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
