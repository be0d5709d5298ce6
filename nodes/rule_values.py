"""The values MaSC Rules and MaSC Prune pass along (MASC_RULES, MASC_PRUNE), checked where they arrive.

A value arrives over a link unchecked (a shared workflow, another pack's any-typed output): every consumer takes it
through these, so a wrong one is one line naming the input, never a traceback or a silent default.
"""

from __future__ import annotations

from ..masc_core.errors import MascInputError
from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.pruning import PruneRules
from ..masc_core.selection.ranking import PassRules
from .types import MASC_PRUNE, MASC_RULES

RULES_INPUT = (MASC_RULES, {"tooltip": "Optional: what passes, from MaSC Rules (the same rules as your MaSC Sample Until (Custom)). "
                                        "When connected it replaces this node's ranking and threshold widgets."})
"""The optional ``rules`` input of MaSC Gate, Select Best and Pick."""

PRUNE_INPUT = (MASC_PRUNE, {"tooltip": "Optional: pruning, from MaSC Prune (judge each round on previews, finish the best). Not connected = every candidate sampled in full."})


def rules_value(value, name: str = "rules") -> RunRules:
    """A MASC_RULES input, checked (it arrives over a link unchecked)."""
    if not isinstance(value, RunRules):
        raise MascInputError(f"{name} is not MaSC Rules' output: connect a MaSC Rules node to '{name}'")
    return value.check()


def prune_value(value, name: str = "prune") -> PruneRules:
    """A MASC_PRUNE input (None = no pruning), checked for its type; its values are checked against the run."""
    if value is None:
        return PruneRules()
    if not isinstance(value, PruneRules):
        raise MascInputError(f"{name} is not MaSC Prune's output: connect a MaSC Prune node to '{name}', or disconnect it")
    return value


def passing_from(rules, widget_rules: PassRules) -> PassRules:
    """The pass rules a judging node uses: MaSC Rules' when its ``rules`` input is connected, else its widgets'."""
    return widget_rules if rules is None else rules_value(rules).passing
