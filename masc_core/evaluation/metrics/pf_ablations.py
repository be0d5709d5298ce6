"""PF ablations (the paper's Table 4): pool region x prompt, on the same backbone.

MaSC's PF pools the background and compares it with the stripped prompt.
The other cells:

- ``pf_full_stripped``: global pool, stripped prompt;
- ``pf_bg_unstripped``: background pool, full prompt;
- ``pf_fg_unstripped``: foreground-only pool, full prompt (the paper's
  control that goes negative).
"""

from __future__ import annotations

from ...metric.masks import grid_weights, hidden_patches, mask_to_float
from .base import ChunkInputs, Column, Metric, MetricSpec, Models, RowValues
from .siglip_pool import cosine, full_pools

NO_MASK = "no output mask given: a regional pool needs the output's foreground mask"
NO_BACKGROUND = "the output mask covers the whole image: no background patch to pool"
NO_FOREGROUND = "the output mask covers no patch: no foreground patch to pool"


class PfAblations(Metric):
    def __init__(self, models: Models, folder: str | None = None):
        self.models = models

    def siglip_texts(self, chunk: ChunkInputs) -> list[str]:
        return list(chunk.stripped) + list(chunk.prompts)

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        encoder = self.models.encoder
        outputs = chunk.out_tokens
        count = len(outputs)
        full = full_pools(self.models, chunk)
        prompts = encoder.encode_texts(chunk.prompts)
        stripped = encoder.encode_texts(chunk.stripped)
        rows = [RowValues({"pf_full_stripped": cosine(full[i], stripped[i])}) for i in range(count)]
        foreground = [
            hidden_patches(grid_weights(mask_to_float(m, f"mask[{i}]"), t.grid)) if m is not None else None
            for i, (m, t) in enumerate(zip(chunk.masks, outputs))
        ]
        with_mask = [i for i in range(count) if foreground[i] is not None]
        for name, background in (("pf_bg_unstripped", True), ("pf_fg_unstripped", False)):
            regions = [foreground[i] if background else ~foreground[i] for i in with_mask]
            pools = dict(
                zip(with_mask, encoder.pool_regions([outputs[i] for i in with_mask], regions) if with_mask else [])
            )
            for i, row in enumerate(rows):
                if foreground[i] is None:
                    row.values[name], row.undefined[name] = None, NO_MASK
                elif pools[i] is None:
                    row.values[name], row.undefined[name] = None, NO_BACKGROUND if background else NO_FOREGROUND
                else:
                    row.values[name] = cosine(pools[i], prompts[i])
        return rows


SPEC = MetricSpec(
    key="pf-ablations",
    columns=(Column("pf_full_stripped", "pf"), Column("pf_bg_unstripped", "pf"), Column("pf_fg_unstripped", "pf")),
    description="PF ablations: pf_full_stripped (global pool), pf_bg_unstripped (full prompt), pf_fg_unstripped "
    "(foreground pool)",
    load=PfAblations,
)
