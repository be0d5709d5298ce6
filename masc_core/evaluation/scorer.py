"""Scoring a manifest's rows: the models loaded once, then group after group, chunk after chunk.

``RowScorer`` is what every engine runs (the single process, shards, and
the distributed engines): it loads the MaSC encoder and the requested
baselines, and turns one chunk of manifest rows into ``EvalRecord``s. A
chunk's scores depend on that chunk alone (see ``plan``): the encoder's
cache is emptied between chunks, keeping only the group's reference,
which is encoded alone.
"""

from __future__ import annotations

import numpy as np

from ..errors import MascInputError
from ..io.images import load_image_file, load_mask_file
from ..models.encoder import MascEncoder
from ..metric.scores import ImageScore, subject_figures
from ..metric.stripping import strip_each
from . import metrics
from .manifest import ManifestRow
from .metrics import masc
from .plan import Chunk, Group
from .records import EvalRecord
from ..metric.subjects import summarize
from .manifest import all_names_of, column
from .timing import Stopwatch


class RowScorer:
    """Loads the models once and scores chunk after chunk, each chunk on its own."""

    def __init__(self, options, clock: Stopwatch | None = None):
        self.options = options
        self.clock = clock or Stopwatch()
        with self.clock.phase("loading_models"):
            encoder = MascEncoder.load(
                options.model,
                device=options.device,
                precision=options.precision,
                max_num_patches=options.max_patches,
                batch_size=options.batch_size,
            )
            self.models = metrics.Models(encoder, options.batch_size)
            self.baselines = [
                (spec, spec.load(self.models, options.folders.get(spec.key)))
                for spec in (metrics.get_spec(key) for key in options.baselines)
            ]
        self.group: metrics.GroupInputs | None = None

    @property
    def encoder(self) -> MascEncoder:
        return self.models.encoder

    def forwards(self) -> dict:
        """Inputs each model encoded (repeated images and prompts within a chunk are encoded once)."""
        counts = {
            "siglip_images": self.encoder.forward_counts["images"],
            "siglip_texts": self.encoder.forward_counts["texts"],
        }
        for _, metric in self.baselines:
            counts.update(metric.forwards())
        return counts

    def start_group(self, group: Group) -> None:
        first = group.first
        with self.clock.phase("loading_files"):
            refs, ref_masks, views = [], [], []
            for k, (ref_paths, mask_paths) in enumerate(
                [(first.ref_paths, first.ref_mask_paths)]
                + [(s.ref_paths, s.ref_mask_paths) for s in first.extra_subjects],
                start=1,
            ):  # every subject's views, in subject order
                refs += [
                    load_image_file(p, f"manifest line {first.line}, column '{column('ref', k)}'") for p in ref_paths
                ]
                ref_masks += [
                    load_mask_file(p, f"manifest line {first.line}, column '{column('ref_mask', k)}'")
                    for p in mask_paths
                ]
                views.append(len(ref_paths))
        with self.clock.phase("encoding"):
            encoder = self.encoder
            encoder.clear_cache()
            # The reference alone in its batch: the same bits whichever chunk comes first.
            ref_tokens = encoder.encode_images(refs)
            keys = [encoder.image_key(img) for img in refs]
            self.pinned = [(k, encoder.image_cache.get(k)) for k in dict.fromkeys(keys)]
            self.group = metrics.GroupInputs(refs, ref_masks, ref_tokens, views if len(views) > 1 else None)
            for _, metric in self.baselines:
                metric.start_group(self.group)

    def _restore_reference(self) -> None:
        encoder = self.encoder
        encoder.clear_cache()
        for key, value in self.pinned:
            if value is None:  # the cache could not hold it: encode it alone again
                encoder.encode_images(self.group.refs)
                return
            encoder.image_cache.put(key, value, value.tokens.numel() * value.tokens.element_size())

    def _read_chunk(self, rows: list[ManifestRow]) -> metrics.ChunkInputs:
        with self.clock.phase("loading_files"):
            outs = [load_image_file(r.out_path, f"manifest line {r.line}, column 'out'") for r in rows]
            masks = [
                load_mask_file(r.out_mask_path, f"manifest line {r.line}, column 'out_mask'")
                if r.out_mask_path
                else None
                for r in rows
            ]
        prompts = [r.prompt for r in rows]
        subjects = [r.subject for r in rows]
        if not self.group.views_per_subject:
            return metrics.ChunkInputs(outs, masks, prompts, subjects, strip_each(prompts, subjects))
        with self.clock.phase("loading_files"):
            subject_masks = [_subject_masks(r, mask) for r, mask in zip(rows, masks)]
        return metrics.ChunkInputs(
            outs,
            [None if m is None else np.maximum.reduce(m) for m in subject_masks],
            prompts,
            subjects,
            strip_each(prompts, [all_names_of(r) for r in rows]),
            subject_names=[[r.subject] + [s.subject for s in r.extra_subjects] for r in rows],
            subject_masks=subject_masks,
        )

    def score_chunk(self, chunk: Chunk) -> list[EvalRecord]:
        """The records of one chunk's rows (``start_group`` for its group first)."""
        inputs = self._read_chunk(chunk.rows)
        encoder = self.encoder
        with self.clock.phase("encoding"):
            self._restore_reference()
            inputs.out_tokens = encoder.encode_images(inputs.outs)
            # Every metric's SigLIP2 texts in one go: MaSC's stripped prompts first.
            texts = list(inputs.stripped)
            for _, metric in self.baselines:
                texts += metric.siglip_texts(inputs)
            encoder.encode_texts(list(dict.fromkeys(texts)))
            for _, metric in self.baselines:
                metric.encode(inputs)
        with self.clock.phase("scoring"):
            min_foreground = self.options.summary.min_foreground
            scores, ref_fractions = masc.score_chunk(self.models, self.group, inputs, min_foreground)
            records = [
                _record(row, fingerprint, score, ref_fractions, min_foreground)
                for row, fingerprint, score in zip(chunk.rows, chunk.fingerprints, scores)
            ]
            for spec, metric in self.baselines:
                for record, values in zip(records, metric.score(inputs)):
                    record.metrics.update({column.name: values.values.get(column.name) for column in spec.columns})
                    record.metric_undefined.update(values.undefined)
            return records


def _subject_masks(row: ManifestRow, first: np.ndarray | None) -> list[np.ndarray] | None:
    """Every subject's output mask of a several-subject row (the manifest gives all or none), checked to share a
    size."""
    if first is None:
        return None
    masks = [first]
    for k, subject in enumerate(row.extra_subjects, start=2):
        mask = load_mask_file(subject.out_mask_path, f"manifest line {row.line}, column '{column('out_mask', k)}'")
        if mask.shape != first.shape:
            raise MascInputError(
                f"manifest line {row.line}, column '{column('out_mask', k)}': the mask is "
                f"{mask.shape[1]}x{mask.shape[0]} but "
                f"out_mask is {first.shape[1]}x{first.shape[0]}: give every subject's mask at the output's size"
            )
        masks.append(mask)
    return masks


def _record(
    row: ManifestRow, fingerprint: str, score: ImageScore, ref_fractions: list[float], min_foreground: float
) -> EvalRecord:
    record = EvalRecord(
        row=row.index,
        id=row.id,
        method=row.method,
        seed=row.seed,
        subject=row.subject,
        prompt=row.prompt,
        encoded_prompt=score.encoded_prompt,
        subject_found=score.subject_found,
        ref=list(row.ref),
        ref_mask=list(row.ref_mask),
        out=row.out,
        out_mask=row.out_mask,
        metrics={"cp": score.cp, "pf": score.pf},
        cp_per_reference=list(score.cp_per_reference),
        cp_undefined=score.cp_undefined,
        pf_undefined=score.pf_undefined,
        out_foreground=score.foreground_fraction,
        ref_foreground=list(ref_fractions),
        fingerprint=fingerprint,
    )
    if score.subjects is not None:  # several subjects: cp above is their cp_min
        record.metrics["cp_mean"] = summarize([s["cp"] for s in score.subjects])[1]
        record.metrics["blend"] = None if score.foreground_fraction is None else float(bool(score.blends))
        record.subjects, record.blends = subject_figures(score.subjects), list(score.blends)
    return record.relabel(row, min_foreground)
