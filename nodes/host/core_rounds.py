"""Core's sampling calls for one round of MaSC Sample Until's candidates: what must touch core's sampler objects.

``nodes.host.sampling.CoreSampling`` hands ``masc_core.selection.pruning.run_round`` a ``CoreRoundSampler``: a plain
round's calls as the plain node makes them (a ``KSamplerSource`` for KSampler's inputs, a ``GuiderSource`` for core's
NOISE / GUIDER / SAMPLER / SIGMAS), a judged round's as ``_CandidateCall``s (counted, previews kept, resumable or
stoppable at a step), so a survivor is always the image the plain node gives at its seed. The round's phase loop
(who is judged when, who goes on) stays in the library; it calls back here for each call, because only the host can
run core's sampler, and a stand-in (the tests') fills the same place without ComfyUI.
"""

from __future__ import annotations

import copy
import inspect
import os

import torch

from ...masc_core.selection.pruning import CandidateRun, phase_plan
from .comfy import IN_COMFYUI, comfy_sample, comfy_samplers, comfy_utils, k_diffusion_sampling, model_management


def fix_empty_latent(model, latent: dict):
    """core's fix_empty_latent_channels with the extra arguments newer versions take from the latent."""
    extra = [latent.get(k) for k in ("downscale_ratio_spacial", "downscale_ratio_temporal")]
    parameters = inspect.signature(comfy_sample.fix_empty_latent_channels).parameters
    return comfy_sample.fix_empty_latent_channels(model, latent["samples"], *extra[: max(0, len(parameters) - 2)])


class KSamplerSource:
    """What a round samples with when the node takes KSampler's inputs: core KSampler's schedule, sampler and CFG
    guider."""

    def __init__(self, inputs, latent: dict):
        self.inputs, self.latent = inputs, latent  # a nodes.host.sampling.KSamplerInputs
        self.model, self.steps, self.name = inputs.model, inputs.steps, inputs.sampler_name

    def schedule(self):
        model, inputs = self.model, self.inputs
        return comfy_samplers.KSampler(
            model,
            steps=inputs.steps,
            device=model.load_device,
            sampler=inputs.sampler_name,
            scheduler=inputs.scheduler,
            denoise=inputs.denoise,
            model_options=model.model_options,
        ).sigmas

    def real_sampler(self):
        return comfy_samplers.sampler_object(self.name)

    def guider(self):
        """The guider core's comfy.samplers.sample builds for KSampler (a fresh CFGGuider on these conds and cfg)."""
        guider = comfy_samplers.CFGGuider(self.model)
        guider.set_conds(self.inputs.positive, self.inputs.negative)
        guider.set_cfg(self.inputs.cfg)
        return guider

    def noise(self, image, seed):
        return comfy_sample.prepare_noise(image, seed, self.latent.get("batch_index"))

    def plain(self, group, seeds, image, progress, done):
        """A plain round's call, as core KSampler makes it, the group as one batch."""
        inputs = self.inputs
        noise = torch.cat([self.noise(image, seeds[j]) for j in group])
        batch = image.repeat(len(group), *([1] * (image.ndim - 1)))
        out = comfy_sample.sample(
            self.model,
            noise,
            inputs.steps,
            inputs.cfg,
            inputs.sampler_name,
            inputs.scheduler,
            inputs.positive,
            inputs.negative,
            batch,
            denoise=inputs.denoise,
            noise_mask=self.latent.get("noise_mask"),
            callback=progress.sampler_callback(self.model, done + group[0]),
            disable_pbar=not comfy_utils.PROGRESS_BAR_ENABLED,
            seed=seeds[group[0]],
        )
        return [out[i : i + 1] for i in range(len(group))]


class GuiderSource:
    """What a round samples with when the node takes core's custom-sampling inputs: the graph's NOISE (its seed moved to
    each candidate's), GUIDER, SAMPLER and SIGMAS, called as SamplerCustomAdvanced calls them."""

    def __init__(self, inputs, latent: dict):
        self.inputs, self.latent = inputs, latent  # a nodes.host.sampling.CustomSamplingInputs
        self.noise_source, self.given_guider, self.sampler, self.sigmas = (
            inputs.noise,
            inputs.guider,
            inputs.sampler,
            inputs.sigmas,
        )
        self.model = inputs.guider.model_patcher
        self.steps = inputs.steps
        self.name = sampler_identity(inputs.sampler)

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


CORE_GUIDER_NAMES = ("Guider_Basic", "Guider_DualCFG")
"""Basic Guider's and Dual CFG Guider's classes (comfy_extras/nodes_custom_sampler.py), built on CFGGuider."""


def is_core_guider(guider) -> bool:
    """Whether ``guider`` is core's CFGGuider, Basic Guider or Dual CFG Guider itself (not a subclass: another pack's
    may change how a batch is denoised). The two in comfy_extras are told by name and file: ComfyUI loads that file
    under a module name made from its path (importing it again would make other classes)."""
    kind = type(guider)
    if kind is comfy_samplers.CFGGuider:
        return True
    if kind.__name__ not in CORE_GUIDER_NAMES or kind.__bases__ != (comfy_samplers.CFGGuider,):
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


def candidate_noise(noise, seed: int):
    """The graph's NOISE with its seed moved to a candidate's: Random Noise with that seed (its copy; the input is
    untouched)."""
    moved = copy.copy(noise)
    moved.seed = int(seed)
    return moved


class CoreRoundSampler:
    """``run_round``'s primitive with core's sampling: a plain round's calls as the plain node makes them (the source's
    ``plain``), a judged round's as ``_CandidateCall``s (counted, previews kept, resumable or stoppable)."""

    def __init__(self, source, seeds, progress, done, stops, prunes):
        self.source, self.seeds, self.progress, self.done = source, seeds, progress, done
        self.image = fix_empty_latent(source.model, source.latent)
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
