"""Reading one manifest cell: texts, path lists, seeds, ratings; resolving and checking the files they name.

Shared by ``manifest`` (the single-subject columns) and ``subject_columns`` (the columns of a row's further
subjects), so every column gets the same checks and the same one-line messages.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..errors import MascInputError

PATH_SEPARATOR = "|"
LISTED_PROBLEMS = 3
"""How many missing files a message names (after their count)."""


def _fail(path: str, where: str, problem: str) -> MascInputError:
    return MascInputError(f"manifest '{path}' {where}: {problem}")


def _text(path: str, line: int, column: str, value: Any, *, required: bool) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _fail(path, f"line {line}, column '{column}'", "is empty")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _fail(path, f"line {line}, column '{column}'", f"expected text, got {type(value).__name__}")
    return str(value)


def _paths(path: str, line: int, column: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value or "").split(PATH_SEPARATOR)
    names = tuple(str(item).strip() for item in items if item is not None and str(item).strip())
    if not names:
        raise _fail(path, f"line {line}, column '{column}'", "is empty: give an image path")
    return names


def _seed(path: str, line: int, value: Any) -> int | str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise _fail(path, f"line {line}, column 'seed'", "expected a number or a name, got true/false")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return text


def _rating(path: str, line: int, column: str, value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise _fail(path, f"line {line}, column '{column}'", "expected a number, got true/false")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _fail(path, f"line {line}, column '{column}'", f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise _fail(path, f"line {line}, column '{column}'", f"expected a finite number, got {value!r}")
    return number


def _resolve(folder: str, name: str) -> str:
    return os.path.normpath(name if os.path.isabs(name) else os.path.join(folder, name))


def _shown(name: str, resolved: str) -> str:
    return f"'{name}'" if os.path.abspath(name) == resolved else f"'{name}' (resolved to '{resolved}')"


def _check_file(path: str, line: int, column: str, name: str, resolved: str, missing: dict[str, str]) -> None:
    """A folder is refused at once; a missing file is noted in ``missing`` (where it first occurs), to be listed with
    the others."""
    if not os.path.exists(resolved):
        missing.setdefault(resolved, f"line {line}, column '{column}': file {_shown(name, resolved)}")
    elif os.path.isdir(resolved):
        raise _fail(path, f"line {line}, column '{column}'", f"{_shown(name, resolved)} is a folder, not an image file")


def missing_files_error(what: str, missing: list[str], hint: str) -> MascInputError:
    """One line for many missing files: their count, the first few (``missing``: one description each), what to do."""
    missing = list(missing)
    count = len(missing)
    listed = "; ".join(missing[:LISTED_PROBLEMS])
    more = f"; and {count - LISTED_PROBLEMS} more" if count > LISTED_PROBLEMS else ""
    verb = "file does" if count == 1 else "files do"
    return MascInputError(f"{what}: {count} {verb} not exist: {listed}{more}: {hint}")
