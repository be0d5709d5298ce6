"""Scoring a manifest's rows: the models loaded once, then group after group, chunk after chunk.

``RowScorer`` is what every engine runs (the single process, shards, and
the distributed engines): it loads the MaSC encoder and the requested
baselines, and turns one chunk of manifest rows into ``EvalRecord``s. A
chunk's scores depend on that chunk alone (see ``plan``): the encoder's
cache is emptied between chunks, keeping only the group's reference,
which is encoded alone.
"""

from __future__ import annotations

from ..images import load_image_file, load_mask_file
from ..models.encoder import MascEncoder
from ..scores import ImageScore
from ..stripping import strip_subject
from . import metrics
from .manifest import ManifestRow
from .metrics import masc
from .plan import Chunk, Group
from .records import EvalRecord
from .timing import Stopwatch


class RowScorer:
    """Loads the models once and scores chunk after chunk, each chunk on its own."""

    def __init__(self, options, clock: Stopwatch | None = None):
        self.options = options
        self.clock = clock or Stopwatch()
        with self.clock.phase("loading_models"):
            encoder = MascEncoder.load(
                options.model, device=options.device, precision=options.precision,
                max_num_patches=options.max_patches, batch_size=options.batch_size,
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
        counts = {"siglip_images": self.encoder.forward_counts["images"], "siglip_texts": self.encoder.forward_counts["texts"]}
        for _, metric in self.baselines:
            counts.update(metric.forwards())
        return counts

    def start_group(self, group: Group) -> None:
        first = group.first
        with self.clock.phase("loading_files"):
            refs = [load_image_file(p, f"manifest line {first.line}, column 'ref'") for p in first.ref_paths]
            ref_masks = [load_mask_file(p, f"manifest line {first.line}, column 'ref_mask'") for p in first.ref_mask_paths]
        with self.clock.phase("encoding"):
            encoder = self.encoder
            encoder.clear_cache()
            # The reference alone in its batch: the same bits whichever chunk comes first.
            ref_tokens = encoder.encode_images(refs)
            keys = [encoder.image_key(img) for img in refs]
            self.pinned = [(k, encoder.image_cache.get(k)) for k in dict.fromkeys(keys)]
            self.group = metrics.GroupInputs(refs, ref_masks, ref_tokens)
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
                load_mask_file(r.out_mask_path, f"manifest line {r.line}, column 'out_mask'") if r.out_mask_path else None
                for r in rows
            ]
        prompts = [r.prompt for r in rows]
        subjects = [r.subject for r in rows]
        return metrics.ChunkInputs(outs, masks, prompts, subjects, [strip_subject(p, s) for p, s in zip(prompts, subjects)])

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


def _record(row: ManifestRow, fingerprint: str, score: ImageScore, ref_fractions: list[float], min_foreground: float) -> EvalRecord:
    record = EvalRecord(
        row=row.index, id=row.id, method=row.method, seed=row.seed, subject=row.subject, prompt=row.prompt,
        encoded_prompt=score.encoded_prompt, subject_found=score.subject_found, ref=list(row.ref),
        ref_mask=list(row.ref_mask), out=row.out, out_mask=row.out_mask, metrics={"cp": score.cp, "pf": score.pf},
        cp_per_reference=list(score.cp_per_reference), cp_undefined=score.cp_undefined, pf_undefined=score.pf_undefined,
        out_foreground=score.foreground_fraction, ref_foreground=list(ref_fractions), fingerprint=fingerprint,
    )
    return record.relabel(row, min_foreground)
