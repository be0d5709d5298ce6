"""Ranking and selection by CP, PF or a weighted combination, with thresholds and the mask filter."""

from __future__ import annotations

import pytest

from masc_core import MascInputError
from masc_core.selection.ranking import rank
from masc_core.metric.scores import ImageScore


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
    assert rank(scores(), by="both").order == [3, 4, 1, 0, 2]  # cp + pf; ties keep batch order
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
    items = [
        ImageScore(index=0, cp=0.5, pf=0.1, foreground_fraction=0.08),
        ImageScore(index=1, cp=0.4, pf=0.1, foreground_fraction=0.2),
    ]
    assert rank(items, reject_small_masks=True).selected == [0, 1]
    assert rank(items, reject_small_masks=True, min_foreground=0.1).selected == [1]


def test_pass_rules_rank_as_the_keyword_form_does_and_describe_themselves():
    from masc_core.selection.ranking import PassRules

    scores = [
        ImageScore(index=i, cp=cp, pf=pf, foreground_fraction=share)
        for i, (cp, pf, share) in enumerate([(0.8, 0.1, 0.3), (0.6, 0.3, 0.01), (0.9, None, 0.4), (0.55, 0.2, 0.2)])
    ]
    rules = PassRules(
        by="both", cp_weight=2.0, pf_weight=1.0, min_cp=0.58, reject_small_masks=True, min_foreground=0.05
    )
    keyword = rank(
        scores,
        by="both",
        cp_weight=2.0,
        pf_weight=1.0,
        min_cp=0.58,
        reject_small_masks=True,
        min_foreground=0.05,
        top_k=2,
    )
    assert rules.rank(scores, top_k=2) == keyword
    assert rules.rank(scores, top_k=2).selected == [0]  # 1: mask too small; 2: PF undefined; 3: CP below 0.58
    assert rules.key(scores[0]) == pytest.approx(1.7) and rules.key(scores[2]) is None
    assert rules.describe() == "rank by score; pass: CP >= 0.58, mask >= 5%"
    assert PassRules(on_uncertain="reject").describe() == "rank by CP+PF; pass: CP+PF defined; uncertain: reject"
    for bad, message in [
        (dict(by="dino"), "rank by 'dino' is unknown"),
        (dict(on_uncertain="maybe"), "on_uncertain 'maybe'"),
        (dict(on_blend="merge"), "on_blend 'merge' is unknown"),
    ]:
        with pytest.raises(MascInputError, match=message):
            PassRules(**bad).rank(scores)
