"""Reading and writing the JSON and text files the package keeps: one place, one-line errors.

Writes go through a temporary file and ``os.replace``, so a killed process
never leaves half a file. Floats are written with Python's shortest
round-trip repr and NaN is refused, so reading a file and writing it again
gives the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, Callable

from ..errors import MascError, MascInputError

MAX_JSON_DEPTH = 32
"""Deepest nesting of lists and objects ``parse_json`` takes by default (the package's files nest at most 6)."""
MAX_JSON_DIGITS = 40
"""Longest whole number ``parse_json`` takes (a seed has at most 20 digits; Python refuses 4,300 with another error)."""


def special_file_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it exists but is neither a regular file nor a folder, or None.

    ``os.stat`` follows links and never opens, so a named pipe, a socket or a device (``/dev/zero`` behind a link
    named ``frame.png``) is named before anything could block on it or read from it without end.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, unreadable, a NUL in the name: the caller's own open says so
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_regular_file(
    path: str | os.PathLike,
    name: str,
    *,
    shown_as: str | None = None,
    label: str | None = None,
    error: type[MascError] = MascInputError,
    hint: str = "give a file",
) -> None:
    """One line of ``error`` naming input ``name`` when ``path`` is a pipe, socket or device: the one check every
    reader of the package makes before it opens a file (images, masks, frames, videos, logs, model files).

    ``shown_as`` is how the file is named in the message (a node names a file of the server by its name, never by
    the server's path); ``label``, when given, is the whole phrase that names it instead.
    """
    kind = special_file_kind(path)
    if kind is not None:
        label = label or f"{name} '{os.fspath(path) if shown_as is None else shown_as}'"
        raise error(f"{label} is {kind}, not a regular file: {hint}")


class JSONUnreadable(ValueError):
    """Text that ``parse_json`` refuses: not JSON, nested too deeply, a number out of range, NaN or Infinity."""


class JSONTooDeep(JSONUnreadable):
    """JSON nested deeper than the caller takes (or than Python's parser can follow)."""


def _whole_number(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise JSONUnreadable(f"a number of {len(text.lstrip('-')):,} digits")
    return int(text)


def _finite_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONUnreadable(f"the number {text[:40]} is out of range")
    return value


def _no_constant(name: str):
    raise JSONUnreadable(f"{name} is not a number")


def json_depth(value: Any, limit: int) -> int:
    """How deeply lists and objects nest in ``value``, counted without recursion and stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` as JSON, strictly: every refusal is one ``JSONUnreadable`` (a ValueError) saying why.

    Python's parser alone raises RecursionError on deep nesting, a ValueError of its own past 4,300 digits,
    and takes NaN and Infinity; a crafted file or request body gets none of that through here.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise JSONUnreadable("not UTF-8 text") from None
    try:
        value = json.loads(text, parse_int=_whole_number, parse_float=_finite_number, parse_constant=_no_constant)
    except RecursionError:  # only far past max_depth; one wording whatever the interpreter's recursion limit
        raise JSONTooDeep(f"nested more than {max_depth} deep") from None
    except JSONUnreadable:
        raise
    except ValueError as exc:
        raise JSONUnreadable(str(exc).splitlines()[0] if str(exc) else "not JSON") from None
    if json_depth(value, max_depth) > max_depth:
        raise JSONTooDeep(f"nested more than {max_depth} deep")
    return value


def read_json(path: str, what: str, *, error: type[MascError] = MascInputError, hint: str = "") -> dict:
    """The JSON object in ``path``, or one line of ``error`` naming ``what`` and the file (then ``hint``)."""
    tail = f": {hint}" if hint else ""
    check_regular_file(path, what, error=error)
    try:
        with open(path, "rb") as handle:
            value = parse_json(handle.read())
    except FileNotFoundError:
        raise error(f"{what} '{path}' does not exist{tail}") from None
    except JSONUnreadable as exc:
        raise error(f"{what} '{path}' is not valid JSON ({exc}){tail}") from None
    except OSError as exc:
        raise error(f"{what} '{path}' could not be read ({exc}){tail}") from None
    if not isinstance(value, dict):
        raise error(f"{what} '{path}' is not a JSON object{tail}")
    return value


def replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """``write`` fills a temporary file beside ``path``, which then replaces ``path``: a kill never leaves half a
    file."""
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
