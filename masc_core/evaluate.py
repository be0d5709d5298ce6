"""Evaluating a manifest: score every row, resume, shard, merge, summarize, and time it.

How the work is cut, and why:

- Rows that share their reference view(s) and masks form a *group*; groups
  are ordered by their first row. The reference is encoded once per group.
- A group's rows, in manifest order, are cut into *chunks* of
  ``chunk_size`` rows. A chunk is the unit of work, of resume and of
  determinism: its outputs and prompts are encoded in batches made of that
  chunk only (the encoder's cache is emptied between chunks, keeping only
  the group's reference, which is encoded alone). Batching changes the last
  bits of a forward pass (padding, kernel choice), so this is what makes
  every score a function of its chunk alone: a resumed run, a sharded run
  and a single run write the same bytes.
- Each row's ``fingerprint`` hashes what its scores depend on: the model
  and options, the row's paths (as written), prompt, subject and file
  sizes, and the same for the rest of its chunk. A rerun skips the chunks
  whose rows are all in results.jsonl with their current fingerprint and
  scores the others. Labels (method, seed, id, ratings) and the filter flags
  are refreshed from the manifest without rescoring.
- ``--shard i/n`` takes the groups whose position modulo n is i, writes
  into ``DIR/shard-i-of-n/`` and no summary; ``merge`` checks the shards are
  complete and consistent and writes the files one run would have.

Timing (``timing.json``, stderr): loading (models, and image files),
encoding (vision and text forwards of every model), scoring (the metric
arithmetic, baselines, writing), and the rest (manifest, planning,
summary); images per second = rows scored / (total - model loading); and
how many inputs each model encoded.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from . import checkpoint as checkpoints
from . import results as files
from .baselines import (
    CLIP_METRICS,
    DINO_METRICS,
    DINO_MODEL_TYPES,
    SAME_BACKBONE_GROUPS,
    ClipEmbedder,
    DinoEmbedder,
    inspect_folder,
    mean_cosine_to_references,
    pooled_embeddings,
    same_backbone_scores,
)
from .devices import resolve_device, resolve_dtype
from .encoder import MascEncoder
from .errors import MascInputError
from .images import load_image_file, load_mask_file
from .manifest import ASPECTS, Manifest, ManifestRow, read_manifest
from .metric import global_cosine
from .preprocess import PreprocessSpec
from .resources import peak_memory
from .scoring import score_images
from .stripping import strip_subject
from .summary import SummaryOptions, apply_filter, metrics_present, summarize

DEFAULT_CHUNK_SIZE = 32
ProgressCallback = Callable[[int, int, int, float], None]
"""``progress(rows_done, rows_total, rows_scored_this_run, seconds_elapsed)`` after each chunk."""


@dataclass(frozen=True)
class EvalOptions:
    """How to score a manifest (model, baselines, batching) and summarize it."""

    model: str
    device: str = "auto"
    precision: str = "fp32"
    max_patches: int | None = None
    batch_size: int = 8
    chunk_size: int = DEFAULT_CHUNK_SIZE
    baselines: tuple[str, ...] = ()
    """Same-backbone baseline groups: "global", "pf-ablations"."""
    clip: str | None = None
    """CLIP checkpoint folder for CLIP-I and CLIP-T."""
    dino: str | None = None
    """DINO checkpoint folder for DINO-I."""
    summary: SummaryOptions = field(default_factory=SummaryOptions)
    shard: tuple[int, int] | None = None
    fresh: bool = False
    """Ignore (delete) earlier results in the output folder."""

    @property
    def metric_names(self) -> list[str]:
        names = ["cp", "pf"]
        for group in self.baselines:
            names += SAME_BACKBONE_GROUPS[group]
        if self.clip:
            names += CLIP_METRICS
        if self.dino:
            names += DINO_METRICS
        return names


@dataclass
class Chunk:
    rows: list[ManifestRow]
    fingerprints: list[str]


@dataclass
class Group:
    """Rows that share their reference view(s) and reference mask(s)."""

    ordinal: int
    rows: list[ManifestRow]
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def first(self) -> ManifestRow:
        return self.rows[0]


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

    def report(self, rows_scored: int, rows_skipped: int, forwards: dict | None = None, memory: dict | None = None) -> dict:
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


# ---------------------------------------------------------------- identities and fingerprints


def _digest(*parts) -> str:
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8"))
    return hasher.hexdigest()


def folder_digest(folder: str) -> str:
    """Identity of a checkpoint folder: its small JSON files' bytes and every file's name and size."""
    parts = []
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        if not os.path.isfile(full):
            continue
        if name in ("config.json", "preprocessor_config.json", "tokenizer_config.json"):
            with open(full, "rb") as handle:
                parts.append([name, hashlib.blake2b(handle.read(), digest_size=16).hexdigest()])
        else:
            parts.append([name, os.path.getsize(full)])
    return _digest(parts)


def scoring_identity(options: EvalOptions) -> dict:
    """Everything the scores depend on besides the rows, checked without loading any weights."""
    for group in options.baselines:
        if group not in SAME_BACKBONE_GROUPS:
            raise MascInputError(f"--baselines '{group}' is unknown: use {', '.join(SAME_BACKBONE_GROUPS)}")
    if options.chunk_size < 1:
        raise MascInputError(f"--chunk-size is {options.chunk_size}: give at least 1 row")
    folder, source = checkpoints.resolve(options.model)
    info = checkpoints.inspect(folder, source)
    spec = PreprocessSpec.from_configs(
        naflex=info.naflex, vision_config=info.vision_config, preprocessor_config=info.preprocessor_config,
        max_num_patches=options.max_patches,
    )
    dtype = resolve_dtype(options.precision, resolve_device(options.device))
    identity = {
        "model": folder_digest(folder),
        "kind": "naflex" if spec.naflex else "fixed",
        "max_num_patches": spec.max_num_patches if spec.naflex else None,
        "precision": str(dtype).replace("torch.", ""),
        "metrics": options.metric_names,
        "chunk_size": options.chunk_size,
    }
    if options.clip:
        inspect_folder(options.clip, "--clip", ("clip",))
        identity["clip"] = folder_digest(options.clip)
    if options.dino:
        inspect_folder(options.dino, "--dino", tuple(DINO_MODEL_TYPES))
        identity["dino"] = folder_digest(options.dino)
    return identity


def _content(row: ManifestRow) -> list:
    """What a row's scores depend on: paths as written (so a moved manifest still resumes), texts, file sizes."""
    sizes = [os.path.getsize(p) for p in (*row.ref_paths, *row.ref_mask_paths, row.out_path)]
    sizes.append(os.path.getsize(row.out_mask_path) if row.out_mask_path else None)
    return [list(row.ref), list(row.ref_mask), row.out, row.out_mask, row.prompt, row.subject, sizes]


def plan(manifest: Manifest, chunk_size: int, identity_digest: str) -> list[Group]:
    """Groups (by reference) in order of first row, cut into chunks, with each row's fingerprint."""
    by_key: dict[tuple, Group] = {}
    for row in manifest.rows:
        key = (row.ref_paths, row.ref_mask_paths)
        if key not in by_key:
            by_key[key] = Group(ordinal=len(by_key), rows=[])
        by_key[key].rows.append(row)
    groups = list(by_key.values())
    for group in groups:
        contents = [_digest(_content(row)) for row in group.rows]
        for start in range(0, len(group.rows), chunk_size):
            rows = group.rows[start : start + chunk_size]
            chunk_digest = _digest(identity_digest, contents[start : start + chunk_size])
            group.chunks.append(Chunk(rows, [_digest(chunk_digest, c) for c in contents[start : start + chunk_size]]))
    return groups


def shard_groups(groups: list[Group], shard: tuple[int, int] | None) -> list[Group]:
    """The groups shard i of n scores: those whose position modulo n is i."""
    if shard is None:
        return groups
    index, count = shard
    return [g for g in groups if g.ordinal % count == index]


def manifest_digest(manifest: Manifest) -> str:
    """Identity of a manifest's content (rows, labels, ratings), to check that shards belong together."""
    return _digest(
        [[_content(r), r.method, r.seed, r.id, r.ratings] for r in manifest.rows]
    )


# ---------------------------------------------------------------- records


def _labels(row: ManifestRow) -> dict:
    return {
        "id": row.id,
        "method": row.method,
        "seed": row.seed,
        "human_cp": row.human("cp"),
        "human_pf": row.human("pf"),
        "ratings": {aspect: dict(row.ratings[aspect]) for aspect in ASPECTS if aspect in row.ratings},
    }


def refresh(record: dict, row: ManifestRow, min_foreground: float) -> dict:
    """The row's stored scores with its current labels, ratings and filter flags."""
    record.update(_labels(row))
    apply_filter(record, min_foreground)
    return record


def _record(row: ManifestRow, fingerprint: str, score, ref_fractions: list[float], extra: dict, reasons: dict, min_foreground: float) -> dict:
    labels = _labels(row)
    record = {
        "row": row.index,
        "id": labels["id"],
        "method": labels["method"],
        "seed": labels["seed"],
        "subject": row.subject,
        "prompt": row.prompt,
        "encoded_prompt": score.encoded_prompt,
        "subject_found": score.subject_found,
        "ref": list(row.ref),
        "ref_mask": list(row.ref_mask),
        "out": row.out,
        "out_mask": row.out_mask,
        "cp": score.cp,
        "pf": score.pf,
        "cp_per_reference": list(score.cp_per_reference),
        "cp_undefined": score.cp_undefined,
        "pf_undefined": score.pf_undefined,
    }
    record.update(extra)
    record.update(
        {
            "baseline_undefined": reasons,
            "out_foreground": score.foreground_fraction,
            "ref_foreground": list(ref_fractions),
            "small_out_mask": False,
            "small_ref_mask": False,
            "filtered": False,
            "human_cp": labels["human_cp"],
            "human_pf": labels["human_pf"],
            "ratings": labels["ratings"],
            "fingerprint": fingerprint,
        }
    )
    apply_filter(record, min_foreground)
    return record


# ---------------------------------------------------------------- scoring


class _Scorer:
    """Loads the models once and scores chunk after chunk, each chunk on its own."""

    def __init__(self, options: EvalOptions, clock: Stopwatch):
        self.options = options
        self.clock = clock
        with clock.phase("loading_models"):
            self.encoder = MascEncoder.load(
                options.model, device=options.device, precision=options.precision,
                max_num_patches=options.max_patches, batch_size=options.batch_size,
            )
            device, dtype = self.encoder.device, self.encoder.dtype
            self.clip = ClipEmbedder.load(options.clip, device=device, dtype=dtype, batch_size=options.batch_size) if options.clip else None
            self.dino = DinoEmbedder.load(options.dino, device=device, dtype=dtype, batch_size=options.batch_size) if options.dino else None
        self.same_backbone = [name for group in options.baselines for name in SAME_BACKBONE_GROUPS[group]]
        self.needs_full_prompts = bool({"global_pf", "pf_bg_unstripped", "pf_fg_unstripped"} & set(self.same_backbone))

    def forwards(self) -> dict:
        """Inputs each model encoded (repeated images and prompts within a chunk are encoded once)."""
        counts = {"siglip_images": self.encoder.forward_counts["images"], "siglip_texts": self.encoder.forward_counts["texts"]}
        if self.clip is not None:
            counts["clip_images"] = self.clip.forwards
            counts["clip_texts"] = self.clip.text_forwards
        if self.dino is not None:
            counts["dino_images"] = self.dino.forwards
        return counts

    def start_group(self, group: Group) -> None:
        first = group.first
        with self.clock.phase("loading_files"):
            self.refs = [load_image_file(p, f"manifest line {first.line}, column 'ref'") for p in first.ref_paths]
            self.ref_masks = [load_mask_file(p, f"manifest line {first.line}, column 'ref_mask'") for p in first.ref_mask_paths]
        with self.clock.phase("encoding"):
            encoder = self.encoder
            encoder.clear_cache()
            # The reference alone in its batch: the same bits whichever chunk comes first.
            ref_tokens = encoder.encode_images(self.refs)
            keys = [encoder.image_key(img) for img in self.refs]
            self.pinned = [(k, encoder.image_cache.get(k)) for k in dict.fromkeys(keys)]
            self.ref_pooled = (
                torch.stack(pooled_embeddings(encoder, ref_tokens, [None] * len(ref_tokens))) if "global_cp" in self.same_backbone else None
            )
            self.clip_refs = self.clip.images(self.refs) if self.clip else None
            self.dino_refs = self.dino.images(self.refs) if self.dino else None

    def _restore_reference(self) -> None:
        encoder = self.encoder
        encoder.clear_cache()
        for key, value in self.pinned:
            if value is None:  # the cache could not hold it: encode it alone again
                encoder.encode_images(self.refs)
                return
            encoder.image_cache.put(key, value, value.tokens.numel() * value.tokens.element_size())

    def score_chunk(self, chunk: Chunk) -> list[dict]:
        rows = chunk.rows
        options = self.options
        with self.clock.phase("loading_files"):
            outs = [load_image_file(r.out_path, f"manifest line {r.line}, column 'out'") for r in rows]
            masks = [
                load_mask_file(r.out_mask_path, f"manifest line {r.line}, column 'out_mask'") if r.out_mask_path else None
                for r in rows
            ]
        prompts = [r.prompt for r in rows]
        subjects = [r.subject for r in rows]
        stripped = [strip_subject(p, s) for p, s in zip(prompts, subjects)]
        encoder = self.encoder
        with self.clock.phase("encoding"):
            self._restore_reference()
            out_tokens = encoder.encode_images(outs)
            # All of the chunk's texts in one go (PF's stripped prompts; the full ones for the global baselines).
            encoder.encode_texts(list(dict.fromkeys(stripped + (prompts if self.needs_full_prompts else []))))
            clip_outs = self.clip.images(outs) if self.clip else None
            clip_texts = self.clip.texts(prompts) if self.clip else None
            dino_outs = self.dino.images(outs) if self.dino else None
        with self.clock.phase("scoring"):
            scores = [None] * len(rows)
            ref_fractions: list[float] = []
            # score_images takes masks for all outputs or for none.
            for members in ([i for i, m in enumerate(masks) if m is not None], [i for i, m in enumerate(masks) if m is None]):
                if not members:
                    continue
                batch = score_images(
                    encoder, [outs[i] for i in members], reference=self.refs, reference_mask=self.ref_masks,
                    mask=[masks[i] for i in members] if masks[members[0]] is not None else None,
                    prompt=[prompts[i] for i in members], subject=[subjects[i] for i in members],
                    min_foreground=options.summary.min_foreground,
                )
                ref_fractions = [r.foreground_fraction for r in batch.references]
                for i, score in zip(members, batch.scores):
                    scores[i] = score
            extra: list[dict] = [{} for _ in rows]
            reasons: list[dict] = [{} for _ in rows]
            if self.same_backbone:
                values, why = same_backbone_scores(
                    encoder, self.same_backbone, reference_pooled=self.ref_pooled, outputs=out_tokens, masks=masks,
                    prompts=prompts, stripped_prompts=stripped,
                )
                for i in range(len(rows)):
                    extra[i].update({name: values[i][name] for name in self.same_backbone})
                    reasons[i].update(why[i])
            if self.clip is not None:
                clip_i = mean_cosine_to_references(clip_outs, self.clip_refs)
                clip_t = global_cosine(clip_outs, clip_texts).tolist()
                for i in range(len(rows)):
                    extra[i].update(clip_i=clip_i[i], clip_t=clip_t[i])
            if self.dino is not None:
                for i, value in enumerate(mean_cosine_to_references(dino_outs, self.dino_refs)):
                    extra[i]["dino_i"] = value
            return [
                _record(row, fingerprint, scores[i], ref_fractions, extra[i], reasons[i], options.summary.min_foreground)
                for i, (row, fingerprint) in enumerate(zip(rows, chunk.fingerprints))
            ]


# ---------------------------------------------------------------- the run


def _target_folder(out_dir: str, shard: tuple[int, int] | None) -> str:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise MascInputError(f"--out-dir '{out_dir}' is a file: give a folder")
    return out_dir if shard is None else os.path.join(out_dir, f"shard-{shard[0]}-of-{shard[1]}")


def _canonical(records: list[dict]) -> list[dict]:
    # Through JSON and back, as a merge reads them: the summary then sees the
    # exact values a merge would.
    return [json.loads(files.record_line(r)) for r in records]


def _run_description(manifest: Manifest, identity: dict, options: EvalOptions, scope_rows: int, complete: bool) -> dict:
    return {
        "manifest": {"path": os.path.abspath(manifest.path), "rows": len(manifest.rows), "digest": manifest_digest(manifest)},
        "shard": list(options.shard) if options.shard else None,
        "scope_rows": scope_rows,
        "complete": complete,
        "model": options.model,
        "scoring": identity,
        "scoring_digest": _digest(identity),
        "metrics": options.metric_names,
        "summary_options": options.summary.to_dict(),
    }


def evaluate(manifest_path: str, out_dir: str, options: EvalOptions, *, progress: ProgressCallback | None = None) -> EvalReport:
    """Score a manifest into ``out_dir`` (results.jsonl/csv, summary.json, run.json, timing.json); resume if possible."""
    clock = Stopwatch()
    manifest = read_manifest(manifest_path)
    if manifest.has_ratings:
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
    identity = scoring_identity(options)
    groups = shard_groups(plan(manifest, options.chunk_size, _digest(identity)), options.shard)
    scope = [row for g in groups for row in g.rows]
    target = _target_folder(out_dir, options.shard)
    os.makedirs(target, exist_ok=True)
    log_path = os.path.join(target, files.RESULTS_JSONL)
    if options.fresh:
        for name in (files.RESULTS_JSONL, files.RESULTS_CSV, files.SUMMARY_JSON, files.TIMING_JSON):
            if os.path.exists(os.path.join(target, name)):
                os.remove(os.path.join(target, name))
    files.write_json(os.path.join(target, files.RUN_JSON), _run_description(manifest, identity, options, len(scope), False))
    stored = files.read_records(log_path)
    todo = [
        (group, chunk) for group in groups for chunk in group.chunks
        if not all(stored.get(r.index, {}).get("fingerprint") == f for r, f in zip(chunk.rows, chunk.fingerprints))
    ]
    rows_todo = sum(len(chunk.rows) for _, chunk in todo)
    done = len(scope) - rows_todo
    scored = 0
    scorer = None
    if progress:
        progress(done, len(scope), 0, clock.elapsed)
    if todo:
        # Until the run ends, the folder must not show a summary or table of older rows.
        for name in (files.RESULTS_CSV, files.SUMMARY_JSON):
            if os.path.exists(os.path.join(target, name)):
                os.remove(os.path.join(target, name))
        scorer = _Scorer(options, clock)
        with files.AppendLog(log_path) as log:
            current = None
            for group, chunk in todo:
                if group is not current:
                    scorer.start_group(group)
                    current = group
                records = scorer.score_chunk(chunk)
                with clock.phase("scoring"):
                    log.append(records)
                for record in records:
                    stored[record["row"]] = record
                done += len(records)
                scored += len(records)
                if progress:
                    progress(done, len(scope), scored, clock.elapsed)
    min_foreground = options.summary.min_foreground
    records = _canonical([refresh(stored[row.index], row, min_foreground) for row in sorted(scope, key=lambda r: r.index)])
    metrics = metrics_present(records) or options.metric_names
    files.write_results(target, records, metrics)
    written = [os.path.join(target, files.RESULTS_JSONL), os.path.join(target, files.RESULTS_CSV)]
    summary = None
    if options.shard is None:
        summary = summarize(records, options.summary)
        files.write_json(os.path.join(target, files.SUMMARY_JSON), summary)
        written.append(os.path.join(target, files.SUMMARY_JSON))
    files.write_json(os.path.join(target, files.RUN_JSON), _run_description(manifest, identity, options, len(scope), True))
    memory = peak_memory(scorer.encoder.device if scorer else None)
    timing = clock.report(scored, len(scope) - rows_todo, scorer.forwards() if scorer else None, memory)
    files.write_json(os.path.join(target, files.TIMING_JSON), timing)
    written += [os.path.join(target, files.RUN_JSON), os.path.join(target, files.TIMING_JSON)]
    return EvalReport(target, len(scope), scored, len(scope) - rows_todo, timing, summary, written)


# ---------------------------------------------------------------- merging shards


def merge(out_dir: str, shard_dirs: Sequence[str] | None = None) -> EvalReport:
    """Merge complete shard folders (default: ``out_dir/shard-*-of-*``) into the files one run writes."""
    clock = Stopwatch()
    folders = list(shard_dirs) if shard_dirs else sorted(glob.glob(os.path.join(out_dir, "shard-*-of-*")))
    if not folders:
        raise MascInputError(f"no shard folders to merge in '{out_dir}': run eval with --shard i/n first, or name the shard folders")
    runs = []
    for folder in folders:
        run = files.read_json(os.path.join(folder, files.RUN_JSON), "shard run file")
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
                raise MascInputError(f"shard '{folder}' was run with other {what} than '{runs[0][0]}': rerun it with the same options")
    for folder, run in runs:
        if run["manifest"]["digest"] != first["manifest"]["digest"]:
            raise MascInputError(f"shard '{folder}' was run on another manifest than '{runs[0][0]}'")
        if run["shard"][1] != count:
            raise MascInputError(f"shard '{folder}' is one of {run['shard'][1]}, not of {count}: merge shards of one split")
    indices = sorted(run["shard"][0] for _, run in runs)
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        problem = f"shard {missing[0]}/{count} is missing" if missing else "a shard is given twice"
        raise MascInputError(f"cannot merge: {problem}")
    records: dict[int, dict] = {}
    for folder, run in runs:
        shard_records = files.read_records(os.path.join(folder, files.RESULTS_JSONL))
        if len(shard_records) != run["scope_rows"]:
            raise MascInputError(f"shard '{folder}' has {len(shard_records)} result rows for {run['scope_rows']}: rerun it")
        records.update(shard_records)
    total = first["manifest"]["rows"]
    if sorted(records) != list(range(total)):
        raise MascInputError(f"the shards hold {len(records)} distinct rows for a manifest of {total}: rerun the shards")
    ordered = [records[i] for i in range(total)]
    options = SummaryOptions.from_dict(first["summary_options"])
    os.makedirs(out_dir, exist_ok=True)
    files.write_results(out_dir, ordered, metrics_present(ordered) or first["metrics"])
    summary = summarize(ordered, options)
    files.write_json(os.path.join(out_dir, files.SUMMARY_JSON), summary)
    merged_run = dict(first, shard=None, scope_rows=total, complete=True, merged_from=[os.path.abspath(f) for f, _ in runs])
    files.write_json(os.path.join(out_dir, files.RUN_JSON), merged_run)
    timing = _sum_timings([os.path.join(f, files.TIMING_JSON) for f, _ in runs])
    timing["merge_seconds"] = clock.elapsed
    files.write_json(os.path.join(out_dir, files.TIMING_JSON), timing)
    written = [os.path.join(out_dir, n) for n in (files.RESULTS_JSONL, files.RESULTS_CSV, files.SUMMARY_JSON, files.RUN_JSON, files.TIMING_JSON)]
    return EvalReport(out_dir, total, timing["rows_scored"], timing["rows_skipped"], timing, summary, written, len(runs))


def _sum_timings(paths: list[str]) -> dict:
    """The shards' timings added up (seconds of work, not wall time: shards may run in parallel)."""
    total = {"rows_scored": 0, "rows_skipped": 0, "seconds": {}, "memory": {}}
    for path in paths:
        if not os.path.exists(path):
            continue
        timing = files.read_json(path, "shard timing file")
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
