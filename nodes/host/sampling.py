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
from ...masc_core.pruning import phase_plan
from .comfy import IN_COMFYUI, comfy_sample, comfy_samplers, comfy_utils, latent_preview, model_management
from .execution import check_interrupt

FALLBACK_SAMPLERS = ("euler", "euler_ancestral", "heun", "dpm_2", "lms", "dpm_fast", "dpm_adaptive", "dpmpp_2m", "dpmpp_2m_sde", "ddim", "uni_pc")
FALLBACK_SCHEDULERS = ("normal", "karras", "exponential", "sgm_uniform", "simple", "ddim_uniform", "beta")

BATCH_EXACT_SAMPLERS = frozenset({
    "euler", "euler_cfg_pp", "heun", "heunpp2", "dpm_2", "lms", "dpm_fast", "dpm_adaptive", "dpmpp_2m", "dpmpp_2m_cfg_pp",
    "ipndm", "ipndm_v", "deis", "res_multistep", "res_multistep_cfg_pp", "gradient_estimation", "gradient_estimation_cfg_pp",
    "uni_pc", "uni_pc_bh2",
})
"""Samplers that draw no noise while sampling (ComfyUI 0.3.64 and 0.33): only their initial noise depends on the
seed, so a batch built from per-candidate noise equals separate runs. The others (ancestral, SDE, lcm, ddpm,
ddim's inpainting noise, ...) draw step noise for the whole batch from one seed; any name not listed counts as one."""


def sampler_names() -> list[str]:
    """The sampler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SAMPLERS) if IN_COMFYUI else list(FALLBACK_SAMPLERS)


def scheduler_names() -> list[str]:
    """The scheduler combo, as core KSampler's."""
    return list(comfy_samplers.KSampler.SCHEDULERS) if IN_COMFYUI else list(FALLBACK_SCHEDULERS)


def samples_one_by_one(sampler_name: str) -> bool:
    """Whether a round must call the sampler once per candidate to equal separate KSampler runs."""
    return sampler_name not in BATCH_EXACT_SAMPLERS


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
    exactly what a KSampler with that seed and latent uses; a round samples them as one batch when the sampler
    draws no noise of its own (``BATCH_EXACT_SAMPLERS``), else one call per candidate.
    """

    def sample(self, model, seeds, latent, *, positive, negative, steps, cfg, sampler_name, scheduler, denoise, progress, done):
        image = self._fix_empty_latent(model, latent)
        batch_index = latent.get("batch_index")
        groups = [[seed] for seed in seeds] if samples_one_by_one(sampler_name) else [list(seeds)]
        results = []
        for group in groups:
            noise = torch.cat([comfy_sample.prepare_noise(image, seed, batch_index) for seed in group])
            batch = image.repeat(len(group), *([1] * (image.ndim - 1)))
            callback = progress.sampler_callback(model, done)
            results.append(comfy_sample.sample(
                model, noise, steps, cfg, sampler_name, scheduler, positive, negative, batch, denoise=denoise,
                noise_mask=latent.get("noise_mask"), callback=callback, disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED,
                seed=group[0],
            ))
            done += len(group)
        return torch.cat(results)

    def sample_in_phases(self, model, seeds, latent, *, positive, negative, steps, cfg, sampler_name, scheduler, denoise,
                         progress, done, stops, judge, prunes=True):
        """Sample each candidate up to each step in ``stops``, let ``judge`` choose who goes on, finish the survivors.

        ``judge(step, previews, alive)``: ``previews`` are the model's denoised predictions at that step (LATENT
        space, one per candidate in ``alive``, the round positions still sampling); it returns the positions that
        go on (all of them when ``prunes`` is False: a study). Returns (the finished candidates' samples in round
        order, their positions, each candidate's model evaluations, each one's replayed evaluations).

        Every call samples one candidate (as a KSampler with batch 1) on the schedule core KSampler computes for
        these settings, and a survivor is always the image KSampler gives at its seed:
        - a sampler that ``resumes_at_split`` (single-step, draws no noise) runs a call per phase, each resuming
          from the latent the previous one left *inside* the sampler (no round trip through the latent scaling);
        - any other sampler is replayed: each call samples the whole schedule from step 0, previews are taken on
          the way, a call made only to be judged stops right after its judged step, and a survivor is sampled
          again from step 0 (its history and noise are then the uninterrupted run's). A study needs one call each.
        """
        image = self._fix_empty_latent(model, latent)
        batch_index = latent.get("batch_index")
        schedule = comfy_samplers.KSampler(model, steps=steps, device=model.load_device, sampler=sampler_name, scheduler=scheduler,
                                           denoise=denoise, model_options=model.model_options).sigmas
        real = comfy_samplers.sampler_object(sampler_name)
        last = len(schedule) - 1
        plan = phase_plan(stops, last, sampler_name, prunes)
        state: dict[int, torch.Tensor] = {}
        evaluations, replayed = [0] * len(seeds), [0] * len(seeds)
        alive = list(range(len(seeds)))
        finished: dict[int, torch.Tensor] = {}
        # The bar moves one step per step sampled in this round (monotonic: phases interleave candidates; held below the
        # round's end when replays sample more), and jumps over what pruning saved when the next round starts.
        step_callback = progress.sampler_callback(model, done)
        executed = [0]

        def on_step(step, x0, x, total):
            step_callback(min(executed[0], len(seeds) * last - 1), x0, x, last)
            executed[0] += 1

        start = 0
        for end in plan.ends:
            judged_here = plan.judged_at(end)
            previews: dict[int, list[torch.Tensor]] = {}
            for j in alive:
                check_interrupt()
                before = evaluations[j]
                call = _CandidateCall(real, j, evaluations, on_step, judged_here)
                first = plan.first_step(start)
                out = call.sample(model, image, seeds[j], batch_index, schedule[first : end + 1 if plan.resume else None],
                                  positive, negative, cfg, offset=first, resume_from=state.get(j),
                                  stop_after=None if plan.resume or end == last else end)
                if plan.resume:
                    state[j] = call.left
                for step in judged_here:
                    if step not in call.denoised:
                        raise MascInputError(f"sampler {sampler_name} did not report step {step} of {last}: pick another sampler to prune (or set prune_at 0)")
                    previews.setdefault(step, []).append(model.model.process_latent_out(call.denoised[step]).to(model_management.intermediate_device()))
                if end == last:
                    finished[j] = out.to(model_management.intermediate_device())
                    state.pop(j, None)
                    replayed[j] = 0 if plan.resume else before  # what it spent before this whole run from step 0
            for step in sorted(previews):
                kept = set(judge(step, torch.cat(previews[step]), list(alive)))
                alive = [j for j in alive if j in kept]
            for j in set(state) - set(alive):
                state.pop(j)
            start = end
        positions = sorted(finished)
        samples = torch.cat([finished[j] for j in positions]) if positions else None
        return samples, positions, evaluations, replayed

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
    """Sample with ``backend`` (``sample``/``decode`` as ``CoreSampling``) inside the block: the tests' stand-in."""
    global _SAMPLING
    previous, _SAMPLING = _SAMPLING, backend
    try:
        yield backend
    finally:
        _SAMPLING = previous
