"""MaSC Sample Until in a real ComfyUI, on the shipped workflow 4 made small (256x256, one step, few candidates):

- a low threshold stops before the budget (``candidates_used`` < ``max_candidates``); the kept PNGs hold the
  scores, ``python -m masc_core read`` prints them, and they agree with the score log;
- a plain KSampler at a kept candidate's seed (``seed + i``, batch 1) gives the same pixels;
- an unreachable threshold blocks the nodes downstream without failing the prompt, or returns the best
  candidates marked below threshold (``on_shortfall``);
- an API prompt without ``extra_data``: the report says the scores are not saved, and the PNG has none;
- two subjects (two chained MaSC Subject nodes in place of the reference inputs): the run stops at the first
  candidate whose weakest subject passes, each subject's CP in the log and in the saved PNG.
(Workflow 3's PNG holding MaSC Score's and Select Best's entries, and workflow 4 queued from the page with
one press, are checked for every workflow in test_workflows.py and test_frontend.py.)
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import ENCODER_NAME, ROOT, pack_mappings, read_scores, this_image, write_json
from .graphs import ancestors, for_cpu, load, node, of_type

WORKFLOW = os.path.join(ROOT, "tests", "data", "saved_workflows", "4_rejection_sampling_0.2.0.api.json")
"""Workflow 4 as shipped until 0.2.0 (MaSC Sample Until, KSampler-shaped): a saved workflow keeps running and giving the
same pixels."""
NODE = "MaSCSampleUntil"
SEED = 1000
EVERY_CANDIDATE_PASSES = dict(min_cp=-0.9, reject_small_masks=False, rank_by="cp")
NONE_PASSES = dict(min_cp=0.999, accept=2, max_candidates=2)
SAMPLER_INPUTS = (
    "model",
    "positive",
    "negative",
    "latent_image",
    "seed",
    "steps",
    "cfg",
    "sampler_name",
    "scheduler",
    "denoise",
)


def _output(name: str) -> int:
    return list(pack_mappings().nodes.NODE_CLASS_MAPPINGS[NODE].RETURN_NAMES).index(name)


class Run:
    """Workflow 4 with some of Sample Until's inputs changed, run once; what it showed and saved."""

    def __init__(self, server, sd15, output_dir, extra_data=hostapi.FROM_FRONT_END, edit=None, **settings):
        graph = for_cpu(load(WORKFLOW), sd15=sd15)
        (self.node,) = of_type(graph, NODE)
        if edit is not None:
            edit(graph, self.node)
        graph[self.node]["inputs"].update(seed=SEED, **settings)
        (self.save,) = [i for i in of_type(graph, "SaveImage") if self.node in ancestors(graph, i)]
        (self.log,) = of_type(graph, "MaSCLogScores")
        top = max(int(i) for i in graph)
        self.used_id, self.seeds_id = str(top + 1), str(top + 2)  # show two of its outputs as text
        graph[self.used_id] = node("PreviewAny", source=[self.node, _output("candidates_used")])
        graph[self.seeds_id] = node("PreviewAny", source=[self.node, _output("seeds")])
        self.graph, self.inputs = graph, graph[self.node]["inputs"]
        self.entry = server.run(graph, extra_data=extra_data)
        self.report = hostapi.ui_text(self.entry, self.node)
        self.pngs = hostapi.saved_images(self.entry, self.save, output_dir)

    @property
    def used(self) -> int:
        return int(hostapi.ui_text(self.entry, self.used_id))

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in hostapi.ui_text(self.entry, self.seeds_id).split(", ") if s]

    def check_succeeded(self) -> None:
        assert hostapi.status(self.entry) == "success", hostapi.explain(self.entry)
        assert self.report, "Sample Until showed no report"


@pytest.fixture(scope="module")
def low_threshold(server, sd15, installed, out_dir) -> Run:
    """Every candidate passes: accept 2 of a budget of 16."""
    run = Run(server, sd15, installed["output"], accept=2, max_candidates=16, **EVERY_CANDIDATE_PASSES)
    write_json(os.path.join(out_dir, "history-sample-until-low-threshold.json"), run.entry)
    return run


def _log_rows(installed, run: Run) -> list[dict]:
    """The rows this run appended to the score log (the log's report names its file and run)."""
    text = hostapi.ui_text(run.entry, run.log)
    match = re.fullmatch(r"appended (\d+) rows to\noutput/(.+)\n\(run (\S+)\)", text.strip())
    assert match, text  # relative to the output folder: the server's own path is never shown
    assert not os.path.isabs(match.group(2)) and installed["output"] not in text, text
    path = os.path.join(installed["output"], match.group(2))
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    mine = [row for row in rows if row["run"] == match.group(3)]
    assert len(mine) == int(match.group(1))
    return mine


def test_a_low_threshold_stops_before_the_budget(low_threshold, installed):
    run = low_threshold
    run.check_succeeded()
    assert run.report.splitlines()[0] == "2 of 2 accepted after 2 of 16 candidates (stopped early)", run.report
    assert run.used == 2 < run.inputs["max_candidates"]
    assert sorted(run.seeds) == [SEED, SEED + 1]
    assert [row["seed"] for row in _log_rows(installed, run)] == [SEED, SEED + 1]
    assert len(run.pngs) == 2


def test_the_kept_pngs_hold_the_scores_and_read_prints_them(low_threshold, installed):
    run = low_threshold
    cp_logged = {row["seed"]: row["cp"] for row in _log_rows(installed, run)}
    for index, path in enumerate(run.pngs):
        read = read_scores(path)
        assert read.returncode == 0, read.stderr
        ((image, source),) = this_image(read.stdout)
        band = r"(?: \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\])?"  # the mask-sensitivity band, which Sample Until computes
        match = re.fullmatch(
            rf"this image: #(\d+)  seed (\d+)  CP ([+-]\d\.\d{{4}}){band}  PF \S+{band}  mask +\S+  accepted", image
        )
        assert match, read.stdout
        candidate, seed, cp = int(match.group(1)), int(match.group(2)), float(match.group(3))
        assert seed == SEED + candidate == run.seeds[index], read.stdout  # saved best first, as the seeds output says
        assert abs(cp - cp_logged[seed]) <= 5e-5, (cp, cp_logged)
        assert re.match(rf"from {NODE} \(node {run.node}\): {ENCODER_NAME} \([0-9a-f]{{12}}\), metric ", source), source


def _plain_ksampler(run: Run, seed: int) -> dict:
    """The graph upstream of Sample Until's sampler inputs, then KSampler (batch 1), VAE Decode and Save Image."""
    graph = {}
    for name in SAMPLER_INPUTS:
        value = run.inputs[name]
        if isinstance(value, list):
            for needed in ancestors(run.graph, value[0]) | {value[0]}:
                graph[needed] = run.graph[needed]
    top = max(int(i) for i in run.graph)
    sampler, decode = str(top + 10), str(top + 11)
    graph[sampler] = node(
        "KSampler", **{name: run.inputs[name] for name in SAMPLER_INPUTS if name != "seed"}, seed=seed
    )
    graph[decode] = node("VAEDecode", samples=[sampler, 0], vae=run.inputs["vae"])
    graph[str(top + 12)] = node("SaveImage", images=[decode, 0], filename_prefix=f"masc_plain_ksampler_{seed}")
    return graph


def check_plain_ksampler_pixels(server, run: Run, seed: int, path: str, output_dir: str) -> None:
    """The saved candidate at ``path`` has the pixels a plain KSampler (batch 1) + VAE Decode gives at ``seed``."""
    graph = _plain_ksampler(run, seed)
    entry = server.run(graph)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    (plain,) = hostapi.saved_images(entry, max(graph, key=int), output_dir)
    candidate, reference = np.asarray(Image.open(path).convert("RGB")), np.asarray(Image.open(plain).convert("RGB"))
    assert candidate.shape == reference.shape and np.array_equal(candidate, reference), (
        f"{int((candidate != reference).any(-1).sum())} pixels differ from KSampler at seed {seed}"
    )


def test_a_plain_ksampler_at_a_kept_seed_gives_the_same_pixels(low_threshold, server, installed):
    run = low_threshold
    seed = SEED + 1  # the second candidate: seed + i, not just the seed
    (path,) = [p for p, s in zip(run.pngs, run.seeds) if s == seed]
    check_plain_ksampler_pixels(server, run, seed, path, installed["output"])


def test_an_unreachable_threshold_blocks_downstream_without_failing_the_prompt(server, sd15, installed):
    run = Run(server, sd15, installed["output"], on_shortfall="block", **NONE_PASSES)
    run.check_succeeded()
    assert run.report.splitlines()[0] == "0 of 2 accepted after 2 of 2 candidates; shortfall: downstream nodes blocked"
    assert run.used == 2 and run.seeds == [] and run.pngs == []
    assert len(_log_rows(installed, run)) == 2  # the report and the log still run


def test_an_unreachable_threshold_returns_the_best_marked_below_threshold(server, sd15, installed):
    run = Run(server, sd15, installed["output"], on_shortfall="return best", **NONE_PASSES)
    run.check_succeeded()
    first = "0 of 2 accepted after 2 of 2 candidates; shortfall: returning the best so far (below threshold)"
    assert run.report.splitlines()[0] == first
    assert len(run.pngs) == 2 and sorted(run.seeds) == [SEED, SEED + 1]
    for path in run.pngs:
        read = read_scores(path)
        assert read.returncode == 0, read.stderr
        ((image, _),) = this_image(read.stdout)
        assert image.endswith("kept below threshold: CP below 0.999"), read.stdout


def test_an_api_prompt_without_extra_data_says_scores_are_not_saved(server, sd15, installed):
    run = Run(server, sd15, installed["output"], extra_data=None, accept=1, **EVERY_CANDIDATE_PASSES)
    run.check_succeeded()
    assert run.report.splitlines()[0] == "1 of 1 accepted after 1 of 2 candidates (stopped early)", run.report
    assert run.report.endswith("scores are not saved in PNGs"), run.report
    (path,) = run.pngs
    read = read_scores(path)
    assert read.returncode == 2 and "has no MaSC scores (no 'masc' text chunk)" in read.stderr, (
        read.stdout,
        read.stderr,
    )


def _two_subjects(graph: dict, sample_until: str) -> None:
    """Workflow 4's dog as one MaSC Subject and the shipped cat photo as a second, chained into 'subjects'."""
    inputs = graph[sample_until]["inputs"]
    (segmenter,) = of_type(graph, "MaSCLoadAutoMaskModel")
    top = max(int(i) for i in graph)
    cat, cat_mask, dog_subject, cat_subject = (str(top + k) for k in (1, 2, 3, 4))
    graph[cat] = node("LoadImage", image="masc_example_cat_00.jpg")
    graph[cat_mask] = node(
        "MaSCAutoMask", subject="cat", threshold=0.4, dilation=0, segmenter=[segmenter, 0], images=[cat, 0]
    )
    graph[dog_subject] = node(
        "MaSCSubject",
        names="sks dog, dog",
        reference_image=inputs.pop("reference_image"),
        reference_mask=inputs.pop("reference_mask"),
    )
    graph[cat_subject] = node(
        "MaSCSubject", names="cat", reference_image=[cat, 0], reference_mask=[cat_mask, 0], subjects=[dog_subject, 0]
    )
    inputs.update(subjects=[cat_subject, 0], subject="", mask_subject="", rank_by="cp", reject_small_masks=False)
    graph[of_type(graph, "PrimitiveStringMultiline")[0]]["inputs"]["value"] = "a photo of sks dog and a cat in the snow"


@pytest.fixture(scope="module")
def two_subjects_budget(server, sd15, installed, out_dir) -> Run:
    """Two subjects, nothing passes: every candidate of a budget of 4 is scored for both."""
    run = Run(server, sd15, installed["output"], edit=_two_subjects, min_cp=0.999, accept=1, max_candidates=4)
    write_json(os.path.join(out_dir, "history-sample-until-two-subjects.json"), run.entry)
    return run


def test_two_subjects_stop_at_the_first_candidate_where_both_pass(two_subjects_budget, server, sd15, installed):
    budget = two_subjects_budget
    budget.check_succeeded()
    rows = _log_rows(installed, budget)
    assert [row["seed"] for row in rows] == [SEED + i for i in range(4)]
    for row in rows:
        assert [s["subject"] for s in row["subjects"]] == ["sks dog", "cat"], row
        assert row["cp"] == min(s["cp"] for s in row["subjects"]), row  # a candidate's CP is its weakest subject's
    cp_min = [row["cp"] for row in rows]
    # the latest candidate to beat every one before it: with min_cp between, the run must stop exactly there
    stop = max(j for j in range(4) if all(cp_min[j] > earlier for earlier in cp_min[:j]))
    threshold = cp_min[0] - 0.01 if stop == 0 else (max(cp_min[:stop]) + cp_min[stop]) / 2
    run = Run(server, sd15, installed["output"], edit=_two_subjects, min_cp=threshold, accept=1, max_candidates=4)
    run.check_succeeded()
    assert run.used == stop + 1 and run.seeds == [SEED + stop], (run.report, cp_min)
    assert run.report.splitlines()[0].startswith(f"1 of 1 accepted after {stop + 1} of 4 candidates"), run.report
    assert "several subjects (sks dog, cat): CP is cp_min" in run.report, run.report
    again = _log_rows(installed, run)
    for first, second in zip(rows, again):  # the same candidates, the same per-subject figures
        assert [s["cp"] for s in second["subjects"]] == pytest.approx([s["cp"] for s in first["subjects"]], abs=1e-5)
    (path,) = run.pngs
    read = read_scores(path)
    assert read.returncode == 0, read.stderr
    assert re.search(
        r"this image: #\d+  seed \d+  cp_min [+-]\d\.\d{4} .* accepted\n +sks dog CP [+-]\d\.\d{4} mask .*  cat CP ",
        read.stdout,
    ), read.stdout


def test_the_node_shows_each_round_its_candidates_and_a_picture_while_it_samples(server, sd15, installed):
    """What the front end draws on the running node arrives over the websocket as the rounds end: the progress text
    (the pace and a line per candidate with its seed and scores) and a preview picture of the round's best."""
    import io

    messages = hostapi.Messages(server)
    try:
        run = Run(server, sd15, installed["output"], **{**NONE_PASSES, "accept": 1, "batch_size": 1})
        run.check_succeeded()
        texts = messages.texts(run.node)
        pictures = messages.preview_images()
    finally:
        messages.close()
    rounds = [text for text in texts if "per candidate" in text]
    assert len(rounds) == 2, texts  # one round of one candidate each: two updates, in order
    for done, text in enumerate(rounds):
        pace, line = text.split("\n")
        assert pace.startswith("time: ") and f"for {done + 1} candidate" in pace, text
        assert re.fullmatch(rf"#{done} seed {SEED + done}: CP [+-]\d\.\d{{4}}, PF \S+(, mask \S+)?: fails: .+", line)
    assert len(pictures) >= 2, "no candidate picture reached the page"
    with Image.open(io.BytesIO(pictures[-1])) as picture:
        assert picture.format == "JPEG" and max(picture.size) <= 512 and min(picture.size) > 16
