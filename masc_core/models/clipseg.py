"""Built-in subject masks: text-prompted segmentation with CLIPSeg.

MaSC needs a foreground mask for the reference (CP) and for each output
(PF). The metric does not care where masks come from, and the paper found
that CLIPSeg (Lüddecke & Ecker, CVPR 2022) masks score as well as SAM3's
(appendix 6.1: CP alpha +0.482 with CLIPSeg vs +0.471 with SAM3, PF within
0.005), so a CLIPSeg checkpoint prompted with the subject's name is enough
to mask every image of a best-of-N batch.

``ClipSegSegmenter`` owns one loaded ``CLIPSegForImageSegmentation``
checkpoint (e.g. CIDAS/clipseg-rd64-refined, from a folder or the Hub):

- ``probabilities``: per pixel, the probability that it shows the subject,
  at each image's own size. Several names ("sks dog, dog") are combined by
  the per-pixel maximum over names.
- ``masks``: those probabilities thresholded (>= threshold) to 0/1 and
  optionally dilated by a number of pixels.

How the model is driven, and why:

- Images are preprocessed here, not by transformers' image processor
  (which needs torchvision in transformers 5 and resized differently in
  4.x): resize to the processor's size (352 x 352 for CIDAS) with
  antialiasing, exactly as transformers 5 does, then ImageNet
  normalization; see :mod:`masc_core.models.preprocess`.
- Prompts are tokenized with CLIP's BPE by :mod:`masc_core.models.tokenizers`.
- The vision tower runs once per image and stops at the deepest layer the
  decoder reads (``extract_layers``; layers 10-12 of CIDAS's 12 feed
  nothing); the text tower runs once per distinct name; only CLIPSeg's small
  decoder runs once per (image, name) pair. transformers' own forward would
  run the whole vision tower once per pair. The arithmetic is the same as
  transformers' forward (the tests compare the logits).
- The decoder's 352 x 352 logits are resized to the image (bilinear), then
  the sigmoid gives probabilities.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import MascModelError
from . import checkpoints
from ..progress import ProgressCallback, stages
from .devices import place
from .preprocess import PreprocessSpec
from .segmenters import Segmenter
from .tokenizers import ClipTextTokenizer
from .weight_shapes import Size, check_heads, check_input_side

CLIPSEG_MODEL_ID = "CIDAS/clipseg-rd64-refined"
"""The usual CLIPSeg checkpoint (ViT-B/16 CLIP, refined decoder with 64 channels)."""

DEFAULT_BATCH_SIZE = 8

# Weights that text-prompted segmentation never reads: a checkpoint without
# them still gives the same masks.
_UNUSED_WEIGHTS = ("position_ids", "clip.logit_scale", "clip.visual_projection", "clip.vision_model.post_layernorm")


# ---------------------------------------------------------------------- checkpoints


@dataclass
class ClipSegCheckpoint(checkpoints.CheckpointFolder):
    """What a CLIPSeg checkpoint folder holds, checked before any weight is read."""

    @property
    def extract_layers(self) -> list[int]:
        """Vision layers (0-based) whose outputs the decoder reads, CIDAS: [3, 6, 9]."""
        return [int(i) for i in self.config.get("extract_layers") or (3, 6, 9)]

    @property
    def text_length(self) -> int:
        """Longest prompt in tokens (CLIP: 77)."""
        return int(self.text_config.get("max_position_embeddings") or 77)


def inspect_clipseg(folder: str, source: str | None = None) -> ClipSegCheckpoint:
    """Check that ``folder`` is a usable CLIPSeg checkpoint, without loading weights."""
    info = checkpoints.read_folder(
        folder,
        source,
        label="CLIPSeg model folder",
        model_types=("clipseg",),
        wrong_type=f", not CLIPSeg: built-in masks need a CLIPSeg checkpoint such as {CLIPSEG_MODEL_ID}",
        preprocessor_required=True,
        cls=ClipSegCheckpoint,
    )
    names = set(os.listdir(folder))
    if "tokenizer.json" not in names and not {"vocab.json", "merges.txt"} <= names:
        raise MascModelError(
            f"CLIPSeg model folder '{info.source}' has no tokenizer.json (nor vocab.json + merges.txt): "
            "copy the tokenizer files that came with the checkpoint into it"
        )
    layers = int(info.vision_config.get("num_hidden_layers") or 12)
    if not info.extract_layers or min(info.extract_layers) < 0 or max(info.extract_layers) >= layers:
        raise MascModelError(
            f"CLIPSeg model folder '{info.source}' has extract_layers {info.extract_layers} for a {layers}-layer "
            "vision "
            "tower: the config is inconsistent; re-download the checkpoint"
        )
    info.check_sizes(clipseg_sizes(info))
    return info


def clipseg_preprocess_spec(info: ClipSegCheckpoint) -> PreprocessSpec:
    """How the checkpoint wants its images (ViTImageProcessor: square resize, rescale, normalize)."""
    config = dict(info.preprocessor_config)
    size = config.get("size")
    if isinstance(size, (int, float)):  # older processor configs give one number
        config["size"] = {"height": int(size), "width": int(size)}
    for side in (config.get("size") or {}).values():  # bounded before any photo is resized to it
        check_input_side(info.named, "size", side, file="preprocessor_config.json")
    spec = PreprocessSpec.from_configs(naflex=False, vision_config=info.vision_config, preprocessor_config=config)
    height, width = spec.image_size
    if height != width:
        raise MascModelError(
            f"CLIPSeg model folder '{info.source}' asks for {height}x{width} inputs: CLIPSeg's decoder needs a "
            "square size; fix 'size' in preprocessor_config.json"
        )
    return spec


def clipseg_sizes(info: ClipSegCheckpoint) -> list[Size]:
    """The sizes config.json asks (transformers' CLIPSegConfig defaults filled) and the weights that hold each."""
    config = checkpoints.transformers_config(info, "CLIPSegConfig")
    vision, text = config.vision_config, config.text_config
    check_input_side(info.named, "vision_config.image_size", vision.image_size)
    check_heads(info.named, "vision_config", vision.hidden_size, vision.num_attention_heads)
    check_heads(info.named, "text_config", text.hidden_size, text.num_attention_heads)
    check_heads(info.named, "decoder", config.reduce_dim, config.decoder_num_attention_heads)
    sizes = []
    for tower, cfg, norm in (("vision", vision, "pre_layrnorm"), ("text", text, "final_layer_norm")):
        prefix = f"clip.{tower}_model."
        sizes += [
            Size(f"{tower}_config.hidden_size", cfg.hidden_size, prefix + norm + ".weight"),
            Size(f"{tower}_config.num_hidden_layers", cfg.num_hidden_layers, prefix + "encoder.layers.", axis=None),
            Size(
                f"{tower}_config.intermediate_size", cfg.intermediate_size, prefix + "encoder.layers.0.mlp.fc1.weight"
            ),
        ]
    patch, positions = vision.patch_size, "clip.vision_model.embeddings.position_embedding.weight"
    layers = len(config.extract_layers or ())
    return sizes + [
        Size("vision_config.patch_size", patch, "clip.vision_model.embeddings.patch_embedding.weight", 2),
        Size("vision_config.image_size", vision.image_size, positions, expected=(vision.image_size // patch) ** 2 + 1),
        Size("text_config.vocab_size", text.vocab_size, "clip.text_model.embeddings.token_embedding.weight"),
        Size(
            "text_config.max_position_embeddings",
            text.max_position_embeddings,
            "clip.text_model.embeddings.position_embedding.weight",
        ),
        Size("projection_dim", config.projection_dim, "clip.text_projection.weight"),
        Size("reduce_dim", config.reduce_dim, "decoder.reduces.0.weight"),
        Size("len(extract_layers)", layers, "decoder.reduces.", axis=None),
        Size("len(extract_layers)", layers, "decoder.layers.", axis=None),
        Size("decoder_intermediate_size", config.decoder_intermediate_size, "decoder.layers.0.mlp.fc1.weight"),
    ]


def load_clipseg_model(info: ClipSegCheckpoint) -> torch.nn.Module:
    """The transformers CLIPSeg model of a checked checkpoint, float32, CPU, eval mode."""
    try:
        import transformers
    except ImportError:  # pragma: no cover - a declared dependency
        raise MascModelError("transformers is not installed: pip install 'transformers>=4.50'") from None
    model_class = getattr(transformers, "CLIPSegForImageSegmentation", None)
    if model_class is None:  # pragma: no cover - in transformers since 4.25
        raise MascModelError(f"transformers {transformers.__version__} has no CLIPSegForImageSegmentation: upgrade it")
    model = checkpoints.load_pretrained(
        model_class,
        info.folder,
        label=f"CLIPSeg model folder '{info.source}'",
        incomplete_hint="the checkpoint is incomplete or not a CLIPSegForImageSegmentation model",
        unused=lambda key: any(part in key for part in _UNUSED_WEIGHTS),
    )
    return model.float()


# ---------------------------------------------------------------------- the segmenter


class ClipSegSegmenter(Segmenter):
    """A loaded CLIPSeg checkpoint that turns images and a subject name into masks (``Segmenter``'s
    ``probabilities`` and ``masks``).

    Build one with :meth:`load`. The model can be moved with :meth:`to`
    (ComfyUI moves it between GPU and CPU); inputs always follow the model's
    current device, and results come back as float32 CPU tensors.
    """

    kind = "clipseg"

    def __init__(
        self,
        model: torch.nn.Module,
        info: ClipSegCheckpoint,
        spec: PreprocessSpec,
        tokenizer: ClipTextTokenizer,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        self.model = model
        self.info = info
        self.spec = spec
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.extract_layers = info.extract_layers
        layer = model.clip.vision_model.encoder.layers[0]
        # transformers 4's encoder layers take (hidden, attention_mask,
        # causal_attention_mask) and return a tuple; 5's take (hidden,
        # attention_mask) and return the tensor.
        self._layer_takes_causal_mask = "causal_attention_mask" in inspect.signature(layer.forward).parameters
        self.forward_counts = {"images": 0, "texts": 0, "pairs": 0}

    @classmethod
    def load(
        cls,
        model: str | os.PathLike = CLIPSEG_MODEL_ID,
        *,
        device: str | torch.device | None = "auto",
        precision: str | torch.dtype | None = "fp32",
        batch_size: int = DEFAULT_BATCH_SIZE,
        cache_dir: str | None = None,
        download_dir: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> "ClipSegSegmenter":
        """Load a CLIPSeg checkpoint from a folder (HF layout) or a Hub id.

        ``model``: a folder holding config.json (model_type "clipseg"),
        safetensors weights, tokenizer.json (or vocab.json + merges.txt) and
        preprocessor_config.json, e.g. ComfyUI's models/clipseg/<name>; a
        Hugging Face cache folder (models--CIDAS--clipseg-rd64-refined) also
        works; or a Hub id, downloaded on first use. Only safetensors are
        read; remote code never runs.
        ``device``: auto (cuda > mps > cpu), cpu, cuda[:N] or mps.
        ``precision``: fp32 (default), bf16, fp16 or auto.
        ``batch_size``: images per vision forward (each with every name).
        ``cache_dir`` / ``download_dir``: where a Hub id is downloaded (the
        Hugging Face cache layout, or a plain folder).
        ``progress``: ``progress(done, total)`` after each loading stage; may raise to cancel.
        """
        step = stages(progress, 4)
        folder, source = checkpoints.resolve(
            model, what="CLIPSeg model", example=CLIPSEG_MODEL_ID, cache_dir=cache_dir, local_dir=download_dir
        )
        info = inspect_clipseg(folder, source)  # the config held against the weights' shapes
        spec = clipseg_preprocess_spec(info)
        step()
        tokenizer = ClipTextTokenizer.from_folder(folder, max_length=info.text_length)
        step()
        built = load_clipseg_model(info)
        step()
        network = place(built, device, precision)
        step()
        return cls(network, info, spec, tokenizer, batch_size=batch_size)

    # ------------------------------------------------------------------ placement

    # ------------------------------------------------------------------ forward passes

    def _encode_names(self, names: Sequence[str]) -> torch.Tensor:
        return self._text_embeddings(names)

    def _batch_maps(
        self, pixels: torch.Tensor, chunk: Sequence[np.ndarray], conditional: torch.Tensor
    ) -> Iterator[torch.Tensor]:
        logits = self._logits(pixels, conditional)
        for image, per_name in zip(chunk, logits):
            yield self._at_image_size(per_name, image.shape[:2])

    @staticmethod
    def _at_image_size(logits: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """[names, S, S] logits -> [H, W] probabilities: bilinear resize, sigmoid, max over names."""
        resized = F.interpolate(logits[:, None].float(), size=tuple(size), mode="bilinear", align_corners=False)
        return resized[:, 0].sigmoid().amax(dim=0)

    @torch.inference_mode()
    def _text_embeddings(self, names: Sequence[str]) -> torch.Tensor:
        """Projected text embeddings [len(names), projection_dim], model device and dtype."""
        clip = self.model.clip
        ids, attention = self.tokenizer(list(names))
        self.forward_counts["texts"] += len(names)
        pooled = clip.text_model(input_ids=ids.to(self.device), attention_mask=attention.to(self.device)).pooler_output
        return clip.text_projection(pooled)

    @torch.inference_mode()
    def _logits(self, pixels: torch.Tensor, conditional: torch.Tensor) -> torch.Tensor:
        """Decoder logits [B, names, S, S] for B prepared images and every name's embedding."""
        count, names = pixels.shape[0], conditional.shape[0]
        activations = self._vision_activations(pixels)
        # One decoder row per (image, name) pair, image-major.
        activations = [a.repeat_interleave(names, dim=0) for a in activations]
        self.forward_counts["pairs"] += count * names
        logits = self.model.decoder(activations, conditional.repeat(count, 1)).logits
        return logits.reshape(count, names, *logits.shape[-2:])

    def _vision_activations(self, pixels: torch.Tensor) -> list[torch.Tensor]:
        """Outputs of the vision layers in ``extract_layers``, running no layer past the deepest one."""
        vision = self.model.clip.vision_model
        self.forward_counts["images"] += pixels.shape[0]
        hidden = vision.embeddings(pixels.to(self.device, self.dtype), interpolate_pos_encoding=True)
        hidden = vision.pre_layrnorm(hidden)
        wanted = set(self.extract_layers)
        outputs: dict[int, torch.Tensor] = {}
        for index, layer in enumerate(vision.encoder.layers[: max(wanted) + 1]):
            result = layer(hidden, None, None) if self._layer_takes_causal_mask else layer(hidden, None)
            hidden = result[0] if isinstance(result, tuple) else result
            if index in wanted:
                outputs[index] = hidden
        return [outputs[i] for i in self.extract_layers]
