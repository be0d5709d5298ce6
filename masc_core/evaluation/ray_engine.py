"""``eval --engine ray``: the chunks scored by ``BatchScorer`` actors on a Ray cluster; this process writes the files.

Ray is imported here only, when this engine starts (``pip install 'masc-comfyui[ray]'``); reaching a cluster, reading
its failures and waiting so that signals are taken need no Ray (``ray_driver``).

How the work maps onto Ray Data (``ray.data``):

- A *unit* is a run of chunks of one group (rows sharing a reference). Each unit is one Arrow
  block, and ``map_batches(batch_size=None)`` makes one call per block, so a unit is scored in
  one call on one actor: its reference is encoded once, and each chunk is encoded on its own,
  as in one process (``plan``), so the bits are the same. A group is one unit unless it has
  more chunks than a quarter of a worker's share (``UNITS_PER_WORKER``); then it is cut into
  units of that many chunks, and each extra unit encodes the reference once more: the price of
  keeping every worker busy, counted in timing.json's forwards.
- The actor yields one row per finished chunk (its results.jsonl lines and what it cost).
  ``DataContext.target_max_block_size`` is set tiny so each such row is its own block and
  reaches this process as soon as the chunk is done; ``evaluate`` appends it to results.jsonl
  there and then. A killed run keeps every chunk that reached this process, as in one process.
- Chunks arrive in any order. Each is checked (its rows and their fingerprints, which the
  worker computes from the files it sees) and relabelled from the manifest before it is
  written; the final files are sorted by row, so they are byte for byte those of one process.

A local cluster (no ``--address``) is started with ``address="local"`` and shut down at the
end; it dies with this process, whatever ends it. ``--address`` joins a running cluster
(``ray start --head``); the address is probed first, so an unreachable one fails in seconds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
import warnings

from ..errors import MascError, MascInputError
from ..resources import peak_memory
from .batch_scorer import BatchScorer
from .ray_driver import (
    RayEngineError,
    captured_stderr,
    check_reachable,
    connect_env,
    init_failure,
    interrupt_signal,
    waking,
    worker_error,
)
from .manifest import Manifest
from .options import EngineOptions, EvalOptions
from .plan import Chunk, Group
from .records import EvalRecord, records_from_lines
from .timing import Stopwatch

INSTALL_HINT = "pip install 'masc-comfyui[ray]' (or: pip install 'ray[data]>=2.60')"
UNITS_PER_WORKER = 4
"""A group longer than 1/UNITS_PER_WORKER of a worker's share of the chunks is cut into several units."""


def import_ray():
    """``ray`` and ``ray.data``, or one line saying how to install them."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise MascInputError(f"--engine ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


class RayEngine:
    """Scores an evaluation's chunks on a Ray cluster (see the module); ``evaluate`` drives it."""

    def __init__(self, settings: EngineOptions):
        self.settings = settings
        self.ray = None
        self.owns_cluster = False
        self.saved_context: dict = {}
        self.saved_sigterm = None
        self.saved_log_level: int | None = None
        self.layout: dict = {}
        self.costs: dict = {"seconds": {}, "forwards": {}, "workers": {}, "chunks": 0, "units": 0}
        self.first_ready: float | None = None
        """Wall clock (time.time) when the first worker had its models loaded."""

    # ------------------------------------------------------------ start

    def start(self, options: EvalOptions, clock: Stopwatch, manifest: Manifest) -> None:
        address = self.settings.address
        ray = import_ray()
        if address:
            check_reachable(address)
        self.options, self.manifest = options, manifest
        with contextlib.redirect_stdout(sys.stderr):  # Ray prints some of its errors on stdout
            self._init(ray, address)
        try:
            self._install_handlers()
            self.layout = self._layout(ray)
        except BaseException:
            self.close()
            raise

    def _init(self, ray, address: str | None) -> None:
        self.owns_cluster = not ray.is_initialized()
        if not self.owns_cluster:  # a caller's own ray.init (a notebook, a script): use that cluster
            self.ray = ray
            return
        settings = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        if address:
            settings["address"] = address
        else:
            cpus = os.cpu_count() or 1
            settings.update(address="local", num_cpus=max(cpus, self.settings.workers or 1))
        # Joining, Ray's C++ core logs its retries on fd 2: kept aside, and read for the reason if it fails.
        captured = captured_stderr() if address else contextlib.nullcontext(lambda: "")
        failure, log = None, ""
        with captured as logged, connect_env(address), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ray.init(**settings)
            except Exception as exc:
                failure, log = exc, logged()
        if failure is not None:
            with contextlib.suppress(Exception):
                ray.shutdown()
            raise RayEngineError(init_failure(address, failure, log)) from None
        self.ray = ray

    def _install_handlers(self) -> None:
        # Ray Data logs its progress and its own tracebacks; the CLI prints one line instead.
        self.saved_log_level = logging.getLogger("ray.data").level
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)
        context = self.ray.data.DataContext.get_current()
        wanted = {"enable_progress_bars": False, "enable_operator_progress_bars": False, "target_max_block_size": 1}
        self.saved_context = {name: getattr(context, name) for name in wanted if hasattr(context, name)}
        for name in self.saved_context:
            setattr(context, name, wanted[name])
        # Ray's SIGTERM handler dumps a stack and exits; a KeyboardInterrupt lets the run end cleanly.
        with contextlib.suppress(ValueError):  # only the main thread may set handlers
            self.saved_sigterm = signal.signal(signal.SIGTERM, interrupt_signal)

    def _layout(self, ray) -> dict:
        """Workers, CPUs and GPUs each, checked against what the cluster has (one line when it does not fit)."""
        resources = ray.cluster_resources()
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        cpus, gpus = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
        per_gpu = self.settings.gpus_per_worker
        if per_gpu:
            if gpus < per_gpu:
                raise RayEngineError(
                    f"--gpus-per-worker {per_gpu:g}: the Ray cluster has {gpus:g} GPUs; use --gpus-per-worker 0 for "
                    "CPU workers"
                )
            workers = self.settings.workers or max(1, int(gpus // per_gpu))
            if workers * per_gpu > gpus or per_gpu > max((n.get("GPU", 0.0) for n in nodes), default=0.0):
                raise RayEngineError(
                    f"{workers} workers x {per_gpu:g} GPUs need more than the Ray cluster's {gpus:g} GPUs "
                    f"({len(nodes)} nodes): use fewer --workers"
                )
            cpus_each = 1
        else:
            workers = self.settings.workers or max(1, int(cpus))
            cpus_each = max(1, min(int(cpus // workers), int(max((n.get("CPU", 0.0) for n in nodes), default=cpus))))
        if workers * cpus_each > cpus:
            raise RayEngineError(
                f"{workers} workers need {workers * cpus_each} CPUs; the Ray cluster has {cpus:g}: use fewer --workers"
            )
        return {
            "workers": workers,
            "cpus_per_worker": cpus_each,
            "gpus_per_worker": per_gpu,
            "nodes": len(nodes),
            "address": self.settings.address or "local",
        }

    # ------------------------------------------------------------ score

    def units(self, todo: list[tuple[Group, Chunk]]) -> list[list[tuple[int, Chunk]]]:
        """Runs of (key, chunk) of one group each, at most ceil(chunks / (workers * UNITS_PER_WORKER)) chunks long."""
        longest = max(1, math.ceil(len(todo) / (self.layout["workers"] * UNITS_PER_WORKER)))
        units: list[list[tuple[int, Chunk]]] = []
        previous = None
        for key, (group, chunk) in enumerate(todo):
            if group is not previous or len(units[-1]) >= longest:
                units.append([])
            units[-1].append((key, chunk))
            previous = group
        return units

    def _dataset(self, units):
        import pyarrow as pa

        strings, paths = pa.string(), pa.list_(pa.string())
        tables = []
        for unit in units:
            rows = [(key, row) for key, chunk in unit for row in chunk.rows]
            tables.append(
                pa.table(
                    {
                        "row": pa.array([row.index for _, row in rows], pa.int64()),
                        "line": pa.array([row.line for _, row in rows], pa.int64()),
                        "chunk": pa.array([key for key, _ in rows], pa.int64()),
                        "ref": pa.array([list(row.ref) for _, row in rows], paths),
                        "ref_mask": pa.array([list(row.ref_mask) for _, row in rows], paths),
                        "out": pa.array([row.out for _, row in rows], strings),
                        "out_mask": pa.array([row.out_mask for _, row in rows], strings),
                        "prompt": pa.array([row.prompt for _, row in rows], strings),
                        "subject": pa.array([row.subject for _, row in rows], strings),
                    }
                )
            )
        return self.ray.data.from_arrow(tables)

    def scorer_settings(self) -> dict:
        """``BatchScorer``'s constructor arguments: the run's options, the manifest's folder, one row per chunk."""
        return dict(
            options=self.options,
            base_dir=os.path.dirname(os.path.abspath(self.manifest.path)),
            source=self.manifest.path,
            threads=self.layout["cpus_per_worker"],
            output="chunks",
        )

    def score(self, todo: list[tuple[Group, Chunk]], done) -> None:
        ray, layout = self.ray, self.layout
        units = self.units(todo)
        self.costs["units"] += len(units)
        pending = dict(enumerate(chunk for _, chunk in todo))
        with warnings.catch_warnings():  # max_restarts via ray_remote_args is deprecated in 2.60 but still the only way
            warnings.simplefilter("ignore", DeprecationWarning)
            scored = self._dataset(units).map_batches(
                BatchScorer,
                fn_constructor_kwargs=self.scorer_settings(),
                batch_size=None,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=layout["workers"], max_tasks_in_flight_per_actor=1),
                num_cpus=layout["cpus_per_worker"],
                num_gpus=layout["gpus_per_worker"] or None,
                # A worker that dies fails the run (it resumes) instead of being restarted with its unit.
                max_restarts=0,
            )
        try:
            with contextlib.redirect_stdout(sys.stderr):
                for batch in waking(scored.iter_batches(batch_size=None, batch_format="numpy")):
                    for key, text, cost in zip(
                        batch["chunk"].tolist(), batch["records"].tolist(), batch["cost"].tolist()
                    ):
                        cost = json.loads(cost)
                        self.first_ready = min(self.first_ready or cost["ready_at"], cost["ready_at"])
                        chunk = pending.pop(int(key), None)
                        if chunk is None:  # Ray ran a unit again after a lost object: that chunk is written already
                            continue
                        done(chunk, self._records(chunk, text))
                        self._add_cost(cost)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            if isinstance(exc, MascError) and not isinstance(exc, ray.exceptions.RayError):
                raise  # this process's own one-line errors (a chunk that does not match the plan)
            raise worker_error(exc) from None
        if pending:
            raise RayEngineError(f"the Ray run ended with {len(pending)} chunks unscored: rerun to resume")

    def _records(self, chunk: Chunk, text: str) -> list[EvalRecord]:
        """A chunk's records from a worker, checked against the plan and relabelled from the manifest."""
        records = records_from_lines(text)
        expected = [(row.index, fingerprint) for row, fingerprint in zip(chunk.rows, chunk.fingerprints)]
        if [(r.row, r.fingerprint) for r in records] != expected:
            line = chunk.rows[0].line
            raise RayEngineError(
                f"a Ray worker scored manifest line {line}'s chunk from other files or settings than this process sees "
                "(another file size, model folder or precision there): give every node the same files and options"
            )
        min_foreground = self.options.summary.min_foreground
        return [record.relabel(row, min_foreground) for record, row in zip(records, chunk.rows)]

    def _add_cost(self, cost: dict) -> None:
        costs = self.costs
        costs["chunks"] += 1
        for key, value in cost["seconds"].items():
            costs["seconds"][key] = costs["seconds"].get(key, 0.0) + value
        for key, value in cost["forwards"].items():
            costs["forwards"][key] = costs["forwards"].get(key, 0) + value
        worker = costs["workers"].setdefault(str(cost["worker"]), {"chunks": 0, "peak_rss_mib": None})
        worker["chunks"] += 1
        worker["peak_rss_mib"] = cost["memory"].get("peak_rss_mib")
        if cost["memory"].get("peak_cuda_mib") is not None:
            worker["peak_cuda_mib"] = cost["memory"]["peak_cuda_mib"]

    # ------------------------------------------------------------ end

    def timing(self, clock: Stopwatch, rows_scored: int, rows_skipped: int) -> dict:
        """timing.json: wall time here; the phases are the workers' seconds added up (they overlap)."""
        if not self.layout:  # nothing was left to score: no cluster was needed
            return clock.report(rows_scored, rows_skipped, None, peak_memory())
        workers = self.costs["seconds"]
        total = clock.elapsed
        # start-up: from this run's start until the first worker was ready to score (every chunk says when)
        startup = min(total, max(0.0, self.first_ready - (time.time() - total)))
        loading = workers.get("loading_models", 0.0) + workers.get("loading_files", 0.0)
        peaks = [w.get("peak_rss_mib") for w in self.costs["workers"].values() if w.get("peak_rss_mib") is not None]
        cuda = [w["peak_cuda_mib"] for w in self.costs["workers"].values() if w.get("peak_cuda_mib") is not None]
        memory = {
            "peak_rss_mib": max(peaks) if peaks else None,
            "driver_peak_rss_mib": peak_memory().get("peak_rss_mib"),
        }
        if cuda:
            memory["peak_cuda_mib"] = max(cuda)
        working = total - startup
        return {
            "rows_scored": rows_scored,
            "rows_skipped": rows_skipped,
            "images_per_second": rows_scored / working if rows_scored and working > 0 else None,
            "forwards": dict(self.costs["forwards"]),
            "memory": memory,
            "seconds": {
                "total": total,
                "startup": startup,
                "loading": loading,
                "loading_models": workers.get("loading_models", 0.0),
                "loading_files": workers.get("loading_files", 0.0),
                "encoding": workers.get("encoding", 0.0),
                "scoring": workers.get("scoring", 0.0) + clock.seconds["scoring"],
            },
            "engine": dict(
                self.layout,
                name="ray",
                units=self.costs["units"],
                chunks=self.costs["chunks"],
                worker_chunks={pid: w["chunks"] for pid, w in self.costs["workers"].items()},
            ),
        }

    def close(self) -> None:
        if self.ray is None:
            return
        ray, self.ray = self.ray, None
        context = ray.data.DataContext.get_current()
        for name, value in self.saved_context.items():
            setattr(context, name, value)
        if self.saved_log_level is not None:
            logging.getLogger("ray.data").setLevel(self.saved_log_level)
        if self.saved_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self.saved_sigterm)
        if self.owns_cluster:
            with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(Exception):
                ray.shutdown()
