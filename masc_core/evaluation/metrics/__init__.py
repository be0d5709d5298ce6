"""The evaluation's metrics: MaSC's own columns, then every registered baseline.

Adding a metric is one module here (a ``MetricSpec`` named ``SPEC`` and a
``Metric`` subclass, see ``base``) and one line in ``REGISTRY``. Its
command-line option, result columns, summary statistics and agreement
with the human ratings follow from the spec.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ...errors import MascInputError
from ...models.encoder import ImageTokens, MascEncoder
from . import clip, dino, global_pool, mask_sources, pf_ablations
from .base import ASPECTS, ChunkInputs, Column, GroupInputs, Metric, MetricSpec, Models, RowValues
from .masc import COLUMNS as MASC_COLUMNS

REGISTRY: tuple[MetricSpec, ...] = (global_pool.SPEC, pf_ablations.SPEC, clip.SPEC, dino.SPEC, *mask_sources.SPECS)
"""Every metric beside MaSC, in the order their columns appear in results and summaries."""

COLUMNS: tuple[Column, ...] = MASC_COLUMNS + tuple(column for spec in REGISTRY for column in spec.columns)
ASPECT_METRICS: dict[str, tuple[str, ...]] = {a: tuple(c.name for c in COLUMNS if c.aspect == a) for a in ASPECTS}
"""Per aspect, the columns compared with that human rating, MaSC's first."""
METRIC_ORDER: tuple[str, ...] = (
    ASPECT_METRICS["cp"] + ASPECT_METRICS["pf"] + tuple(c.name for c in COLUMNS if c.aspect not in ASPECTS)
)
"""The canonical order of metric columns (concept metrics, then prompt metrics, then the several-subject ones)."""

BASELINE_CHOICES: tuple[str, ...] = tuple(spec.key for spec in REGISTRY if spec.folder_option is None)
"""The ``--baselines`` choices: metrics on MaSC's own backbone, which need no folder."""


def get_spec(key: str) -> MetricSpec:
    """The registered metric named ``key``, or a one-line error listing the names."""
    for spec in REGISTRY:
        if spec.key == key:
            return spec
    known = ", ".join(s.key for s in REGISTRY)
    raise MascInputError(f"metric '{key}' is unknown: use one of {known}")


def same_backbone_scores(
    encoder: MascEncoder,
    names: Sequence[str],
    *,
    reference_pooled: torch.Tensor,
    outputs: Sequence[ImageTokens],
    masks: Sequence[np.ndarray | None],
    prompts: Sequence[str],
    stripped_prompts: Sequence[str],
) -> tuple[list[dict[str, float | None]], list[dict[str, str]]]:
    """The same-backbone baselines ``names`` for encoded outputs, outside an evaluation run.

    ``reference_pooled`` [K, D]: the globally pooled reference views.
    ``masks``: the outputs' foreground masks (uint8 0..255, float 0..1,
    bool) or None. Returns per output the values and, for the undefined
    ones, the reasons.
    """
    chunk = ChunkInputs(
        outs=[],
        masks=list(masks),
        prompts=list(prompts),
        subjects=[],
        stripped=list(stripped_prompts),
        out_tokens=list(outputs),
    )
    models = Models(encoder, encoder.batch_size)
    values: list[dict[str, float | None]] = [{} for _ in outputs]
    reasons: list[dict[str, str]] = [{} for _ in outputs]
    for spec in (global_pool.SPEC, pf_ablations.SPEC):
        wanted = [c.name for c in spec.columns if c.name in names]
        if not wanted:
            continue
        metric = spec.load(models, None)
        if isinstance(metric, global_pool.GlobalPool):
            metric.reference_pools = reference_pooled
        for i, row in enumerate(metric.score(chunk)):
            values[i].update({name: row.values[name] for name in wanted})
            reasons[i].update({name: why for name, why in row.undefined.items() if name in wanted})
    return values, reasons


__all__ = [
    "ASPECTS",
    "ASPECT_METRICS",
    "BASELINE_CHOICES",
    "COLUMNS",
    "METRIC_ORDER",
    "MASC_COLUMNS",
    "REGISTRY",
    "ChunkInputs",
    "Column",
    "GroupInputs",
    "Metric",
    "MetricSpec",
    "Models",
    "RowValues",
    "get_spec",
    "same_backbone_scores",
]
