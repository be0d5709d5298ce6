"""The sample-until loop's decisions (masc_core.selection.acceptance), on made-up scores: no model, no sampler."""

from __future__ import annotations

import gc
import weakref

import pytest

from masc_core.selection.acceptance import RETURN_BEST, AcceptanceLoop, RunRules, outcome_report
from masc_core.selection.ranking import PassRules
from masc_core.errors import MascInputError
from masc_core.metric.scores import ImageScore


class Payload:
    """Stands for a candidate's pixels and latent; weakly referenced to see what the loop still holds."""

    def __init__(self, seed):
        self.seed = seed


def flat_rules(seed, accept=1, max_candidates=16, batch_size=1, *, on_shortfall=RETURN_BEST, **passing):
    """The loop's rules from flat keywords (``by``, ``min_cp``, ... are ``PassRules``' fields)."""
    return RunRules(PassRules(**passing), accept, max_candidates, batch_size, on_shortfall, seed)


def run(rules: RunRules, cp_of, *, pf_of=None, fraction_of=None):
    """Drive the loop as the node does; returns (outcome, loop, rounds as seed lists, seeds whose payload was taken,
    live payloads per round)."""
    loop = AcceptanceLoop(rules)
    rounds, taken, live_after_round, refs = [], [], [], []
    while seeds := loop.next_seeds():
        rounds.append(seeds)
        scores = [
            ImageScore(
                index=j,
                cp=cp_of(s),
                pf=pf_of(s) if pf_of else None,
                foreground_fraction=fraction_of(s) if fraction_of else None,
            )
            for j, s in enumerate(seeds)
        ]
        payloads = [Payload(s) for s in seeds]
        refs += [weakref.ref(p) for p in payloads]

        def take(j, payloads=payloads):
            taken.append(payloads[j].seed)
            return payloads[j]

        loop.add_round(scores, take)
        del payloads, take
        gc.collect()
        live_after_round.append(sum(r() is not None for r in refs))
    return loop.outcome(), loop, rounds, taken, live_after_round


CPS = [0.10, 0.70, 0.20, 0.80, 0.90, 0.30, 0.95, 0.40]


def cp_table(seed0, values=CPS):
    return lambda seed: values[seed - seed0] if seed - seed0 < len(values) else 0.0


def test_stops_as_soon_as_accept_candidates_pass_and_returns_them_best_first():
    rules = flat_rules(seed=1000, accept=2, max_candidates=8, batch_size=1, by="cp", min_cp=0.5)
    outcome, loop, rounds, taken, _ = run(rules, cp_table(1000))
    assert rounds == [[1000], [1001], [1002], [1003]]
    assert outcome.used == 4 and outcome.stopped_early and not outcome.shortfall
    assert outcome.seeds == [1003, 1001] and [p.seed for _, p in outcome.kept] == [1003, 1001]
    assert [c.verdict for c in outcome.candidates] == [
        "rejected: CP below 0.5",
        "accepted",
        "rejected: CP below 0.5",
        "accepted",
    ]
    assert [c.output for c in outcome.candidates] == [None, 1, None, 0]
    # "return best": each of these was among the best 2 so far when sampled, so its payload was taken
    assert taken == [1000, 1001, 1002, 1003]


def test_a_round_is_scored_whole_and_the_best_passing_are_kept():
    rules = flat_rules(seed=0, accept=2, max_candidates=8, batch_size=3, by="cp", min_cp=0.5)
    outcome, _, rounds, _, _ = run(rules, cp_table(0))
    assert rounds == [[0, 1, 2], [3, 4, 5]]
    assert outcome.used == 6 and outcome.seeds == [4, 3]
    verdicts = {c.seed: c.verdict for c in outcome.candidates}
    assert verdicts[1] == "passed, not kept: better candidates filled accept"
    assert verdicts[3] == verdicts[4] == "accepted"


def test_the_last_round_is_cut_to_the_budget():
    rules = flat_rules(seed=7, accept=1, max_candidates=5, batch_size=2, by="cp", min_cp=0.99)
    outcome, _, rounds, _, _ = run(rules, lambda s: 0.1)
    assert rounds == [[7, 8], [9, 10], [11]] and outcome.used == 5 and not outcome.stopped_early


def test_shortfall_returns_the_best_so_far_marked_below_threshold():
    rules = flat_rules(seed=0, accept=2, max_candidates=8, batch_size=2, by="cp", min_cp=0.99)
    outcome, loop, _, _, live = run(rules, cp_table(0))
    assert outcome.shortfall and not outcome.blocked and outcome.used == 8
    assert outcome.seeds == [6, 4]  # CP 0.95, 0.90
    assert outcome.candidates[6].verdict == "kept below threshold: CP below 0.99"
    assert outcome.candidates[3].verdict == "rejected: CP below 0.99"
    assert max(live) <= 2 and loop.peak_retained == 2  # only what can still be returned is held


def test_shortfall_blocks_and_holds_only_passing_candidates():
    rules = flat_rules(seed=0, accept=3, max_candidates=8, batch_size=2, by="cp", min_cp=0.85, on_shortfall="block")
    outcome, loop, _, taken, live = run(rules, cp_table(0))
    assert outcome.blocked and outcome.kept == [] and outcome.seeds == []
    # "block": failing candidates can never be returned, so their payloads are never asked for
    assert sorted(taken) == [4, 6] and loop.peak_retained == 2 and loop.retained == 0
    assert outcome.candidates[4].verdict == "passed, blocked: only 2 of 3 passed"
    assert "shortfall: downstream nodes blocked" in outcome_report(outcome, rules)


def test_memory_is_flat_in_the_budget():
    """Live payloads after each round never exceed accept, whatever max_candidates is."""
    peaks = []
    for budget in (4, 64):
        rules = flat_rules(seed=0, accept=2, max_candidates=budget, batch_size=4, by="cp", min_cp=2.0)
        _, loop, rounds, _, live = run(rules, lambda s: (s * 37 % 101) / 101)
        assert len(rounds) == budget // 4
        peaks.append((max(live), loop.peak_retained))
    assert peaks[0] == peaks[1] == (2, 2)


def test_undefined_keys_rank_last_and_the_mask_filter_rejects():
    rules = flat_rules(
        seed=0, accept=2, max_candidates=3, batch_size=3, by="both", reject_small_masks=True, min_foreground=0.05
    )
    outcome, _, _, _, _ = run(
        rules,
        lambda s: [0.5, 0.9, 0.4][s],
        pf_of=lambda s: [0.1, None, 0.2][s],
        fraction_of=lambda s: [0.3, 0.3, 0.01][s],
    )
    by_seed = {c.seed: c for c in outcome.candidates}
    assert by_seed[1].key is None and not by_seed[1].passed and "PF undefined" in by_seed[1].reasons[0]
    assert "mask below the size filter" in by_seed[2].reasons[0]
    assert outcome.seeds == [0, 2]  # passing first; then the defined key before the undefined one


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(accept=5, max_candidates=3), "accept is 5 but max_candidates is 3"),
        (dict(batch_size=0), "batch_size is 0"),
        (dict(accept=0), "accept is 0"),
        # The library holds the budgets to the widgets' ranges itself: a value sent over a link reaches it unchecked.
        (
            dict(max_candidates=10**6, accept=1),
            "max_candidates is 1000000, outside the range this input takes: set it between 1 and 4096",
        ),
        (dict(batch_size=65), "batch_size is 65, outside the range"),
        (dict(accept=2.5), "accept is 2.5, not a whole number"),
        (dict(on_shortfall="retry"), "on_shortfall 'retry' is unknown"),
        (dict(by="sum"), "rank_by 'sum' is unknown"),
        (dict(seed=0xFFFFFFFFFFFFFFFF - 2, max_candidates=4), "seed 18446744073709551613 is outside"),
    ],
)
def test_rules_that_cannot_work_are_refused_in_one_line(changes, message):
    with pytest.raises(MascInputError, match=message) as error:
        AcceptanceLoop(flat_rules(**{"seed": 0, **changes}))
    assert "\n" not in str(error.value)


def test_the_report_lists_every_candidate_with_its_seed_scores_and_verdict():
    rules = flat_rules(seed=1000, accept=2, max_candidates=8, by="cp", min_cp=0.5)
    outcome, _, _, _, _ = run(rules, cp_table(1000))
    text = outcome_report(outcome, rules, "a photo of in the snow")
    lines = text.splitlines()
    assert lines[0] == "2 of 2 accepted after 4 of 8 candidates (stopped early)"
    assert lines[1].startswith("rank by cp; pass: CP >= 0.5; accept 2 of at most 8, 1 per round")
    assert lines[3].split()[:4] == ["0", "1000", "+0.1000", "n/a"] and lines[3].endswith("rejected: CP below 0.5")
    assert lines[6].split()[:3] == ["3", "1003", "+0.8000"] and lines[6].endswith("accepted")
    assert lines[7] == "kept, best first: #3 (seed 1003), #1 (seed 1001)"
    assert lines[8] == "PF text: 'a photo of in the snow'"


def test_add_round_wants_one_score_per_seed():
    loop = AcceptanceLoop(flat_rules(seed=0, batch_size=2))
    loop.next_seeds()
    with pytest.raises(ValueError):
        loop.add_round([ImageScore(index=0, cp=0.5)], lambda j: j)


def test_round_news_names_every_candidate_and_pictures_the_best_finished_one():
    """What a running Sample Until node shows after a round (masc_core.selection.sample_until.round_news)."""
    import numpy as np

    from masc_core.selection.acceptance import Candidate
    from masc_core.selection.sample_until import round_news

    def candidate(index, cp, key, passed, pruned=None, mask=0.3):
        score = ImageScore(index=index, cp=cp, pf=0.1, foreground_fraction=mask)
        return Candidate(index, 1000 + index, score, key, passed, [] if passed else ["CP below 0.6"], pruned=pruned)

    pictures = [np.full((2, 2, 3), value, np.uint8) for value in (10, 20, 30)]
    round_ = [
        candidate(4, 0.5, 0.5, False),
        candidate(5, None, None, False, pruned="pruned at step 6 of 20 (preview CP +0.1000)"),
        candidate(6, 0.7, 0.7, True, mask=None),
    ]
    news = round_news(round_, pictures, "time: 1.0 s per candidate (6.0 s for 6 candidates)")
    assert news.text.split("\n") == [
        "time: 1.0 s per candidate (6.0 s for 6 candidates)",
        "#4 seed 1004: CP +0.5000, PF +0.1000, mask 30.0%: fails: CP below 0.6",
        "#5 seed 1005: CP n/a, PF +0.1000, mask 30.0%: pruned at step 6 of 20 (preview CP +0.1000)",
        "#6 seed 1006: CP +0.7000, PF +0.1000: passes",
    ]
    assert news.picture is pictures[2]  # the best by the run's key among those that finished
    # Passing comes before a higher key that fails (a mask too small, say): the picture is the one the run keeps.
    mixed = [candidate(8, 0.9, 0.9, False), candidate(9, 0.65, 0.65, True)]
    assert round_news(mixed, pictures[:2], "time").picture is pictures[1]
    all_pruned = [candidate(7, None, None, False, pruned="pruned at step 6 of 20")]
    assert round_news(all_pruned, pictures[:1], "time").picture is None
