"""The values MaSC Rules and MaSC Prune pass along (MASC_RULES, MASC_PRUNE), checked where they arrive.

A value arrives over a link unchecked (a shared workflow, another pack's any-typed output): every consumer takes it
through these, so a wrong one is one line naming the input, never a traceback or a silent default.
"""

from __future__ import annotations

from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.pruning import PruneRules
from ..masc_core.selection.ranking import PassRules


def rules_value(value: RunRules) -> RunRules:
    """A MASC_RULES input's values checked again where they arrive (its type was checked there by ``nodes/inputs``)."""
    return value.check()


def prune_value(value: PruneRules | None) -> PruneRules:
    """A MASC_PRUNE input (None = no pruning; its type was checked where it arrived); its values are checked against
    the run."""
    return PruneRules() if value is None else value


def passing_from(rules, widget_rules: PassRules) -> PassRules:
    """The pass rules a judging node uses: MaSC Rules' when its ``rules`` input is connected, else its widgets'."""
    return widget_rules if rules is None else rules_value(rules).passing
