"""MaSC Sample Until's pruning in a real ComfyUI (workflow 4, random-weight SD1.5 at 256 px, euler, 4 steps):

- a round of 4 judged at step 2 keeps 1: the ledger in the report equals the model evaluations counted from
  outside MaSC (a test-only node's post-CFG function, which core's sampling calls once per evaluation);
- the survivor's pixels equal a plain KSampler's at its seed (batch 1);
- pruning off gives the same survivor image the same way (the split changes nothing for euler);
- samplers that cannot resume at a split (multistep dpmpp_2m and uni_pc, ancestral euler_ancestral, SDE
  dpmpp_2m_sde) replay their survivors from step 0: pixel-identical to a plain KSampler at the seed, and the
  replayed steps counted in the ledger and from outside alike.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from . import hostapi
from .conftest import HERE, server_args, write_json
from .graphs import node
from .test_sample_until import SEED, Run, check_plain_ksampler_pixels

COUNTING_PACK = "masc_host_test_counting"
PRUNED = dict(
    steps=4,
    batch_size=4,
    max_candidates=4,
    accept=1,
    min_cp=0.999,
    rank_by="cp",
    reject_small_masks=False,
    on_shortfall="return best",
    prune_at=0.5,
    prune_keep=1,
)


@pytest.fixture(scope="module")
def counting_server(host, installed, out_dir):
    """A server that also loads the test-only counting nodes (whitelisted beside the pack)."""
    target = os.path.join(host.dir, "custom_nodes", COUNTING_PACK)
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(os.path.join(HERE, "counting_node"), target)
    args = server_args(host, installed)
    at = args.index("--whitelist-custom-nodes")
    args[at + 1 : at + 2] = [args[at + 1], COUNTING_PACK]
    started = hostapi.start_server(host.python, host.dir, args, os.path.join(out_dir, "server-counting.log"))
    yield started
    started.stop()
    shutil.rmtree(target, ignore_errors=True)


def _count_calls(graph: dict, sample_until: str) -> str:
    """Route Sample Until's MODEL through the counter; a node that reads the count after the run; its id."""
    top = max(int(i) for i in graph)
    counter, reader = str(top + 20), str(top + 21)
    graph[counter] = node("HostTestCountModelCalls", model=graph[sample_until]["inputs"]["model"])
    graph[sample_until]["inputs"]["model"] = [counter, 0]
    graph[reader] = node("HostTestModelCalls", after=[sample_until, 6])  # its report: exists once the run is over
    return reader


@pytest.fixture(scope="module")
def pruned(counting_server, sd15, installed, out_dir):
    readers = {}

    def edit(graph, sample_until):
        readers["id"] = _count_calls(graph, sample_until)

    run = Run(counting_server, sd15, installed["output"], edit=edit, **PRUNED)
    write_json(os.path.join(out_dir, "history-pruning.json"), run.entry)
    run.check_succeeded()
    run.calls = int(hostapi.ui_text(run.entry, readers["id"]))
    return run


def test_the_ledger_counts_the_model_evaluations_actually_made(pruned):
    ledger = re.search(
        r"(\d+) of (\d+) model evaluations, ([\d.]+)x fewer \((\d+) of (\d+) candidates pruned\)", pruned.report
    )
    assert ledger, pruned.report
    spent, in_full, _, pruned_count, candidates = (float(g) if "." in g else int(g) for g in ledger.groups())
    assert (pruned_count, candidates) == (3, 4) and pruned.used == 4
    assert spent == pruned.calls == 4 * 2 + 1 * 2, (spent, pruned.calls)  # counted outside MaSC
    assert in_full == 4 * 4
    assert len(re.findall(r"pruned at step 2 of 4 \(preview cp ", pruned.report)) == 3


def test_a_survivor_is_the_image_a_plain_ksampler_gives_at_its_seed(pruned, counting_server, installed):
    (seed,) = pruned.seeds
    (path,) = pruned.pngs
    assert SEED <= seed < SEED + 4
    check_plain_ksampler_pixels(counting_server, pruned, seed, path, installed["output"])


@pytest.mark.parametrize("sampler_name", ["dpmpp_2m", "uni_pc", "euler_ancestral", "dpmpp_2m_sde"])
def test_a_replayed_survivor_is_the_plain_ksampler_image_and_the_ledger_counts_the_replay(
    counting_server, sd15, installed, sampler_name
):
    """A round of 3 judged at step 2 of 4 keeps 1: each candidate's call stops after its judged step (J evaluations),
    then the survivor is sampled from step 0 (F): spent 3J + F of 3F, J of them replayed."""
    readers = {}

    def edit(graph, sample_until):
        readers["id"] = _count_calls(graph, sample_until)

    run = Run(
        counting_server,
        sd15,
        installed["output"],
        edit=edit,
        **dict(PRUNED, batch_size=3, max_candidates=3, sampler_name=sampler_name),
    )
    run.check_succeeded()
    calls = int(hostapi.ui_text(run.entry, readers["id"]))
    ledger = re.search(
        r"(\d+) of (\d+) model evaluations, [\d.]+x fewer \(2 of 3 candidates pruned; (\d+) evaluations replayed\)",
        run.report,
    )
    assert ledger, run.report
    spent, in_full, judged = (int(g) for g in ledger.groups())
    assert spent == calls, (spent, calls)  # counted outside MaSC
    assert in_full % 3 == 0 and spent == 3 * judged + in_full // 3, run.report
    if sampler_name != "uni_pc":  # k-diffusion samplers: one evaluation per step
        assert (spent, in_full, judged) == (3 * 2 + 4, 3 * 4, 2), run.report
    assert f"{sampler_name} " in run.report and "each survivor was sampled again from step 0" in run.report
    (seed,) = run.seeds
    (path,) = run.pngs
    check_plain_ksampler_pixels(counting_server, run, seed, path, installed["output"])


def _benchmark(server, sd15, tmp_path, name: str, *options: str) -> tuple[dict, str]:
    """``python -m benchmarks NAME`` against ``server`` with the host's models: its JSON results and printed table."""
    import json
    import subprocess
    import sys

    from .conftest import ENCODER_NAME, ROOT, SEGMENTER_NAME

    out = tmp_path / f"{name}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            name,
            "--url",
            server.url,
            "--ckpt",
            sd15,
            "--encoder",
            ENCODER_NAME,
            "--segmenter",
            SEGMENTER_NAME,
            *options,
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def test_the_pruning_benchmark_runs_against_a_server(counting_server, sd15, tmp_path):
    """``python -m benchmarks pruning`` end to end, small (its timings are not asserted: not a timed test)."""
    results, printed = _benchmark(
        counting_server,
        sd15,
        tmp_path,
        "pruning",
        "--candidates",
        "4",
        "--steps",
        "4",
        "--prune-at",
        "0.5",
        "--prune-keep",
        "1",
        "--steps-judged",
        "0.25:2,0.5:1",
    )
    assert (results["no pruning"]["spent"], results["no pruning"]["in_full"]) == (16, 16)
    assert (results["pruning at 0.5"]["spent"], results["pruning at 0.5"]["in_full"]) == (10, 16)
    assert results["pruning at 0.5"]["replayed"] == 0  # euler resumes
    # Judged at steps 1 and 2 (the twin, two MaSC Prune): 4 x 1 + 2 x 1 + 1 x 2 evaluations.
    assert (results["at 0.25 (2) then 0.5 (1)"]["spent"], results["at 0.25 (2) then 0.5 (1)"]["in_full"]) == (8, 16)
    assert "model evaluations" in printed


def test_the_split_drift_benchmark_shows_a_split_changing_a_multistep_sampler(counting_server, sd15, tmp_path):
    """``python -m benchmarks split-drift`` end to end, small: dpmpp_2m split at step 1 of 4 by core's
    KSamplerAdvanced pair restarts its history there, so its image is not the plain KSampler's (why pruning replays)."""
    results, printed = _benchmark(
        counting_server,
        sd15,
        tmp_path,
        "split-drift",
        "--samplers",
        "dpmpp_2m",
        "--steps",
        "4",
        "--split-at",
        "0.25",
        "--seeds",
        "1",
    )
    assert results["split_step"] == 1
    (run,) = results["samplers"]["dpmpp_2m"]["runs"]
    assert run["max_pixel"] > 0 and 0 < run["pixels_differ"] <= 1, run
    assert run["cp_change"] == abs(run["cp_split"] - run["cp_plain"]) and -1 <= run["cp_plain"] <= 1
    assert "dpmpp_2m" in printed


def test_cancel_after_the_judgement_stops_the_survivors_and_frees_the_queue(counting_server, sd15, installed):
    """Cancel once the round was judged and a survivor is being finished: the prompt ends interrupted, nothing is
    saved, and the next prompt runs. (Phase 2 has 6 steps left when Cancel is sent: the interrupt is seen at the
    next step, whatever the machine's speed.)"""
    import time

    from .graphs import for_cpu, load, of_type
    from .test_sample_until import WORKFLOW

    graph = for_cpu(load(WORKFLOW), sd15=sd15)
    (sample_until,) = of_type(graph, "MaSCSampleUntil")
    graph[sample_until]["inputs"].update(PRUNED, steps=8, prune_at=0.25, seed=SEED + 50)
    messages = hostapi.Messages(counting_server)
    try:
        prompt_id = counting_server.queue(graph, extra_data=hostapi.FROM_FRONT_END)
        judged = 4 * 2  # four candidates sampled to step 2: the judgement comes next, then a survivor's 6 steps
        deadline = time.monotonic() + 1200
        while not [
            d
            for _, d in messages.of_type("progress", prompt_id)
            if d.get("node") == sample_until and d["value"] > judged
        ]:
            assert time.monotonic() < deadline, "the survivor's phase never started"
            time.sleep(0.05)
        counting_server.request("/interrupt", {})
        entry = counting_server.wait(prompt_id, timeout=600)
    finally:
        messages.close()
    assert hostapi.was_interrupted(entry), hostapi.explain(entry)
    assert not entry.get("outputs", {}).get(sample_until)
    assert counting_server.request("/queue")["queue_running"] == []
    after = for_cpu(load(WORKFLOW), sd15=sd15)
    assert hostapi.status(counting_server.run(after)) == "success"


def _with_sam3(graph: dict, sample_until: str) -> None:
    """Workflow 4 with its CLIPSeg loader swapped for Load MaSC SAM3 Model (the test SAM3 in models/sam3)."""
    from .conftest import SAM3_NAME

    loader = graph[sample_until]["inputs"]["segmenter"][0]
    graph[loader] = node("MaSCLoadSAM3Model", model=SAM3_NAME, device="auto", precision="auto", score_threshold=0.5)


def _host_has_sam3(host) -> bool:
    done = host.run_python("-c", "import transformers, sys; sys.exit(0 if hasattr(transformers, 'Sam3Model') else 1)")
    return done.returncode == 0


def test_with_sam3_masks_sample_until_prunes_exactly_and_stops_early(counting_server, sd15, installed, host):
    """SAM3's segmenter in place of CLIPSeg's: the same exact ledger and plain-KSampler survivor, PF defined; and
    with every candidate passing, one round is enough."""
    if not _host_has_sam3(host):
        pytest.skip("this host's transformers has no Sam3Model (SAM3 needs transformers 5)")
    readers = {}

    def edit(graph, sample_until):
        _with_sam3(graph, sample_until)
        readers["id"] = _count_calls(graph, sample_until)

    run = Run(counting_server, sd15, installed["output"], edit=edit, **dict(PRUNED, rank_by="both"))
    run.check_succeeded()
    calls = int(hostapi.ui_text(run.entry, readers["id"]))
    ledger = re.search(r"(\d+) of (\d+) model evaluations, [\d.]+x fewer \(3 of 4 candidates pruned\)", run.report)
    assert ledger and int(ledger.group(1)) == calls == 4 * 2 + 2, run.report
    (seed,) = run.seeds
    (path,) = run.pngs
    check_plain_ksampler_pixels(counting_server, run, seed, path, installed["output"])
    early = Run(
        counting_server,
        sd15,
        installed["output"],
        edit=_with_sam3,
        steps=2,
        batch_size=1,
        max_candidates=6,
        accept=1,
        min_cp=-0.9,
        rank_by="both",
        reject_small_masks=False,
        on_shortfall="return best",
        prune_at=0.0,
    )
    early.check_succeeded()
    assert early.used == 1 and early.seeds == [SEED], early.report
