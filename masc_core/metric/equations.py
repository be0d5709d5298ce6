"""The two MaSC equations on encoded features (paper Sec. 3.2 and 3.3).

Pure tensor functions, batched over outputs; no model, no I/O.

- Eq. 1, concept preservation: for each reference patch i under the
  reference mask, s_i = max_j cos(r_i, g_j) over ALL output patches j;
  CP = mean of s_i over the masked reference patches.
- Eq. 2, prompt following: cosine between the background-only pooled image
  embedding and the text embedding of the subject-stripped prompt.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Patches x patches x outputs per similarity block; bounds peak memory
# (64 Mi floats = 256 MiB) whatever the batch size.
_SIMILARITY_BLOCK = 64 * 1024 * 1024


def pad_tokens(token_list: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack [L_i, D] token sets into [B, L_max, D] plus a [B, L_max] validity mask."""
    longest = max(t.shape[0] for t in token_list)
    padded = torch.nn.utils.rnn.pad_sequence(token_list, batch_first=True)
    lengths = torch.tensor([t.shape[0] for t in token_list], device=padded.device)
    valid = torch.arange(longest, device=padded.device)[None, :] < lengths[:, None]
    return padded, valid


def best_matches(
    reference: torch.Tensor,
    outputs: torch.Tensor,
    output_valid: torch.Tensor,
    reference_keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Best cosine per reference patch, and optionally per output patch.

    ``reference`` [Nr, D]; ``outputs`` [B, L, D] with ``output_valid`` [B, L].
    Returns ``per_reference`` [B, Nr]: max over valid output patches of the
    cosine with each reference patch (Eq. 1's s_i, for every reference
    patch); and, when ``reference_keep`` [Nr] is given, ``per_output``
    [B, L]: max over the kept reference patches of the cosine with each
    output patch (-inf where invalid or when nothing is kept).
    """
    ref_unit = F.normalize(reference.float(), dim=-1)
    out_unit = F.normalize(outputs.float(), dim=-1)
    batch, length, _ = out_unit.shape
    per_reference = torch.empty(batch, ref_unit.shape[0], device=out_unit.device)
    per_output = None
    keep_any = False
    if reference_keep is not None:
        per_output = torch.full((batch, length), float("-inf"), device=out_unit.device)
        keep_any = bool(reference_keep.any())
        keep = reference_keep.to(out_unit.device)
    step = max(1, _SIMILARITY_BLOCK // max(1, ref_unit.shape[0] * length))
    for start in range(0, batch, step):
        stop = min(batch, start + step)
        sims = torch.matmul(out_unit[start:stop], ref_unit.T)  # [b, L, Nr]
        invalid = ~output_valid[start:stop, :, None]
        per_reference[start:stop] = sims.masked_fill(invalid, float("-inf")).amax(dim=1)
        if keep_any:
            kept = sims[:, :, keep].amax(dim=2)
            per_output[start:stop] = kept.masked_fill(invalid[:, :, 0], float("-inf"))
    return per_reference, per_output


def concept_preservation(per_reference: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Eq. 1: mean of the best matches over the kept reference patches; [B]. NaN if none is kept."""
    keep = keep.to(per_reference.device)
    if not bool(keep.any()):
        return torch.full((per_reference.shape[0],), float("nan"), device=per_reference.device)
    return per_reference[:, keep].mean(dim=1)


def prompt_following(pooled_images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
    """Eq. 2: cosine of each pooled image embedding [B, D] with its text embedding [B, D]; [B]."""
    return (F.normalize(pooled_images.float(), dim=-1) * F.normalize(texts.float(), dim=-1)).sum(dim=-1)


def mean_cosine_to_references(outputs: torch.Tensor, references: torch.Tensor) -> list[float]:
    """For each output embedding [N, D], the mean cosine with the reference embeddings [K, D] (the multi-view mean)."""
    sims = F.normalize(outputs.float(), dim=-1) @ F.normalize(references.to(outputs.device).float(), dim=-1).T  # [N, K]
    return [float(v) for v in sims.mean(dim=1).cpu().tolist()]
