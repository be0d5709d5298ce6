"""Every node holds its inputs to what its own INPUT_TYPES declares, before its body runs.

ComfyUI checks a combo's list and an INT/FLOAT's min and max only for a value
typed into the widget. A value that arrives over a link (core's Int, Float or
String primitives, a switch, any node with an any-typed output, a hand-edited
API prompt) reaches the node function as sent. ``checked_inputs`` wraps a node
class's FUNCTION so each declared input is checked against its declaration,
read at call time (a model combo lists the folders present now):

- INT: a whole number (not a bool) within min..max;
- FLOAT: a finite number (NaN and infinities refused) within min..max;
- BOOLEAN: True or False;
- STRING: text of at most ``MAX_TEXT`` characters;
- a combo (a list of choices): one of the choices.

Types the pack or ComfyUI define (IMAGE, MASK, MASC_ENCODER, ...) are checked
by the code that converts them. A refusal is one MascInputError line naming
the input, the value (shortened, escaped) and what it may be.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

from ..masc_core.errors import MascInputError
from ..masc_core.limits import out_of_range
from ..masc_core.safe_text import shown

MAX_TEXT = 20_000
"""Longest text a STRING input takes (SigLIP2 reads 64 tokens; a prompt is far shorter than this)."""


def _number(name: str, value, kind: str, options: dict):
    if kind == "INT":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise MascInputError(f"{name} is {shown(value)}, not a whole number: connect an INT or type a number")
        value = int(value)
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise MascInputError(f"{name} is {shown(value)}, not a number: connect a FLOAT or type a number")
        value = float(value)
        if not math.isfinite(value):
            raise MascInputError(f"{name} is {shown(value)}: give a finite number")
    low, high = options.get("min"), options.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        raise MascInputError(out_of_range(name, value, low, high))
    return value


def check_value(name: str, value, declaration: tuple):
    """``value`` as the input ``name`` declared by ``declaration`` takes it, or a one-line MascInputError."""
    kind = declaration[0]
    options = declaration[1] if len(declaration) > 1 and isinstance(declaration[1], dict) else {}
    if isinstance(kind, (list, tuple)):
        if not isinstance(value, str) or value not in kind:
            listed = ", ".join(shown(c, 40) for c in list(kind)[:6]) + (", ..." if len(kind) > 6 else "")
            raise MascInputError(f"{name} is {shown(value)}, not one of its choices ({listed}): pick one from the list")
        return value
    if kind in ("INT", "FLOAT"):
        return _number(name, value, kind, options)
    if kind == "BOOLEAN":
        if not isinstance(value, bool):
            raise MascInputError(f"{name} is {shown(value)}, not true or false: connect a BOOLEAN or use the toggle")
        return value
    if kind == "STRING":
        if not isinstance(value, str):
            raise MascInputError(f"{name} is {shown(value)}, not text: connect a STRING or type the text")
        if len(value) > MAX_TEXT:
            raise MascInputError(f"{name} is {len(value):,} characters long: this input takes at most {MAX_TEXT:,}")
        return value
    return value


def check_inputs(node_class, inputs: dict) -> dict:
    """``inputs`` with every declared required/optional input checked (``check_value``)."""
    declared = node_class.INPUT_TYPES()
    checked = dict(inputs)
    for section in ("required", "optional"):
        for name, declaration in (declared.get(section) or {}).items():
            if name in checked and not (section == "optional" and checked[name] is None):
                checked[name] = check_value(name, checked[name], declaration)
    return checked


def checked_inputs(node_class):
    """Class decorator: the node's FUNCTION runs only on inputs its INPUT_TYPES allows (``check_inputs``)."""
    function = getattr(node_class, node_class.FUNCTION)
    signature = inspect.signature(function)

    @functools.wraps(function)
    def run(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        values = dict(bound.arguments)
        values.pop(next(iter(signature.parameters)))
        return function(self, **check_inputs(type(self), values))

    setattr(node_class, node_class.FUNCTION, run)
    node_class.INPUTS_CHECKED = True
    return node_class
