"""The metric protocol: what an evaluation metric declares and does.

A metric is a module under ``masc_core.evaluation.metrics`` that defines a
``SPEC`` (a ``MetricSpec``) and a ``Metric`` subclass; the registry in
``metrics/__init__.py`` lists the specs. The evaluation run then gives the
metric its command-line option, its place in results.jsonl/csv and in the
summary (its columns, in registry order), its part in the scoring identity
(resume, shards) and its timing.

The run calls a loaded metric in this order, per reference group and per
chunk of rows (a chunk is the unit of batching, resume and determinism):

1. ``start_group(group)``  reference features (encoding phase);
2. ``siglip_texts(chunk)`` prompts it needs from the shared SigLIP2 text
   tower: the run encodes every metric's texts in one batch per chunk;
3. ``encode(chunk)``       forwards of its own models (encoding phase);
4. ``score(chunk)``        one ``RowValues`` per row (scoring phase).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ...models.encoder import ImageTokens, MascEncoder
from ..manifest import ASPECTS as ASPECTS  # re-exported: what a metric column may score


@dataclass(frozen=True)
class Column:
    """One result column of a metric."""

    name: str
    """The column in results.jsonl/csv and summary.json (e.g. "clip_i")."""
    aspect: str
    """The human rating it is compared with: "cp" (concept) or "pf" (prompt)."""


@dataclass
class GroupInputs:
    """What a reference group gives every metric."""

    refs: list[np.ndarray]
    ref_masks: list[np.ndarray]
    ref_tokens: list[ImageTokens]
    """SigLIP2 patch tokens of the reference views (encoded alone)."""
    views_per_subject: list[int] | None = None
    """Several subjects per image: how many of ``refs`` (in order) are each subject's views. None for one
    subject. ``refs`` then holds every subject's views, so a baseline averaging over ``refs`` averages over
    all reference images of all subjects (the multi-subject DreamBench recipe)."""


@dataclass
class ChunkInputs:
    """What a chunk of rows gives every metric (one entry per row)."""

    outs: list[np.ndarray]
    masks: list[np.ndarray | None]
    prompts: list[str]
    subjects: list[str]
    stripped: list[str]
    """The prompts with the subject removed (what MaSC's PF encodes)."""
    out_tokens: list[ImageTokens] = field(default_factory=list)
    """SigLIP2 patch tokens of the outputs."""
    subject_names: list[list[str]] | None = None
    """Several subjects per image: per row, each subject's names text (``subjects[i]`` is the first). ``masks``
    then holds the union of the subjects' output masks (what a background pool must avoid), ``stripped`` the
    prompt with every name removed."""
    subject_masks: list[list[np.ndarray] | None] | None = None
    """Several subjects per image: per row, each subject's output mask (None for a row without masks)."""
    shared: dict = field(default_factory=dict)
    """Results metrics share within the chunk (computed once, e.g. the global pool)."""

    def once(self, key: str, compute: Callable):
        """``compute()`` the first time ``key`` is asked for in this chunk, the stored result after."""
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]


@dataclass
class RowValues:
    """A metric's values for one row, and why any of them is undefined."""

    values: dict[str, float | None]
    undefined: dict[str, str] = field(default_factory=dict)


@dataclass
class Models:
    """What loaded metrics may share: the MaSC encoder (its device and precision), the batch size."""

    encoder: MascEncoder
    batch_size: int

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    @property
    def dtype(self) -> torch.dtype:
        return self.encoder.dtype


class Metric:
    """A loaded metric. Override what the metric needs; ``score`` always."""

    def start_group(self, group: GroupInputs) -> None:
        """Reference features for the group's rows (encoding phase)."""

    def siglip_texts(self, chunk: ChunkInputs) -> list[str]:
        """Texts this metric reads from the SigLIP2 text tower (encoded with everyone's, once per chunk)."""
        return []

    def encode(self, chunk: ChunkInputs) -> None:
        """Forwards of the metric's own models for the chunk (encoding phase)."""

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        """One RowValues per row of the chunk (scoring phase)."""
        raise NotImplementedError

    def forwards(self) -> dict[str, int]:
        """Inputs the metric's own models encoded, by name (timing.json)."""
        return {}


@dataclass(frozen=True)
class MetricSpec:
    """A metric as the registry knows it, before anything is loaded."""

    key: str
    """Its name on the command line: a ``--baselines`` choice, or the option given by ``folder_option``."""
    columns: tuple[Column, ...]
    description: str
    """One line for --help and the README."""
    load: Callable[[Models, str | None], Metric]
    """Builds the loaded metric from the shared models and its checkpoint folder (None when it takes none)."""
    folder_option: str | None = None
    """The option naming its checkpoint folder (e.g. "--clip"), for metrics with a model of their own."""
    check_folder: Callable[[str], object] | None = None
    """Checks that folder without loading weights (one-line error), before any scoring starts."""
