"""What the nodes need from ComfyUI, with stand-ins when ComfyUI is absent.

Inside ComfyUI these are ComfyUI's own facilities (model folders, memory
management, progress bar, interrupts, execution blocking, temp previews,
the output folder, the input folder the example inputs are copied to, and
sampling: core's noise, sampler, latent previews and VAE decode). Outside it
(the pack's tests, scripts) the same calls work with plain equivalents, so
the node code has a single path; sampling has none outside ComfyUI unless
one is installed with ``use_sampling`` (the tests' stand-in sampler), and
MaSC Pick's browser (the websocket and the pick route) is absent unless one
is installed with ``use_pick_browser``. Over 400 lines: sampling (pruning's
phases included) and the pick route are the ComfyUI facilities with real
code here, and they must live in this module (only host talks to ComfyUI).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import weakref
from typing import Callable

import torch

from ..masc_core.errors import MascInputError
from ..masc_core.models.devices import PRECISION_CHOICES, resolve_device, resolve_dtype
from ..masc_core.pruning import phase_plan
from ..masc_core.safe_text import shown

try:  # ComfyUI's modules are importable only inside ComfyUI.
    import folder_paths  # type: ignore
    import comfy.model_management as model_management  # type: ignore
    import comfy.model_patcher as model_patcher  # type: ignore
    import comfy.sample as comfy_sample  # type: ignore
    import comfy.samplers as comfy_samplers  # type: ignore
    import comfy.utils as comfy_utils  # type: ignore
    import latent_preview  # type: ignore

    IN_COMFYUI = True
except ImportError:  # pragma: no cover - exercised by the tests without ComfyUI
    folder_paths = model_management = model_patcher = comfy_sample = comfy_samplers = comfy_utils = latent_preview = None
    IN_COMFYUI = False

try:
    from comfy_execution.graph_utils import ExecutionBlocker  # type: ignore
except ImportError:

    class ExecutionBlocker:  # noqa: D401 - same contract as ComfyUI's
        """Stand-in for ComfyUI's ExecutionBlocker: an output value that blocks its consumers."""

        def __init__(self, message):
            self.message = message


MODEL_FOLDERS = {"masc": "SigLIP2 checkpoints for MaSC", "clipseg": "CLIPSeg checkpoints for MaSC Auto Mask"}


def _standalone_models_dir() -> str:
    """Outside ComfyUI: $MASC_MODELS_DIR, else ./models."""
    return os.environ.get("MASC_MODELS_DIR", os.path.join(os.getcwd(), "models"))


def register_model_folders() -> None:
    """Add models/masc and models/clipseg to ComfyUI's model folders.

    ``add_model_folder_path`` keeps the paths a user's extra_model_paths.yaml
    already gave these keys (assigning folder_names_and_paths would wipe them).
    """
    if not IN_COMFYUI:
        return
    for key in MODEL_FOLDERS:
        folder_paths.add_model_folder_path(key, os.path.join(folder_paths.models_dir, key))


PACK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE_INPUTS = os.path.join(PACK_DIR, "example_inputs")
EXAMPLE_PREFIX = "masc_example_"
"""The example workflows load their inputs from ComfyUI's input folder under these names.

Not a subfolder: Load Image lists the input folder's top level only, and
front end 1.49 marks a workflow naming a file outside that list as having
missing media ("Resolve them before running"), although the server would
load it. ComfyUI itself puts its example.png there.
"""
EXAMPLE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def copy_example_inputs(input_dir: str | None = None) -> list[str]:
    """Copy the pack's example images into ComfyUI's input folder; the names copied.

    A file is copied only when that name is absent, so a user's own file is
    never overwritten (and an example the user edited stays edited). Runs at
    every start, so examples added by a pack update arrive too. Never raises:
    a read-only input folder only means the examples must be copied by hand.
    """
    if input_dir is None:
        if not IN_COMFYUI:
            return []
        input_dir = folder_paths.get_input_directory()
    copied = []
    try:
        for name in sorted(os.listdir(EXAMPLE_INPUTS)):
            destination = os.path.join(input_dir, name)
            if not name.startswith(EXAMPLE_PREFIX) or not name.lower().endswith(EXAMPLE_SUFFIXES) or os.path.lexists(destination):
                continue
            os.makedirs(input_dir, exist_ok=True)
            shutil.copyfile(os.path.join(EXAMPLE_INPUTS, name), destination)
            copied.append(name)
    except OSError as error:
        logging.warning("MaSC: example inputs not copied to %s (%s); copy them from %s by hand", input_dir, error, EXAMPLE_INPUTS)
    return copied


def model_roots(kind: str) -> list[str]:
    """Folders searched for checkpoints of ``kind`` ("masc" or "clipseg")."""
    if IN_COMFYUI:
        try:
            return list(folder_paths.get_folder_paths(kind))
        except KeyError:
            return [os.path.join(folder_paths.models_dir, kind)]
    return [os.path.join(_standalone_models_dir(), kind)]


def list_checkpoints(kind: str) -> list[str]:
    """Checkpoint folders (holding config.json) under the model roots, as names relative to a root.

    One or two levels deep, so both models/masc/<name> and
    models/masc/<owner>/<name> work.
    """
    found: list[str] = []
    for root in model_roots(kind):
        if not os.path.isdir(root):
            continue
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            if not os.path.isdir(path) or entry.startswith("."):
                continue
            if os.path.isfile(os.path.join(path, "config.json")):
                found.append(entry)
                continue
            for sub in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, sub, "config.json")):
                    found.append(f"{entry}/{sub}")
    return list(dict.fromkeys(found))


def checkpoint_choices(kind: str, hub_id: str) -> list[str]:
    """A loader's model combo: local checkpoint folders, then the Hub id (unless a local folder has that name)."""
    local = list_checkpoints(kind)
    return local + ([hub_id] if hub_id not in local else [])


DEVICE_INPUT = (["auto", "cpu", "cuda"], {"default": "auto", "tooltip": "auto follows ComfyUI (GPU unless started with --cpu)."})


def precision_input(note: str = "") -> tuple:
    return (list(PRECISION_CHOICES), {"default": "auto", "tooltip": "auto: fp32 on CPU, bf16 or fp16 on GPU." + note})


def find_checkpoint(kind: str, name: str) -> str | None:
    """The folder of a checkpoint the loader's list shows (``list_checkpoints``), or None.

    Only listed names resolve, and only inside the model roots: a name from a shared workflow that is an
    absolute path, climbs out with '..' or names any other folder is never opened as a model.
    """
    if name not in list_checkpoints(kind):
        return None
    for root in model_roots(kind):
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    return None


def download_folder(kind: str, repo_id: str) -> str:
    """Where a Hub checkpoint is downloaded: models/<kind>/<owner>--<name>."""
    return os.path.join(model_roots(kind)[0], repo_id.replace("/", "--"))


def checkpoint_folder(kind: str, name: str, hub_id: str) -> tuple[str | None, str | None]:
    """(local folder, None) for a listed checkpoint, (None, download folder) for the pack's own Hub id.

    Anything else (a path, another Hub id, a folder removed since the list was drawn) is refused with the same
    line whether or not such a path exists on the server, so an error never tells a workflow what is there.
    Only ``hub_id`` ever downloads: another 'owner/name' would fetch any size into models/ for every user.
    """
    folder = find_checkpoint(kind, name)
    if folder is not None:
        return folder, None
    if name == hub_id:
        downloaded = download_folder(kind, name)
        if os.path.isfile(os.path.join(downloaded, "config.json")):  # fetched before: no need to ask the Hub again
            return downloaded, None
        return None, downloaded
    raise MascInputError(
        f"model {shown(name)} is not a checkpoint folder in models/{kind}: choose one the list shows, or put the "
        f"checkpoint's folder (with config.json) in models/{kind} and refresh; only {hub_id} is downloaded by name"
    )


def load_device(choice: str) -> torch.device:
    """The device a model computes on: ComfyUI's choice for 'auto' (honours --cpu)."""
    if choice == "auto":
        if IN_COMFYUI:
            return model_management.get_torch_device()
        return resolve_device("auto")
    return resolve_device(choice)


def offload_device() -> torch.device:
    """Where a model waits while others use the GPU."""
    if IN_COMFYUI:
        return model_management.text_encoder_offload_device()
    return torch.device("cpu")


def pick_dtype(choice: str, device: torch.device) -> torch.dtype:
    """fp32 on CPU; on GPU bf16 or fp16 where ComfyUI judges them usable, else fp32."""
    if choice != "auto" or device.type == "cpu" or not IN_COMFYUI:
        return resolve_dtype(choice, device)
    if model_management.should_use_bf16(device):
        return torch.bfloat16
    if model_management.should_use_fp16(device):
        return torch.float16
    return torch.float32


class MascModelHolder(torch.nn.Module):
    """A thin module around a transformers model, for ComfyUI's ModelPatcher.

    ModelPatcher assigns ``model.device``; a transformers PreTrainedModel has a
    read-only ``device`` property, so it cannot be patched directly.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device):
        super().__init__()
        self.wrapped = model
        self.device = device


def make_patcher(model: torch.nn.Module, load: torch.device, offload: torch.device):
    """A ModelPatcher managing ``model`` (None outside ComfyUI)."""
    if not IN_COMFYUI:
        return None
    holder = MascModelHolder(model, offload)
    return model_patcher.ModelPatcher(holder, load_device=load, offload_device=offload)


def load_for_inference(patcher, fallback_device: torch.device, module: torch.nn.Module) -> None:
    """Make sure the model sits on its compute device, making room as ComfyUI decides.

    transformers layers are not comfy.ops layers, so partial (low-VRAM) loading
    cannot work: the model is always loaded in full.
    """
    if patcher is not None:
        model_management.load_models_gpu([patcher], force_full_load=True)
    else:
        module.to(fallback_device)


class ManagedModel:
    """A loaded masc_core model (encoder or segmenter) plus ComfyUI's handle on its weights.

    Inside ComfyUI the torch module is registered with a ModelPatcher, so it
    shares VRAM with diffusion models: ComfyUI offloads it when they need
    room, and ``ready()`` loads it back before use. This object keeps the
    strong reference ComfyUI's model list does not (it holds patchers weakly).
    """

    def __init__(self, core, compute_device: torch.device, name: str = ""):
        self.core = core
        self.compute_device = compute_device
        self.name = name
        """The model as the loader's combo named it (a folder under models/<kind>, or a Hub id)."""
        self.patcher = make_patcher(core.model, compute_device, offload_device())

    def ready(self):
        """The masc_core object, with its weights on the compute device."""
        load_for_inference(self.patcher, self.compute_device, self.core.model)
        return self.core

    def __repr__(self) -> str:
        info = self.core.describe()
        return f"{type(self.core).__name__}({info['model']}, {info['precision']}, {self.compute_device})"


# Same inputs -> the same loaded model, for as long as some graph holds it.
_LOADED: "weakref.WeakValueDictionary[tuple, ManagedModel]" = weakref.WeakValueDictionary()


def load_shared(kind: str, name: str, hub_id: str, device: str, precision: str, build: Callable, *options) -> ManagedModel:
    """Load a checkpoint once per (kind, name, device, precision, options) and share it.

    ``name`` is a folder the loader lists under models/<kind>, or ``hub_id`` (the pack's own checkpoint,
    downloaded into models/<kind>/<owner>--<name>); ``checkpoint_folder`` refuses anything else.
    ``build(path_or_id, device, dtype, download_dir)`` makes the masc_core object; it is created on the
    offload device and moved to the compute device by ComfyUI when a node needs it.
    """
    register_model_folders()
    key = (kind, name, device, precision, *options)
    cached = _LOADED.get(key)
    if cached is not None:
        return cached
    folder, download_dir = checkpoint_folder(kind, name, hub_id)
    compute = load_device(device)
    dtype = pick_dtype(precision, compute)
    managed = ManagedModel(build(folder or name, offload_device(), dtype, download_dir), compute, name)
    _LOADED[key] = managed
    return managed


def check_interrupt() -> None:
    """Raise ComfyUI's interrupt exception if the user pressed Cancel."""
    if IN_COMFYUI:
        model_management.throw_exception_if_processing_interrupted()


def progress_callback(total_hint: int | None = None) -> Callable[[int, int], None]:
    """``progress(done, total)`` that drives ComfyUI's progress bar and honours interrupts."""
    bar = comfy_utils.ProgressBar(total_hint or 1) if IN_COMFYUI else None

    def update(done: int, total: int) -> None:
        check_interrupt()
        if bar is not None:
            bar.update_absolute(done, total)

    return update


PREVIEW_SIZE = 512
"""Longest side of the thumbnails shown on a node (IMAGE outputs keep the image's size)."""
PREVIEW_DIR_ENV = "MASC_PREVIEW_DIR"
"""Outside ComfyUI, previews are written only when this environment variable names a folder (benchmarks, scripts)."""


def thumbnail_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) of a picture's thumbnail: at most PREVIEW_SIZE on the longest side, aspect kept."""
    longest = max(width, height)
    if longest <= PREVIEW_SIZE:
        return width, height
    return max(1, round(width * PREVIEW_SIZE / longest)), max(1, round(height * PREVIEW_SIZE / longest))


def preview_thumbnail(pixels):
    """An RGB uint8 picture as a PIL thumbnail (``thumbnail_size``)."""
    from PIL import Image

    picture = Image.fromarray(pixels)
    size = thumbnail_size(*picture.size)
    if size == picture.size:
        return picture
    factor = picture.width // size[0]
    if (size[0] * factor, size[1] * factor) == picture.size:
        return picture.reduce(factor)  # 1024 -> 512 and the like: a box average, the cheapest good reduction
    return picture.resize(size, Image.Resampling.BOX)


def _preview_folder(prefix: str, width: int, height: int) -> tuple[str, str, int, str] | None:
    """(folder, file name stem, first counter, subfolder) for a node's previews, or None where none are kept."""
    if IN_COMFYUI:
        directory = folder_paths.get_temp_directory()
        full_folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(prefix, directory, width, height)
        return full_folder, filename, counter, subfolder
    directory = os.environ.get(PREVIEW_DIR_ENV)
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    return directory, prefix, 1 + sum(1 for name in os.listdir(directory) if name.startswith(prefix + "_")), ""


def save_previews(images: list, prefix: str) -> list[dict]:
    """Save uint8 RGB pictures as thumbnails in ComfyUI's temp folder; entries for a node's ``ui.images``.

    Thumbnails are at most PREVIEW_SIZE pixels on their longest side (PNG,
    ComfyUI's fast compression level); outside ComfyUI nothing is written
    unless $MASC_PREVIEW_DIR names a folder.
    """
    if not images:
        return []
    height, width = images[0].shape[:2]
    target = _preview_folder(prefix, *thumbnail_size(width, height))
    if target is None:
        return []
    folder, filename, counter, subfolder = target
    entries = []
    for index, pixels in enumerate(images):
        name = f"{filename}_{counter + index:05}_.png"
        preview_thumbnail(pixels).save(os.path.join(folder, name), compress_level=1)
        entries.append({"filename": name, "subfolder": subfolder, "type": "temp"})
    return entries


def interrupt_callback() -> Callable[[int, int], None]:
    """``progress(done, total)`` that only honours Cancel (for work inside a node that drives its own bar)."""
    return lambda done, total: check_interrupt()


def output_directory() -> str:
    """ComfyUI's output folder (outside ComfyUI: $MASC_OUTPUT_DIR, else ./output)."""
    if IN_COMFYUI:
        return folder_paths.get_output_directory()
    return os.environ.get("MASC_OUTPUT_DIR", os.path.join(os.getcwd(), "output"))


# ---------------------------------------------------------------- sampling

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


# ---------------------------------------------------------------- the artist's picks (MaSC Pick)

PICK_EVENT = "masc.pick"
"""Sent to the browser that queued the prompt: show these candidates and answer with a pick."""
PICK_CLOSED_EVENT = "masc.pick.closed"
"""Sent when a node stops waiting (answered, timed out, cancelled): the browser closes its dialog."""
PICK_ROUTE = "/masc/pick"
"""Where the browser posts its answer (ComfyUI serves it under /api too)."""
PICK_HELLO_ROUTE = "/masc/pick/hello"
"""Where the pack's script announces that its page can answer picks (on load and on every reconnect)."""


class ComfyBrowser:
    """The browser tab that queued the running prompt, through ComfyUI's websocket (PromptServer.send_sync)."""

    @staticmethod
    def _server():
        try:
            from server import PromptServer  # type: ignore
        except ImportError:
            return None
        return getattr(PromptServer, "instance", None)

    def client(self) -> str | None:
        """The id of the connected browser that queued the running prompt; None for an API prompt or a closed tab."""
        server = self._server()
        if server is None:
            return None
        client_id = getattr(server, "client_id", None)
        return client_id if client_id is not None and self.connected(client_id) else None

    def connected(self, client: str) -> bool:
        """Whether ``client`` has a websocket open now (a reloading tab has none for a moment)."""
        server = self._server()
        return server is not None and client in getattr(server, "sockets", {})

    def send(self, event: str, data: dict, client: str) -> None:
        server = self._server()
        if server is not None:
            server.send_sync(event, data, client)


_BROWSER = ComfyBrowser() if IN_COMFYUI else None
_BOARD_ATTRIBUTE = "masc_pick_board"
"""Where the PromptServer keeps the pick board its routes answer: one per process, whichever copy of the pack came first."""


def pick_browser():
    """Who a MaSC Pick asks: the browser behind the running prompt inside ComfyUI; outside it, a stand-in or None."""
    return _BROWSER


def pick_board(own):
    """The board this process's pick routes answer (``register_pick_route``), or ``own`` when there is none.

    With two copies of the pack installed, the first copy's board is the one the routes serve; a copy's
    nodes wait on it so that answers reach them. A board without the calls this copy needs (an older copy)
    is not used: then ``own`` has no announced page and every pick takes its default at once.
    """
    server = ComfyBrowser._server() if IN_COMFYUI else None
    shared = getattr(server, _BOARD_ATTRIBUTE, None) if server is not None else None
    return shared if shared is not None and all(hasattr(shared, name) for name in ("announcements", "announce", "wait")) else own


@contextlib.contextmanager
def use_pick_browser(browser):
    """Ask ``browser`` (``client()``, ``connected(client)``, ``send(event, data, client)`` as ``ComfyBrowser``) inside the block: the tests'."""
    global _BROWSER
    previous, _BROWSER = _BROWSER, browser
    try:
        yield browser
    finally:
        _BROWSER = previous


def _json_body_error(message: str, status: int = 400):
    from aiohttp import web  # ComfyUI's own web server

    return web.json_response({"error": message}, status=status)


async def _read_json_body(request, what: str):
    """A route's JSON body (at most ``MAX_BODY_BYTES``, its length given), or the refusal to answer with."""
    from ..masc_core.files import JSONUnreadable, parse_json
    from ..masc_core.picks import MAX_BODY_BYTES

    length = request.content_length
    if length is None or length > MAX_BODY_BYTES:
        return None, _json_body_error(f"{what} is a JSON body of at most {MAX_BODY_BYTES} bytes, with its length given", 413)
    try:
        return parse_json(await request.read(), max_depth=4), None
    except JSONUnreadable as why:  # deep nesting included: one line, never a 500
        return None, _json_body_error(f"{what} is not JSON ({why})")


def register_pick_route(board) -> bool:
    """Serve MaSC Pick's two routes, once per process; True when this call registered them.

    - POST ``PICK_ROUTE``: a browser's answer for a waiting MaSC Pick, handed to ``board.answer`` (checked there).
    - POST ``PICK_HELLO_ROUTE``: the pack's script announces that its page can answer picks (``board.announce``).

    Bodies are read only when they declare a length of at most ``MAX_BODY_BYTES``; every refusal is a JSON
    ``{"error": one line}`` with the board's status (400 malformed, 404 nobody waiting, 409 answered, 413 too long).
    A second copy of the pack (another folder in custom_nodes) finds the routes taken, says so in the log and
    registers nothing: aiohttp would refuse the same route twice and the server would not start.
    """
    if not IN_COMFYUI:
        return False
    server = ComfyBrowser._server()
    if server is None:
        return False
    taken = any(getattr(route, "path", None) in (PICK_ROUTE, PICK_HELLO_ROUTE) for route in getattr(server, "routes", ()))
    if getattr(server, _BOARD_ATTRIBUTE, None) is not None or taken:  # taken: an older copy that did not leave its board
        logging.warning(
            "MaSC: another copy of the pack is installed (this one at %s); MaSC Pick's routes stay with the first copy "
            "loaded. Remove one of the two folders from custom_nodes.", os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        return False
    from ..masc_core.picks import PickRefused

    @server.routes.post(PICK_ROUTE)
    async def answer_pick(request):
        body, refusal = await _read_json_body(request, "a pick")
        if refusal is not None:
            return refusal
        try:
            board.answer(body)
        except PickRefused as refused:
            return _json_body_error(str(refused), refused.status)
        from aiohttp import web

        return web.json_response({"ok": True})

    @server.routes.post(PICK_HELLO_ROUTE)
    async def announce_page(request):
        body, refusal = await _read_json_body(request, "an announcement")
        if refusal is not None:
            return refusal
        try:
            board.announce(body)
        except PickRefused as refused:
            return _json_body_error(str(refused), refused.status)
        from aiohttp import web

        return web.json_response({"ok": True})

    setattr(server, _BOARD_ATTRIBUTE, board)
    return True
