"""Public names imported on first use (PEP 562), for a package whose users often need only a few of them.

``masc_core`` and ``masc_core.evaluation`` use it: ``python -m masc_core read`` and the other report commands then
start without torch or transformers, while ``from masc_core import MascEncoder`` works as before.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_exports(package: str, public: dict[str, tuple[str, ...]]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``: each name in ``public`` (relative module -> names) is imported from
    its module when first asked for, then kept as a plain attribute."""
    module_of = {name: module for module, names in public.items() for name in names}

    def __getattr__(name: str):
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(module_of))

    return __getattr__, __dir__
