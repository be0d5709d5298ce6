"""ComfyUI's own sampling for MaSC Sample Until: what samples (the node's inputs), one sampler per run, the backend.

- ``KSamplerInputs`` / ``CustomSamplingInputs``: what the graph samples with (KSampler's inputs, or core's NOISE,
  GUIDER, SAMPLER and SIGMAS), each built once from a node's inputs;
- ``ComfyCandidateSampler``: masc_core's ``CandidateSampler`` for one run: the inputs, the latent, the VAE, the node's
  progress bar and text;
- ``CoreSampling``: the backend that samples a round as the plain node would (``core_rounds``: one per seed, or in
  phases for pruning, resumed or replayed, so a survivor is always the image the plain node gives at its seed).

The round's phase loop (``masc_core.selection.pruning.run_round``) stays in the library, behind the backend's
``round_sampler``: the library decides who is judged and who goes on, and calls back here only to run core's sampler.
Outside ComfyUI there is no sampling unless a stand-in backend is installed with ``use_sampling`` (the tests').
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.selection.pruning import RoundResult, run_round
from ...masc_core.selection.samplers import samples_one_by_one
from .comfy import IN_COMFYUI, comfy_samplers, comfy_utils, latent_preview
from .core_rounds import CoreRoundSampler, GuiderSource, KSamplerSource, is_core_guider, sampler_identity
from .execution import check_interrupt, show_text

FALLBACK_SAMPLERS = (
    "euler",
    "euler_ancestral",
    "heun",
    "dpm_2",
    "lms",
    "dpm_fast",
    "dpm_adaptive",
    "dpmpp_2m",
    "dpmpp_2m_sde",
    "ddim",
    "uni_pc",
)
FALLBACK_SCHEDULERS = ("normal", "karras", "exponential", "sgm_uniform", "simple", "ddim_uniform", "beta")


def sampler_names() -> list[str]:
    """The sampler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SAMPLERS) if IN_COMFYUI else list(FALLBACK_SAMPLERS)


def scheduler_names() -> list[str]:
    """The scheduler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SCHEDULERS) if IN_COMFYUI else list(FALLBACK_SCHEDULERS)


PREVIEW_SIDE = 512
"""The largest side of a candidate's picture on the node (core's own previews are at most 512 px by default)."""


class CandidateProgress:
    """One progress bar over a run's candidates (each counted in sampler steps), with core's latent previews.

    ``updates`` keeps (value, total) pairs outside ComfyUI, for tests.
    """

    def __init__(self, candidates: int, steps: int):
        self.steps = max(1, int(steps))
        self.total = max(1, int(candidates)) * self.steps
        self.bar = comfy_utils.ProgressBar(self.total) if IN_COMFYUI else None
        self.updates: list[tuple[int, int]] = []
        self.pictures: list = []
        self.value = 0
        self._previewer = None
        self._previewer_for = None

    def update(self, value: int, preview=None) -> None:
        value = min(int(value), self.total)
        self.value = value
        if self.bar is not None:
            self.bar.update_absolute(value, self.total, preview)
        else:
            self.updates.append((value, self.total))

    def show(self, picture) -> None:
        """A finished candidate (RGB uint8 array) as the node's preview, where the bar stands: core sends it to the
        front end as it sends a sampler's live preview (``pictures`` keeps them outside ComfyUI, for tests)."""
        if picture is None:
            return
        if self.bar is None:
            self.pictures.append(picture)
            return
        from PIL import Image

        self.bar.update_absolute(self.value, self.total, ("JPEG", Image.fromarray(picture), PREVIEW_SIDE))

    def sampler_callback(self, model, done: int) -> Callable:
        """``callback(step, x0, x, total_steps)`` for a sampler call that starts after ``done`` candidates."""
        previewer = self._get_previewer(model)

        def callback(step, x0, x, total_steps):
            preview = None
            if previewer is not None and x0 is not None:
                if getattr(x0, "is_nested", False):
                    x0 = x0.tensors[0]
                preview = previewer.decode_latent_to_preview_image("JPEG", x0)
            self.update(done * self.steps + round((step + 1) * self.steps / max(1, total_steps)), preview)

        return callback

    def _get_previewer(self, model):
        if not IN_COMFYUI:
            return None
        if self._previewer_for is not model:
            self._previewer = latent_preview.get_previewer(model.load_device, model.model.latent_format)
            self._previewer_for = model
        return self._previewer


@dataclass(frozen=True)
class KSamplerInputs:
    """What core's KSampler samples with: MaSC Sample Until's sampler inputs, built once (``from_inputs``)."""

    model: Any
    positive: Any
    negative: Any
    steps: int
    cfg: float
    sampler_name: str
    scheduler: str
    denoise: float

    @classmethod
    def from_inputs(cls, inputs: Mapping) -> "KSamplerInputs":
        """The node's inputs of these names (checked against their declarations by ``nodes/inputs``)."""
        return cls(
            inputs["model"],
            inputs["positive"],
            inputs["negative"],
            int(inputs["steps"]),
            float(inputs["cfg"]),
            inputs["sampler_name"],
            inputs["scheduler"],
            float(inputs["denoise"]),
        )


@dataclass(frozen=True)
class CustomSamplingInputs:
    """What core's SamplerCustomAdvanced samples with (NOISE, GUIDER, SAMPLER, SIGMAS), checked once
    (``from_inputs``)."""

    noise: Any
    guider: Any
    sampler: Any
    sigmas: Any
    denoise: float = 1.0

    @classmethod
    def from_inputs(cls, inputs: Mapping) -> "CustomSamplingInputs":
        """The node's NOISE, GUIDER, SAMPLER and SIGMAS, refused in one line when the run cannot use them."""
        values = cls(inputs["noise"], inputs["guider"], inputs["sampler"], inputs["sigmas"])
        check_custom_inputs(values.noise, values.sigmas)
        return values

    @property
    def steps(self) -> int:
        """The steps the sigmas make."""
        return int(self.sigmas.shape[0]) - 1

    @property
    def seed(self) -> int:
        """The NOISE's seed: candidate ``i`` uses seed + i."""
        return int(self.noise.seed)


@dataclass(frozen=True)
class SamplerTraits:
    """What a run's report and pruning need to know of what samples (``CandidateSampler``'s fields)."""

    label: str
    """The sampler's name (core's), or what it is when it is none of core's."""
    known: bool
    """Whether ``label`` is one of core's sampler names (what pruning's tables describe)."""
    batches: bool
    """Whether a plain round may sample the round as one batch, exactly as one call each."""


class CoreSampling:
    """ComfyUI's own sampling, one candidate per seed: as core KSampler + VAE Decode (nodes.common_ksampler), or as core
    SamplerCustomAdvanced with the graph's NOISE, GUIDER, SAMPLER and SIGMAS.

    Whatever the graph did to MODEL and CONDITIONING upstream (LoRA, IP-Adapter, a guider from another pack, ...)
    applies. Candidate ``i``'s noise is what the plain node makes for its seed from the one input latent. A plain
    round samples the round as one batch when that is exact (``describe``), else one call per candidate; a judged
    round samples one candidate per call on the schedule the plain node computes: a sampler that ``resumes_at_split``
    (single-step, draws no noise) runs a call per phase, resuming from the latent the previous one left *inside* the
    sampler; any other is replayed (each call from step 0, stopping right after a judged step; a survivor sampled again
    from step 0, so its history and noise are the uninterrupted run's). A study needs one call each.

    A stand-in backend (the tests') overrides ``sampler_identity``, ``is_core_guider``, ``check_splittable``,
    ``round_sampler`` and ``decode``.
    """

    def describe(self, inputs) -> SamplerTraits:
        """The sampler's name and whether a plain round batches: KSampler's inputs name one of core's samplers; for
        core's SAMPLER, only a guider of core's and a sampler of core's unchanged batch exactly (another pack's guider
        may not denoise a batch row by row)."""
        if isinstance(inputs, KSamplerInputs):
            return SamplerTraits(inputs.sampler_name, known=True, batches=True)
        name = self.sampler_identity(inputs.sampler)
        batches = name is not None and not samples_one_by_one(name) and self.is_core_guider(inputs.guider)
        label = name or f"the connected sampler ({type(inputs.sampler).__name__})"
        return SamplerTraits(label, known=name is not None, batches=batches)

    @staticmethod
    def sampler_identity(sampler) -> str | None:
        """Core's name for a SAMPLER, None when it is none of core's k-diffusion samplers unchanged."""
        return sampler_identity(sampler)

    @staticmethod
    def is_core_guider(guider) -> bool:
        """Whether a GUIDER is one of core's own, which denoise a batch row by row (so a round may be one call)."""
        return is_core_guider(guider)

    def check_splittable(self, inputs) -> None:
        """One line when pruning cannot stop the connected SAMPLER at a step (it is not a k-diffusion sampler of
        core's kind); KSampler's samplers that choose their own steps are refused by name in ``PruneRules.check``."""
        # A KSAMPLER wraps a k-diffusion function whose per-step callback pruning needs; any other SAMPLER is opaque.
        if isinstance(inputs, CustomSamplingInputs) and not isinstance(inputs.sampler, comfy_samplers.KSAMPLER):
            raise MascInputError(
                f"sampler is a {type(inputs.sampler).__name__}, which cannot be stopped at a step: pruning needs a "
                "k-diffusion sampler "
                "(KSampler Select or a Sampler... node of core); disconnect MaSC Prune to sample in full"
            )

    def round_sampler(self, inputs, seeds, latent, *, progress, done, stops, prunes):
        """``run_round``'s primitive for one round (its ``plan`` says the phases): core's sampling calls."""
        source = KSamplerSource(inputs, latent) if isinstance(inputs, KSamplerInputs) else GuiderSource(inputs, latent)
        return CoreRoundSampler(source, seeds, progress, done, stops, prunes)

    def sample_round(self, inputs, seeds, latent, *, progress, done, stops=(), judge=None, prunes=True) -> RoundResult:
        """Sample a round of candidates (``seeds``), judged at ``stops`` by ``judge``; a plain round has none."""
        traits = self.describe(inputs)
        primitive = self.round_sampler(inputs, seeds, latent, progress=progress, done=done, stops=stops, prunes=prunes)
        return run_round(
            primitive.plan,
            len(seeds),
            primitive,
            judge,
            check_interrupt,
            batch=traits.batches and not samples_one_by_one(traits.label),
            sampler_name=traits.label,
        )

    def decode(self, vae, samples):
        """As core VAE Decode: IMAGE [B,H,W,C]; a video latent of more than one frame stays one clip per candidate,
        [B,T,H,W,C] (VAE Decode would lay the clips' frames in one batch)."""
        images = vae.decode(samples)
        if len(images.shape) == 5 and images.shape[1] == 1:  # an image from a video VAE (Qwen-Image's Wan VAE)
            images = images.reshape(-1, images.shape[-3], images.shape[-2], images.shape[-1])
        return images


class ComfyCandidateSampler:
    """masc_core's ``CandidateSampler`` in ComfyUI, one per run: candidates of one latent, sampled with the graph's
    ``inputs`` (``KSamplerInputs`` or ``CustomSamplingInputs``) by the backend, decoded by its VAE, shown on the node
    while the run goes on."""

    def __init__(self, inputs, latent: dict, vae, unique_id, *, trim_latent: int = 0):
        self.inputs, self.latent, self.vae, self.unique_id = inputs, latent, vae, unique_id
        self.trim_latent = trim_latent
        """Video: latent frames cut from the start before decoding (WanVaceToVideo's reference frames)."""
        self.backend = sampling()
        traits = self.backend.describe(inputs)
        self.label, self.known, self.batches = traits.label, traits.known, traits.batches
        self.steps, self.denoise = inputs.steps, inputs.denoise
        self.clips = latent["samples"].ndim == 5
        """Whether each candidate is a video clip: the latent has frames ([B,C,T,h,w])."""
        self.progress: CandidateProgress | None = None

    def check_splittable(self) -> None:
        """One line when pruning cannot stop this sampler at a step (before anything is sampled)."""
        self.backend.check_splittable(self.inputs)

    def start(self, budget: int) -> None:
        self.progress = CandidateProgress(budget, self.steps)

    def sample_round(self, seeds, *, done, stops, judge, prunes) -> RoundResult:
        return self.backend.sample_round(
            self.inputs, seeds, self.latent, progress=self.progress, done=done, stops=stops, judge=judge, prunes=prunes
        )

    def decode(self, samples):
        """IMAGE [B,H,W,C], or for video [B,T,H,W,C] (the reference frames cut first, as core's Trim Video Latent)."""
        if self.trim_latent:
            samples = samples[:, :, self.trim_latent :]
        return self.backend.decode(self.vae, samples)

    def show_round(self, news) -> None:
        """A finished round on the running node: its candidates' scores as the node's text, the best one's picture."""
        show_text(self.unique_id, news.text)
        self.progress.show(news.picture)

    def check_interrupt(self) -> None:
        check_interrupt()

    def finish(self) -> None:
        """The progress bar full: the run is over (it may stop before its budget)."""
        if self.progress is not None:
            self.progress.update(self.progress.total)


def check_custom_inputs(noise, sigmas) -> None:
    """The custom-sampling inputs checked before anything is sampled (a shared workflow's values arrive unchecked)."""
    # That each is of its type was checked where it arrived (nodes/inputs.py); here, what the run needs of them.
    seed = getattr(noise, "seed", None)
    if type(noise).__name__ == "Noise_EmptyNoise" or isinstance(seed, bool) or not isinstance(seed, int):
        raise MascInputError(
            "noise has no seed to count up from (Disable Noise?): every candidate would be the same image; connect "
            "Random Noise"
        )
    if (
        not isinstance(sigmas, torch.Tensor)
        or sigmas.ndim != 1
        or sigmas.shape[0] < 2
        or not torch.isfinite(sigmas).all()
    ):
        shape = tuple(sigmas.shape) if isinstance(sigmas, torch.Tensor) else type(sigmas).__name__
        raise MascInputError(
            f"sigmas is {shape}, not a schedule of at least 2 finite noise levels: connect Basic Scheduler or another "
            "node's SIGMAS"
        )


_SAMPLING = CoreSampling() if IN_COMFYUI else None


def sampling():
    """The sampling backend: ComfyUI's own inside ComfyUI, else the one installed with ``use_sampling``."""
    if _SAMPLING is None:
        raise MascInputError("MaSC Sample Until samples with ComfyUI's own sampler: run it inside ComfyUI")
    return _SAMPLING


@contextlib.contextmanager
def use_sampling(backend):
    """Sample with ``backend`` (``sample_round``/``decode`` as ``CoreSampling``) inside the block: the tests'
    stand-in."""
    global _SAMPLING
    previous, _SAMPLING = _SAMPLING, backend
    try:
        yield backend
    finally:
        _SAMPLING = previous
