"""Evaluating generated images at scale: manifests in, results, summaries and agreement out.

- ``manifest``: read and check a manifest (CSV/JSONL);
- ``plan``: groups (rows sharing a reference), chunks, fingerprints, shards;
- ``scorer``: ``RowScorer``, the models loaded once, chunk after chunk -> records;
- ``metrics``: MaSC's columns and the registered baselines (one module each);
- ``records``: ``EvalRecord`` and the result files;
- ``run``: ``evaluate`` (resumable, shardable) and ``merge``;
- ``summary`` / ``agreement``: per-method statistics and agreement with human ratings;
- ``discrimination``: identity pairs (``same_subject``): ROC AUC per concept metric;
- ``timing`` / ``report``: where the time went, and the printed tables;
- ``plots``: the PNG plots beside summary.json (matplotlib, optional);
- ``builders``: manifests built from benchmark folders (DreamBench, DreamBench++, identity pairs).
"""

from .manifest import Manifest, ManifestRow, read_manifest
from .records import EvalRecord
from .run import DEFAULT_CHUNK_SIZE, EvalOptions, EvalReport, evaluate, merge
from .summary import SummaryOptions, summarize

__all__ = [
    "DEFAULT_CHUNK_SIZE", "EvalOptions", "EvalRecord", "EvalReport", "Manifest", "ManifestRow", "SummaryOptions",
    "evaluate", "merge", "read_manifest", "summarize",
]
