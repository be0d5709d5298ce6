"""MaSC Sample Until's pruning and study without ComfyUI: the stand-in sampler's previews are a known function of the
seed (comfy_harness.StandInSampling.preview), so who is pruned, who finishes, the ledger and the budget are exact."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
import torch

from comfy_harness import StandInSampling, text_conditioning
from conftest import box_mask
from test_sample_until import PROMPT, float_image, models, plain_candidates, recorded_bars, run  # noqa: F401 (models: a fixture)

STEPS = 4


def preview_cps(pack, models, seeds, step, steps=STEPS):
    """CP of each seed's stand-in preview at ``step`` of ``steps``: what the loop must prune on."""
    backend = StandInSampling()
    latent = {"samples": torch.zeros(1, 4, 32, 32)}
    previews = torch.cat(
        [
            backend.preview(
                models["model"],
                s,
                latent,
                step,
                steps,
                text_conditioning(PROMPT),
                text_conditioning("blurry"),
                7.0,
                1.0,
            )
            for s in seeds
        ]
    )
    images = models["vae"].decode(previews)
    out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCConceptPreservation"]().score(
        models["encoder"],
        float_image("dog_00"),
        torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None],
        images,
        heatmaps=False,
    )
    return [s.cp for s in out["result"][1].scores]


def test_pruning_finishes_the_best_previews_of_each_round_with_an_exact_ledger(pack, models, monkeypatch):
    bars = recorded_bars(pack, monkeypatch)
    out, backend = run(
        pack, models, steps=STEPS, batch_size=4, max_candidates=8, accept=2, min_cp=1.0, prune_at=0.5, prune_keep=1
    )
    images, latent, _, scores, used, seeds, report, candidates = out["result"]
    assert used == 8 and [c["stops"] for c in backend.phase_calls] == [[2], [2]]
    cps = preview_cps(pack, models, range(1000, 1008), step=2)
    expected = [max(range(0, 4), key=lambda i: cps[i]), max(range(4, 8), key=lambda i: cps[i])]
    finished = [i for i, s in enumerate(scores.scores) if s.cp is not None]
    assert finished == expected
    for i, score in enumerate(scores.scores):
        assert score.previews[0]["step"] == 2 and score.previews[0]["cp"] == pytest.approx(cps[i], abs=1e-6)
        if i not in expected:
            assert scores.context.verdicts[i].startswith("pruned at step 2 of 4 (preview cp ")
            assert score.cp_undefined == scores.context.verdicts[i]
    # the survivors are exactly what a plain KSampler makes at their seeds (shortfall: min_cp 1 never passes)
    plain = plain_candidates(models, [1000 + i for i in expected], steps=STEPS)
    order = [int(s) - 1000 for s in seeds.split(", ")]
    assert sorted(order) == expected
    for position, candidate in enumerate(order):
        assert torch.equal(images[position], plain[expected.index(candidate)])
    # ledger: every candidate spent 2 steps, the 2 survivors 2 more; in full 8 x 4
    assert scores.context.ledger == {
        "steps": 4,
        "spent": 20,
        "in_full": 32,
        "pruned": 6,
        "candidates": 8,
        "replayed": 0,
        "per_candidate": [4 if i in expected else 2 for i in range(8)],
    }
    assert "20 of 32 model evaluations, 1.6x fewer (6 of 8 candidates pruned)" in report
    assert candidates.shape[0] == 8  # pruned ones show their last preview on the contact sheet
    values = [value for value, _ in bars[0].updates]
    assert values == sorted(values) and values[-1] == 8 * STEPS  # the bar never moves back, and ends full
    assert (
        values[:10] == list(range(1, 11)) and values[10] == 4 * STEPS + 1
    )  # round 1 sampled 10 steps, round 2 starts at 16


@pytest.mark.parametrize("sampler_name", ["dpmpp_2m", "euler_ancestral", "uni_pc"])
def test_a_sampler_that_cannot_resume_replays_its_survivors_and_the_ledger_says_so(
    pack, models, monkeypatch, sampler_name
):
    """Multistep and noise-drawing samplers: the judged candidates stop at step 2, the survivors are sampled again
    from step 0 (so they are the plain KSampler's images), and the ledger counts the replayed steps."""
    bars = recorded_bars(pack, monkeypatch)
    out, backend = run(
        pack,
        models,
        steps=STEPS,
        batch_size=4,
        max_candidates=8,
        accept=2,
        min_cp=1.0,
        prune_at=0.5,
        prune_keep=1,
        sampler_name=sampler_name,
    )
    images, _, _, scores, used, seeds, report, _ = out["result"]
    cps = preview_cps(pack, models, range(1000, 1008), step=2)
    expected = [max(range(0, 4), key=lambda i: cps[i]), max(range(4, 8), key=lambda i: cps[i])]
    assert [i for i, s in enumerate(scores.scores) if s.cp is not None] == expected
    order = [int(s) - 1000 for s in seeds.split(", ")]
    plain = plain_candidates(models, [1000 + i for i in expected], steps=STEPS)
    for position, candidate in enumerate(order):
        assert torch.equal(images[position], plain[expected.index(candidate)])
    # 8 candidates x 2 judged steps, then each survivor's 4 steps from the start: 2 of them replayed
    assert scores.context.ledger == {
        "steps": 4,
        "spent": 24,
        "in_full": 32,
        "pruned": 6,
        "candidates": 8,
        "replayed": 4,
        "per_candidate": [6 if i in expected else 2 for i in range(8)],
    }
    assert "24 of 32 model evaluations, 1.3x fewer (6 of 8 candidates pruned; 4 evaluations replayed)" in report
    assert f"{sampler_name} is a multistep sampler" in report or f"{sampler_name} draws noise while sampling" in report
    assert "each survivor was sampled again from step 0" in report
    values = [value for value, _ in bars[0].updates]
    assert values == sorted(values) and values[-1] == 8 * STEPS


def test_a_study_with_a_replayed_sampler_samples_each_candidate_once(pack, models):
    out, backend = run(
        pack,
        models,
        steps=10,
        batch_size=2,
        max_candidates=2,
        accept=2,
        min_cp=-1.0,
        prune_study=True,
        sampler_name="dpmpp_2m",
    )
    scores = out["result"][3]
    assert [c["prunes"] for c in backend.phase_calls] == [False]
    assert all([p["step"] for p in s.previews] == [2, 3, 4, 5, 6] for s in scores.scores)
    assert (
        scores.context.ledger["spent"] == scores.context.ledger["in_full"] == 20
        and scores.context.ledger["replayed"] == 0
    )


def test_a_study_prunes_nothing_and_records_every_preview(pack, models):
    out, backend = run(pack, models, steps=10, batch_size=2, max_candidates=2, accept=2, min_cp=-1.0, prune_study=True)
    scores, report = out["result"][3], out["result"][6]
    assert [c["stops"] for c in backend.phase_calls] == [[2, 3, 4, 5, 6]]
    for score in scores.scores:
        assert score.cp is not None and [p["step"] for p in score.previews] == [2, 3, 4, 5, 6]
    assert scores.context.ledger["spent"] == scores.context.ledger["in_full"] == 20
    assert "none pruned: 20 of 20 model evaluations (0 of 2 candidates pruned)" in report


def test_pruning_off_samples_as_before(pack, models):
    out, backend = run(
        pack, models, steps=STEPS, batch_size=2, max_candidates=4, accept=2, min_cp=1.0, prune_at=0.0, prune_keep=1
    )
    assert backend.phase_calls == [] and out["result"][3].context.ledger is None
    assert all(s.previews is None for s in out["result"][3].scores)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"prune_at": 0.5, "prune_keep": 3, "batch_size": 2}, "prune_keep is 3 but a round has batch_size 2"),
        ({"prune_at": 0.5, "prune_keep": 2, "batch_size": 2}, "nothing would be pruned"),
        (
            {"prune_at": 0.5, "prune_keep": 1, "batch_size": 2, "sampler_name": "dpm_adaptive"},
            "cannot be stopped at a step",
        ),
        ({"prune_at": 0.5, "prune_keep": 1, "batch_size": 2, "steps": 1}, "at least 2 steps"),
        (
            {
                "prune_at": 0.5,
                "prune_keep": 1,
                "batch_size": 2,
                "latent_image": {"samples": torch.zeros(1, 4, 32, 32), "noise_mask": torch.ones(1, 32, 32)},
            },
            "noise_mask",
        ),
    ],
)
def test_pruning_that_cannot_work_is_one_line(pack, models, changes, message):
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    with pytest.raises(errors.MascInputError, match=message) as refused:
        run(pack, models, **changes)
    assert "\n" not in str(refused.value)


def test_prune_at_out_of_range_is_refused_by_the_node(pack, models):
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    for value in (1.0, -0.1, float("nan")):
        with pytest.raises(errors.MascInputError, match="prune_at"):
            run(pack, models, prune_at=value, prune_keep=1, batch_size=2)


def test_prune_report_reads_a_study_logged_by_log_scores(pack, models, comfy_dirs):
    stats = pytest.importorskip("scipy.stats")
    out, _ = run(pack, models, steps=10, batch_size=4, max_candidates=8, accept=8, min_cp=-1.0, prune_study=True)
    scores = out["result"][3]
    logged = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, "study.jsonl", "")
    score_log = importlib.import_module(pack.__name__ + ".masc_core.evaluation.score_log")
    study = importlib.import_module(pack.__name__ + ".masc_core.evaluation.prune_study")
    rows = score_log.read_log(f"{comfy_dirs['output']}/{logged['result'][0]}")
    rows = [r for r in rows if r["run"] == rows[-1]["run"]]
    assert [r["evaluations"] for r in rows] == [10] * 8 and all(len(r["previews"]) == 5 for r in rows)
    report = study.prune_report(rows, keep=2, best=1, bootstrap=100)
    assert (
        report["rounds"] == 2 and report["candidates"] == 8 and [s["step"] for s in report["steps"]] == [2, 3, 4, 5, 6]
    )
    for entry in report["steps"]:
        preview = [next(p["cp"] for p in r["previews"] if p["step"] == entry["step"]) for r in rows]
        final = [r["cp"] for r in rows]
        assert entry["rho_cp"]["rho"] == pytest.approx(stats.spearmanr(preview, final).statistic, abs=1e-12)
        hits = 0
        for members in (range(0, 4), range(4, 8)):  # by hand: does the best final CP have a top-2 preview?
            best = max(members, key=lambda i: final[i])
            hits += best in sorted(members, key=lambda i: -preview[i])[:2]
        assert entry["kept_best"]["hits"] == hits and entry["kept_best"]["rounds"] == 2
    # The stand-in's previews converge on the final latent: later steps predict no worse.
    assert report["steps"][-1]["rho_cp"]["rho"] >= report["steps"][0]["rho_cp"]["rho"]
    text = study.prune_report_text(report)
    assert "2 of 4 kept the final best 1 in" in text


def test_prune_report_without_previews_is_one_line(tmp_path):
    from masc_core.errors import MascInputError
    from masc_core.evaluation.prune_study import prune_report

    with pytest.raises(MascInputError, match="no candidates with previews"):
        prune_report([{"run": "r", "cp": 0.5, "previews": None}])
    with pytest.raises(MascInputError, match="--best 3 is more than --keep 2"):
        prune_report([], keep=2, best=3)


def test_the_png_entry_carries_previews_and_the_ledger_and_read_accepts_it(pack, models):
    import json

    saved = importlib.import_module(pack.__name__ + ".masc_core.metric.saved_scores")
    extra = {"workflow": {}}
    out, _ = run(
        pack,
        models,
        steps=STEPS,
        batch_size=4,
        max_candidates=4,
        accept=1,
        min_cp=1.0,
        prune_at=0.5,
        prune_keep=1,
        extra_pnginfo=extra,
        unique_id="10",
    )
    entry = saved.parse_entry(json.dumps(extra["masc"]))  # what read takes from a PNG, strictly checked
    node = entry["nodes"]["10"]
    assert node["ledger"] == {"steps": 4, "spent": 10, "in_full": 16, "pruned": 3, "candidates": 4, "replayed": 0}
    assert all(image["previews"][0]["step"] == 2 for image in node["images"])
    reader = importlib.import_module(pack.__name__ + ".masc_core.metric.saved_png")
    text = reader.describe("x.png", entry, digest="none", every=True)
    assert "10 of 16 model evaluations (3 pruned)" in text
    crafted = json.loads(json.dumps(extra["masc"]))
    crafted["nodes"]["10"]["images"][0]["previews"][0]["step"] = "two"
    with pytest.raises(Exception, match="previews"):
        saved.parse_entry(json.dumps(crafted))


def test_the_phase_plan_resumes_or_replays_by_sampler():
    from masc_core.selection.pruning import phase_plan

    resumed = phase_plan([2, 12], 10, "euler", prunes=True)  # 12 is past the schedule: dropped
    assert (resumed.ends, resumed.judged_at(2), resumed.judged_at(10), resumed.first_step(2)) == ([2, 10], [2], [], 2)
    replayed = phase_plan([3], 10, "dpmpp_2m", prunes=True)
    assert (replayed.ends, replayed.judged_at(3), replayed.judged_at(10), replayed.first_step(3)) == (
        [3, 10],
        [3],
        [],
        0,
    )
    study = phase_plan([2, 3, 4], 10, "euler_ancestral", prunes=False)
    assert (study.ends, study.judged_at(10), study.first_step(0)) == ([10], [2, 3, 4], 0)
    assert phase_plan([2, 3], 10, "heun", prunes=False).ends == [2, 3, 10]


def test_a_sam3_segmenter_stops_early_and_prunes_as_clipseg_does(pack, models, comfy_dirs):
    """The segmenter is an input like any other: with SAM3's, PF is defined, pruning keeps one per round, the ledger
    is exact, and the masks are SAM3's of the kept images."""
    from masc_core.models.sam3 import Sam3Segmenter

    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    sam3 = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadSAM3Model"]().load("tiny-sam3", "cpu", "fp32", 0.5)[0]
    out, backend = run(
        pack,
        models,
        steps=STEPS,
        batch_size=4,
        max_candidates=8,
        accept=1,
        min_cp=-1.0,
        rank_by="both",
        prune_at=0.5,
        prune_keep=1,
        segmenter=sam3,
    )
    images, latent, masks, scores, used, seeds, report, candidates = out["result"]
    assert used == 4  # the first round's survivor passes (thresholds off): an early stop after one round
    finished = [s for s in scores.scores if s.cp is not None]
    assert len(finished) == 1 and finished[0].pf is not None
    assert scores.context.ledger["spent"] == 4 * 2 + 2 and scores.context.ledger["pruned"] == 3
    direct = Sam3Segmenter.load(sam3.core.info.folder, device="cpu")
    assert torch.equal(masks[0], direct.masks(images[0:1], "dog", threshold=0.4)[0])  # mask_threshold 0.4 (inputs())


@pytest.mark.parametrize(
    "sampler, spent, per_survivor, replayed",
    [("euler", 23, 10, 0), ("dpmpp_2m", 30, 14, 4)],  # euler resumes at each split; dpmpp_2m replays from step 0
)
def test_two_judged_steps_keep_4_of_8_then_1_and_the_survivor_is_exact(
    pack, models, sampler, spent, per_survivor, replayed
):
    """MaSC Prune chained: keep 4 of 8 at 10% of 10 steps, then 1 at 30%; at least 3x fewer model evaluations."""
    from test_sample_until_custom import make_prune, run_custom

    first = make_prune(pack, prune_at=0.1, prune_keep=4)
    both = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPrune"]().prune(0.3, 1, False, prune=first)[0]
    settings = dict(steps=10, sampler=sampler, batch_size=8, max_candidates=8, min_cp=1.0)
    out, backend = run_custom(pack, models, prune=both, accept=1, **settings)
    images, _, _, scores, used, seeds, report, _ = out["result"]
    assert used == 8 and [c["stops"] for c in backend.phase_calls] == [[1, 3]]
    at_1 = preview_cps(pack, models, range(1000, 1008), step=1, steps=10)
    kept_at_1 = sorted(sorted(range(8), key=lambda i: (-at_1[i], i))[:4])
    at_3 = preview_cps(pack, models, [1000 + i for i in kept_at_1], step=3, steps=10)
    survivor = kept_at_1[max(range(4), key=lambda p: (at_3[p], -p))]
    assert [i for i, s in enumerate(scores.scores) if s.cp is not None] == [survivor] and seeds == str(1000 + survivor)
    for i, verdict in enumerate(scores.context.verdicts):
        if i not in kept_at_1:
            assert verdict.startswith("pruned at step 1 of 10 (preview cp ")
        elif i != survivor:
            assert verdict.startswith("pruned at step 3 of 10 (preview cp ")
    # The survivor is the image the twin makes at its seed without pruning.
    full, _ = run_custom(pack, models, accept=8, **settings)
    full_seeds = [int(s) for s in full["result"][5].split(", ")]
    assert torch.equal(images[0], full["result"][0][full_seeds.index(1000 + survivor)])
    ledger = scores.context.ledger
    assert (ledger["spent"], ledger["in_full"], ledger["pruned"], ledger["replayed"]) == (spent, 80, 7, replayed)
    assert ledger["per_candidate"][survivor] == per_survivor and 80 / spent >= 2.6
    assert "pruning at step 1 of 10, 4 of each round of 8 go on; at step 3, 1 goes on" in report
    assert f"{spent} of 80 model evaluations, {80 / spent:.1f}x fewer (7 of 8 candidates pruned" in report


@pytest.mark.parametrize(
    "later, message",
    [
        ((0.1, 1), "a later judged step at 0.1 must come after the one before (0.1)"),
        ((0.3, 4), "the judged step at 0.3 keeps 4, but 4 go on from the one before: a later step keeps 1 to 3"),
        ((0.14, 1), "judged steps at 0.1 and 0.14 of 10 steps both fall on step 1"),
    ],
)
def test_judged_steps_that_cannot_work_are_one_line_before_sampling(pack, models, later, message):
    from test_sample_until_custom import make_prune, run_custom

    first = make_prune(pack, prune_at=0.1, prune_keep=4)
    chained = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPrune"]().prune(later[0], later[1], False, prune=first)[0]
    with pytest.raises(
        importlib.import_module(pack.__name__ + ".masc_core.errors").MascInputError, match=re.escape(message)
    ):
        run_custom(pack, models, prune=chained, steps=10, batch_size=8, max_candidates=8, accept=1, min_cp=1.0)
    study = make_prune(pack, prune_study=True)
    with pytest.raises(Exception, match="prune_study judges every candidate and prunes none"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCPrune"]().prune(0.3, 1, False, prune=study)


def test_the_pruning_benchmarks_several_step_row_is_the_twin_with_chained_prunes(pack, comfy_dirs, tmp_path):
    """``python -m benchmarks pruning``'s third row: saved workflow 4's MaSC Sample Until turned into its custom twin
    with one MaSC Prune per judged step; run here on the stand-ins, its ledger is the chained prunes' (keep 4 of 8
    at step 1 of 10, then 1 at step 3: 23 of 80 model evaluations with euler)."""
    import argparse
    from importlib import import_module

    from benchmarks.pruning import as_twin, graph, judged_steps
    from comfy_harness import run_graph, stand_in_sampling

    args = argparse.Namespace(
        ckpt="v1-5-pruned-emaonly-fp16.safetensors", side=256, encoder=None, segmenter=None, steps=10, candidates=8,
        seed=5000, prune_keep=4, sampler="euler",
    )  # fmt: skip
    prompt = as_twin(graph(args, 0.0), judged_steps("0.1:4,0.3:1"))
    (twin,) = [i for i, n in prompt.items() if n["class_type"] == "MaSCSampleUntilCustom"]
    assert prompt["twin_prune_1"]["inputs"]["prune"] == ["twin_prune_0", 0]
    blocker = import_module(pack.__name__ + ".nodes.host").ExecutionBlocker
    with stand_in_sampling(pack):
        result = run_graph(prompt, pack.nodes.NODE_CLASS_MAPPINGS, comfy_dirs["input"], blocker, str(tmp_path))
    report = result["outputs"][twin][6]
    assert "23 of 80 model evaluations, 3.5x fewer (7 of 8 candidates pruned" in report, report
    with pytest.raises(argparse.ArgumentTypeError):
        judged_steps("0.1-4")
