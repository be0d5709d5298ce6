"""What the same-backbone baselines share: SigLIP2's attention pool over chosen patches, and the cosine."""

from __future__ import annotations

import torch

from ...metric.equations import prompt_following
from .base import ChunkInputs, Models


def full_pools(models: Models, chunk: ChunkInputs) -> list[torch.Tensor]:
    """Each output's global pool (SigLIP2's pooler over every patch), computed once per chunk."""
    return chunk.once(
        "siglip_global_pool", lambda: models.encoder.pool_regions(chunk.out_tokens, [None] * len(chunk.out_tokens))
    )


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine of two [D] embeddings, as a float."""
    return float(prompt_following(a[None].float(), b[None].to(a.device).float())[0])
