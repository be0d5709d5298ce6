"""Global pool (the paper's same-backbone ablation, Sec. 4.1): MaSC without its masks.

- ``global_cp``: cosine of the globally pooled image embeddings (SigLIP2's
  attention pooler over all patches) of reference and output; mean over
  reference views. MaSC's CP with the masked max-cosine replaced by a
  global pool.
- ``global_pf``: cosine of the output's globally pooled embedding with the
  text embedding of the full prompt: no mask, no subject stripping.
"""

from __future__ import annotations

import torch

from ...metric.equations import mean_cosine_to_references
from .base import ChunkInputs, Column, GroupInputs, Metric, MetricSpec, Models, RowValues
from .siglip_pool import cosine, full_pools


class GlobalPool(Metric):
    def __init__(self, models: Models, folder: str | None = None):
        self.models = models
        self.reference_pools: torch.Tensor | None = None

    def start_group(self, group: GroupInputs) -> None:
        encoder = self.models.encoder
        self.reference_pools = torch.stack(encoder.pool_regions(group.ref_tokens, [None] * len(group.ref_tokens)))

    def siglip_texts(self, chunk: ChunkInputs) -> list[str]:
        return list(chunk.prompts)

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        full = full_pools(self.models, chunk)
        global_cp = mean_cosine_to_references(torch.stack(full), self.reference_pools)
        prompts = self.models.encoder.encode_texts(chunk.prompts)
        return [
            RowValues({"global_cp": global_cp[i], "global_pf": cosine(full[i], prompts[i])}) for i in range(len(full))
        ]


SPEC = MetricSpec(
    key="global",
    columns=(Column("global_cp", "cp"), Column("global_pf", "pf")),
    description="same backbone, global pool: global_cp (pooled reference vs output), global_pf (pooled output vs full "
    "prompt)",
    load=GlobalPool,
)
