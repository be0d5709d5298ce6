"""MaSC under another mask source: CP and PF again, from masks a built-in segmenter (CLIPSeg or SAM3) makes.

The paper's appendix 6.1 (Tables 6 and 7) asks how much MaSC's agreement with people hangs on the mask source;
this metric answers it for any manifest. For each row it masks the reference view(s) and the output with the
source's segmenter, prompted by the row's subject (its names, "_" read as a space; the paper prompts SAM3 with the
concept's name) at the family's pixel threshold (CLIPSeg 0.4, SAM3 0.5; SAM3 merges instances scoring 0.5 or more),
and scores
CP and PF with those masks. The columns, per source ``s``:

- ``cp_s``, ``pf_s``: MaSC's CP and PF with the source's masks (undefined as MaSC's are: an empty mask);
- ``ref_fg_s``, ``out_fg_s``: the shares of the image the source's reference (smallest view) and output masks
  cover, so the 5% filter is applied when summarising, like the manifest's own masks' shares.

**No SigLIP2 forward of its own.** The masks change which patches are pooled, never the patches: the run has
already encoded this chunk's reference and outputs (and the stripped prompts) for MaSC's own columns, and the
scores here read those encodings from the encoder's cache. What a source costs is its segmenter's forwards:
one per reference view per group (and subject text) and one per distinct output image of a chunk
(``forwards``: ``<s>_images``), as SigLIP2's own.

The columns' aspect is ``MASK_SOURCES``, not cp or pf: they are compared with the human ratings in the study's
own table (``masc_core.evaluation.mask_study``), on the keys where every source's mask is valid, never mixed
into the main agreement block.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import MascInputError
from ...metric.masks import foreground_fraction
from ...models import segmenter_folders
from ...models.cache import content_key
from .base import ChunkInputs, Column, GroupInputs, Metric, MetricSpec, Models, RowValues
from . import masc

MASK_SOURCES = "mask_sources"
"""The aspect of these columns: summarised (means), compared with people only in the mask-source study."""

SOURCES = ("clipseg", "sam3")
"""The built-in sources; ``manifest`` (the manifest's own masks, MaSC's cp and pf) is the third."""


def columns(source: str) -> tuple[Column, ...]:
    """The four columns of ``source``."""
    return tuple(Column(f"{name}_{source}", MASK_SOURCES) for name in ("cp", "pf", "ref_fg", "out_fg"))


class MaskSourceMetric(Metric):
    """CP and PF of each row with masks from one built-in segmenter (see the module)."""

    def __init__(self, models: Models, folder: str, source: str):
        self.source, self.models = source, models
        # The run has checked the folder (``scoring_identity`` requires the folder option; --mask-sources resolves Hub
        # ids).
        self.segmenter = segmenter_folders.load_segmenter(
            folder, kind=source, device=models.device, precision=models.dtype, batch_size=models.batch_size
        )
        self.images = 0
        self.group: GroupInputs | None = None

    def start_group(self, group: GroupInputs) -> None:
        self.group = group
        # The group's reference masks, per subject text (rows of one group may name their subject differently):
        # kept for the whole group, as the encoder keeps the reference's encoding.
        self.reference_masks: dict[tuple[str, str], np.ndarray] = {}

    def _masks(
        self, images: list[np.ndarray], subject: str, known: dict[tuple[str, str], np.ndarray]
    ) -> list[np.ndarray]:
        """One mask per image; an image already in ``known`` (or repeated in the list) is masked once, as SigLIP2
        encodes it once. What is masked is added to ``known``."""
        keys = [(content_key(image), subject) for image in images]
        missing = {key: image for key, image in zip(keys, images) if key not in known}
        if missing:
            self.images += len(missing)
            # A folder-style name ("bear_plushie", as the pairs builder's subject column) reads as words to the
            # segmenter.
            made = self.segmenter.masks(
                list(missing.values()), subject.replace("_", " "), threshold=self.segmenter.default_threshold
            )
            known.update({key: mask.numpy() for key, mask in zip(missing, made)})
        return [known[key] for key in keys]

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        names = [f"{name}_{self.source}" for name in ("cp", "pf", "ref_fg", "out_fg")]
        if self.group.views_per_subject:  # several subjects per image: the study is single-subject, as the paper's
            why = "the mask-source study scores single-subject rows"
            return [RowValues(dict.fromkeys(names), dict.fromkeys(names, why)) for _ in chunk.outs]
        values: list[RowValues | None] = [None] * len(chunk.outs)
        by_subject: dict[str, list[int]] = {}
        for i, subject in enumerate(chunk.subjects):
            by_subject.setdefault(subject, []).append(i)
        for subject, members in by_subject.items():
            if not subject.strip():
                why = "the row names no subject: nothing to prompt the segmenter with"
                for i in members:
                    values[i] = RowValues(dict.fromkeys(names), dict.fromkeys(names, why))
                continue
            ref_masks = self._masks(self.group.refs, subject, self.reference_masks)
            # An output that is a reference view reuses its mask; the chunk's others are masked for this chunk only.
            out_masks = self._masks([chunk.outs[i] for i in members], subject, dict(self.reference_masks))
            group = replace(self.group, ref_masks=ref_masks)
            part = replace(
                chunk,
                outs=[chunk.outs[i] for i in members],
                masks=out_masks,
                prompts=[chunk.prompts[i] for i in members],
                subjects=[chunk.subjects[i] for i in members],
                stripped=[chunk.stripped[i] for i in members],
                out_tokens=[],
                shared={},
            )
            scores, _ = masc.score_chunk(self.models, group, part, 0.0)
            ref_share = min(foreground_fraction(m) for m in ref_masks)
            for i, score, mask in zip(members, scores, out_masks):
                undefined = {}
                if score.cp is None:
                    undefined[names[0]] = score.cp_undefined or "undefined"
                if score.pf is None:
                    undefined[names[1]] = score.pf_undefined or "undefined"
                values[i] = RowValues(
                    {names[0]: score.cp, names[1]: score.pf, names[2]: ref_share, names[3]: foreground_fraction(mask)},
                    undefined,
                )
        return values

    def forwards(self) -> dict[str, int]:
        return {f"{self.source}_images": self.images}


def _check(source: str):
    def check(folder: str):
        from ...models import checkpoints
        from ...models.clipseg import inspect_clipseg
        from ...models.sam3 import check_transformers_has_sam3, inspect_sam3

        if checkpoints.looks_like_hub_id(folder):  # --mask-sources resolves Hub ids first: here only folders
            raise MascInputError(f"--{source} '{folder}' is not a folder: pass the checkpoint's folder")
        resolved, label = checkpoints.resolve(folder, what=f"--{source}")
        if source == "sam3":
            check_transformers_has_sam3()
            return inspect_sam3(resolved, label)
        return inspect_clipseg(resolved, label)

    return check


def _spec(source: str, label: str) -> MetricSpec:
    return MetricSpec(
        key=f"masks_{source}",
        columns=columns(source),
        description=f"{label} checkpoint folder: adds MaSC with {label} masks (the mask-source study, --mask-sources)",
        load=lambda models, folder: MaskSourceMetric(models, folder, source),
        folder_option=f"--{source}",
        check_folder=_check(source),
    )


CLIPSEG_SPEC = _spec("clipseg", "CLIPSeg")
SAM3_SPEC = _spec("sam3", "SAM3")
SPECS = (CLIPSEG_SPEC, SAM3_SPEC)
