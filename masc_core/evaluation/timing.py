"""Where an evaluation's time and memory went (``timing.json``).

Phases: loading (models, and image files), encoding (vision and text
forwards of every model), scoring (the metric arithmetic, baselines,
writing), and the rest (manifest, planning, summary); images per second =
rows scored / (total - model loading); how many inputs each model encoded;
peak memory.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from ..io.files import read_json


class Stopwatch:
    """Seconds spent per phase (loading, encoding, scoring)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.seconds = {"loading_models": 0.0, "loading_files": 0.0, "encoding": 0.0, "scoring": 0.0}

    @contextmanager
    def phase(self, name: str):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - began

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def report(
        self, rows_scored: int, rows_skipped: int, forwards: dict | None = None, memory: dict | None = None
    ) -> dict:
        total = self.elapsed
        loading = self.seconds["loading_models"] + self.seconds["loading_files"]
        working = total - self.seconds["loading_models"]
        return {
            "rows_scored": rows_scored,
            "rows_skipped": rows_skipped,
            "images_per_second": rows_scored / working if rows_scored and working > 0 else None,
            "forwards": forwards or {},
            "memory": memory or {},
            "seconds": {
                "total": total,
                "loading": loading,
                "loading_models": self.seconds["loading_models"],
                "loading_files": self.seconds["loading_files"],
                "encoding": self.seconds["encoding"],
                "scoring": self.seconds["scoring"],
                "other": max(0.0, total - loading - self.seconds["encoding"] - self.seconds["scoring"]),
            },
        }


def sum_timings(paths: list[str]) -> dict:
    """The shards' timings added up (seconds of work, not wall time: shards may run in parallel)."""
    total = {"rows_scored": 0, "rows_skipped": 0, "seconds": {}, "memory": {}}
    for path in paths:
        if not os.path.exists(path):
            continue
        timing = read_json(path, "shard timing file")
        total["rows_scored"] += timing.get("rows_scored", 0)
        total["rows_skipped"] += timing.get("rows_skipped", 0)
        for key, value in (timing.get("seconds") or {}).items():
            total["seconds"][key] = total["seconds"].get(key, 0.0) + value
        # Shards are separate processes: the merged peak is the largest one's.
        for key, value in (timing.get("memory") or {}).items():
            if value is not None:
                total["memory"][key] = max(total["memory"].get(key, value), value)
    working = total["seconds"].get("total", 0.0) - total["seconds"].get("loading_models", 0.0)
    total["images_per_second"] = total["rows_scored"] / working if total["rows_scored"] and working > 0 else None
    return total
