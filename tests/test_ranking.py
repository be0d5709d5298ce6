"""Ranking and selection by CP, PF or a weighted combination, with thresholds and the mask filter."""

from __future__ import annotations

import pytest

from masc_core import MascInputError
from masc_core.ranking import rank
from masc_core.scores import ImageScore


def scores():
    return [
        ImageScore(index=0, cp=0.70, pf=0.10),
        ImageScore(index=1, cp=0.90, pf=0.01),
        ImageScore(index=2, cp=None, pf=0.20, cp_undefined="reference_mask is empty (no foreground pixel)"),
        ImageScore(index=3, cp=0.80, pf=0.12, small_foreground=True),
        ImageScore(index=4, cp=0.80, pf=0.12),
    ]


def test_rank_by_each_key():
    assert rank(scores(), by="cp").order == [1, 3, 4, 0, 2]
    assert rank(scores(), by="pf").order == [2, 3, 4, 0, 1]
    assert rank(scores(), by="both").order == [3, 4, 1, 0, 2]           # cp + pf; ties keep batch order
    assert rank(scores(), by="both", cp_weight=0.0, pf_weight=1.0).order == [3, 4, 0, 1, 2]


def test_top_k_thresholds_and_filter():
    ranking = rank(scores(), by="both", top_k=2, min_pf=0.05, reject_small_masks=True)
    assert ranking.selected == [4, 0]
    reasons = {item.index: item.reasons for item in ranking.items}
    assert reasons[1] == ["PF below 0.05"]
    assert reasons[3] == ["mask below the size filter (subject probably not rendered)"]
    assert reasons[2][0].startswith("CP undefined (reference_mask is empty")
    assert rank(scores(), by="cp", min_cp=0.95).selected == []
    table = ranking.table().splitlines()
    assert table[0].split()[:4] == ["rank", "index", "CP", "PF"] and table[2].endswith("selected")


def test_bad_arguments():
    with pytest.raises(MascInputError, match="rank by 'x'"):
        rank(scores(), by="x")
    with pytest.raises(MascInputError, match="top_k is 0"):
        rank(scores(), top_k=0)


def test_min_foreground_redecides_the_flag():
    items = [ImageScore(index=0, cp=0.5, pf=0.1, foreground_fraction=0.08), ImageScore(index=1, cp=0.4, pf=0.1, foreground_fraction=0.2)]
    assert rank(items, reject_small_masks=True).selected == [0, 1]
    assert rank(items, reject_small_masks=True, min_foreground=0.1).selected == [1]
