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

- a socket of a type the pack or ComfyUI defines (IMAGE, MASK, LATENT, VAE,
  VIDEO, MASC_ENCODER, MASC_SEGMENTER, ..., or either of two as "IMAGE,VIDEO"):
  a value of that type (``SOCKETS``), so a
  STRING sent through a switch into ``vae`` is refused before any sampling, not
  met as an AttributeError after the first round. What the value holds (a
  mask's size, a schedule's length) is checked by the code that converts it.

A refusal is one MascInputError line naming the input, what arrived
(shortened, escaped) and what to connect.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

from dataclasses import dataclass
from typing import Callable

import torch

from ..masc_core.errors import MascError, MascInputError
from ..masc_core.limits import out_of_range
from ..masc_core.metric.scores import ScoreBatch
from ..masc_core.models.encoder import MascEncoder
from ..masc_core.models.segmenters import Segmenter
from ..masc_core.safe_text import shown
from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.clip import ClipChoice
from ..masc_core.selection.pruning import PruneRules
from ..masc_core.selection.sweep_cells import LoraChoice
from .host import ManagedModel, is_video
from .host.models import without_server_paths
from .host.refusals import as_refusal
from .types import (
    MASC_ENCODER,
    MASC_PRUNE,
    MASC_RULES,
    MASC_SCORES,
    MASC_SEGMENTER,
    MASC_SUBJECTS,
    MASC_SWEEP_CELLS,
    MASC_VIDEO,
    DeclaredSubject,
)

MAX_TEXT = 20_000
"""Longest text a STRING input takes (SigLIP2 reads 64 tokens; a prompt is far shorter than this)."""


@dataclass(frozen=True)
class Socket:
    """What a socket type takes: ``accepts(value)``, its name in a sentence, and what to connect to it."""

    what: str
    accepts: Callable[[object], bool]
    connect: str


def _tensor(*dims: int) -> Callable[[object], bool]:
    return lambda value: isinstance(value, torch.Tensor) and value.ndim in dims


def _core_object(value) -> bool:
    """A model object of core's (MODEL, CLIP): anything but a plain value, a tensor or a container."""
    return value is not None and not isinstance(value, (str, bytes, numbers.Number, torch.Tensor, dict, list, tuple))


def _managed(kind: type) -> Callable[[object], bool]:
    return lambda value: isinstance(value, ManagedModel) and isinstance(value.core, kind)


SOCKETS: dict[str, Socket] = {
    "IMAGE": Socket("an IMAGE", _tensor(3, 4), "Load Image, VAE Decode or another node's IMAGE output"),
    "MASK": Socket("a MASK", _tensor(2, 3), "Load Image's MASK, MaSC Auto Mask or another node's MASK output"),
    "LATENT": Socket(
        "a LATENT",
        lambda v: isinstance(v, dict) and isinstance(v.get("samples"), torch.Tensor),
        "Empty Latent Image or another node's LATENT output",
    ),
    "SIGMAS": Socket("a SIGMAS schedule", _tensor(1), "Basic Scheduler or another node's SIGMAS output"),
    "CONDITIONING": Socket(
        "a CONDITIONING", lambda v: isinstance(v, list), "CLIP Text Encode or another node's CONDITIONING"
    ),
    "MODEL": Socket("a MODEL", _core_object, "Load Checkpoint's MODEL or another node's MODEL output"),
    "CLIP": Socket(
        "a CLIP", lambda v: callable(getattr(v, "tokenize", None)), "Load Checkpoint's CLIP or another node's CLIP"
    ),
    "VAE": Socket(
        "a VAE", lambda v: callable(getattr(v, "decode", None)), "Load Checkpoint's VAE, Load VAE or another node's VAE"
    ),
    "NOISE": Socket(
        "a NOISE", lambda v: callable(getattr(v, "generate_noise", None)), "Random Noise or another node's NOISE output"
    ),
    "GUIDER": Socket(
        "a GUIDER",
        lambda v: callable(getattr(v, "sample", None)) and getattr(v, "model_patcher", None) is not None,
        "CFG Guider, Basic Guider, Dual CFG Guider or another node's GUIDER output",
    ),
    "SAMPLER": Socket(
        "a SAMPLER", lambda v: callable(getattr(v, "sample", None)), "KSampler Select or another node's SAMPLER output"
    ),
    "VIDEO": Socket("a VIDEO", is_video, "Load Video, Create Video or another node's VIDEO output"),
    MASC_ENCODER: Socket("a MaSC encoder", _managed(MascEncoder), "Load MaSC Encoder's 'encoder' output"),
    MASC_SEGMENTER: Socket(
        "a MaSC segmenter",
        _managed(Segmenter),
        "Load MaSC Auto Mask Model's or Load MaSC SAM3 Model's 'segmenter' output",
    ),
    MASC_SCORES: Socket("MaSC scores", lambda v: isinstance(v, ScoreBatch), "the 'scores' output of a MaSC node"),
    MASC_SUBJECTS: Socket(
        "what MaSC Subject outputs",
        lambda v: isinstance(v, (tuple, list)) and all(isinstance(d, DeclaredSubject) for d in v),
        "a MaSC Subject node's 'subjects' output",
    ),
    MASC_RULES: Socket("MaSC Rules' output", lambda v: isinstance(v, RunRules), "a MaSC Rules node"),
    MASC_PRUNE: Socket(
        "MaSC Prune's output", lambda v: isinstance(v, PruneRules), "a MaSC Prune node, or disconnect it"
    ),
    MASC_VIDEO: Socket(
        "MaSC Video Options' output", lambda v: isinstance(v, ClipChoice), "a MaSC Video Options node, or disconnect it"
    ),
    MASC_SWEEP_CELLS: Socket(
        "MaSC Sweep LoRA's cells",
        lambda v: isinstance(v, tuple) and all(isinstance(c, LoraChoice) for c in v),
        "a MaSC Sweep LoRA or MaSC Sweep LoRA Model node's 'cells' output",
    ),
    "LORA_MODEL": Socket(
        "a LORA_MODEL", lambda v: isinstance(v, dict), "Train LoRA's 'lora' output (core's LORA_MODEL)"
    ),
}
"""Every socket type a pack node takes that is not a widget, and how a value of it is recognised."""


def _either(first: str, second: str) -> Socket:
    """A socket taking either of two types (core's union type ``"A,B"``)."""
    a, b = SOCKETS[first], SOCKETS[second]
    return Socket(f"{a.what} or {b.what}", lambda v: a.accepts(v) or b.accepts(v), f"{a.connect}; or {b.connect}")


SOCKETS["IMAGE,VIDEO"] = _either("IMAGE", "VIDEO")  # MaSC Score Video's frames


def arrived(value) -> str:
    """What came over a link, for a refusal: a plain value shown (shortened, escaped), else its kind."""
    if value is None or isinstance(value, (str, numbers.Number)):
        return shown(value, 40)
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


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
    if kind in SOCKETS:
        socket = SOCKETS[kind]
        if not socket.accepts(value):
            raise MascInputError(f"{name} is not {socket.what} ({arrived(value)} arrived): connect {socket.connect}")
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


def declared_order(node_class) -> list[str]:
    """The node's input names in the order its INPUT_TYPES declares them: required, optional, then hidden (the order
    a ``**inputs`` method takes positional arguments in)."""
    declared = node_class.INPUT_TYPES()
    return [name for section in ("required", "optional", "hidden") for name in declared.get(section) or {}]


def named_inputs(node_class, args: tuple, kwargs: dict) -> dict:
    """A ``**inputs`` method's call as one mapping: positional values by declared order, every declared input present
    (a required widget left out takes its declared default, anything else left out is None), an unknown name refused
    as Python refuses one."""
    names = declared_order(node_class)
    if len(args) > len(names):
        raise TypeError(f"{node_class.__name__} takes {len(names)} inputs, {len(args)} were given")
    values = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"{node_class.__name__} has no input named {name!r}")
        if name in values:
            raise TypeError(f"{node_class.__name__} got input {name!r} twice")
        values[name] = value
    required = node_class.INPUT_TYPES().get("required") or {}
    for name in names:
        if name not in values:
            options = required.get(name, (None,))[1:2]
            values[name] = options[0].get("default") if options and isinstance(options[0], dict) else None
    return values


def checked_inputs(node_class):
    """Class decorator: the node's FUNCTION runs only on inputs its INPUT_TYPES allows (``check_inputs``), and its
    refusals name server folders as a workflow sees them (``without_server_paths``: models/sam3/<name>, never the
    server's absolute path) and reach ComfyUI sentence first (``as_refusal``).

    A method that takes ``**inputs`` receives one mapping of every declared input (``named_inputs``): the node reads
    its values by name and hands the mapping down whole instead of relisting them."""
    function = getattr(node_class, node_class.FUNCTION)
    signature = inspect.signature(function)
    by_mapping = [p.kind for p in signature.parameters.values()][1:] == [inspect.Parameter.VAR_KEYWORD]

    @functools.wraps(function)
    def run(self, *args, **kwargs):
        if by_mapping:
            values = named_inputs(type(self), args, kwargs)
        else:
            bound = signature.bind(self, *args, **kwargs)
            values = dict(bound.arguments)
            values.pop(next(iter(signature.parameters)))
        try:
            return function(self, **check_inputs(type(self), values))
        except MascError as error:
            raise as_refusal(error, without_server_paths(str(error))) from None

    setattr(node_class, node_class.FUNCTION, run)
    node_class.INPUTS_CHECKED = True
    return node_class
