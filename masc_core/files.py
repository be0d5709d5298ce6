"""Reading and writing the JSON and text files the package keeps: one place, one-line errors.

Writes go through a temporary file and ``os.replace``, so a killed process
never leaves half a file. Floats are written with Python's shortest
round-trip repr and NaN is refused, so reading a file and writing it again
gives the same bytes.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from .errors import MascError, MascInputError


def read_json(path: str, what: str, *, error: type[MascError] = MascInputError, hint: str = "") -> dict:
    """The JSON object in ``path``, or one line of ``error`` naming ``what`` and the file (then ``hint``)."""
    tail = f": {hint}" if hint else ""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        raise error(f"{what} '{path}' does not exist{tail}") from None
    except ValueError as exc:
        raise error(f"{what} '{path}' is not valid JSON ({exc}){tail}") from None
    except OSError as exc:
        raise error(f"{what} '{path}' could not be read ({exc}){tail}") from None
    if not isinstance(value, dict):
        raise error(f"{what} '{path}' is not a JSON object{tail}")
    return value


def replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """``write`` fills a temporary file beside ``path``, which then replaces ``path``: a kill never leaves half a file."""
    temporary = f"{path}.tmp-{os.getpid()}"
    write(temporary)
    os.replace(temporary, path)


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (``replace_atomically``), synced to disk first."""

    def write(temporary: str) -> None:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    replace_atomically(path, write)


def json_text(value: Any) -> str:
    """Indented JSON with a final newline; NaN refused."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=2) + "\n"


def write_json(path: str, value: Any) -> None:
    write_atomic(path, json_text(value))
