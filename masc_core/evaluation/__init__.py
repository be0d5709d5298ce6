"""Evaluating generated images at scale: manifests in, results, summaries and agreement out.

- ``manifest``: read and check a manifest, every column and file of every subject; ``manifest_formats``: its rows
  from CSV or JSONL; ``manifest_ratings``: its human-rating columns;
- ``plan``: groups (rows sharing a reference), chunks, fingerprints, shards;
- ``scorer``: ``RowScorer``, the models loaded once, chunk after chunk -> records;
- ``metrics``: MaSC's columns and the registered baselines (one module each);
- ``records``: ``EvalRecord`` and the result files;
- ``options``: ``EvalOptions`` (what to score with), ``EngineOptions`` (where), the scoring identity;
- ``run``: ``evaluate`` (resumable, shardable; in this process or on Ray) and ``merge``;
- ``batch_scorer``: ``BatchScorer``, manifest rows in, result columns out (``ray.data`` ``map_batches``);
- ``ray_engine``: ``--engine ray``, the chunks scored by actors on a Ray cluster (Ray imported only there);
  ``ray_driver``: the driver's side that needs no Ray (reaching the cluster, its failures, a wait that takes signals);
- ``summary`` / ``agreement``: per-method statistics and agreement with human ratings;
- ``discrimination``: identity pairs (``same_subject``): ROC AUC per concept metric;
- ``timing`` / ``report``: where the time went, and the printed tables;
- ``plots``: the PNG plots beside summary.json (matplotlib, optional);
- ``score_log`` / ``append_log``: MaSC Log Scores' running log, and logs several writers append to safely;
- ``calibration``: ``calibrate``, the scores against the artist's picks; ``prune_study``: ``prune-report``;
  ``mask_study``: how much the verdicts hang on where the masks come from;
- ``builders``: manifests built from benchmark folders (DreamBench, DreamBench++, identity pairs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

# Imported when first used (PEP 562): reading a score log (calibrate, prune-report) loads no model code.
_PUBLIC = {
    ".manifest": ("Manifest", "ManifestRow", "read_manifest"),
    ".records": ("EvalRecord",),
    ".options": ("DEFAULT_CHUNK_SIZE", "EngineOptions", "EvalOptions"),
    ".run": ("EvalReport", "evaluate", "merge"),
    ".summary": ("SummaryOptions", "summarize"),
}
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)


if TYPE_CHECKING:
    from .manifest import Manifest, ManifestRow, read_manifest
    from .options import DEFAULT_CHUNK_SIZE, EngineOptions, EvalOptions
    from .records import EvalRecord
    from .run import EvalReport, evaluate, merge
    from .summary import SummaryOptions, summarize

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "EngineOptions",
    "EvalOptions",
    "EvalRecord",
    "EvalReport",
    "Manifest",
    "ManifestRow",
    "SummaryOptions",
    "evaluate",
    "merge",
    "read_manifest",
    "summarize",
]
