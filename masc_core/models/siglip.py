"""SigLIP / SigLIP2 image-text model in plain torch, loaded from Hugging Face checkpoints.

The architecture and the weight names are those of transformers'
``Siglip2Model`` (NaFlex) and ``SiglipModel`` (fixed resolution), so a
checkpoint folder's safetensors load as they are. The arithmetic is the
same as transformers' (the tests compare the two); owning it here means:

- scores cannot change with the installed transformers (whose SigLIP2 code
  moved between 4.x and 5.x), and
- scoring does not import transformers at all: that import alone takes
  seconds, more than a whole forward pass of the base model on a CPU.

Only inference is implemented: no dropout, no gradients, no output of
attentions or intermediate states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

_ACTIVATIONS = {
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
}


@dataclass(frozen=True)
class TowerConfig:
    """One tower's dimensions; missing config.json keys take transformers' SigLIP defaults."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    layer_norm_eps: float = 1e-6
    hidden_act: str = "gelu_pytorch_tanh"

    @classmethod
    def read(cls, config: dict, **defaults) -> dict:
        fields = {name: config.get(name, defaults.get(name, getattr(cls, name))) for name in cls.__dataclass_fields__}
        return fields


def _embedding(count: int, width: int) -> nn.Embedding:
    """An embedding table without random initialisation (its weights come from the checkpoint).

    Besides saving the work, this keeps construction on the meta device fast:
    the first ``normal_`` on a meta tensor costs over a second of lazy imports.
    """
    return nn.Embedding(count, width, _weight=torch.empty(count, width))


class Attention(nn.Module):
    """Multi-head self-attention (q/k/v/out projections), scaled dot product."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, width = hidden.shape
        shape = (batch, length, self.heads, width // self.heads)
        q = self.q_proj(hidden).view(shape).transpose(1, 2)
        k = self.k_proj(hidden).view(shape).transpose(1, 2)
        v = self.v_proj(hidden).view(shape).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, width))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, activation: str):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unsupported hidden_act {activation!r}")
        self.activation = _ACTIVATIONS[activation]
        self.fc1 = nn.Linear(hidden, intermediate)
        self.fc2 = nn.Linear(intermediate, hidden)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation(self.fc1(hidden)))


class EncoderLayer(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.self_attn = Attention(cfg["hidden_size"], cfg["num_attention_heads"])
        self.layer_norm2 = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.mlp = MLP(cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_act"])

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.layer_norm1(hidden), mask)
        return hidden + self.mlp(self.layer_norm2(hidden))


class Encoder(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            hidden = layer(hidden, mask)
        return hidden


class NaflexEmbeddings(nn.Module):
    """SigLIP2 NaFlex: linear patch embedding plus the learned position grid resized to each image's grid."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.patch_embedding = nn.Linear(cfg["num_channels"] * cfg["patch_size"] ** 2, cfg["hidden_size"])
        self.position_embedding = _embedding(cfg["num_patches"], cfg["hidden_size"])
        self.grid_side = int(math.isqrt(cfg["num_patches"]))
        self._resized: dict[tuple[int, int], torch.Tensor] = {}

    def positions(self, grid: tuple[int, int]) -> torch.Tensor:
        """[rows * cols, D] position embeddings for a grid: bilinear with antialiasing, in float32.

        Cached per grid and device: they depend on the weights only.
        """
        weight = self.position_embedding.weight
        key = (grid, weight.device, weight.dtype)
        cached = self._resized.get(key)
        if cached is None:
            table = weight.float().reshape(self.grid_side, self.grid_side, -1).permute(2, 0, 1)[None]
            resized = F.interpolate(table, size=grid, mode="bilinear", align_corners=False, antialias=True)
            cached = resized[0].reshape(weight.shape[1], -1).transpose(0, 1).to(weight.dtype)
            self._resized = {k: v for k, v in self._resized.items() if k[1:] == key[1:]}
            self._resized[key] = cached
        return cached

    def forward(self, pixels: torch.Tensor, grids: list[tuple[int, int]]) -> torch.Tensor:
        """``pixels`` [B, L, P*P*C] (patches padded to L) -> [B, L, D]; padding takes the first position."""
        embedded = self.patch_embedding(pixels.to(self.patch_embedding.weight.dtype))
        positions = torch.empty_like(embedded)
        for row, grid in enumerate(grids):
            table = self.positions(grid)
            count = table.shape[0]
            positions[row, :count] = table
            positions[row, count:] = table[0]
        return embedded + positions


class FixedEmbeddings(nn.Module):
    """SigLIP fixed resolution: convolutional patch embedding plus one learned position per patch."""

    def __init__(self, cfg: dict):
        super().__init__()
        patch = cfg["patch_size"]
        self.patch_embedding = nn.Conv2d(cfg["num_channels"], cfg["hidden_size"], kernel_size=patch, stride=patch)
        self.position_embedding = _embedding((cfg["image_size"] // patch) ** 2, cfg["hidden_size"])

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """``pixels`` [B, C, H, W] -> [B, N, D]."""
        embedded = self.patch_embedding(pixels.to(self.patch_embedding.weight.dtype)).flatten(2).transpose(1, 2)
        return embedded + self.position_embedding.weight[None]


class ProbeAttention(nn.Module):
    """Multi-head cross-attention from a few queries to the tokens, with its weights.

    The parameters are those of ``nn.MultiheadAttention`` (``in_proj_weight``,
    ``in_proj_bias``, ``out_proj``), as SigLIP checkpoints store them. Written
    out rather than calling that module: its functional path validates the
    key mask through torch's symbolic-shape machinery, whose first use
    imports sympy (half a second in every fresh process that scores PF).
    """

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.num_heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * hidden, hidden))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * hidden))
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(
        self,
        queries: torch.Tensor,
        tokens: torch.Tensor,
        hidden: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``queries`` [B, Q, D] attend over ``tokens`` [B, L, D]; ``hidden`` [B, L] bool, True = not attended.

        Returns the attended values [B, Q, D] and, with ``need_weights``, the
        attention averaged over heads [B, Q, L]. A row with every token hidden
        gives NaN, as ``nn.MultiheadAttention`` does.
        """
        batch, count, width = queries.shape
        length = tokens.shape[1]
        head_dim = width // self.num_heads
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        q = F.linear(queries, w_q, b_q).view(batch, count, self.num_heads, head_dim).transpose(1, 2)
        k = F.linear(tokens, w_k, b_k).view(batch, length, self.num_heads, head_dim).transpose(1, 2)
        v = F.linear(tokens, w_v, b_v).view(batch, length, self.num_heads, head_dim).transpose(1, 2)
        logits = (q * (1.0 / math.sqrt(head_dim))) @ k.transpose(-2, -1)  # [B, H, Q, L]
        if hidden is not None:
            logits = logits.masked_fill(hidden[:, None, None, :], float("-inf"))
        weights = logits.softmax(dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(batch, count, width)
        return self.out_proj(mixed), (weights.mean(dim=1) if need_weights else None)


class PoolingHead(nn.Module):
    """SigLIP's multihead attention pooling: one learned probe attends over the tokens."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.probe = nn.Parameter(torch.empty(1, 1, cfg["hidden_size"]))
        self.attention = ProbeAttention(cfg["hidden_size"], cfg["num_attention_heads"])
        self.layernorm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.mlp = MLP(cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_act"])


class VisionTower(nn.Module):
    def __init__(self, cfg: dict, naflex: bool):
        super().__init__()
        self.embeddings = NaflexEmbeddings(cfg) if naflex else FixedEmbeddings(cfg)
        self.encoder = Encoder(cfg)
        self.post_layernorm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.head = PoolingHead(cfg)


class TextEmbeddings(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.token_embedding = _embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.position_embedding = _embedding(cfg["max_position_embeddings"], cfg["hidden_size"])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.token_embedding(ids) + self.position_embedding.weight[: ids.shape[1]][None]


class TextTower(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.embeddings = TextEmbeddings(cfg)
        self.encoder = Encoder(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.head = nn.Linear(cfg["hidden_size"], cfg["projection_size"])


class SiglipModel(nn.Module):
    """Vision and text towers of a SigLIP2 checkpoint (``vision_model``, ``text_model``, as in transformers)."""

    def __init__(self, config: dict, naflex: bool):
        super().__init__()
        vision = config.get("vision_config") or {}
        text = config.get("text_config") or {}
        vision_cfg = TowerConfig.read(vision)
        vision_cfg.update(num_channels=vision.get("num_channels", 3), patch_size=vision.get("patch_size", 16))
        if naflex:
            vision_cfg["num_patches"] = vision.get("num_patches", 256)
        else:
            vision_cfg["image_size"] = vision.get("image_size", 224)
        text_cfg = TowerConfig.read(text)
        text_cfg.update(
            vocab_size=text.get("vocab_size", 32000),
            max_position_embeddings=text.get("max_position_embeddings", 64),
            projection_size=text.get("projection_size") or text_cfg["hidden_size"],
        )
        self.naflex = naflex
        self.vision_model = VisionTower(vision_cfg, naflex)
        self.text_model = TextTower(text_cfg)
        # Trained with the towers; unused by MaSC but part of the checkpoint.
        self.logit_scale = nn.Parameter(torch.empty(1))
        self.logit_bias = nn.Parameter(torch.empty(1))

    @torch.inference_mode()
    def encode_images(
        self, pixels: torch.Tensor, grids: list[tuple[int, int]] | None = None, valid: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Patch tokens after the final layer norm, [B, L, D].

        NaFlex: ``pixels`` [B, L, P*P*C], ``grids`` each image's (rows, cols),
        ``valid`` [B, L] bool (False = padding, hidden from attention).
        Fixed-size: ``pixels`` [B, C, H, W].
        """
        vision = self.vision_model
        if not self.naflex:
            return vision.post_layernorm(vision.encoder(vision.embeddings(pixels)))
        hidden = vision.embeddings(pixels, grids)
        mask = None
        if valid is not None and not bool(valid.all()):
            # Additive key mask [B, 1, 1, L]: padded positions get no attention.
            mask = torch.zeros(valid.shape[0], 1, 1, valid.shape[1], dtype=hidden.dtype, device=hidden.device)
            mask.masked_fill_(~valid[:, None, None, :].to(hidden.device), torch.finfo(hidden.dtype).min)
        return vision.post_layernorm(vision.encoder(hidden, mask))

    @torch.inference_mode()
    def encode_texts(self, ids: torch.Tensor) -> torch.Tensor:
        """Pooled text embeddings [T, D]: the last position's state through the head.

        No attention mask: SigLIP's text tower was trained attending to its padding.
        """
        text = self.text_model
        hidden = text.final_layer_norm(text.encoder(text.embeddings(ids)))
        return text.head(hidden[:, -1, :])
