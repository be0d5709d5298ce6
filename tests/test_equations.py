"""CP (Eq. 1) and PF (Eq. 2) against an independent, straightforward computation.

The reference computation uses transformers' own processor and model
forward for the features, and float64 numpy loops for the equations,
including a hand-written multi-head attention pool over background patches.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import PROMPT, box_mask, load_photo

transformers = pytest.importorskip("transformers")
pytest.importorskip("torchvision", reason="transformers' image processors need torchvision")


def hf_features(folder, image: np.ndarray, naflex: bool):
    processor = transformers.AutoProcessor.from_pretrained(folder)
    model = (transformers.Siglip2Model if naflex else transformers.SiglipModel).from_pretrained(folder).eval()
    kwargs = {"max_num_patches": 1024} if naflex else {}
    inputs = processor.image_processor(images=[Image.fromarray(image)], return_tensors="pt", **kwargs)
    with torch.no_grad():
        if naflex:
            out = model.vision_model(
                pixel_values=inputs["pixel_values"],
                pixel_attention_mask=inputs["pixel_attention_mask"],
                spatial_shapes=inputs["spatial_shapes"],
            )
            rows, cols = inputs["spatial_shapes"][0].tolist()
            tokens = out.last_hidden_state[0, : rows * cols]
        else:
            out = model.vision_model(pixel_values=inputs["pixel_values"])
            tokens = out.last_hidden_state[0]
            rows = cols = int(round(tokens.shape[0] ** 0.5))
    return model, processor, tokens.detach().double().numpy(), (rows, cols)


def grid_mask(mask: np.ndarray, grid) -> np.ndarray:
    tensor = torch.from_numpy(mask.astype(np.float32) / (255.0 if mask.max() > 1 else 1.0))[None, None]
    return (
        torch.nn.functional.interpolate(tensor, size=grid, mode="bilinear", align_corners=False)[0, 0]
        .clamp(0, 1)
        .flatten()
        .numpy()
    )


def reference_cp(ref_tokens, out_tokens, keep):
    values = []
    for i in range(ref_tokens.shape[0]):
        if not keep[i]:
            continue
        r = ref_tokens[i] / np.linalg.norm(ref_tokens[i])
        best = max(float(r @ (g / np.linalg.norm(g))) for g in out_tokens)
        values.append(best)
    return sum(values) / len(values)


def reference_pool(head, tokens: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """SigLIP2's multi-head attention pool written out, over the visible tokens only."""
    attention = head.attention
    dim = tokens.shape[1]
    heads = attention.num_heads
    w = attention.in_proj_weight.detach().double().numpy()
    b = attention.in_proj_bias.detach().double().numpy()
    probe = head.probe.detach().double().numpy()[0, 0]
    q = w[:dim] @ probe + b[:dim]
    k = tokens[visible] @ w[dim : 2 * dim].T + b[dim : 2 * dim]
    v = tokens[visible] @ w[2 * dim :].T + b[2 * dim :]
    head_dim = dim // heads
    mixed = []
    for h in range(heads):
        s = slice(h * head_dim, (h + 1) * head_dim)
        logits = k[:, s] @ q[s] / np.sqrt(head_dim)
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        mixed.append(weights @ v[:, s])
    attended = (
        attention.out_proj.weight.detach().double().numpy() @ np.concatenate(mixed)
        + attention.out_proj.bias.detach().double().numpy()
    )
    normed = torch.nn.functional.layer_norm(
        torch.from_numpy(attended)[None],
        (dim,),
        head.layernorm.weight.double(),
        head.layernorm.bias.double(),
        head.layernorm.eps,
    )
    mlp = head.mlp.double()
    with torch.no_grad():
        out = attended + mlp(normed)[0].numpy()
    head.mlp.float()
    return out


@pytest.mark.parametrize("naflex", [True, False])
def test_cp_and_pf_equal_straightforward_computation(naflex, naflex_dir, fixed_dir, naflex_encoder, fixed_encoder):
    from masc_core import score_images
    from masc_core.metric.stripping import strip_subject

    folder, encoder = (naflex_dir, naflex_encoder) if naflex else (fixed_dir, fixed_encoder)
    ref = load_photo("dog_00")
    out = load_photo("dog_02")[40:460, :]  # another aspect ratio
    ref_mask = box_mask(*ref.shape[:2])
    out_mask = box_mask(*out.shape[:2], 0.1, 0.2, 0.8, 0.6)

    model, processor, ref_tokens, ref_grid = hf_features(folder, ref, naflex)
    _, _, out_tokens, out_grid = hf_features(folder, out, naflex)
    keep = grid_mask(ref_mask, ref_grid) > 0.5
    visible = grid_mask(out_mask, out_grid) < 0.5
    expected_cp = reference_cp(ref_tokens, out_tokens, keep)

    pooled = reference_pool(model.vision_model.head, out_tokens, visible)
    text = strip_subject(PROMPT, "dog")
    kwargs = {"max_length": 64, "truncation": True} if not naflex else {}
    ids = processor(text=[text], padding="max_length", return_tensors="pt", **kwargs)["input_ids"]
    with torch.no_grad():
        text_embedding = model.text_model(input_ids=ids).pooler_output[0].detach().double().numpy()
    expected_pf = float(pooled @ text_embedding / (np.linalg.norm(pooled) * np.linalg.norm(text_embedding)))

    batch = score_images(
        encoder, out, reference=ref, reference_mask=ref_mask, mask=out_mask, prompt=PROMPT, subject="dog"
    )
    score = batch.scores[0]
    assert score.grid == out_grid
    assert batch.references[0].concept_patches == int(keep.sum())
    assert score.background_patches == int(visible.sum())
    assert score.cp == pytest.approx(expected_cp, abs=1e-5)
    assert score.pf == pytest.approx(expected_pf, abs=1e-5)


def test_cp_searches_the_whole_output_and_only_averages_the_reference_foreground(naflex_encoder):
    """Eq. 1's design: moving the concept in the output does not change CP; the output mask is not used."""
    from masc_core import score_images

    ref = load_photo("dog_00")
    out = load_photo("dog_01")
    ref_mask = box_mask(512, 512)
    a = score_images(naflex_encoder, out, reference=ref, reference_mask=ref_mask, cp=True, pf=False).scores[0].cp
    b = (
        score_images(
            naflex_encoder, out, reference=ref, reference_mask=ref_mask, mask=np.zeros((512, 512)), cp=True, pf=False
        )
        .scores[0]
        .cp
    )
    assert a == b
    # The identical image scores the maximum: each reference patch finds itself.
    same = score_images(naflex_encoder, ref, reference=ref, reference_mask=ref_mask, pf=False).scores[0].cp
    assert same == pytest.approx(1.0, abs=1e-5)
    # Only the reference patches under the mask are averaged: CP is the mean of
    # the per-patch best matches (the heatmap) over the kept patches, and a
    # reference patch outside the mask can be anything.
    detailed = score_images(naflex_encoder, out, reference=ref, reference_mask=ref_mask, pf=False, heatmaps=True)
    match = detailed.heatmaps.reference_match[0][0]
    keep = detailed.heatmaps.reference_keep[0]
    assert keep.sum() == detailed.references[0].concept_patches > 0
    assert float(match[keep].mean()) == pytest.approx(a, abs=1e-6)
    assert float(match.mean()) != pytest.approx(a, abs=1e-4)


def test_probe_attention_equals_torch_multihead_attention():
    """The pooler's attention, written out, gives nn.MultiheadAttention's values and weights on the same parameters."""
    from masc_core.models.siglip import ProbeAttention

    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    torch.nn.init.normal_(reference.in_proj_bias)
    ours = ProbeAttention(32, 4)
    ours.load_state_dict(reference.state_dict())
    probe, tokens = torch.randn(3, 1, 32), torch.randn(3, 10, 32)
    hidden = torch.zeros(3, 10, dtype=torch.bool)
    hidden[0, :4] = True
    hidden[1, 7:] = True
    with torch.no_grad():
        expected, expected_weights = reference(
            probe, tokens, tokens, key_padding_mask=hidden, need_weights=True, average_attn_weights=True
        )
        got, weights = ours(probe, tokens, hidden, need_weights=True)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)
    assert float(weights[0, 0, :4].abs().max()) == 0.0  # hidden tokens get no attention
    assert ours(probe, tokens)[1] is None
