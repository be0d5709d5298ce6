"""Evaluating a manifest: score every row, resume, shard, merge and summarize.

How the work is cut (groups, chunks, fingerprints, shards) is ``plan``;
how rows are scored is ``scorer``; the files are ``records``.

- A rerun skips the chunks whose rows are all in results.jsonl with their
  current fingerprint and scores the others. Labels (method, seed, id,
  ratings) and the filter flags are refreshed from the manifest without
  rescoring.
- ``--shard i/n`` writes into ``DIR/shard-i-of-n/`` and no summary;
  ``merge`` checks the shards are complete and consistent and writes the
  files one run would have.
- The chunks are scored by an *engine*, chosen in ``make_engine``: this
  process (``InProcessEngine``, the default), or actors on a Ray cluster
  (``ray_engine``). An engine hands back each finished chunk's records, in
  any order; ``evaluate`` appends them to results.jsonl as they come, so
  every engine resumes the same way and writes the same files. The engine
  starts (models loaded, cluster joined) before the output folder is
  touched, so one that cannot start leaves earlier results as they were.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..io import files
from ..errors import MascInputError
from ..resources import peak_memory
from . import records as results
from .manifest import Manifest, read_manifest
from .options import DEFAULT_CHUNK_SIZE, EngineOptions, EvalOptions, scoring_identity
from .plan import Chunk, Group, digest, manifest_digest, plan, shard_groups
from .records import EvalRecord, canonical
from .scorer import RowScorer
from .summary import SummaryOptions, metrics_present, summarize
from .timing import Stopwatch, sum_timings

__all__ = ["DEFAULT_CHUNK_SIZE", "EngineOptions", "EvalOptions", "EvalReport", "evaluate", "merge", "scoring_identity"]

ProgressCallback = Callable[[int, int, int, float], None]
"""``progress(rows_done, rows_total, rows_scored_this_run, seconds_elapsed)`` after each chunk."""
ChunkDone = Callable[[Chunk, list[EvalRecord]], None]
"""What an engine calls with each finished chunk's records, in the order they finish."""


@dataclass
class EvalReport:
    """What a run or a merge did."""

    out_dir: str
    rows_total: int
    rows_scored: int
    rows_skipped: int
    timing: dict
    summary: dict | None
    written: list[str]
    merged_shards: int = 0
    """For a merge: how many shards; its timing is theirs added up."""
    records: list[EvalRecord] = field(default_factory=list, repr=False)
    """The rows in results.jsonl, in row order, as a reader of that file gets them (the plots are drawn from them)."""


# ---------------------------------------------------------------- the run


def _target_folder(out_dir: str, shard: tuple[int, int] | None) -> str:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise MascInputError(f"--out-dir '{out_dir}' is a file: give a folder")
    return out_dir if shard is None else os.path.join(out_dir, f"shard-{shard[0]}-of-{shard[1]}")


def _run_description(manifest: Manifest, identity: dict, options: EvalOptions, scope_rows: int, complete: bool) -> dict:
    return {
        "manifest": {
            "path": os.path.abspath(manifest.path),
            "rows": len(manifest.rows),
            "digest": manifest_digest(manifest),
        },
        "shard": list(options.shard) if options.shard else None,
        "scope_rows": scope_rows,
        "complete": complete,
        "model": options.model,
        "scoring": identity,
        "scoring_digest": digest(identity),
        "metrics": options.metric_names,
        "summary_options": options.summary.to_dict(),
    }


def check_ratings(manifest: Manifest, options: EvalOptions) -> None:
    """Ratings need the statistics packages and must lie on the rating scale."""
    if not manifest.has_ratings:
        return
    from .agreement import require

    require("scipy.stats")
    require("krippendorff")
    low, high = options.summary.rating_scale
    for row in manifest.rows:
        for aspect, given in row.ratings.items():
            for rater, value in given.items():
                if not low <= value <= high:
                    column = f"human_{aspect}" + (f".{rater}" if rater else "")
                    raise MascInputError(
                        f"manifest '{manifest.path}' {row.where(column)}: rating {value:g} is outside the rating "
                        f"scale {low:g}..{high:g} (set it with --rating-scale LOW HIGH)"
                    )


def _remove(folder: str, names: Sequence[str]) -> None:
    for name in names:
        if os.path.exists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))


def chunks_to_score(groups, stored: dict[int, EvalRecord]) -> list:
    """(group, chunk) pairs whose rows are not all stored with their current fingerprint."""
    return [
        (group, chunk)
        for group in groups
        for chunk in group.chunks
        if not all(
            r.index in stored and stored[r.index].fingerprint == f for r, f in zip(chunk.rows, chunk.fingerprints)
        )
    ]


class InProcessEngine:
    """The single-process engine: the models loaded once in this process, then chunk after chunk in plan order."""

    def __init__(self):
        self.scorer: RowScorer | None = None

    def start(self, options: EvalOptions, clock: Stopwatch, manifest: Manifest) -> None:
        self.scorer = RowScorer(options, clock)

    def score(self, todo: list[tuple[Group, Chunk]], done: ChunkDone) -> None:
        current = None
        for group, chunk in todo:
            if group is not current:
                self.scorer.start_group(group)
                current = group
            done(chunk, self.scorer.score_chunk(chunk))

    def timing(self, clock: Stopwatch, rows_scored: int, rows_skipped: int) -> dict:
        memory = peak_memory(self.scorer.encoder.device if self.scorer else None)
        return clock.report(rows_scored, rows_skipped, self.scorer.forwards() if self.scorer else None, memory)

    def close(self) -> None:
        pass


def make_engine(settings: EngineOptions, options: EvalOptions):
    """The one place an engine is chosen: this process (``single``), or a Ray cluster (``ray``, imported only then)."""
    settings.check(options.precision)
    if settings.name == "ray":
        from .ray_engine import RayEngine

        return RayEngine(settings)
    return InProcessEngine()


def evaluate(
    manifest_path: str,
    out_dir: str,
    options: EvalOptions,
    *,
    progress: ProgressCallback | None = None,
    engine: EngineOptions | None = None,
) -> EvalReport:
    """Score a manifest into ``out_dir`` (results.jsonl/csv, summary.json, run.json, timing.json); resume if possible.

    ``engine`` says where the chunks are scored (default: this process); every engine writes the same files.
    """
    clock = Stopwatch()
    engine = engine or EngineOptions()
    scoring = make_engine(engine, options)
    manifest = read_manifest(manifest_path)
    check_ratings(manifest, options)
    identity = scoring_identity(options, engine.scoring_device())
    groups = shard_groups(plan(manifest, options.chunk_size, digest(identity)), options.shard)
    scope = [row for g in groups for row in g.rows]
    target = _target_folder(out_dir, options.shard)
    log_path = os.path.join(target, results.RESULTS_JSONL)
    stored = {} if options.fresh else results.read_records(log_path)
    todo = chunks_to_score(groups, stored)
    skipped = len(scope) - sum(len(chunk.rows) for _, chunk in todo)
    scored = 0
    try:
        if todo:
            scoring.start(
                options, clock, manifest
            )  # models loaded (or the cluster joined) before the folder is touched
        os.makedirs(target, exist_ok=True)
        if options.fresh:
            _remove(target, (results.RESULTS_JSONL, results.RESULTS_CSV, results.SUMMARY_JSON, results.TIMING_JSON))
        files.write_json(
            os.path.join(target, results.RUN_JSON), _run_description(manifest, identity, options, len(scope), False)
        )
        if progress:
            progress(skipped, len(scope), 0, clock.elapsed)
        if todo:
            # Until the run ends, the folder must not show a summary or table of older rows.
            _remove(target, (results.RESULTS_CSV, results.SUMMARY_JSON))
            with results.open_results_log(log_path) as log:

                def done(chunk: Chunk, records: list[EvalRecord]) -> None:
                    nonlocal scored
                    with clock.phase("scoring"):
                        log.write("".join(results.record_line(r) for r in records))
                    stored.update((record.row, record) for record in records)
                    scored += len(records)
                    if progress:
                        progress(skipped + scored, len(scope), scored, clock.elapsed)

                scoring.score(todo, done)
    finally:
        scoring.close()
    min_foreground = options.summary.min_foreground
    records = canonical(
        [stored[row.index].relabel(row, min_foreground) for row in sorted(scope, key=lambda r: r.index)]
    )
    written, summary = write_outputs(
        target, records, options.metric_names, options.summary if options.shard is None else None
    )
    files.write_json(
        os.path.join(target, results.RUN_JSON), _run_description(manifest, identity, options, len(scope), True)
    )
    timing = scoring.timing(clock, scored, skipped)
    files.write_json(os.path.join(target, results.TIMING_JSON), timing)
    written += [os.path.join(target, results.RUN_JSON), os.path.join(target, results.TIMING_JSON)]
    return EvalReport(
        out_dir=target,
        rows_total=len(scope),
        rows_scored=scored,
        rows_skipped=skipped,
        timing=timing,
        summary=summary,
        written=written,
        records=records,
    )


def write_outputs(
    folder: str, records: list[EvalRecord], metric_names: list[str], summary_options: SummaryOptions | None
) -> tuple[list[str], dict | None]:
    """results.jsonl, results.csv and (unless ``summary_options`` is None) summary.json: (their paths, the summary)."""
    results.write_results(folder, records, metrics_present(records) or metric_names)
    written = [os.path.join(folder, results.RESULTS_JSONL), os.path.join(folder, results.RESULTS_CSV)]
    summary = None
    if summary_options is not None:
        summary = summarize(records, summary_options)
        files.write_json(os.path.join(folder, results.SUMMARY_JSON), summary)
        written.append(os.path.join(folder, results.SUMMARY_JSON))
    return written, summary


# ---------------------------------------------------------------- merging shards


def read_shard_runs(out_dir: str, shard_dirs: Sequence[str] | None = None) -> list[tuple[str, dict]]:
    """(folder, run.json) of every shard of one complete, consistent split, or a one-line error."""
    folders = list(shard_dirs) if shard_dirs else sorted(glob.glob(os.path.join(out_dir, "shard-*-of-*")))
    if not folders:
        raise MascInputError(
            f"no shard folders to merge in '{out_dir}': run eval with --shard i/n first, or name the shard folders"
        )
    runs = []
    for folder in folders:
        run = files.read_json(os.path.join(folder, results.RUN_JSON), "shard run file")
        if not run.get("shard"):
            raise MascInputError(f"'{folder}' is not a shard (its run.json has no shard): merge only --shard outputs")
        if not run.get("complete"):
            raise MascInputError(f"shard '{folder}' did not finish: rerun its eval command (it resumes), then merge")
        runs.append((folder, run))
    first = runs[0][1]
    count = first["shard"][1]
    for key, what in (("scoring_digest", "model or scoring options"), ("summary_options", "summary options")):
        for folder, run in runs:
            if run[key] != first[key]:
                raise MascInputError(
                    f"shard '{folder}' was run with other {what} than '{runs[0][0]}': rerun it with the same options"
                )
    for folder, run in runs:
        if run["manifest"]["digest"] != first["manifest"]["digest"]:
            raise MascInputError(f"shard '{folder}' was run on another manifest than '{runs[0][0]}'")
        if run["shard"][1] != count:
            raise MascInputError(
                f"shard '{folder}' is one of {run['shard'][1]}, not of {count}: merge shards of one split"
            )
    indices = sorted(run["shard"][0] for _, run in runs)
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        problem = f"shard {missing[0]}/{count} is missing" if missing else "a shard is given twice"
        raise MascInputError(f"cannot merge: {problem}")
    return runs


def merge(out_dir: str, shard_dirs: Sequence[str] | None = None) -> EvalReport:
    """Merge complete shard folders (default: ``out_dir/shard-*-of-*``) into the files one run writes."""
    clock = Stopwatch()
    runs = read_shard_runs(out_dir, shard_dirs)
    first = runs[0][1]
    records: dict[int, EvalRecord] = {}
    for folder, run in runs:
        shard_records = results.read_records(os.path.join(folder, results.RESULTS_JSONL))
        if len(shard_records) != run["scope_rows"]:
            raise MascInputError(
                f"shard '{folder}' has {len(shard_records)} result rows for {run['scope_rows']}: rerun it"
            )
        records.update(shard_records)
    total = first["manifest"]["rows"]
    if sorted(records) != list(range(total)):
        raise MascInputError(
            f"the shards hold {len(records)} distinct rows for a manifest of {total}: rerun the shards"
        )
    os.makedirs(out_dir, exist_ok=True)
    rows = [records[i] for i in range(total)]
    written, summary = write_outputs(
        out_dir, rows, first["metrics"], SummaryOptions.from_dict(first["summary_options"])
    )
    merged_run = dict(
        first, shard=None, scope_rows=total, complete=True, merged_from=[os.path.abspath(f) for f, _ in runs]
    )
    files.write_json(os.path.join(out_dir, results.RUN_JSON), merged_run)
    timing = sum_timings([os.path.join(f, results.TIMING_JSON) for f, _ in runs])
    timing["merge_seconds"] = clock.elapsed
    files.write_json(os.path.join(out_dir, results.TIMING_JSON), timing)
    written += [os.path.join(out_dir, results.RUN_JSON), os.path.join(out_dir, results.TIMING_JSON)]
    return EvalReport(
        out_dir=out_dir,
        rows_total=total,
        rows_scored=timing["rows_scored"],
        rows_skipped=timing["rows_skipped"],
        timing=timing,
        summary=summary,
        written=written,
        merged_shards=len(runs),
        records=rows,
    )
