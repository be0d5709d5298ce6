"""ComfyUI's own sampling for MaSC Sample Until: core's noise, sampler, schedule, latent previews and VAE decode.

``CoreSampling`` samples candidates as core KSampler + VAE Decode would (one per seed), and in phases for pruning
(resume or replay, so a survivor is always the image KSampler gives at its seed). Outside ComfyUI there is no
sampling unless a stand-in is installed with ``use_sampling`` (the tests'). Over 200 lines: the phases and the
counted, stoppable sampler call are the part of pruning that must touch core's sampler objects.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Callable

import torch

from ...masc_core.errors import MascInputError
from ...masc_core.selection.pruning import CandidateRun, RoundResult, phase_plan, run_round, samples_one_by_one
from .comfy import IN_COMFYUI, comfy_sample, comfy_samplers, comfy_utils, latent_preview, model_management
from .execution import check_interrupt

FALLBACK_SAMPLERS = ("euler", "euler_ancestral", "heun", "dpm_2", "lms", "dpm_fast", "dpm_adaptive", "dpmpp_2m", "dpmpp_2m_sde", "ddim", "uni_pc")
FALLBACK_SCHEDULERS = ("normal", "karras", "exponential", "sgm_uniform", "simple", "ddim_uniform", "beta")

def sampler_names() -> list[str]:
    """The sampler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SAMPLERS) if IN_COMFYUI else list(FALLBACK_SAMPLERS)


def scheduler_names() -> list[str]:
    """The scheduler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SCHEDULERS) if IN_COMFYUI else list(FALLBACK_SCHEDULERS)


class CandidateProgress:
    """One progress bar over a run's candidates (each counted in sampler steps), with core's latent previews.

    ``updates`` keeps (value, total) pairs outside ComfyUI, for tests.
    """

    def __init__(self, candidates: int, steps: int):
        self.steps = max(1, int(steps))
        self.total = max(1, int(candidates)) * self.steps
        self.bar = comfy_utils.ProgressBar(self.total) if IN_COMFYUI else None
        self.updates: list[tuple[int, int]] = []
        self._previewer = None
        self._previewer_for = None

    def update(self, value: int, preview=None) -> None:
        value = min(int(value), self.total)
        if self.bar is not None:
            self.bar.update_absolute(value, self.total, preview)
        else:
            self.updates.append((value, self.total))

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
    """ComfyUI's own sampling, as core KSampler + VAE Decode do it (nodes.common_ksampler), one candidate per seed.

    Whatever the graph did to MODEL and CONDITIONING upstream (LoRA, IP-Adapter, ...) applies. Each
    candidate's noise is ``comfy.sample.prepare_noise(latent, seed, batch_index)`` of the one input latent,
    exactly what a KSampler with that seed and latent uses. The round itself (phases, judged steps, who goes on)
    is ``masc_core.selection.pruning.run_round``; this supplies its one primitive (``_CoreRoundSampler``).
    """

    def sample_round(self, model, seeds, latent, *, positive, negative, steps, cfg, sampler_name, scheduler, denoise,
                     progress, done, stops=(), judge=None, prunes=True) -> RoundResult:
        """Sample a round of candidates (seeds), judged at ``stops`` by ``judge`` (``run_round``); a plain round has none.

        Every survivor is the image a KSampler gives at its seed (batch of one):
        - a plain round samples the round as one batch when the sampler draws no noise of its own
          (``BATCH_EXACT_SAMPLERS``), else one call per candidate, each as core's KSampler does;
        - a judged round samples one candidate per call on the schedule core KSampler computes for these settings: a
          sampler that ``resumes_at_split`` (single-step, draws no noise) runs a call per phase, each resuming from the
          latent the previous one left *inside* the sampler (no round trip through the latent scaling); any other
          sampler is replayed (each call from step 0, stopping right after a judged step; a survivor sampled again from
          step 0, so its history and noise are the uninterrupted run's). A study needs one call each.
        """
        image = self._fix_empty_latent(model, latent)
        round_sampler = _CoreRoundSampler(model, seeds, latent, image, progress, done, stops, sampler_name, prunes,
                                          dict(positive=positive, negative=negative, steps=steps, cfg=cfg, scheduler=scheduler, denoise=denoise))
        return run_round(round_sampler.plan, len(seeds), round_sampler, judge, check_interrupt,
                         batch=not samples_one_by_one(sampler_name), sampler_name=sampler_name)

    @staticmethod
    def _fix_empty_latent(model, latent):
        """core's fix_empty_latent_channels with the extra arguments newer versions take from the latent."""
        extra = [latent.get(k) for k in ("downscale_ratio_spacial", "downscale_ratio_temporal")]
        parameters = inspect.signature(comfy_sample.fix_empty_latent_channels).parameters
        return comfy_sample.fix_empty_latent_channels(model, latent["samples"], *extra[: max(0, len(parameters) - 2)])

    def decode(self, vae, samples):
        """As core VAE Decode: IMAGE [B,H,W,C]."""
        images = vae.decode(samples)
        if len(images.shape) == 5:
            images = images.reshape(-1, images.shape[-3], images.shape[-2], images.shape[-1])
        return images


class _CoreRoundSampler:
    """``run_round``'s primitive with core's sampling: a plain round's calls as core KSampler makes them, a judged
    round's as ``_CandidateCall``s (counted, previews kept, resumable or stoppable)."""

    def __init__(self, model, seeds, latent, image, progress, done, stops, sampler_name, prunes, settings):
        self.model, self.seeds, self.latent, self.image, self.progress, self.done = model, seeds, latent, image, progress, done
        self.sampler_name, self.settings = sampler_name, settings
        self.batch_index = latent.get("batch_index")
        self.state: dict[int, torch.Tensor] = {}
        if not stops:
            self.plan = phase_plan((), settings["steps"], sampler_name, prunes=False)
            return
        self.schedule = comfy_samplers.KSampler(model, steps=settings["steps"], device=model.load_device, sampler=sampler_name,
                                                scheduler=settings["scheduler"], denoise=settings["denoise"],
                                                model_options=model.model_options).sigmas
        self.real = comfy_samplers.sampler_object(sampler_name)
        self.plan = phase_plan(stops, len(self.schedule) - 1, sampler_name, prunes)
        # The bar moves one step per step sampled in this round (monotonic: phases interleave candidates; held below the
        # round's end when replays sample more), and jumps over what pruning saved when the next round starts.
        step_callback = progress.sampler_callback(model, done)
        executed = [0]
        last = self.plan.last

        def on_step(step, x0, x, total):
            step_callback(min(executed[0], len(seeds) * last - 1), x0, x, last)
            executed[0] += 1

        self.on_step = on_step

    def sample(self, group, start, end, judged, stop_after):
        settings, model = self.settings, self.model
        if not self.plan.judged:  # a plain round: core's sampling as KSampler calls it, the group as one batch
            noise = torch.cat([comfy_sample.prepare_noise(self.image, self.seeds[j], self.batch_index) for j in group])
            batch = self.image.repeat(len(group), *([1] * (self.image.ndim - 1)))
            out = comfy_sample.sample(
                model, noise, settings["steps"], settings["cfg"], self.sampler_name, settings["scheduler"], settings["positive"],
                settings["negative"], batch, denoise=settings["denoise"], noise_mask=self.latent.get("noise_mask"),
                callback=self.progress.sampler_callback(model, self.done + group[0]),
                disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED, seed=self.seeds[group[0]],
            )
            return [CandidateRun(final=out[i : i + 1]) for i in range(len(group))]
        (j,) = group
        counted = [0]
        call = _CandidateCall(self.real, 0, counted, self.on_step, judged)
        plan = self.plan
        out = call.sample(model, self.image, self.seeds[j], self.batch_index, self.schedule[start : end + 1 if plan.resume else None],
                          settings["positive"], settings["negative"], settings["cfg"], offset=start, resume_from=self.state.get(j),
                          stop_after=stop_after)
        if plan.resume:
            self.state[j] = call.left
        intermediate = model_management.intermediate_device()
        previews = {step: model.model.process_latent_out(call.denoised[step]).to(intermediate) for step in judged if step in call.denoised}
        final = None
        if end == plan.last:
            final = out.to(intermediate)
            self.state.pop(j, None)
        return [CandidateRun(previews=previews, final=final, evaluations=counted[0])]

    def drop(self, j: int) -> None:
        self.state.pop(j, None)


class _CountedModel:
    """The denoiser a sampler function calls, counting its calls (one model evaluation each); everything else passes through."""

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
        self.real, self.j, self.evaluations, self.on_step, self.judged = real_sampler, j, evaluations, on_step, set(judged)
        self.denoised: dict[int, torch.Tensor] = {}
        self.left = None  # the latent inside the sampler when the call ended

    def sample(self, model, image, seed, batch_index, sigmas, positive, negative, cfg, *, offset=0, resume_from=None, stop_after=None):
        noise = comfy_sample.prepare_noise(image, seed, batch_index)

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
                self.left = self.real.sampler_function(_CountedModel(inner, count), x, sigmas, extra_args=extra_args,
                                                       callback=on_each, disable=disable, **options)
            except _JudgedStepReached:
                self.left = reached["x"]  # handed back so core's sampling ends as usual
            return self.left

        sampler = comfy_samplers.KSAMPLER(function, self.real.extra_options, self.real.inpaint_options)
        return comfy_samplers.sample(
            model, noise, positive, negative, cfg, model.load_device, sampler, sigmas, model_options=model.model_options,
            latent_image=image, denoise_mask=None, callback=None, disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED, seed=seed,
        )


_SAMPLING = CoreSampling() if IN_COMFYUI else None


def sampling():
    """The sampling backend: ComfyUI's own inside ComfyUI, else the one installed with ``use_sampling``."""
    if _SAMPLING is None:
        raise MascInputError("MaSC Sample Until samples with ComfyUI's own sampler: run it inside ComfyUI")
    return _SAMPLING


@contextlib.contextmanager
def use_sampling(backend):
    """Sample with ``backend`` (``sample_round``/``decode`` as ``CoreSampling``) inside the block: the tests' stand-in."""
    global _SAMPLING
    previous, _SAMPLING = _SAMPLING, backend
    try:
        yield backend
    finally:
        _SAMPLING = previous
