"""``BatchScorer``: a batch of manifest rows in, the columns ``eval`` writes out. Torch only, no Ray.

It is the callable class to hand to ``ray.data.Dataset.map_batches``, which
makes one instance per actor, so the models are loaded once per actor::

    ds = ray.data.read_csv("bench/manifest.csv")
    scored = ds.map_batches(
        BatchScorer,
        fn_constructor_kwargs={
            "options": EvalOptions("google/siglip2-so400m-patch16-naflex", baselines=("global",)),
            "base_dir": "bench",
        },
        concurrency=4, num_gpus=1, batch_size=64,
    )
    scored.write_parquet("bench/scores")

A batch (a dict of columns, numpy or pandas) has the manifest's columns
(``ref``, ``ref_mask``, ``out``, ``out_mask``, ``prompt``, ``subject``;
optional ``method``, ``seed``, ``id``, ``same_subject``, ``human_*``) and
may add ``row`` (the row's key, copied to the results; -1 without it),
``line`` (for messages) and ``chunk`` (see below). Relative paths are
resolved against ``base_dir`` (default: the working directory).

What comes out, one row per input row: the columns of results.csv, typed
(metrics, ``out_foreground`` and the pooled ratings as float64 with NaN
where undefined; ``small_out_mask``, ``small_ref_mask``, ``filtered``,
``same_subject`` as bool; the rest as the text results.csv has, lists
joined with ``|``), without the per-rater rating columns, plus ``record``:
the row's results.jsonl line, every value exact (per-rater ratings
included).

Inside a batch the rows are planned as ``eval`` plans a manifest
(``plan``): rows sharing a reference form a group, whose reference is
encoded once; a group's rows are cut into chunks of ``chunk_size``, or
where the ``chunk`` column changes. A chunk's scores depend on the chunk
alone, so the same rows in the same chunks give the same bits in any
process. ``__call__`` yields one output per chunk (Ray streams them);
``score_batch`` returns one for the whole batch. ``--engine ray``
(``ray_engine``) uses ``output="chunks"``: one row per chunk carrying its
records and what the chunk cost.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from ..errors import MascInputError
from ..resources import peak_memory
from .manifest import ManifestRow, parse_records
from .metrics import MASC_COLUMNS as MASC_METRIC_COLUMNS
from .options import EvalOptions, scoring_identity
from .plan import Chunk, digest, plan_rows
from .records import EvalRecord, csv_cells, csv_columns, record_line
from .scorer import RowScorer
from .timing import Stopwatch

OUTPUTS = ("rows", "chunks")
FLAG_COLUMNS = ("small_out_mask", "small_ref_mask", "filtered", "same_subject")
NUMBER_COLUMNS = ("out_foreground", "human_cp", "human_pf")
KEY_COLUMNS = ("row", "line", "chunk")
"""Columns a batch may add to the manifest's: the row's key, its line for messages, its chunk."""


class BatchScorer:
    """The models loaded once; then batch after batch of manifest rows -> result columns (see the module)."""

    def __init__(
        self,
        options: EvalOptions,
        *,
        base_dir: str | None = None,
        source: str = "batch",
        threads: int | None = None,
        output: str = "rows",
    ):
        """``options``: the run's, as for ``eval`` (model, device, precision, patch budget, batch and chunk sizes,
        baselines and their folders, the summary's mask filter; a dataclass, so Ray hands it to each actor as it
        is). ``base_dir``: where relative paths start; ``source``: the rows' name in messages; ``threads``: torch's
        CPU threads in this process (with several actors on one machine, the CPUs each may use); ``output``: "rows"
        or "chunks"."""
        if output not in OUTPUTS:
            raise MascInputError(f"output '{output}' is not one of {', '.join(OUTPUTS)}")
        if threads:
            torch.set_num_threads(int(threads))
        self.options = options
        self.base_dir = os.path.abspath(base_dir or os.getcwd())
        self.source = source
        self.output = output
        self.identity_digest = digest(scoring_identity(self.options))
        self.clock = Stopwatch()
        self.scorer = RowScorer(self.options, self.clock)
        self._spent = self._snapshot()
        self._spent["seconds"]["loading_models"] = 0.0  # the first chunk reports the model loading
        self.ready_at = time.time()
        """When this scorer was ready to score (wall clock: an engine compares it across processes)."""

    # ------------------------------------------------------------ the API

    def __call__(self, batch: Mapping[str, Any]) -> Iterator[dict[str, np.ndarray]]:
        """One output per chunk of the batch, as each is scored."""
        for chunk, records in self.chunks(batch):
            yield (
                self._chunk_output(chunk, records)
                if self.output == "chunks"
                else result_columns(records, self.options.metric_names)
            )

    def score_batch(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The whole batch's output at once (outside Ray, or for a caller that wants one result per batch)."""
        parts = list(self(batch))
        if not parts:
            return {}
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def chunks(self, batch: Mapping[str, Any]) -> Iterator[tuple[Chunk, list[EvalRecord]]]:
        """(chunk, its records) for each chunk of the batch, group by group."""
        rows, keys = self.rows(batch)
        for group in plan_rows(rows, self.options.chunk_size, self.identity_digest, keys):
            self.scorer.start_group(group)
            for chunk in group.chunks:
                yield chunk, self.scorer.score_chunk(chunk)

    def rows(self, batch: Mapping[str, Any]) -> tuple[list[ManifestRow], list | None]:
        """The batch's rows, checked as a manifest's are, and their ``chunk`` keys (None without the column)."""
        columns = [str(name) for name in batch.keys()]
        values = {name: [_plain(v) for v in _column(batch[name])] for name in columns}
        count = len(values[columns[0]]) if columns else 0
        if "seed" in values:  # a numeric column with gaps arrives as floats: seed 0.0 is seed 0
            values["seed"] = [int(v) if isinstance(v, float) and v.is_integer() else v for v in values["seed"]]
        lines = [int(v) for v in values["line"]] if "line" in values else list(range(1, count + 1))
        indices = [int(v) for v in values["row"]] if "row" in values else [-1] * count
        records = [
            (lines[i], {name: values[name][i] for name in columns if name not in KEY_COLUMNS}) for i in range(count)
        ]
        manifest = parse_records(
            self.source, self.base_dir, [c for c in columns if c not in KEY_COLUMNS], records, indices
        )
        return manifest.rows, values.get("chunk")

    # ------------------------------------------------------------ engine output

    def _snapshot(self) -> dict:
        return {"seconds": dict(self.clock.seconds), "forwards": self.scorer.forwards()}

    def _chunk_output(self, chunk: Chunk, records: list[EvalRecord]) -> dict[str, np.ndarray]:
        """One row: the chunk's key, its results.jsonl lines, and what it cost on this worker since the last chunk."""
        now = self._snapshot()
        cost = {
            "worker": os.getpid(),
            "ready_at": self.ready_at,
            "seconds": {k: v - self._spent["seconds"].get(k, 0.0) for k, v in now["seconds"].items()},
            "forwards": {k: v - self._spent["forwards"].get(k, 0) for k, v in now["forwards"].items()},
            "memory": peak_memory(self.scorer.encoder.device),
        }
        self._spent = now
        return {
            "chunk": np.array([chunk.key]),
            "rows": np.array([len(records)], dtype=np.int64),
            "records": np.array(["".join(record_line(r) for r in records)], dtype=object),
            "cost": np.array([json.dumps(cost)], dtype=object),
        }


def result_columns(records: list[EvalRecord], metric_names: Sequence[str]) -> dict[str, np.ndarray]:
    """results.csv's columns for ``records``, typed (see the module), plus ``record``: each row's results.jsonl line."""
    several = [
        c.name for c in MASC_METRIC_COLUMNS if c.name not in metric_names and any(c.name in r.metrics for r in records)
    ]
    metric_names = list(metric_names) + several  # cp_mean and blend: batches holding several-subject rows
    numbers = set(NUMBER_COLUMNS) | set(metric_names)
    columns = [c for c in csv_columns(records, metric_names) if not (c.startswith("human_") and "." in c)]
    cells = [csv_cells(record, columns, spreadsheet=False) for record in records]  # typed data, not a file
    out: dict[str, np.ndarray] = {}
    for position, name in enumerate(columns):
        texts = [row[position] for row in cells]
        if name == "row":
            out[name] = np.array([int(t) for t in texts], dtype=np.int64)
        elif name in numbers:
            out[name] = np.array([float(t) if t else math.nan for t in texts], dtype=np.float64)
        elif name in FLAG_COLUMNS:
            out[name] = np.array([t == "true" for t in texts], dtype=bool)
        else:
            out[name] = np.array(texts, dtype=object)
    out["record"] = np.array([record_line(r)[:-1] for r in records], dtype=object)
    return out


def _column(values: Any) -> list:
    """A batch column (numpy array, pandas Series, list) as a list."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _plain(value: Any) -> Any:
    """A cell as the manifest reader takes it: numpy values as Python ones, NaN and pandas' NA as missing."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
