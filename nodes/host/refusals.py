"""How the pack's refusals reach a person in ComfyUI: the sentence first, and no traceback on the console.

ComfyUI names a node's exception ``<module>.<Type>`` (execution.py ``full_type_name``) before its message, and it
imports a custom node as a package named after its folder's path, so a refusal read
``/home/.../custom_nodes/masc-comfyui.masc_core.errors.MascModelError: <sentence>``: the server's path first, the
sentence last. And it logs ``traceback.format_exc()`` for every exception, so an expected refusal (a wrong input, a
missing model) filled the console with a traceback of the pack's own frames.

- ``as_refusal``: the error re-raised as a subclass of its own type (``isinstance`` still holds) whose module is
  ``builtins``, which ComfyUI shows by its bare name: ``MascModelError: <sentence>``.
- ``quiet_console``: a filter on the root logger that drops the traceback ComfyUI logs after such a refusal. The
  line before it, ``!!! Exception during processing !!! <sentence>``, stays: one line per refusal. Any other
  exception (a bug, another pack's error) keeps its traceback.
"""

from __future__ import annotations

import logging

from ...masc_core.errors import MascError
from .comfy import IN_COMFYUI

_REFUSAL_TYPES: dict[type, type] = {}


def refusal_type(kind: type) -> type:
    """``kind`` (a MascError class) as ComfyUI shows it by its bare name: a subclass whose module is builtins."""
    shown = _REFUSAL_TYPES.get(kind)
    if shown is None:
        shown = type(kind.__name__, (kind,), {"__module__": "builtins", "__qualname__": kind.__qualname__})
        _REFUSAL_TYPES[kind] = shown
    return shown


def as_refusal(error: MascError, message: str) -> MascError:
    """``error`` with ``message``, of a type ComfyUI names without a module path (``refusal_type``)."""
    kind = type(error)
    if kind.__module__ == "builtins":  # already one (a node called from another node's body)
        return kind(message)
    return refusal_type(kind)(message)


class QuietRefusals(logging.Filter):
    """Drops the traceback ComfyUI logs after an expected refusal (its last line names a MascError type)."""

    MARK = "masc_quiet_refusals"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not isinstance(record.msg, str):
            return True
        text = record.msg.rstrip()
        if not text.startswith("Traceback (most recent call last):"):
            return True
        last = text.rsplit("\n", 1)[-1]
        return not any(last.startswith(f"{kind.__qualname__}: ") for kind in _REFUSAL_TYPES.values())


def quiet_console(logger: logging.Logger | None = None) -> None:
    """Install ``QuietRefusals`` on ComfyUI's root logger once (a second copy of the pack installs none); outside
    ComfyUI, only on the ``logger`` given."""
    if logger is None:
        if not IN_COMFYUI:
            return
        logger = logging.getLogger()
    if not any(getattr(f, "MARK", None) == QuietRefusals.MARK for f in logger.filters):
        logger.addFilter(QuietRefusals())
