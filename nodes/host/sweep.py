"""MaSC Sweep in ComfyUI: each cell's model as core's LoraLoader makes it, each image as KSampler (or
SamplerCustomAdvanced) + VAE Decode.

- ``LoraPatching``: the LoRA list of ``models/loras``, a file loaded and checked (it must patch some of this model's
  keys: core only logs "lora key not loaded"), ``comfy.sd.load_lora_for_models`` as LoraLoader calls it (ModelPatcher
  clones, the base weights never reloaded), the prompt encoded as CLIPTextEncode does with the patched CLIP, and the
  graph's GUIDER given the cell's model and prompt (``guide``: as Basic Guider / CFG Guider would make it on the
  patched model and the re-encoded conditioning, keeping what nodes after the text encoder added, e.g.
  FluxGuidance's guidance or ReferenceLatent's latents). ``use_loras`` installs the tests' stand-in outside ComfyUI.
- ``KSamplerCells`` / ``GuiderCells``: what every cell samples with (KSampler's widgets, or the graph's NOISE,
  GUIDER, SAMPLER and SIGMAS), turned into one round's inputs for a cell's model and conditioning.
- ``ComfySweepSampler``: masc_core's ``SweepSampler`` for one run: a cell patched once and kept while it samples,
  each image one plain round of the Sample Until backend (``sampling.CoreSampling``: the noise the plain node makes
  for the seed from the one input latent), decoded by the VAE; the decoded IMAGE kept for the node's output, an RGB
  uint8 copy handed to the library for scoring; one progress bar over the grid, the newest image on the node.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from dataclasses import dataclass

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.io.images import to_rgb_uint8
from ...masc_core.selection.sweep_cells import LoraChoice
from .comfy import IN_COMFYUI, comfy_utils, folder_paths
from .execution import check_interrupt
from .sampling import CandidateProgress, CustomSamplingInputs, KSamplerInputs, sampling

MAX_OUTPUT_BYTES = 4 * 1024**3
"""The most the ``images`` output holds (float32, as ComfyUI's IMAGE): 4 GiB, checked before the first image."""
MAX_LORA_TENSORS = 100_000
"""Most weights a LORA_MODEL may hold (an SDXL LoRA of every layer has a few thousand)."""
GUIDED_CONDS = ("positive", "negative")
"""The conditionings a swept GUIDER may hold (Basic Guider's, CFG Guider's): each cell re-prompts them."""


def check_lora_model(value, name: str = "lora") -> dict:
    """``value`` as core's LORA_MODEL (Train LoRA's ``lora``: weight name -> tensor), or one line naming ``name``."""
    if not isinstance(value, dict) or not value:
        raise MascInputError(f"{name} is not a LoRA's weights: connect Train LoRA's 'lora' output (a LORA_MODEL)")
    if len(value) > MAX_LORA_TENSORS:
        raise MascInputError(f"{name} holds {len(value)} weights, over the {MAX_LORA_TENSORS} a LoRA has")
    wrong = next((k for k, t in value.items() if not isinstance(k, str) or not isinstance(t, torch.Tensor)), None)
    if wrong is not None:
        raise MascInputError(
            f"{name} holds {type(value[wrong]).__name__} under a key, not weight names and tensors: connect Train "
            "LoRA's 'lora' output (a LORA_MODEL)"
        )
    bad = next((k for k, t in value.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())), None)
    if bad is not None:
        raise MascInputError(f"{name}'s weight {bad[:60]!r} holds NaN or infinity: train again with a lower rate")
    return value


class LoraPatching:
    """core's LoraLoader and CLIPTextEncode, as a sweep needs them (one file in memory at a time, as LoraLoader)."""

    def __init__(self):
        self._loaded: tuple[str, dict] | None = None

    @staticmethod
    def names() -> list[str]:
        """The LoRA combo, as core's LoraLoader's."""
        return list(folder_paths.get_filename_list("loras")) if IN_COMFYUI else []

    def _weights(self, choice: LoraChoice) -> dict:
        """An in-memory LoRA's weights as given, or its file's, loaded."""
        return choice.weights if choice.weights is not None else self._file(choice.lora)

    def _file(self, name: str) -> dict:
        path = folder_paths.get_full_path("loras", name) if IN_COMFYUI else None
        if not path or not os.path.isfile(path):
            raise MascInputError(f"lora_name '{name}' is not in models/loras: choose one of the list")
        if self._loaded is None or self._loaded[0] != path:
            self._loaded = None  # the last file freed before the next is read
            self._loaded = (path, comfy_utils.load_torch_file(path, safe_load=True))
        return self._loaded[1]

    def check(self, model, clip, choice: LoraChoice) -> None:
        """One line when ``choice``'s file is missing or patches none of this model's weights (core only logs each
        key it cannot map)."""
        import comfy.lora  # type: ignore
        import comfy.lora_convert  # type: ignore

        lora = self._weights(choice)
        key_map = comfy.lora.model_lora_keys_unet(model.model, {})
        if clip is not None and choice.weights is None:
            key_map = comfy.lora.model_lora_keys_clip(clip.cond_stage_model, key_map)
        if not comfy.lora.load_lora(comfy.lora_convert.convert_lora(dict(lora)), key_map, log_missing=False):
            what = f"lora_name '{choice.lora}'" if choice.weights is None else f"the LoRA named '{choice.lora}'"
            raise MascInputError(
                f"{what} patches none of this model's weights (a LoRA for another base model?): "
                "choose a LoRA trained for the connected model"
            )

    def apply(self, model, clip, choice: LoraChoice):
        """(model, clip) patched with ``choice`` as LoraLoader patches them (strength 0 and 0: unchanged); an
        in-memory LoRA as Load LoRA Model patches the model (the clip unchanged)."""
        import comfy.sd  # type: ignore

        if choice.strength_model == 0 and choice.strength_clip == 0:
            return model, clip
        if choice.weights is not None:
            patched, _ = comfy.sd.load_lora_for_models(model, None, choice.weights, choice.strength_model, 0)
            return patched, clip
        lora = self._file(choice.lora)
        return comfy.sd.load_lora_for_models(model, clip, lora, choice.strength_model, choice.strength_clip)

    @staticmethod
    def encode(clip, text: str):
        """CONDITIONING as core's CLIPTextEncode makes it."""
        return clip.encode_from_tokens_scheduled(clip.tokenize(text))

    @staticmethod
    def check_guider(guider, negative: str | None = None) -> None:
        """One line, before anything is sampled, when a sweep cannot give ``guider`` each cell's model and prompt:
        it must be core's CFGGuider kind (Basic Guider, CFG Guider) holding one text conditioning per input, and
        hold a negative if ``negative`` (a text to put in its place) is given."""
        conds = getattr(guider, "original_conds", None)
        kind = type(guider).__name__
        if not isinstance(conds, dict) or not callable(getattr(guider, "inner_set_conds", None)):
            raise MascInputError(
                f"guider is a {kind}, which a sweep cannot give each cell's model and prompt: connect Basic Guider "
                "or CFG Guider"
            )
        extra = sorted(k for k in conds if k not in GUIDED_CONDS)
        if extra or "positive" not in conds:
            raise MascInputError(
                f"guider is a {kind} with the conditionings {sorted(conds)}: a sweep re-prompts only a positive and a "
                "negative; connect Basic Guider or CFG Guider"
            )
        many = next((k for k in GUIDED_CONDS if k in conds and len(conds[k]) != 1), None)
        if many is not None:
            raise MascInputError(
                f"the guider's {many} conditioning holds {len(conds[many])} entries (Conditioning Combine or "
                "Concat?): a sweep re-encodes each prompt into one; connect one text encode's conditioning"
            )
        if negative is not None and "negative" not in conds:
            raise MascInputError(
                f"negative is set, but the guider ({kind}) has no negative to put it in: clear negative, or "
                "connect CFG Guider to use one"
            )

    @staticmethod
    def guide(guider, model, positive, negative=None):
        """``guider`` on ``model`` with ``positive`` (and ``negative``, when given) in place of its text: each
        conditioning keeps what nodes after the text encoder added (FluxGuidance's guidance, ReferenceLatent's
        latents, ...), so it is the guider core's Basic Guider / CFG Guider node makes from CLIPTextEncode on the
        cell's CLIP, then those nodes, on the cell's model. The graph's guider is untouched."""
        moved = copy.copy(guider)
        moved.model_patcher, moved.model_options = model, model.model_options
        moved.original_conds = dict(guider.original_conds)
        texts = {"positive": positive, "negative": negative}
        moved.inner_set_conds(
            {
                name: _retext(guider.original_conds[name][0], texts[name])
                for name in GUIDED_CONDS
                if name in guider.original_conds and texts[name] is not None
            }
        )
        return moved


def _retext(entry: dict, text_conditioning) -> list:
    """A guider's converted conditioning entry (comfy.sampler_helpers.convert_cond's) back in CONDITIONING form with
    the text encoder's part from ``text_conditioning``: [[tensor, {the entry's keys, then the new encoding's}]]."""
    kept = {k: v for k, v in entry.items() if k not in ("cross_attn", "uuid")}
    return [[tensor, dict(kept, **extra)] for tensor, extra in text_conditioning]


_LORAS: list = [LoraPatching()]


def loras():
    """The LoRA backend in use: core's, or the one ``use_loras`` installed."""
    return _LORAS[-1]


@contextlib.contextmanager
def use_loras(backend):
    """Install ``backend`` (``names``, ``check``, ``apply``, ``encode``, ``check_guider``, ``guide``) for the block:
    the tests' stand-in."""
    _LORAS.append(backend)
    try:
        yield backend
    finally:
        _LORAS.remove(backend)


def check_sweep_latent(latent, vae, images: int) -> None:
    """One line, before anything is sampled, when the latent is not one image or the grid's images would not fit
    the output's bound."""
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if not isinstance(samples, torch.Tensor) or samples.ndim != 4 or samples.shape[0] != 1:
        raise MascInputError(
            "latent_image must be ONE image latent (Empty Latent Image with batch_size 1): a sweep samples each "
            "cell from it at every seed; video latents are not swept yet"
        )
    ratio = getattr(vae, "downscale_ratio", 8)
    ratio = ratio if isinstance(ratio, int) else 8
    height, width = samples.shape[-2] * ratio, samples.shape[-1] * ratio
    needed = images * height * width * 3 * 4
    if needed > MAX_OUTPUT_BYTES:
        raise MascInputError(
            f"{images} images of {width}x{height} are {needed / 1024**3:.1f} GiB as the images output, over the "
            f"{MAX_OUTPUT_BYTES // 1024**3} GiB a sweep holds: use fewer seeds, prompts or cells, or a smaller latent"
        )


@dataclass(frozen=True)
class KSamplerCells:
    """KSampler's widgets, the same for every cell (MaSC Sweep): a round samples a cell's model on its prompt."""

    ksampler: KSamplerInputs
    """The graph's model and KSampler widgets; each round puts in a cell's model and conditionings."""
    negative: str
    """The negative prompt, encoded with each cell's CLIP as CLIPTextEncode would."""

    @classmethod
    def from_inputs(cls, inputs) -> "KSamplerCells":
        """MaSC Sweep's generator inputs."""
        return cls(KSamplerInputs.from_inputs(dict(inputs, positive=None, negative=None)), str(inputs["negative"]))

    @property
    def model(self):
        """The graph's MODEL: the baseline's, and what each cell's LoRA patches."""
        return self.ksampler.model

    @property
    def steps(self) -> int:
        return self.ksampler.steps

    def round_inputs(self, model, positive, negative) -> KSamplerInputs:
        """One image's KSampler inputs on ``model`` (a cell's)."""
        return dataclasses.replace(self.ksampler, model=model, positive=positive, negative=negative)


@dataclass(frozen=True)
class GuiderCells:
    """The graph's NOISE, GUIDER, SAMPLER and SIGMAS for every cell (MaSC Sweep (Custom)): a round samples the guider
    given the cell's model and prompt (``LoraPatching.guide``), as SamplerCustomAdvanced would."""

    custom: CustomSamplingInputs
    negative: str | None
    """A negative prompt to encode with each cell's CLIP, or None: the guider's negative as wired."""

    @classmethod
    def from_inputs(cls, inputs) -> "GuiderCells":
        """MaSC Sweep (Custom)'s generator inputs, the guider checked (one line) before anything is sampled."""
        custom = CustomSamplingInputs.from_inputs(inputs)
        text = str(inputs["negative"]).strip() or None
        loras().check_guider(custom.guider, text)
        return cls(custom, text)

    @property
    def model(self):
        """The MODEL the guider was built on: the baseline's, and what each cell's LoRA patches."""
        return self.custom.guider.model_patcher

    @property
    def steps(self) -> int:
        return self.custom.steps

    def round_inputs(self, model, positive, negative) -> CustomSamplingInputs:
        """One image's custom-sampling inputs: the guider on ``model`` with these conditionings."""
        return dataclasses.replace(self.custom, guider=loras().guide(self.custom.guider, model, positive, negative))


class ComfySweepSampler:
    """masc_core's ``SweepSampler`` in ComfyUI for one run (see the module)."""

    def __init__(self, generator, clip, latent: dict, vae, choices: dict, planned: int):
        self.generator = generator  # a KSamplerCells or a GuiderCells
        self.clip, self.choices = clip, choices  # cell name -> LoraChoice (None: the baseline)
        self.latent, self.vae = latent, vae  # the one input latent every image starts from; VAE Decode's VAE
        self.patched: tuple | None = None  # (cell name, model, clip, {text: conditioning})
        self.images: dict = {}
        """(cell name, (prompt, seed)) -> the decoded IMAGE [1,H,W,C], as VAE Decode gives it."""
        self.bar = CandidateProgress(planned, generator.steps)

    def _cell(self, name: str):
        if self.patched is None or self.patched[0] != name:
            self.patched = None  # the last cell's clones released before the next is patched
            model, clip, choice = self.generator.model, self.clip, self.choices[name]
            if choice is not None:
                model, clip = loras().apply(model, clip, choice)
            self.patched = (name, model, clip, {})
        return self.patched

    def _conditioning(self, text: str | None):
        _, _, clip, known = self.patched
        if text is None:
            return None
        if text not in known:
            known[text] = loras().encode(clip, text)
        return known[text]

    def check_cells(self) -> None:
        """Every cell's LoRA file read and matched to the model, one at a time, before the first image."""
        for choice in self.choices.values():
            if choice is not None:
                loras().check(self.generator.model, self.clip, choice)

    def sample(self, cell, prompt: str, seed: int):
        _, model, _, _ = self._cell(cell.name)
        round_inputs = self.generator.round_inputs(
            model, self._conditioning(prompt), self._conditioning(self.generator.negative)
        )
        backend = sampling()
        done = len(self.images)
        result = backend.sample_round(
            round_inputs, [int(seed)], self.latent, progress=self.bar, done=done, prunes=False
        )
        image = backend.decode(self.vae, result.samples[0])[:1].to("cpu", torch.float32)
        self.images[(cell.name, (prompt, int(seed)))] = image
        return to_rgb_uint8(image[0], "the sweep's image")

    def progress(self, done: int, total: int, picture) -> None:
        self.bar.update(done * self.bar.steps)
        self.bar.show(picture)

    def check_interrupt(self) -> None:
        check_interrupt()

    def output(self, sampled: list) -> torch.Tensor:
        """The ``images`` output: every image sampled, in the grid's order."""
        return torch.cat([self.images.pop(key) for key in sampled]) if sampled else torch.zeros(1, 64, 64, 3)
