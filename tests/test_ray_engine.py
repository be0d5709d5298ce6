"""`eval --engine ray` on local Ray clusters: the single process's files byte for byte, after kills and resumes too.

Every test here shares one manifest of the repo's photos (36 rows, 3 references, chunks of 2 rows)
and the single-process run of it. Ray costs seconds per start, so the cluster starts are few: a
complete CLI run, an interrupted and a killed one, and one cluster this process starts itself
(as a notebook would) for the library path, map_batches, the resume after a torn line, and the
errors found on a running cluster.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, call, read_bytes
from eval_manifests import small_rows, write_csv, write_masks
from batch_tickets.sitecustomize import TICKETS_ENV, issue_tickets

if importlib.util.find_spec("ray") is None:
    if os.environ.get("CI"):
        pytest.fail(".ci/run installs the ray extra: Ray is missing", pytrace=False)
    pytest.skip("Ray is not installed: pip install -e '.[ray]'", allow_module_level=True)

FILES = ("results.jsonl", "results.csv", "summary.json")
OPTIONS = ["--device", "cpu", "--max-patches", "64", "--chunk-size", "2", "--baselines", "global", "--no-plots"]
DEADLINE = 600.0
"""Seconds any one Ray run may take here before the test calls it hung: a guard, never the verdict (a start is 10-25 s
on 2 quiet cores, and was seen past 240 s while another process installed packages)."""
# Ray's dashboard process asks cloud metadata servers which cloud it is on (even with usage stats
# off); a closed loopback proxy keeps that request on this machine.
QUIET_NETWORK = {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}


def lines_in(path) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as handle:
        return handle.read().count(b"\n")


TICKET_HOOK = os.path.join(ROOT, "tests", "batch_tickets")
"""On the run's PYTHONPATH with $MASC_TEST_BATCH_TICKETS: every batch waits for a ticket
(``batch_tickets/sitecustomize.py``)."""


def environment(**extra) -> dict:
    env = dict(os.environ, **QUIET_NETWORK, **extra)
    hook = TICKET_HOOK if TICKETS_ENV in extra else None
    env["PYTHONPATH"] = os.pathsep.join(p for p in (hook, ROOT, env.get("PYTHONPATH")) if p)
    return env


def descendants(pid: int) -> list[int]:
    """The processes started by ``pid``, its children's children included (Ray's cluster and actors)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def running(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


def wait_gone(pids, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    return running(pids)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, naflex_dir):
    """The manifest and the single-process run of it (the reference bytes)."""
    folder = tmp_path_factory.mktemp("ray")
    write_masks(str(folder))
    rows = small_rows()
    manifest = write_csv(str(folder / "manifest.csv"), rows)
    code, out, err = call("eval", manifest, "--model", naflex_dir, *OPTIONS, "--out-dir", folder / "single", "--quiet")
    assert code == 0, err
    return {
        "folder": str(folder),
        "manifest": manifest,
        "single": str(folder / "single"),
        "tables": out,
        "model": naflex_dir,
    }


KILLED_CLUSTERS: list[int] = []
"""Processes of a cluster whose driver was killed with -9 (it cannot stop them: they end by themselves)."""


def eval_command(workspace, out_dir, *extra):
    return [
        sys.executable,
        "-m",
        "masc_core",
        "eval",
        workspace["manifest"],
        "--model",
        workspace["model"],
        *OPTIONS,
        "--out-dir",
        out_dir,
        "--engine",
        "ray",
        *extra,
    ]


def test_a_ray_run_writes_the_single_process_files_and_nothing_else(workspace):
    out_dir = os.path.join(workspace["folder"], "ray")
    done = subprocess.run(
        eval_command(workspace, out_dir, "--workers", "2", "--quiet"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(workspace["single"], name), name
    assert done.stdout == workspace["tables"]
    assert done.stderr == ""  # --quiet: not a line from Ray either
    timing = json.loads(read_bytes(out_dir, "timing.json"))
    engine = timing["engine"]
    assert engine["name"] == "ray" and engine["workers"] == 2 and engine["cpus_per_worker"] == 1
    assert engine["chunks"] == 18 and sum(engine["worker_chunks"].values()) == 18
    # 3 groups of 6 chunks in units of at most ceil(18 / 8) = 3 chunks: each reference is encoded twice, not once.
    single = json.loads(read_bytes(workspace["single"], "timing.json"))
    assert engine["units"] == 6
    assert timing["forwards"]["siglip_images"] == single["forwards"]["siglip_images"] + 3
    assert timing["forwards"]["siglip_texts"] == single["forwards"]["siglip_texts"]


def test_the_mask_source_study_on_ray_writes_the_single_process_files(workspace, tiny_sam3_dir, tiny_clipseg_dir):
    """Each actor loads the sources' segmenters once; the study's rows and table are the single process's bytes."""
    study = ["--mask-sources", "sam3,clipseg,manifest", "--sam3", tiny_sam3_dir, "--clipseg", tiny_clipseg_dir]
    single = os.path.join(workspace["folder"], "study-single")
    code, out, err = call(
        "eval", workspace["manifest"], "--model", workspace["model"], *OPTIONS, "--out-dir", single, "--quiet", *study
    )
    assert code == 0, err
    out_dir = os.path.join(workspace["folder"], "study-ray")
    done = subprocess.run(
        eval_command(workspace, out_dir, "--workers", "2", "--quiet", *study),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(single, name), name
    assert done.stdout == out and "mask sources (deltas from sam3" in out
    forwards = json.loads(read_bytes(out_dir, "timing.json"))["forwards"]
    alone = json.loads(read_bytes(single, "timing.json"))["forwards"]
    # A mask per image per source, as SigLIP2's encodings: in one process and on Ray (whose units re-encode each
    # reference once more, see the test above) alike.
    assert alone["sam3_images"] == alone["clipseg_images"] == alone["siglip_images"]
    assert (
        forwards["sam3_images"] == forwards["clipseg_images"] == forwards["siglip_images"] == alone["siglip_images"] + 3
    )


def test_interrupted_then_killed_then_resumed(workspace):
    """Ctrl-C ends the run and its cluster cleanly; kill -9 loses nothing written; a rerun finishes the same files.

    The workers score a unit of chunks only with a ticket from this test (tests/batch_tickets): each
    run is let through one unit, so whatever the machine's load the signal lands after that unit's first
    rows and before the other units ever start. No race between the run and the signal decides the verdict.
    """
    out_dir = os.path.join(workspace["folder"], "killed")
    log = os.path.join(out_dir, "results.jsonl")
    tickets = os.path.join(workspace["folder"], "tickets")
    seen = []
    for sig in (signal.SIGINT, signal.SIGKILL):
        before = lines_in(log)
        issue_tickets(tickets, 1)
        driver = subprocess.Popen(
            eval_command(workspace, out_dir, "--workers", "2"),
            env=environment(**{TICKETS_ENV: tickets}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + DEADLINE  # a guard against a hang, never the verdict: the unit is held for us
        while lines_in(log) == before and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert driver.poll() is None, driver.communicate()[1]
        cluster = descendants(driver.pid)
        assert cluster, "a local Ray cluster runs under the driver"
        driver.send_signal(sig)
        _, err = driver.communicate(timeout=DEADLINE)  # guards against a hang: a loaded machine takes its time
        kept = lines_in(log)
        # Some rows of the one unit let through, at most its 3 chunks of 2 rows; every other unit was held.
        assert before < kept <= before + 6 < 36, (before, kept)
        if sig == signal.SIGINT:
            assert driver.returncode == 130 and err.strip().splitlines()[-1] == "interrupted"
            assert not wait_gone(cluster, DEADLINE), "the cluster ends with an interrupted run"
        else:
            assert driver.returncode == -signal.SIGKILL
            seen.extend(cluster)
    # Every line written is whole, and is the single run's line for that row.
    with open(os.path.join(workspace["single"], "results.jsonl"), encoding="utf-8") as handle:
        single = {json.loads(line)["row"]: line for line in handle}
    with open(log, encoding="utf-8") as handle:
        written = handle.readlines()
    assert all(single[json.loads(line)["row"]] == line for line in written)
    done = subprocess.run(
        eval_command(workspace, out_dir), env=environment(), capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    assert f"{36 - len(written)} scored, {len(written)} already done" in done.stderr
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(workspace["single"], name), name
    KILLED_CLUSTERS.extend(seen)  # checked by the module's last test, when Ray's agents have had their minute


# ---------------------------------------------------------------- one cluster started here, as a notebook would


@pytest.fixture(scope="module")
def cluster():
    import ray

    with pytest.MonkeyPatch.context() as patch:
        for key, value in QUIET_NETWORK.items():
            patch.setenv(key, value)
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            yield ray
        finally:
            ray.shutdown()


def test_on_a_callers_cluster_a_torn_log_resumes_to_the_same_files(workspace, cluster, naflex_dir):
    from masc_core.evaluation import EngineOptions, EvalOptions, SummaryOptions, evaluate

    out_dir = os.path.join(workspace["folder"], "torn")
    os.makedirs(out_dir)
    with open(os.path.join(workspace["single"], "results.jsonl"), encoding="utf-8") as handle:
        lines = handle.readlines()
    with open(os.path.join(out_dir, "results.jsonl"), "w", encoding="utf-8") as handle:
        handle.writelines(lines[:6] + [lines[6][:40]])  # three chunks done, the fourth cut off mid-line
    options = EvalOptions(
        model=naflex_dir, device="cpu", max_patches=64, chunk_size=2, baselines=("global",), summary=SummaryOptions()
    )
    report = evaluate(workspace["manifest"], out_dir, options, engine=EngineOptions("ray", workers=2))
    assert (report.rows_scored, report.rows_skipped) == (30, 6)
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(workspace["single"], name), name
    assert cluster.is_initialized(), "a cluster the caller started is the caller's to stop"


def test_another_process_joins_the_cluster_with_address(workspace, cluster):
    port = cluster.get_runtime_context().gcs_address.rsplit(":", 1)[1]
    out_dir = os.path.join(workspace["folder"], "joined")
    done = subprocess.run(
        eval_command(workspace, out_dir, "--address", f"127.0.0.1:{port}", "--quiet"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(workspace["single"], name), name
    engine = json.loads(read_bytes(out_dir, "timing.json"))["engine"]
    assert engine["address"] == f"127.0.0.1:{port}" and engine["workers"] == 2 and engine["nodes"] == 1
    assert cluster.is_initialized()


def test_map_batches_with_the_batch_scorer(workspace, cluster, naflex_dir):
    from masc_core.evaluation.batch_scorer import BatchScorer
    from masc_core.evaluation.options import EvalOptions

    with open(workspace["manifest"], newline="", encoding="utf-8") as handle:
        count = sum(1 for _ in csv.DictReader(handle))
    rows = cluster.data.read_csv(workspace["manifest"])
    scored = rows.map_batches(
        BatchScorer,
        fn_constructor_kwargs=dict(
            options=EvalOptions(naflex_dir, device="cpu", max_patches=64, chunk_size=2, baselines=("global",)),
            base_dir=workspace["folder"],
            threads=1,
        ),
        # One actor: read_csv's read tasks need a CPU too, and this cluster has two (two actors would wait forever).
        compute=cluster.data.ActorPoolStrategy(size=1),
        num_cpus=1,
        batch_size=12,
    ).take_all()
    assert len(scored) == count
    with open(os.path.join(workspace["single"], "results.jsonl"), encoding="utf-8") as handle:
        single = [json.loads(line) for line in handle]
    by_output = {}
    for row in scored:
        record = json.loads(row["record"])
        by_output.setdefault((record["out"], record["prompt"], record["method"], record["seed"]), []).append(record)
        assert row["cp"] == record["cp"] or (record["cp"] is None and np.isnan(row["cp"]))
    for record in single:  # batches of 12 rows cut chunks of 2 as eval does: the same scores
        (match,) = [
            r
            for r in by_output[(record["out"], record["prompt"], record["method"], record["seed"])]
            if r["subject"] == record["subject"] and r["ref"] == record["ref"]
        ]
        assert match["cp"] == record["cp"] and match["pf"] == record["pf"] and match["global_cp"] == record["global_cp"]


def test_errors_on_a_running_cluster_are_one_line_and_keep_the_finished_chunks(workspace, cluster, naflex_dir):
    folder = workspace["folder"]
    with open(os.path.join(folder, "broken.png"), "wb") as handle:
        handle.write(b"not an image")
    with open(workspace["manifest"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[30]["out"] = "broken.png"
    broken = write_csv(os.path.join(folder, "broken.csv"), rows)
    code, _, single_err = call(
        "eval", broken, "--model", naflex_dir, *OPTIONS, "--out-dir", os.path.join(folder, "broken-single"), "--quiet"
    )
    assert code == 2
    code, _, err = call(
        "eval",
        broken,
        "--model",
        naflex_dir,
        *OPTIONS,
        "--out-dir",
        os.path.join(folder, "broken-ray"),
        "--quiet",
        "--engine",
        "ray",
        "--workers",
        "2",
    )
    assert code == 2 and err == single_err and err.count("\n") == 1
    assert "manifest line 32, column 'out'" in err and "broken.png" in err
    assert 0 < lines_in(os.path.join(folder, "broken-ray", "results.jsonl")) < 36
    code, _, err = call(
        "eval",
        workspace["manifest"],
        "--model",
        naflex_dir,
        *OPTIONS,
        "--out-dir",
        os.path.join(folder, "gpus"),
        "--engine",
        "ray",
        "--gpus-per-worker",
        "1",
        "--quiet",
    )
    assert code == 2 and err.count("\n") == 1 and "the Ray cluster has 0 GPUs" in err
    assert not os.path.exists(os.path.join(folder, "gpus"))


# ---------------------------------------------------------------- no cluster at all


def test_an_unreachable_address_fails_at_once_and_touches_nothing(workspace):
    out_dir = os.path.join(workspace["folder"], "earlier")
    shutil.copytree(workspace["single"], out_dir)
    before = {name: read_bytes(out_dir, name) for name in os.listdir(out_dir)}
    address = f"127.0.0.1:{free_port()}"
    done = subprocess.run(
        eval_command(workspace, out_dir, "--address", address, "--fresh"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: cannot reach a Ray cluster at {address}: ")
    # --fresh would have deleted the earlier results: nothing is touched before the cluster answers.
    assert {name: read_bytes(out_dir, name) for name in os.listdir(out_dir)} == before


def test_without_ray_installed_one_line_says_how_to_get_it(workspace, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code, _, err = call(
        "eval",
        workspace["manifest"],
        "--model",
        workspace["model"],
        *OPTIONS,
        "--out-dir",
        tmp_path / "out",
        "--engine",
        "ray",
    )
    assert code == 2 and err.count("\n") == 1
    assert "pip install 'masc-comfyui[ray]'" in err
    assert not os.path.exists(tmp_path / "out")


def test_a_finished_run_needs_no_cluster(workspace, monkeypatch, tmp_path):
    out_dir = tmp_path / "done"
    shutil.copytree(workspace["single"], out_dir)
    monkeypatch.setitem(sys.modules, "ray", None)  # no Ray at all: nothing is left to score, so none is asked for
    code, out, err = call(
        "eval", workspace["manifest"], "--model", workspace["model"], *OPTIONS, "--out-dir", out_dir, "--engine", "ray"
    )
    assert code == 0 and "36 rows: 0 scored, 36 already done" in err and out == workspace["tables"]
    for name in FILES:
        assert read_bytes(out_dir, name) == read_bytes(workspace["single"], name), name


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--workers", "2"], "--workers is an option of --engine ray"),
        (["--address", "127.0.0.1:6379"], "--address is an option of --engine ray"),
        (
            ["--engine", "ray", "--gpus-per-worker", "1", "--precision", "auto"],
            "--precision auto with --gpus-per-worker",
        ),
    ],
)
def test_engine_options_that_do_not_fit(workspace, tmp_path, flags, message):
    code, _, err = call(
        "eval", workspace["manifest"], "--model", workspace["model"], "--out-dir", tmp_path / "out", *flags
    )
    assert code == 2 and err.count("\n") == 1 and message in err


def test_the_benchmark_row_runs_end_to_end(naflex_dir, tmp_path):
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "ray-workers",
            "--checkpoint",
            naflex_dir,
            "--groups",
            "2",
            "--rows",
            "2",
            "--workers",
            "2",
            "--repeat",
            "1",
            "--max-patches",
            "64",
            "--chunk-size",
            "2",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(report_path),
        ],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    single, ray_run = report["runs"]
    assert (single["engine"], ray_run["engine"], ray_run["workers"], ray_run["threads"]) == ("single", "ray", 2, 1)
    assert single["identical_to_single"] and ray_run["identical_to_single"]
    assert single["rows"] == ray_run["rows"] == 4 and ray_run["startup_seconds"] > 0 and len(ray_run["repeats"]) == 1
    assert ray_run["speedup_after_startup"] == pytest.approx(ray_run["images_per_second"] / single["images_per_second"])
    table = done.stdout.splitlines()
    assert table[2].startswith("| engine | workers x torch threads |") and table[5].startswith("| ray | 2 x 1 |")


def test_a_killed_drivers_cluster_ends_by_itself():
    """Last in the module: gcs and raylet die with the driver, the actors within seconds, the idle agents in about a
    minute."""
    assert KILLED_CLUSTERS, "the kill test ran first"
    left = wait_gone(KILLED_CLUSTERS, DEADLINE)
    assert not left, [open(f"/proc/{pid}/cmdline").read()[:60] for pid in running(left)]
