"""ComfyUI's own sampling for MaSC Sample Until: core's noise, sampler, schedule, latent previews and VAE decode.

``CoreSampling`` samples candidates as core KSampler + VAE Decode would (one per seed), and in phases for pruning
(resume or replay, so a survivor is always the image KSampler gives at its seed). Outside ComfyUI there is no
sampling unless a stand-in is installed with ``use_sampling`` (the tests'). Over 400 lines: the phases and the
counted, stoppable sampler call are the part of pruning that must touch core's sampler objects.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
from typing import Callable

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.selection.pruning import CandidateRun, RoundResult, phase_plan, run_round
from ...masc_core.selection.samplers import samples_one_by_one
from .comfy import (
    IN_COMFYUI,
    comfy_sample,
    comfy_samplers,
    comfy_utils,
    k_diffusion_sampling,
    latent_preview,
    model_management,
)
from .execution import check_interrupt

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


class CoreSampling:
    """ComfyUI's own sampling, one candidate per seed: as core KSampler + VAE Decode (nodes.common_ksampler), or as core
    SamplerCustomAdvanced with the graph's NOISE, GUIDER, SAMPLER and SIGMAS.

    Whatever the graph did to MODEL and CONDITIONING upstream (LoRA, IP-Adapter, a guider from another pack, ...)
    applies.
    Candidate ``i``'s noise is what the plain node makes for its seed from the one input latent. The round itself
    (phases, judged steps, who goes on) is ``masc_core.selection.pruning.run_round`` for both; this supplies its one
    primitive (``_CoreRoundSampler``), fed by a ``_KSamplerSource`` or a ``_GuiderSource``.
    """

    def sample_round(
        self,
        model,
        seeds,
        latent,
        *,
        positive,
        negative,
        steps,
        cfg,
        sampler_name,
        scheduler,
        denoise,
        progress,
        done,
        stops=(),
        judge=None,
        prunes=True,
    ) -> RoundResult:
        """Sample a round of candidates (seeds) as KSampler would, judged at ``stops`` by ``judge``; a plain round has
        none.

        Every survivor is the image a KSampler gives at its seed (batch of one):
        - a plain round samples the round as one batch when the sampler draws no noise of its own
          (``BATCH_EXACT_SAMPLERS``), else one call per candidate, each as core's KSampler does;
        - a judged round samples one candidate per call on the schedule core KSampler computes for these settings: a
          sampler that ``resumes_at_split`` (single-step, draws no noise) runs a call per phase, each resuming from the
          latent the previous one left *inside* the sampler (no round trip through the latent scaling); any other
          sampler is replayed (each call from step 0, stopping right after a judged step; a survivor sampled again from
          step 0, so its history and noise are the uninterrupted run's). A study needs one call each.
        """
        source = _KSamplerSource(
            model=model,
            latent=latent,
            positive=positive,
            negative=negative,
            steps=steps,
            cfg=cfg,
            sampler_name=sampler_name,
            scheduler=scheduler,
            denoise=denoise,
        )
        return self._round(
            source=source,
            seeds=seeds,
            latent=latent,
            progress=progress,
            done=done,
            stops=stops,
            judge=judge,
            prunes=prunes,
            batch=not samples_one_by_one(sampler_name),
        )

    def sample_guided_round(
        self, noise, guider, sampler, sigmas, seeds, latent, *, progress, done, stops=(), judge=None, prunes=True
    ) -> RoundResult:
        """Sample a round as SamplerCustomAdvanced would, candidate ``i`` with ``noise`` at seed ``seeds[i]``.

        A plain round is one ``guider.sample`` call for the whole round when ``guided_batches`` says that is exact (a
        guider of core's, a sampler that draws no noise), else one call per candidate (another pack's guider or
        sampler may not batch exactly). Judged rounds as in ``sample_round``: a sampler ``sampler_identity`` names and
        that ``resumes_at_split`` resumes, any other is replayed.
        """
        source = _GuiderSource(noise, guider, sampler, sigmas, latent)
        return self._round(
            source=source,
            seeds=seeds,
            latent=latent,
            progress=progress,
            done=done,
            stops=stops,
            judge=judge,
            prunes=prunes,
            batch=self.guided_batches(guider, sampler),
        )

    @staticmethod
    def guided_batches(guider, sampler) -> bool:
        """Whether a plain round of candidates may be one ``guider.sample`` call, exactly as one call each: the
        guider is one of core's own (CFG Guider, Basic Guider, Dual CFG Guider: each denoises a batch row by row, as
        KSampler's CFG does) and the sampler is one of core's, unchanged, that draws no noise of its own."""
        name = sampler_identity(sampler)
        return name is not None and not samples_one_by_one(name) and _is_core_guider(guider)

    @staticmethod
    def sampler_name(sampler) -> str | None:
        """Core's name for a SAMPLER, or None when it is none of core's samplers unchanged (``sampler_identity``)."""
        return sampler_identity(sampler)

    @staticmethod
    def check_splittable(sampler) -> None:
        """One line when pruning cannot stop ``sampler`` at a step (it is not a k-diffusion sampler of core's kind).

        Called by the node before anything is sampled; the samplers that choose their own steps (dpm_fast,
        dpm_adaptive) are refused by name in ``PruneRules.check``, as for KSampler's inputs."""
        # A KSAMPLER wraps a k-diffusion function whose per-step callback pruning needs; any other SAMPLER is opaque.
        if not isinstance(sampler, comfy_samplers.KSAMPLER):
            raise MascInputError(
                f"sampler is a {type(sampler).__name__}, which cannot be stopped at a step: pruning needs a "
                "k-diffusion sampler "
                "(KSampler Select or a Sampler... node of core); disconnect MaSC Prune to sample in full"
            )

    def _round(self, source, seeds, latent, progress, done, stops, judge, prunes, batch) -> RoundResult:
        image = self._fix_empty_latent(source.model, latent)
        round_sampler = _CoreRoundSampler(
            source=source,
            seeds=seeds,
            latent=latent,
            image=image,
            progress=progress,
            done=done,
            stops=stops,
            prunes=prunes,
        )
        return run_round(
            round_sampler.plan,
            len(seeds),
            round_sampler,
            judge,
            check_interrupt,
            batch=batch,
            sampler_name=source.label,
        )

    @staticmethod
    def _fix_empty_latent(model, latent):
        """core's fix_empty_latent_channels with the extra arguments newer versions take from the latent."""
        extra = [latent.get(k) for k in ("downscale_ratio_spacial", "downscale_ratio_temporal")]
        parameters = inspect.signature(comfy_sample.fix_empty_latent_channels).parameters
        return comfy_sample.fix_empty_latent_channels(model, latent["samples"], *extra[: max(0, len(parameters) - 2)])

    def decode(self, vae, samples):
        """As core VAE Decode: IMAGE [B,H,W,C]; a video latent of more than one frame stays one clip per candidate,
        [B,T,H,W,C] (VAE Decode would lay the clips' frames in one batch)."""
        images = vae.decode(samples)
        if len(images.shape) == 5 and images.shape[1] == 1:  # an image from a video VAE (Qwen-Image's Wan VAE)
            images = images.reshape(-1, images.shape[-3], images.shape[-2], images.shape[-1])
        return images


class _KSamplerSource:
    """What a round samples with when the node takes KSampler's inputs: core KSampler's schedule, sampler and CFG
    guider."""

    def __init__(self, model, latent, positive, negative, steps, cfg, sampler_name, scheduler, denoise):
        self.model, self.latent, self.positive, self.negative = model, latent, positive, negative
        self.steps, self.cfg, self.name, self.scheduler, self.denoise = steps, cfg, sampler_name, scheduler, denoise
        self.label = sampler_name

    def schedule(self):
        model = self.model
        return comfy_samplers.KSampler(
            model,
            steps=self.steps,
            device=model.load_device,
            sampler=self.name,
            scheduler=self.scheduler,
            denoise=self.denoise,
            model_options=model.model_options,
        ).sigmas

    def real_sampler(self):
        return comfy_samplers.sampler_object(self.name)

    def guider(self):
        """The guider core's comfy.samplers.sample builds for KSampler (a fresh CFGGuider on these conds and cfg)."""
        guider = comfy_samplers.CFGGuider(self.model)
        guider.set_conds(self.positive, self.negative)
        guider.set_cfg(self.cfg)
        return guider

    def noise(self, image, seed):
        return comfy_sample.prepare_noise(image, seed, self.latent.get("batch_index"))

    def plain(self, group, seeds, image, progress, done):
        """A plain round's call, as core KSampler makes it, the group as one batch."""
        noise = torch.cat([self.noise(image, seeds[j]) for j in group])
        batch = image.repeat(len(group), *([1] * (image.ndim - 1)))
        out = comfy_sample.sample(
            self.model,
            noise,
            self.steps,
            self.cfg,
            self.name,
            self.scheduler,
            self.positive,
            self.negative,
            batch,
            denoise=self.denoise,
            noise_mask=self.latent.get("noise_mask"),
            callback=progress.sampler_callback(self.model, done + group[0]),
            disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED,
            seed=seeds[group[0]],
        )
        return [out[i : i + 1] for i in range(len(group))]


class _GuiderSource:
    """What a round samples with when the node takes core's custom-sampling inputs: the graph's NOISE (its seed moved to
    each candidate's), GUIDER, SAMPLER and SIGMAS, called as SamplerCustomAdvanced calls them."""

    def __init__(self, noise, guider, sampler, sigmas, latent):
        self.noise_source, self.given_guider, self.sampler, self.sigmas, self.latent = (
            noise,
            guider,
            sampler,
            sigmas,
            latent,
        )
        self.model = guider.model_patcher
        self.steps = int(sigmas.shape[-1]) - 1
        self.name = sampler_identity(sampler)
        self.label = self.name or f"the connected sampler ({type(sampler).__name__})"

    def schedule(self):
        return self.sigmas

    def real_sampler(self):
        return self.sampler  # a KSAMPLER: the node checked it (CoreSampling.check_splittable) before sampling

    def guider(self):
        return self.given_guider

    def noise(self, image, seed):
        latent = dict(
            self.latent, samples=image
        )  # as SamplerCustomAdvanced hands it over: fixed samples, the input's batch_index
        return candidate_noise(self.noise_source, seed).generate_noise(latent)

    def plain(self, group, seeds, image, progress, done):
        """A plain round's call, as SamplerCustomAdvanced makes it: the group (one candidate, or the whole round when
        ``guided_batches``) as one batch, each row's noise from its own seed."""
        noise = torch.cat([self.noise(image, seeds[j]) for j in group])
        batch = image.repeat(len(group), *([1] * (image.ndim - 1)))
        out = self.given_guider.sample(
            noise,
            batch,
            self.sampler,
            self.sigmas,
            denoise_mask=self.latent.get("noise_mask"),
            callback=progress.sampler_callback(self.model, done + group[0]),
            disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED,
            seed=seeds[group[0]],
        )
        out = out.to(model_management.intermediate_device())
        return [out[i : i + 1] for i in range(len(group))]


_CORE_GUIDER_NAMES = ("Guider_Basic", "Guider_DualCFG")
"""Basic Guider's and Dual CFG Guider's classes (comfy_extras/nodes_custom_sampler.py), built on CFGGuider."""


def _is_core_guider(guider) -> bool:
    """Whether ``guider`` is core's CFGGuider, Basic Guider or Dual CFG Guider itself (not a subclass: another pack's
    may change how a batch is denoised). The two in comfy_extras are told by name and file: ComfyUI loads that file
    under a module name made from its path (importing it again would make other classes)."""
    kind = type(guider)
    if kind is comfy_samplers.CFGGuider:
        return True
    if kind.__name__ not in _CORE_GUIDER_NAMES or kind.__bases__ != (comfy_samplers.CFGGuider,):
        return False
    try:
        source = inspect.getfile(kind)
    except TypeError:
        return False
    return os.path.normpath(source).endswith(os.path.join("comfy_extras", "nodes_custom_sampler.py"))


def sampler_identity(sampler) -> str | None:
    """The name core gives a SAMPLER (KSamplerSelect's, or a Sampler... node's built on one), None when it is not one of
    core's k-diffusion samplers unchanged: pruning then replays (never resumes), which is exact for any sampler."""
    function = getattr(sampler, "sampler_function", None)
    if function is None or not IN_COMFYUI:
        return None
    wrapped = getattr(function, "__name__", "")
    if wrapped in ("dpm_fast_function", "dpm_adaptive_function"):  # core wraps these two: they choose their own steps
        return wrapped[: -len("_function")]
    if getattr(sampler, "extra_options", None):  # eta, s_noise, ...: not the sampler the pack's tables describe
        return None
    return next(
        (
            name
            for name in comfy_samplers.KSAMPLER_NAMES
            if getattr(k_diffusion_sampling, f"sample_{name}", None) is function
        ),
        None,
    )


def check_custom_inputs(noise, guider, sampler, sigmas) -> int:
    """The custom-sampling inputs checked before anything is sampled (a shared workflow's values arrive unchecked);
    returns
    the number of steps the sigmas make."""
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
    return int(sigmas.shape[0]) - 1


def candidate_noise(noise, seed: int):
    """The graph's NOISE with its seed moved to a candidate's: Random Noise with that seed (its copy; the input is
    untouched)."""
    moved = copy.copy(noise)
    moved.seed = int(seed)
    return moved


class _CoreRoundSampler:
    """``run_round``'s primitive with core's sampling: a plain round's calls as the plain node makes them (the source's
    ``plain``), a judged round's as ``_CandidateCall``s (counted, previews kept, resumable or stoppable)."""

    def __init__(self, source, seeds, latent, image, progress, done, stops, prunes):
        self.source, self.seeds, self.latent, self.image, self.progress, self.done = (
            source,
            seeds,
            latent,
            image,
            progress,
            done,
        )
        self.state: dict[int, torch.Tensor] = {}
        self.model = source.model
        if not stops:
            self.plan = phase_plan((), source.steps, source.name, prunes=False)
            return
        self.schedule = source.schedule()
        self.real = source.real_sampler()
        self.guider = source.guider()
        self.plan = phase_plan(stops, len(self.schedule) - 1, source.name, prunes)
        # The bar moves one step per step sampled in this round (monotonic: phases interleave candidates; held below the
        # round's end when replays sample more), and jumps over what pruning saved when the next round starts.
        step_callback = progress.sampler_callback(self.model, done)
        executed = [0]
        last = self.plan.last

        def on_step(step, x0, x, total):
            step_callback(min(executed[0], len(seeds) * last - 1), x0, x, last)
            executed[0] += 1

        self.on_step = on_step

    def sample(self, group, start, end, judged, stop_after):
        model = self.model
        if not self.plan.judged:  # a plain round: the plain node's own call
            return [
                CandidateRun(final=out)
                for out in self.source.plain(group, self.seeds, self.image, self.progress, self.done)
            ]
        (j,) = group
        counted = [0]
        call = _CandidateCall(self.real, 0, counted, self.on_step, judged)
        plan = self.plan
        out = call.sample(
            self.guider,
            self.image,
            self.source.noise(self.image, self.seeds[j]),
            self.seeds[j],
            self.schedule[start : end + 1 if plan.resume else None],
            resume_from=self.state.get(j),
            offset=start,
            stop_after=stop_after,
        )
        if plan.resume:
            self.state[j] = call.left
        intermediate = model_management.intermediate_device()
        previews = {
            step: model.model.process_latent_out(call.denoised[step]).to(intermediate)
            for step in judged
            if step in call.denoised
        }
        final = None
        if end == plan.last:
            final = out.to(intermediate)
            self.state.pop(j, None)
        return [CandidateRun(previews=previews, final=final, evaluations=counted[0])]

    def drop(self, j: int) -> None:
        self.state.pop(j, None)


class _CountedModel:
    """The denoiser a sampler function calls, counting its calls (one model evaluation each); everything else passes
    through."""

    def __init__(self, model, count):
        self._model, self._count = model, count

    def __call__(self, *args, **kwargs):
        self._count()
        return self._model(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


class _JudgedStepReached(Exception):
    """Raised inside a replayed candidate's sampler once its judged step's prediction is in (caught in the call)."""


class _CandidateCall:
    """One sampling call for candidate ``j``: core's sampling with a sampler function that counts the model's calls,
    keeps the denoised predictions at the ``judged`` steps (counted from the schedule's start), reports each step
    to the round's bar, may start from the latent a previous phase left inside the sampler (``resume_from``) and
    may stop once step ``stop_after`` is judged (what it returns then is not an image: the caller drops it)."""

    def __init__(self, real_sampler, j, evaluations, on_step, judged):
        self.real, self.j, self.evaluations, self.on_step, self.judged = (
            real_sampler,
            j,
            evaluations,
            on_step,
            set(judged),
        )
        self.denoised: dict[int, torch.Tensor] = {}
        self.left = None  # the latent inside the sampler when the call ended

    def sample(self, guider, image, noise, seed, sigmas, *, offset=0, resume_from=None, stop_after=None):
        def count():
            self.evaluations[self.j] += 1

        def function(inner, x, sigmas, extra_args=None, callback=None, disable=None, **options):
            if resume_from is not None:
                x = resume_from  # exactly as the previous phase left it
            reached = {}

            def on_each(info):
                step = offset + info["i"] + 1  # this prediction's step: the steps done once its update is made
                if step in self.judged:
                    self.denoised[step] = info["denoised"]
                self.on_step(step - 1, info["denoised"], info["x"], None)
                if stop_after is not None and step >= stop_after:
                    reached["x"] = info["x"]
                    raise _JudgedStepReached

            try:
                self.left = self.real.sampler_function(
                    _CountedModel(inner, count),
                    x,
                    sigmas,
                    extra_args=extra_args,
                    callback=on_each,
                    disable=disable,
                    **options,
                )
            except _JudgedStepReached:
                self.left = reached["x"]  # handed back so core's sampling ends as usual
            return self.left

        sampler = comfy_samplers.KSAMPLER(function, self.real.extra_options, self.real.inpaint_options)
        # guider.sample is core's public sampling call (comfy.samplers.sample is this with a fresh CFGGuider).
        return guider.sample(
            noise,
            image,
            sampler,
            sigmas,
            denoise_mask=None,
            callback=None,
            disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED,
            seed=seed,
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
