"""What a best-of-N run decides, as small typed nodes: MaSC Rules -> MASC_RULES and MaSC Prune -> MASC_PRUNE.

Core composes its custom sampler from NOISE, GUIDER, SAMPLER and SIGMAS; the pack composes what passes the same way.
MaSC Rules holds one ``RunRules`` (what passes, ``PassRules``, plus how many to keep and the budget): MaSC Sample Until
(Custom) runs on it, and MaSC Gate, Select Best and Pick take its pass rules in place of their own widgets, so "what
passes" is said once per graph. MaSC Prune holds one ``PruneRules``. Both check their values when made; the consumers
check what arrives over the link (a shared workflow's value is untrusted).
"""

from __future__ import annotations

from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.pruning import PruneRules
from .declarations import (
    ACCEPT_INPUT,
    BATCH_SIZE_INPUT,
    BLEND_INPUT,
    CP_WEIGHT_INPUT,
    MaSCNode,
    MAX_CANDIDATES_INPUT,
    ON_SHORTFALL_INPUT,
    ON_UNCERTAIN_INPUT,
    PF_WEIGHT_INPUT,
    PRUNE_INPUTS,
    rank_by_input,
    RUN_MIN_CP_INPUT,
    THRESHOLD_INPUTS,
)
from .types import MASC_PRUNE, MASC_RULES, Output


class MaSCRules(MaSCNode):
    """What passes and how many to keep: the ranking, the thresholds, the mask filter, what an uncertain or blended
    candidate becomes, how many to accept and the budget. Connect it to MaSC Sample Until (Custom); MaSC Gate, Select
    Best and Pick take the same rules."""

    SEARCH_ALIASES = ["thresholds", "acceptance", "pass rules", "best of n rules", "budget"]
    FUNCTION = "rules"
    OUTPUTS = (
        Output(MASC_RULES, "rules", "These rules, for MaSC Sample Until (Custom), MaSC Gate, Select Best and Pick."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        required = {
            "rank_by": rank_by_input("cp"),
            "cp_weight": CP_WEIGHT_INPUT,
            "pf_weight": PF_WEIGHT_INPUT,
            **THRESHOLD_INPUTS,
            "min_cp": RUN_MIN_CP_INPUT,
            "on_uncertain": ON_UNCERTAIN_INPUT,
            "on_blend": BLEND_INPUT,
            "accept": ACCEPT_INPUT,
            "max_candidates": MAX_CANDIDATES_INPUT,
            "batch_size": BATCH_SIZE_INPUT,
            "on_shortfall": ON_SHORTFALL_INPUT,
        }
        return {"required": required}

    def rules(self, **widgets):
        """The widgets ``INPUT_TYPES`` declares, by name, as one checked ``RunRules`` (its seed is the run's)."""
        return (RunRules.from_widgets(widgets).check(),)


class MaSCPrune(MaSCNode):
    """Pruning for MaSC Sample Until (Custom): judge each round's candidates on the model's denoised preview at prune_at
    of the steps and finish only the best prune_keep. Survivors stay exactly the plain sampler's image at their seed.
    prune_study prunes nothing and records previews for 'python -m masc_core prune-report'."""

    SEARCH_ALIASES = ["prune", "early stop", "preview judging", "prune study"]
    FUNCTION = "prune"
    OUTPUTS = (Output(MASC_PRUNE, "prune", "These pruning settings, for MaSC Sample Until (Custom)'s 'prune' input."),)

    @classmethod
    def INPUT_TYPES(cls):
        prune_at = (
            "FLOAT",
            dict(PRUNE_INPUTS["prune_at"][1], default=0.4),
        )  # this node is added to prune: on by default
        return {
            "required": {
                "prune_at": prune_at,
                "prune_keep": PRUNE_INPUTS["prune_keep"],
                "prune_study": PRUNE_INPUTS["prune_study"],
            },
            "optional": {
                "prune": (
                    MASC_PRUNE,
                    {
                        "tooltip": "Optional: an earlier judged step (another MaSC Prune); this one judges after it, "
                        "among those it kept (e.g. keep 4 of 8 at 0.1, then 1 at 0.3)."
                    },
                ),
            },
        }

    def prune(self, prune_at, prune_keep, prune_study, prune=None):
        # What depends on the run (batch_size, steps, sampler) is checked by Sample Until, before the first candidate.
        this = PruneRules(prune_at=float(prune_at), prune_keep=int(prune_keep), study=bool(prune_study))
        return (this if prune is None else prune.followed_by(this),)
