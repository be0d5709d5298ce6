"""MaSC Sample Until without ComfyUI: the stand-in sampler (comfy_harness.StandInSampling) makes one picture per seed,
so seeds, early stop, the budget, the order of kept images, on_shortfall and flat memory are asserted exactly.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import warnings

import re

import numpy as np
import pytest
import torch

from comfy_harness import StandInModel, StandInVAE, ksampler, stand_in_sampling, text_conditioning
from conftest import box_mask, load_photo

PROMPT = "a photo of sks dog in the snow"
SUBJECT = "sks dog, dog"


def module(pack, name):
    return importlib.import_module(f"{pack.__name__}.{name}")


def float_image(name):
    return torch.from_numpy(load_photo(name).astype(np.float32) / 255.0)[None]


@pytest.fixture(scope="module")
def models(pack, comfy_dirs):
    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    encoder = nodes["MaSCLoadEncoder"]().load("google/siglip2-so400m-patch16-naflex", "cpu", "fp32", 1024)[0]
    segmenter = nodes["MaSCLoadAutoMaskModel"]().load("CIDAS/clipseg-rd64-refined", "cpu", "fp32")[0]
    return {"encoder": encoder, "segmenter": segmenter, "model": StandInModel(), "vae": StandInVAE()}


def inputs(models, **changes):
    """Sample Until's inputs: a 256x256 empty latent, the dog reference with a box mask, CP only by default."""
    values = dict(
        model=models["model"],
        positive=text_conditioning(PROMPT),
        negative=text_conditioning("blurry"),
        latent_image={"samples": torch.zeros(1, 4, 32, 32)},
        vae=models["vae"],
        seed=1000,
        steps=3,
        cfg=7.0,
        sampler_name="euler",
        scheduler="normal",
        denoise=1.0,
        encoder=models["encoder"],
        reference_image=float_image("dog_00"),
        reference_mask=torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None],
        prompt=PROMPT,
        subject=SUBJECT,
        accept=2,
        max_candidates=8,
        batch_size=1,
        rank_by="cp",
        cp_weight=1.0,
        pf_weight=1.0,
        min_cp=-1.0,
        min_pf=-1.0,
        reject_small_masks=False,
        min_foreground=0.05,
        on_shortfall="return best",
        mask_subject="dog",
        mask_threshold=0.4,
        segmenter=None,
        extra_pnginfo={},
        unique_id="7",
    )
    values.update(changes)
    return values


def run(pack, models, **changes):
    with stand_in_sampling(pack) as backend:
        out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"]().sample(**inputs(models, **changes))
    return out, backend


def plain_candidates(models, seeds, steps=3):
    """What a core KSampler (batch 1, seed s) + VAE Decode makes of each seed."""
    images = []
    for seed in seeds:
        latent = ksampler(
            None,
            models["model"],
            seed,
            steps,
            7.0,
            "euler",
            "normal",
            text_conditioning(PROMPT),
            text_conditioning("blurry"),
            {"samples": torch.zeros(1, 4, 32, 32)},
        )[0]
        images.append(models["vae"].decode(latent["samples"]))
    return torch.cat(images)


@pytest.fixture(scope="module")
def plain_cps(pack, models):
    """CP of the first 8 seeds' plain KSampler images, from MaSC Score (the reference the loop must agree with)."""
    images = plain_candidates(models, range(1000, 1008))
    score = pack.nodes.NODE_CLASS_MAPPINGS["MaSCConceptPreservation"]().score(
        models["encoder"],
        float_image("dog_00"),
        torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None],
        images,
        heatmaps=False,
    )
    cps = [s.cp for s in score["result"][1].scores]
    assert len(set(round(c, 6) for c in cps)) == 8  # every seed makes its own picture
    return images, cps


def threshold_passing(cps, wanted):
    """A min_cp that exactly the candidates in ``wanted`` clear (among the first len(cps))."""
    low = max(cps[i] for i in range(len(cps)) if i not in wanted)
    high = min(cps[i] for i in wanted)
    assert low < high, "the chosen candidates are not the best"
    return (low + high) / 2


def best_two_then_rest(cps):
    order = sorted(range(len(cps)), key=lambda i: -cps[i])
    return order


def test_stops_early_and_returns_the_kept_candidates_best_first_equal_to_plain_ksampler_runs(pack, models, plain_cps):
    images, cps = plain_cps
    first_two_passing = sorted(best_two_then_rest(cps)[:2])
    stop = max(first_two_passing)
    min_cp = threshold_passing(cps, set(first_two_passing))
    out, backend = run(pack, models, min_cp=min_cp)
    kept_images, latent, mask, scores, used, seeds, report = out["result"][:7]
    assert used == stop + 1 and backend.calls == [[1000 + i] for i in range(used)]  # stopped at the second pass
    best_first = sorted(first_two_passing, key=lambda i: -cps[i])
    assert seeds == ", ".join(str(1000 + i) for i in best_first)
    assert torch.equal(kept_images, images[best_first])  # candidate i is exactly KSampler(seed + i)
    assert latent["batch_index"] == best_first and latent["samples"].shape == (2, 4, 32, 32)
    assert [s.cp for s in scores.scores] == pytest.approx(cps[:used], abs=1e-6)
    assert scores.context.seeds == [1000 + i for i in range(used)] and scores.context.kept == best_first
    assert isinstance(mask, module(pack, "nodes.host").ExecutionBlocker)  # no segmenter: no masks to pass on
    assert report.splitlines()[0] == f"2 of 2 accepted after {used} of 8 candidates (stopped early)"
    assert "no segmenter connected: PF undefined, CP only" in report
    assert out["ui"]["text"] == [report]


def test_rounds_of_several_candidates_equal_separate_runs(pack, models, plain_cps):
    images, cps = plain_cps
    out, backend = run(
        pack, models, batch_size=3, accept=2, max_candidates=7, min_cp=1.0
    )  # unreachable: the whole budget
    kept_images, _, _, scores, used, seeds, _ = out["result"][:7]
    assert backend.calls == [[1000, 1001, 1002], [1003, 1004, 1005], [1006]]  # the budget cuts the last round
    assert used == 7 and [s.cp for s in scores.scores] == pytest.approx(cps[:7], abs=1e-6)
    best = sorted(range(7), key=lambda i: -cps[i])[:2]
    assert torch.equal(kept_images, images[best]) and seeds == ", ".join(str(1000 + i) for i in best)


def test_shortfall_returns_the_best_marked_below_threshold(pack, models, plain_cps):
    _, cps = plain_cps
    out, _ = run(pack, models, min_cp=1.0, max_candidates=4)
    _, _, _, scores, used, seeds, report = out["result"][:7]
    best = sorted(range(4), key=lambda i: -cps[i])[:2]
    assert used == 4 and seeds == ", ".join(str(1000 + i) for i in best)
    assert "shortfall: returning the best so far (below threshold)" in report.splitlines()[0]
    assert scores.context.verdicts[best[0]] == "kept below threshold: CP below 1"


def test_shortfall_can_block_downstream_and_still_reports(pack, models, plain_cps):
    blocker = module(pack, "nodes.host").ExecutionBlocker
    out, _ = run(pack, models, min_cp=1.0, max_candidates=4, on_shortfall="block")
    kept_images, latent, mask, scores, used, seeds, report = out["result"][:7]
    assert all(isinstance(v, blocker) and v.message is None for v in (kept_images, latent, mask))
    assert used == 4 and seeds == "" and len(scores.scores) == 4
    assert "shortfall: downstream nodes blocked" in report


def live_image_bytes() -> int:
    """Bytes of every live tensor storage shaped like decoded candidates (256x256 RGB)."""
    seen, total = set(), 0
    with warnings.catch_warnings():  # isinstance() on torch's deprecated aliases warns
        warnings.simplefilter("ignore")
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    for obj in tensors:
        if obj.ndim == 4 and tuple(obj.shape[1:]) == (256, 256, 3):
            storage = obj.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


def test_memory_stays_flat_in_max_candidates(pack, models, monkeypatch):
    """Peak live candidate pixels are the same for a budget of 3 and of 9; no earlier round outlives its scoring."""
    peaks = {}
    for budget in (3, 9):
        samples_seen = []
        loop_module = module(pack, "masc_core.selection.acceptance")
        original = loop_module.AcceptanceLoop.add_round

        def add_round(self, scores, take, *pruned, original=original, samples_seen=samples_seen):
            original(self, scores, take, *pruned)
            gc.collect()
            samples_seen.append(live_image_bytes())

        monkeypatch.setattr(loop_module.AcceptanceLoop, "add_round", add_round)
        gc.collect()
        before = live_image_bytes()  # what other tests' fixtures hold
        out, backend = run(pack, models, min_cp=1.0, max_candidates=budget, accept=2)
        assert out["result"][4] == budget and backend.alive_at_call == [0] * budget  # each round's tensors were freed
        peaks[budget] = max(samples_seen) - before
        monkeypatch.setattr(loop_module.AcceptanceLoop, "add_round", original)
        del out, backend
    one = 256 * 256 * 3 * 4
    assert peaks[3] == peaks[9] == (2 + 1) * one  # the accept=2 kept copies + the round being scored


def test_reference_and_prompt_are_encoded_once_per_run(pack, models, plain_cps):
    encoder = models["encoder"].core
    encoder.clear_cache()
    encoder.reset_forward_counts()
    out, _ = run(
        pack, models, rank_by="both", min_cp=1.0, max_candidates=5, batch_size=2, segmenter=models["segmenter"]
    )
    scores = out["result"][3]
    assert encoder.forward_counts == {"images": 5 + 1, "texts": 1}
    assert len(encoder.image_cache) == 1  # the candidates were not cached, the reference was
    assert all(s.pf is not None for s in scores.scores) and scores.scores[0].encoded_prompt == "a photo of in the snow"
    masks = out["result"][2]
    assert masks.shape == (2, 256, 256)


def recorded_bars(pack, monkeypatch) -> list:
    """Every CandidateProgress the node makes from now on (outside ComfyUI each keeps its updates)."""
    host = module(pack, "nodes.host")
    bars = []
    original = host.CandidateProgress.__init__

    def init(self, candidates, steps):
        original(self, candidates, steps)
        bars.append(self)

    monkeypatch.setattr(host.CandidateProgress, "__init__", init)
    return bars


def test_progress_counts_candidates_in_steps(pack, models, monkeypatch):
    bars = recorded_bars(pack, monkeypatch)
    run(pack, models, min_cp=1.0, max_candidates=3)
    (bar,) = bars
    assert bar.updates[0] == (1, 9) and bar.updates[-1] == (9, 9) and len(bar.updates) == 3 * 3 + 1
    assert [v for v, _ in bar.updates] == sorted(v for v, _ in bar.updates)


def test_scores_travel_in_the_png_and_feed_select_best_and_the_log(pack, models, plain_cps, tmp_path, capsys):
    from comfy_harness import save_image
    from masc_core.cli import main

    extra = {"workflow": {}}
    out, _ = run(pack, models, min_cp=1.0, max_candidates=4, extra_pnginfo=extra, unique_id="13")
    kept_images, _, _, scores, _, seeds, _ = out["result"][:7]
    entry = extra["masc"]["nodes"]["13"]
    assert entry["node"] == "MaSCSampleUntil" and [i["seed"] for i in entry["images"]] == [1000, 1001, 1002, 1003]
    assert entry["encoder"]["model"] == "google/siglip2-so400m-patch16-naflex" and len(entry["encoder"]["digest"]) == 12
    select = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSelectBest"]().select(
        scores, kept_images, "cp", 1.0, 1.0, 5, -1.0, -1.0, False, 0.05, extra_pnginfo=extra, unique_id="14"
    )["result"]
    assert torch.equal(select[0], kept_images)  # Sample Until's kept images with their own scores, best first already
    assert "top_k is 5 but the batch has 2 images: at most 2 selected" in select[5]
    assert [i["seed"] for i in extra["masc"]["nodes"]["14"]["images"]] == [int(s) for s in seeds.split(", ")]
    ctx = {
        "saved": {},
        "saved_files": {},
        "node_id": "9",
        "output_dir": str(tmp_path),
        "prompt": {},
        "extra_pnginfo": extra,
    }
    save_image(ctx, kept_images, "masc")
    best_seed = seeds.split(", ")[0]
    assert main(["read", ctx["saved_files"]["9"][0]]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith(f"  this image: #{int(best_seed) - 1000}  seed {best_seed}  CP ")
    assert printed[1].endswith("kept below threshold: CP below 1")
    assert printed[3].startswith("  this image: #0  seed") and printed[3].endswith(
        "selected"
    )  # Select Best's view of it
    log = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, "night.jsonl", "test")["result"]
    assert log[0] == "night.jsonl" and log[1].startswith(
        "appended 4 rows to\noutput/night.jsonl\n(run "
    )  # no server path
    rows = [json.loads(line) for line in open(os.path.join(os.environ["MASC_OUTPUT_DIR"], log[0]))]
    assert [r["seed"] for r in rows[-4:]] == [1000, 1001, 1002, 1003] and rows[-1]["method"] == "test"


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(accept=9), "accept is 9 but max_candidates is 8: the budget cannot yield that many"),
        (dict(batch_size=0), "batch_size is 0, outside the range this input takes: set it between 1 and 64"),
        (
            dict(max_candidates=10**6),
            "max_candidates is 1000000, outside the range this input takes: set it between 1 and 4096",
        ),
        (
            dict(latent_image={"samples": torch.zeros(4, 4, 32, 32)}),
            "latent_image has a batch of 4: MaSC Sample Until starts every candidate from one latent",
        ),
        (
            dict(reference_image=torch.cat([float_image("dog_00")] * 3), reference_mask=torch.ones(2, 64, 64)),
            "reference_mask has 2 masks for 3 images",
        ),
        (
            dict(reference_mask=torch.zeros(1, 64, 64)),
            "reference_mask is empty .* the empty 64x64 mask Load Image gives",
        ),
        (dict(rank_by="both"), "rank_by 'both' needs the candidates' masks, and no segmenter is connected"),
        (dict(min_pf=0.1), "min_pf needs the candidates' masks"),
    ],
)
def test_bad_input_is_refused_before_sampling_in_one_line(pack, models, changes, message):
    errors = module(pack, "masc_core.errors")
    with pytest.raises(errors.MascInputError, match=message) as error:
        with stand_in_sampling(pack) as backend:
            pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"]().sample(**inputs(models, **changes))
    assert "\n" not in str(error.value) and backend.calls == []


def test_outside_comfyui_without_a_sampler_says_so(pack, models):
    errors = module(pack, "masc_core.errors")
    with pytest.raises(errors.MascInputError, match="samples with ComfyUI's own sampler: run it inside ComfyUI"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"]().sample(**inputs(models))


def test_a_load_image_empty_mask_as_candidate_mask_gets_the_hint(pack, models):
    errors = module(pack, "masc_core.errors")
    with pytest.raises(errors.MascInputError, match="mask is empty .* the empty 64x64 mask Load Image gives"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCPromptFollowing"]().score(
            models["encoder"], float_image("dog_01"), torch.zeros(1, 64, 64), PROMPT, "dog"
        )
    # An empty mask of the image's own size is a segmenter finding no subject: scored, not refused.
    out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPromptFollowing"]().score(
        models["encoder"], float_image("dog_01"), torch.zeros(1, 512, 512), PROMPT, "dog", heatmaps=False
    )
    assert out["result"][2].scores[0].foreground_fraction == 0.0


def workflow_4(**sample_until):
    import os

    from comfy_harness import ROOT

    # Workflow 4 as shipped until 0.2.0 (KSampler-shaped): a saved workflow of MaSC Sample Until keeps running.
    with open(os.path.join(ROOT, "tests", "data", "saved_workflows", "4_rejection_sampling_0.2.0.api.json")) as handle:
        graph = json.load(handle)
    graph["5"]["inputs"].update(width=256, height=256)
    graph["10"]["inputs"].update(steps=1, **sample_until)
    return graph


@pytest.mark.parametrize("case", ["low threshold", "unreachable, block", "unreachable, return best"])
def test_workflow_4_in_one_queue_press(pack, comfy_dirs, tmp_path, capsys, case):
    """The host check, in the harness: early stop, blocking, and the scores read back from the saved PNGs."""
    from comfy_harness import run_graph
    from masc_core.cli import main

    blocker = module(pack, "nodes.host").ExecutionBlocker
    settings = {
        "low threshold": dict(min_cp=-0.9),
        "unreachable, block": dict(min_cp=0.999, on_shortfall="block", max_candidates=3),
        "unreachable, return best": dict(min_cp=0.999, max_candidates=3),
    }[case]
    with stand_in_sampling(pack) as backend:
        result = run_graph(
            workflow_4(**settings),
            pack.nodes.NODE_CLASS_MAPPINGS,
            comfy_dirs["input"],
            blocker,
            output_dir=str(tmp_path),
        )
    outputs = result["outputs"]["10"]
    used, report = outputs[4], outputs[6]
    logged = result["outputs"]["13"][0]
    assert not os.path.isabs(logged)  # relative to the output folder, where the log is
    log_rows = open(os.path.join(comfy_dirs["output"], logged)).read().splitlines()
    if case == "low threshold":
        assert used == 2 < 16 and backend.calls == [[1000], [1001]]
        assert report.splitlines()[0] == "2 of 2 accepted after 2 of 16 candidates (stopped early)"
    else:
        assert used == 3
    if case == "unreachable, block":
        assert "11" in result["blocked"] and "11" not in result["saved_files"]  # Save Image skipped, no error
        assert "12" not in result["blocked"] and "13" not in result["blocked"]  # the report and the log still run
        return
    paths = result["saved_files"]["11"]
    assert len(paths) == 2
    seeds = outputs[5].split(", ")
    for path, seed in zip(paths, seeds):
        assert main(["read", path]) == 0
        line = capsys.readouterr().out.splitlines()[1]
        assert line.startswith(f"  this image: #{int(seed) - 1000}  seed {seed}  CP ")
        assert line.endswith("accepted" if case == "low threshold" else "kept below threshold: CP below 0.999")
    assert json.loads(log_rows[-1])["seed"] == 1000 + used - 1


def test_without_png_metadata_from_comfyui_the_report_says_scores_are_not_saved(pack, models):
    out, _ = run(pack, models, max_candidates=2, extra_pnginfo=None)
    assert out["result"][6].endswith("scores are not saved in PNGs")


def test_the_node_shows_each_round_its_candidates_their_scores_and_the_pace_while_running(pack, models, monkeypatch):
    """On a CPU a candidate can take minutes: the run says so while it goes (the node's progress text) and in the
    report. The figures are measured, so only their form is held here."""
    host = module(pack, "nodes.host")
    shown, pictures = [], []
    sampling = module(pack, "nodes.host.sampling")  # the run's sampler shows each round's text on the node
    monkeypatch.setattr(sampling, "show_text", lambda node_id, text: shown.append((node_id, text)))
    monkeypatch.setattr(host.CandidateProgress, "show", lambda self, picture: pictures.append(picture))
    out, _ = run(pack, models, accept=1, max_candidates=3, min_cp=0.99, unique_id="12")  # nothing passes: 3 rounds
    report = out["result"][6]
    pace = r"time: \d+\.\d s per candidate \(\d+\.\d s for {count} candidates?\)"
    (line,) = [line for line in report.splitlines() if line.startswith("time: ")]
    assert re.fullmatch(pace.format(count=3), line), report
    assert [node_id for node_id, _ in shown] == ["12"] * 3
    candidates = out["result"][7]  # every candidate's thumbnail, float 0..1
    for done, (_, text) in enumerate(shown, start=1):
        first, *candidate_lines = text.split("\n")
        rest = r"; at most \d+ s more for the other {left}".format(left=3 - done) if done < 3 else ""
        assert re.fullmatch(pace.format(count=done) + rest, first), text
        # The round's candidate, with its scores and how it fared, as the report's line for it says.
        (shown_line,) = candidate_lines
        seed = 1000 + done - 1
        cp = re.search(rf"^\s*{done - 1}\s+{seed}\s+(\S+)", report, re.M).group(1)
        assert re.fullmatch(rf"#{done - 1} seed {seed}: CP {re.escape(cp)}, PF \S+: fails: CP below 0.99", shown_line)
        # ... and its picture on the node: the thumbnail the 'candidates' output holds for it.
        assert pictures[done - 1].dtype == np.uint8
        assert np.array_equal(pictures[done - 1], np.round(candidates[done - 1].numpy() * 255).astype(np.uint8))
    assert len(pictures) == 3
