"""Subject masks from SAM3 (Carion et al., 2025, "SAM 3: segment anything with concepts"), the paper's mask source.

The paper extracts M_R and M_G "with SAM3 prompted by the canonical concept name, applied identically to
reference and output images" (section 3). ``Sam3Segmenter`` does that with a transformers ``Sam3Model``
checkpoint folder (facebook/sam3, or a local copy in ComfyUI's models/sam3/<name>), behind the same
``Segmenter`` interface as CLIPSeg:

- Images are resized to the processor's size (1008 x 1008 for facebook/sam3; bilinear, antialiased, as
  transformers 5's torchvision processor does), rescaled and normalized (mean = std = 0.5) here, not by
  transformers' processor; see :mod:`masc_core.models.preprocess`.
- Each name is tokenized with CLIP's BPE, padded to SAM3's 32 tokens as ``Sam3Processor`` pads it.
- The vision tower runs once per image and the text tower once per distinct name; only the DETR encoder,
  decoder and mask decoder run per (image, name) pair (``Sam3Model.forward`` with ``vision_embeds`` and
  ``text_embeds``). The arithmetic is transformers' own (the tests compare with ``Sam3Processor`` +
  ``post_process_instance_segmentation``).
- **Instances are merged**: every query whose score (sigmoid of its logit times the sigmoid of the presence
  logit, as transformers and core's SAM3_Detect compute it) is at least ``score_threshold`` (0.5 by default,
  core SAM3_Detect's default) contributes its mask probabilities, and a pixel's probability is the maximum over
  those instances (and over the subject's names). The union, not the best instance: a subject seen as two
  instances (a pair of shoes, a dog split by an occluder) must leave no part of itself in the background PF
  pools, and core's SAM3_Detect also returns the union unless asked for individual masks. No instance above
  the score gives an empty mask, which the paper's 5% filter then drops.
- The mask decoder's 288 x 288 (at 1008 px) probabilities are resized to the image (bilinear), as
  transformers' post-processing does.

SAM3 is in transformers 5 only (no 4.x release has ``Sam3Model``): loading it under 4.x is a one-line error.
facebook/sam3 is gated on the Hub (the SAM License: request access on its page, then log in).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..defaults import SAM3_PIXEL_THRESHOLD, SAM3_SCORE_THRESHOLD
from ..errors import MascModelError
from ..metric.masks import check_threshold
from . import checkpoints
from ..progress import ProgressCallback, stages
from .devices import place
from .preprocess import PreprocessSpec
from .segmenters import Segmenter
from .tokenizers import ClipTextTokenizer
from .weight_shapes import Size, check_heads, check_input_side

SAM3_MODEL_ID = "facebook/sam3"
"""The SAM3 checkpoint (gated: accept the SAM License on its Hub page and log in before it downloads)."""

SAM3_GATE = (
    f"{SAM3_MODEL_ID} is gated: request access on https://huggingface.co/{SAM3_MODEL_ID} (the SAM License), then "
    "log in on this machine (hf auth login) and retry, or download the folder elsewhere"
)
"""What to do when the gated download is refused (said with any failed download of it)."""


TEXT_LENGTH = 32
"""SAM3's text context: ``Sam3Processor`` pads every prompt to 32 tokens."""

DEFAULT_BATCH_SIZE = 2
"""Images per vision forward (1008 px images through a 32-layer ViT-L: small batches)."""


@dataclass
class Sam3Checkpoint(checkpoints.CheckpointFolder):
    """What a SAM3 checkpoint folder holds, checked before any weight is read."""

    @property
    def detector_config(self) -> dict:
        """The image detector's config (a sam3_video checkpoint nests it under detector_config)."""
        return self.config.get("detector_config") or self.config

    @property
    def backbone_config(self) -> dict:
        return (self.detector_config.get("vision_config") or {}).get("backbone_config") or {}

    @property
    def text_length(self) -> int:
        return int((self.detector_config.get("text_config") or {}).get("max_position_embeddings") or TEXT_LENGTH)


def check_transformers_has_sam3():
    """transformers' ``Sam3Model``, or the one-line error that SAM3 needs transformers >= 5."""
    try:
        import transformers
    except ImportError:  # pragma: no cover - a declared dependency
        raise MascModelError("transformers is not installed: pip install 'transformers>=5'") from None
    model_class = getattr(transformers, "Sam3Model", None)
    if model_class is None:
        raise MascModelError(
            f"SAM3 needs transformers >= 5 (this is {transformers.__version__}, which has no Sam3Model): "
            "pip install -U 'transformers>=5', or use a CLIPSeg segmenter"
        )
    return model_class


def resolve_sam3(
    model: str | os.PathLike, *, what: str, cache_dir: str | None = None, local_dir: str | None = None
) -> tuple[str, str]:
    """``checkpoints.resolve`` for a SAM3 model: a failed download of the gated id also says how to get access."""
    try:
        return checkpoints.resolve(model, what=what, example=SAM3_MODEL_ID, cache_dir=cache_dir, local_dir=local_dir)
    except MascModelError as error:
        if os.fspath(model) == SAM3_MODEL_ID and not os.path.exists(SAM3_MODEL_ID):  # the download failed
            raise MascModelError(f"{error} ({SAM3_GATE})") from None
        raise


def inspect_sam3(folder: str, source: str | None = None) -> Sam3Checkpoint:
    """Check that ``folder`` is a usable SAM3 checkpoint, without loading weights."""
    info = checkpoints.read_folder(
        folder,
        source,
        label="SAM3 model folder",
        model_types=("sam3", "sam3_video"),
        wrong_type=f", not SAM3: SAM3 masks need a SAM3 checkpoint such as {SAM3_MODEL_ID}",
        preprocessor_required=False,
        cls=Sam3Checkpoint,
    )
    names = set(os.listdir(folder))
    if "tokenizer.json" not in names and not {"vocab.json", "merges.txt"} <= names:
        raise MascModelError(
            f"SAM3 model folder '{info.source}' has no tokenizer.json (nor vocab.json + merges.txt): "
            "copy the tokenizer files that came with the checkpoint into it"
        )
    if not info.preprocessor_config and "processor_config.json" in names:
        # transformers 5 saves a processor's parts in one processor_config.json.
        processor = checkpoints.read_config(os.path.join(folder, "processor_config.json"), "processor config")
        info.preprocessor_config = dict(processor.get("image_processor") or {})
    info.check_sizes(sam3_sizes(info))
    return info


def sam3_detector(info: Sam3Checkpoint):
    """The image detector's config as transformers reads it (a sam3_video config nests it): defaults filled."""
    if info.model_type == "sam3_video":
        return checkpoints.transformers_config(info, "Sam3VideoConfig").detector_config
    return checkpoints.transformers_config(info, "Sam3Config")


def sam3_sizes(info: Sam3Checkpoint) -> list[Size]:
    """The sizes config.json asks of the image detector and the weights that hold each (under ``detector_model.``
    in a sam3_video checkpoint)."""
    check_transformers_has_sam3()
    config = sam3_detector(info)
    prefix = info.weight_shapes().prefix_of("detr_decoder.query_embed.weight")
    text, decoder = config.text_config, config.detr_decoder_config
    tokens, layers = prefix + "text_encoder.text_model.embeddings.", prefix + "text_encoder.text_model.encoder.layers."
    return _vision_sizes(info, config.vision_config, prefix + "vision_encoder.") + [
        Size("text_config.vocab_size", text.vocab_size, tokens + "token_embedding.weight"),
        Size("text_config.hidden_size", text.hidden_size, tokens + "token_embedding.weight", 1),
        Size("text_config.max_position_embeddings", text.max_position_embeddings, tokens + "position_embedding.weight"),
        Size("text_config.num_hidden_layers", text.num_hidden_layers, layers, axis=None),
        Size("detr_decoder_config.num_queries", decoder.num_queries, prefix + "detr_decoder.query_embed.weight"),
        Size("detr_decoder_config.hidden_size", decoder.hidden_size, prefix + "detr_decoder.query_embed.weight", 1),
        Size("detr_decoder_config.num_layers", decoder.num_layers, prefix + "detr_decoder.layers.", axis=None),
        Size(
            "detr_encoder_config.num_layers",
            config.detr_encoder_config.num_layers,
            prefix + "detr_encoder.layers.",
            axis=None,
        ),
        Size(
            "geometry_encoder_config.num_layers",
            config.geometry_encoder_config.num_layers,
            prefix + "geometry_encoder.layers.",
            axis=None,
        ),
        Size(
            "mask_decoder_config.hidden_size",
            config.mask_decoder_config.hidden_size,
            prefix + "mask_decoder.prompt_cross_attn.q_proj.weight",
        ),
    ]


def _vision_sizes(info: Sam3Checkpoint, vision, where: str) -> list[Size]:
    """The ViT backbone's and the FPN neck's sizes (``where``: the vision encoder's weights' prefix)."""
    backbone, vit = vision.backbone_config, "vision_config.backbone_config"
    check_input_side(info.named, f"{vit}.image_size", backbone.image_size)
    check_input_side(info.named, f"{vit}.pretrain_image_size", backbone.pretrain_image_size)
    check_heads(info.named, vit, backbone.hidden_size, backbone.num_attention_heads)
    patch, embedding = backbone.patch_size, where + "backbone.embeddings."
    return [
        Size(f"{vit}.hidden_size", backbone.hidden_size, embedding + "patch_embeddings.projection.weight"),
        Size(f"{vit}.patch_size", patch, embedding + "patch_embeddings.projection.weight", 2),
        Size(f"{vit}.num_hidden_layers", backbone.num_hidden_layers, where + "backbone.layers.", axis=None),
        Size(f"{vit}.intermediate_size", backbone.intermediate_size, where + "backbone.layers.0.mlp.fc1.weight"),
        Size(
            f"{vit}.pretrain_image_size",
            backbone.pretrain_image_size,
            embedding + "position_embeddings",
            1,
            expected=(backbone.pretrain_image_size // patch) ** 2,
        ),
        Size("vision_config.fpn_hidden_size", vision.fpn_hidden_size, where + "neck.fpn_layers.0.proj2.weight"),
        Size("len(vision_config.scale_factors)", len(vision.scale_factors), where + "neck.fpn_layers.", axis=None),
    ]


def sam3_preprocess_spec(info: Sam3Checkpoint) -> PreprocessSpec:
    """How the checkpoint wants its images: a square resize to the backbone's size, mean = std = 0.5.

    The processor's size must be the backbone's: its rotary positions are laid out for that grid, and any other size
    fails inside the first forward (after every photo was resized to it)."""
    backbone = info.backbone_config
    size = check_input_side(info.named, "vision_config.backbone_config.image_size", backbone.get("image_size") or 1008)
    config = {"size": {"height": size, "width": size}, "resample": 2, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    config.update(
        {
            k: v
            for k, v in info.preprocessor_config.items()
            if k in ("size", "resample", "image_mean", "image_std", "rescale_factor")
        }
    )
    spec = PreprocessSpec.from_configs(
        naflex=False, vision_config={"patch_size": int(backbone.get("patch_size") or 14)}, preprocessor_config=config
    )
    height, width = spec.image_size
    if (height, width) != (size, size):
        processor = (
            "preprocessor_config.json"
            if os.path.isfile(os.path.join(info.folder, "preprocessor_config.json"))
            else "processor_config.json"
        )
        raise MascModelError(
            f"{info.named}: {processor} asks {height}x{width} inputs, but the backbone takes {size}x{size} "
            "(config.json's vision_config.backbone_config.image_size): the processor config belongs to another "
            f"checkpoint; re-download it or set its size to {size}"
        )
    return spec


def load_sam3_model(info: Sam3Checkpoint) -> torch.nn.Module:
    """The transformers SAM3 model of a checked checkpoint, float32, CPU, eval mode (the tracker's weights unread)."""
    model_class = check_transformers_has_sam3()
    model = checkpoints.load_pretrained(
        model_class,
        info.folder,
        label=f"SAM3 model folder '{info.source}'",
        incomplete_hint="the checkpoint is incomplete or not a Sam3Model",
        unused=lambda key: key.startswith(("tracker_model.", "tracker_neck.")),
    )
    return model.float()


class Sam3Segmenter(Segmenter):
    """A loaded SAM3 checkpoint that turns images and a subject's names into masks (``Segmenter``'s
    ``probabilities`` and ``masks``; instances at or above ``score_threshold`` merged, see the module)."""

    kind = "sam3"
    default_threshold = SAM3_PIXEL_THRESHOLD

    def __init__(
        self,
        model: torch.nn.Module,
        info: Sam3Checkpoint,
        spec: PreprocessSpec,
        tokenizer: ClipTextTokenizer,
        *,
        score_threshold: float = SAM3_SCORE_THRESHOLD,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        self.model, self.info, self.spec, self.tokenizer = model, info, spec, tokenizer
        self.score_threshold = check_threshold(score_threshold, "score_threshold")
        self.batch_size = max(1, int(batch_size))
        self.forward_counts = {"images": 0, "texts": 0, "pairs": 0}

    @classmethod
    def load(
        cls,
        model: str | os.PathLike = SAM3_MODEL_ID,
        *,
        device: str | torch.device | None = "auto",
        precision: str | torch.dtype | None = "fp32",
        batch_size: int = DEFAULT_BATCH_SIZE,
        score_threshold: float = SAM3_SCORE_THRESHOLD,
        cache_dir: str | None = None,
        download_dir: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> "Sam3Segmenter":
        """Load a SAM3 checkpoint from a folder (HF layout: config.json with model_type sam3 or sam3_video,
        safetensors weights, the CLIP tokenizer files) or the Hub id ``facebook/sam3`` (gated).

        ``score_threshold``: an instance joins the mask when its score is at least this (0..1).
        ``device``, ``precision``, ``batch_size``, ``cache_dir``, ``download_dir`` and ``progress`` as for CLIPSeg.
        """
        step = stages(progress, 4)
        score_threshold = check_threshold(score_threshold, "score_threshold")
        check_transformers_has_sam3()  # before any download
        folder, source = resolve_sam3(model, what="SAM3 model", cache_dir=cache_dir, local_dir=download_dir)
        info = inspect_sam3(folder, source)  # the config held against the weights' shapes
        spec = sam3_preprocess_spec(info)
        step()
        tokenizer = ClipTextTokenizer.from_folder(folder, max_length=info.text_length, pad_to_max_length=True)
        step()
        built = load_sam3_model(info)
        step()
        network = place(built, device, precision)
        step()
        return cls(network, info, spec, tokenizer, score_threshold=score_threshold, batch_size=batch_size)

    def describe(self) -> dict:
        """Name, input size, instance score threshold, device and precision, for logs and reports."""
        info = super().describe()
        info["score_threshold"] = self.score_threshold
        return {key: info[key] for key in ("model", "kind", "image_size", "score_threshold", "device", "precision")}

    # ------------------------------------------------------------------ forward passes

    def _encode_names(self, names: Sequence[str]):
        return self._text_embeddings(names)

    def _batch_maps(self, pixels: torch.Tensor, chunk: Sequence[np.ndarray], texts) -> Iterator[torch.Tensor]:
        per_name = self._instance_probabilities(pixels, texts)  # [names][B] -> (scores [Q], masks [Q, h, w])
        for position, image in enumerate(chunk):
            maps = [
                merge_instances(*scores_masks[position], self.score_threshold, image.shape[:2])
                for scores_masks in per_name
            ]
            yield torch.stack(maps).amax(dim=0)

    @torch.inference_mode()
    def _text_embeddings(self, names: Sequence[str]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per name: (SAM3's projected text features [1, 32, D], attention mask [1, 32]), model device and dtype."""
        ids, attention = self.tokenizer(list(names))
        self.forward_counts["texts"] += len(names)
        features = self.model.get_text_features(
            input_ids=ids.to(self.device), attention_mask=attention.to(self.device)
        ).pooler_output
        return [(features[i : i + 1], attention[i : i + 1].to(self.device)) for i in range(len(names))]

    @torch.inference_mode()
    def _instance_probabilities(self, pixels: torch.Tensor, texts) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
        """For each name, for each image: (instance scores [Q], instance mask probabilities [Q, h, w])."""
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        count = pixels.shape[0]
        self.forward_counts["images"] += count
        vision = self.model.get_vision_features(pixel_values=pixels.to(self.device, self.dtype))
        results = []
        for features, attention in texts:
            self.forward_counts["pairs"] += count
            output = self.model(
                vision_embeds=vision,
                text_embeds=BaseModelOutputWithPooling(pooler_output=features.expand(count, -1, -1)),
                attention_mask=attention.expand(count, -1),
            )
            scores = output.pred_logits.float().sigmoid()
            if output.presence_logits is not None:
                scores = scores * output.presence_logits.float().sigmoid()
            masks = output.pred_masks.float().sigmoid()
            results.append([(scores[i], masks[i]) for i in range(count)])
        return results


def merge_instances(
    scores: torch.Tensor, masks: torch.Tensor, score_threshold: float, size: tuple[int, int]
) -> torch.Tensor:
    """[H, W] probabilities: the per-pixel maximum over the instances scoring at least ``score_threshold``, resized
    (bilinear) to ``size``; zeros when none does."""
    kept = masks[scores >= score_threshold]
    if kept.shape[0] == 0:
        return torch.zeros(tuple(size), dtype=torch.float32, device=masks.device)
    resized = F.interpolate(kept[None], size=tuple(size), mode="bilinear", align_corners=False)[0]
    return resized.amax(dim=0).clamp_(0.0, 1.0)
