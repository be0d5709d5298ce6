"""Run the pack without ComfyUI: import it as ComfyUI does and execute API-format graphs.

- ``import_pack``: loads the repository as a package named after its folder
  path, the way ComfyUI's ``load_custom_node`` does, with a decoy top-level
  ``nodes`` module in place (ComfyUI has its own), so an absolute import of
  ``nodes`` inside the pack would pick the wrong module and fail the tests.
- ``CORE_NODES``: small stand-ins for the core nodes the example workflows
  use, behaving as ComfyUI's do for these inputs (LoadImage's MASK is
  1 - alpha, or an empty 64x64 without alpha; LoadImageMask reads one
  channel; ImageBatch resizes the second batch to the first; Save Image
  writes PNGs with the prompt's extra_pnginfo as text chunks, as core's).
- A stand-in diffusion model (``CheckpointLoaderSimple``, ``CLIPTextEncode``,
  ``EmptyLatentImage``, ``KSampler``, ``VAEDecode``): core's noise
  (``prepare_noise``, copied from comfy/sample.py) and a fixed, per-item
  "denoiser" and "VAE" that turn each seed into its own deterministic
  picture (a blend of two photos set by the noise). ``StandInSampling`` is
  the same model behind the pack's ``host.use_sampling``, so MaSC Sample
  Until's candidate i can be compared with a KSampler run at seed + i.
- ``run_graph``: validates widget values against INPUT_TYPES, passes the
  hidden inputs (EXTRA_PNGINFO, UNIQUE_ID, PROMPT), executes the nodes in
  dependency order, and propagates ExecutionBlocker values as ComfyUI does
  (a node with a blocked input is skipped, its outputs blocked).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import types
import weakref

import numpy as np
import torch
from PIL import Image, ImageOps
from PIL.PngImagePlugin import PngInfo

from masc_core.selection.pruning import CandidateRun

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_pack(path: str = ROOT):
    """Import the pack from its folder as ComfyUI 0.3.64 does (module name = folder path)."""
    sys.modules.setdefault("nodes", types.ModuleType("nodes"))  # ComfyUI's own top-level 'nodes'
    name = path.replace(".", "_x_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class LoadImage:
    def __init__(self, input_dir):
        self.input_dir = input_dir

    def run(self, image):
        picture = ImageOps.exif_transpose(Image.open(os.path.join(self.input_dir, image)))
        rgb = torch.from_numpy(np.asarray(picture.convert("RGB"), dtype=np.float32) / 255.0)[None]
        if "A" in picture.getbands():
            mask = 1.0 - torch.from_numpy(np.asarray(picture.getchannel("A"), dtype=np.float32) / 255.0)
        else:
            mask = torch.zeros(64, 64)
        return rgb, mask[None]


class LoadImageMask:
    def __init__(self, input_dir):
        self.input_dir = input_dir

    def run(self, image, channel):
        picture = ImageOps.exif_transpose(Image.open(os.path.join(self.input_dir, image))).convert("RGBA")
        band = channel[0].upper()
        mask = torch.from_numpy(np.asarray(picture.getchannel(band), dtype=np.float32) / 255.0)
        return ((1.0 - mask if band == "A" else mask)[None],)


def image_batch(image1, image2):
    if image1.shape[1:] != image2.shape[1:]:
        resized = torch.nn.functional.interpolate(image2.movedim(-1, 1), size=image1.shape[1:3], mode="bilinear")
        image2 = resized.movedim(1, -1)
    return (torch.cat([image1, image2]),)


def record(kind: str):
    """An output node that keeps what it received in ctx[kind][node_id]."""

    def node(ctx, **inputs):
        value = inputs.get("source", inputs.get("images"))
        ctx[kind][ctx["node_id"]] = value
        return ()

    return node


def save_image(ctx, images, filename_prefix="ComfyUI"):
    """core Save Image: keeps the images, and with ctx["output_dir"] writes PNGs as core does (extra_pnginfo as text
    chunks)."""
    ctx["saved"][ctx["node_id"]] = images
    folder = ctx.get("output_dir")
    if folder:
        paths = ctx["saved_files"].setdefault(ctx["node_id"], [])
        for image in images:
            pixels = Image.fromarray(np.clip(255.0 * image.cpu().numpy(), 0, 255).astype(np.uint8))
            metadata = PngInfo()
            metadata.add_text("prompt", json.dumps(ctx["prompt"]))
            for key, value in (ctx.get("extra_pnginfo") or {}).items():
                metadata.add_text(key, json.dumps(value))
            target = os.path.dirname(os.path.join(folder, filename_prefix))  # a prefix may name a subfolder, as core's
            os.makedirs(target, exist_ok=True)
            path = os.path.join(folder, f"{filename_prefix}_{len(os.listdir(target)) + 1:05}_.png")
            pixels.save(path, pnginfo=metadata, compress_level=4)
            paths.append(path)
    return ()


# ---------------------------------------------------------------- a stand-in diffusion model

LATENT_CHANNELS = 4
PHOTOS = os.path.join(ROOT, "tests", "data", "dreambench")


def prepare_noise(latent_image, seed, noise_inds=None):
    """core's comfy.sample.prepare_noise (0.3.64): the noise a KSampler with ``seed`` adds."""
    generator = torch.manual_seed(seed)
    if noise_inds is None:
        return torch.randn(
            latent_image.size(), dtype=latent_image.dtype, layout=latent_image.layout, generator=generator, device="cpu"
        )
    unique_inds, inverse = np.unique(noise_inds, return_inverse=True)
    noises = []
    for i in range(unique_inds[-1] + 1):
        noise = torch.randn(
            [1] + list(latent_image.size())[1:],
            dtype=latent_image.dtype,
            layout=latent_image.layout,
            generator=generator,
            device="cpu",
        )
        if i in unique_inds:
            noises.append(noise)
    return torch.cat([noises[i] for i in inverse], axis=0)


class StandInModel:
    """MODEL: 'denoising' is a fixed function of each item's noise and the conditioning (items never mix)."""

    def denoise(self, noise, latent, positive, negative, cfg, denoise):
        unguided = positive if negative is None else negative  # Basic Guider's: no negative, no guidance
        guidance = 0.01 * cfg * (positive[0][0].mean() - unguided[0][0].mean())
        return (1.0 - denoise) * latent + denoise * (0.8 * noise + guidance)


class StandInClip:
    """CLIP: what CLIP Text Encode takes (``text_conditioning`` ignores it); ``tokenize`` is all a socket asks of it."""

    def tokenize(self, text):
        return text


class StandInLoraModel(StandInModel):
    """MODEL with a stand-in LoRA: the stand-in model's result moved by ``shift`` (how a LoRA file at a strength
    changes what the model draws; the stand-in VAE turns a positive latent into the dog photo)."""

    def __init__(self, shift: float):
        self.shift = shift

    def denoise(self, noise, latent, positive, negative, cfg, denoise):
        return super().denoise(noise, latent, positive, negative, cfg, denoise) + self.shift


class StandInLoras:
    """The pack's LoRA backend (``host.use_loras``) on the stand-in model: each file a direction in latent space
    (``files``: name -> shift at strength 1), ``check`` refusing the files listed as for another model."""

    def __init__(self, files: dict, foreign: tuple = (), error: type = ValueError):
        self.files, self.foreign, self.error = dict(files), set(foreign), error
        self.checked: list[str] = []

    def names(self):
        return sorted(self.files)

    def check(self, model, clip, choice):
        self.checked.append(choice.lora)
        if choice.lora in self.foreign:
            raise self.error(f"lora_name '{choice.lora}' patches none of this model's weights")

    def apply(self, model, clip, choice):
        """A file's shift, or an in-memory LoRA's ({"shift": tensor}), at the model strength."""
        shift = self.files[choice.lora] if choice.weights is None else float(choice.weights["shift"])
        return StandInLoraModel(shift * choice.strength_model), clip

    @staticmethod
    def encode(clip, text):
        return text_conditioning(text)

    def check_guider(self, guider, negative=None):
        """Only the stand-in's own guider can be given another model and prompt (as only core's CFGGuider kind), and
        a ``negative`` only if it holds one (Basic Guider's has none)."""
        if type(guider) is not StandInGuider:
            raise self.error(f"guider is a {type(guider).__name__}, which a sweep cannot give each cell's model")
        if negative is not None and guider.negative is None:
            raise self.error("negative is set, but the guider (StandInGuider) has no negative to put it in")

    @staticmethod
    def guide(guider, model, positive, negative=None):
        """The stand-in guider on ``model`` with these conditionings (the guider's negative when None)."""
        return StandInGuider(model, positive, guider.negative if negative is None else negative, guider.cfg)


@contextlib.contextmanager
def stand_in_loras(pack, files: dict, foreign: tuple = ()):
    """Install ``StandInLoras`` as the pack's LoRA backend for the block (refusing with the pack's error class)."""
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    error = importlib.import_module(pack.__name__ + ".masc_core.errors").MascInputError
    with host.use_loras(StandInLoras(files, foreign, error)) as backend:
        yield backend


class StandInVAE:
    """VAE: each latent becomes a blend of a dog and a teapot photo, set by its mean, plus its own texture."""

    def __init__(self):
        self.photos = [
            np.asarray(Image.open(os.path.join(PHOTOS, f"{n}.jpg")).convert("RGB")) for n in ("dog_01", "teapot_00")
        ]

    def decode(self, samples):
        if samples.ndim == 5:  # a video latent [B,C,T,h,w]: frame by frame, to [B,T,H,W,C] as core's VAE.decode of a
            # Wan latent gives it (one pixel frame per latent frame here)
            batch, frames = samples.shape[0], samples.shape[2]
            flat = samples.movedim(2, 1).reshape(batch * frames, samples.shape[1], *samples.shape[3:])
            images = self.decode(flat)
            return images.reshape(batch, frames, *images.shape[1:])
        height, width = samples.shape[-2] * 8, samples.shape[-1] * 8
        a, b = (
            torch.from_numpy(np.asarray(Image.fromarray(p).resize((width, height)), dtype=np.float32) / 255.0)
            for p in self.photos
        )
        weight = torch.sigmoid(60.0 * samples.mean(dim=(1, 2, 3)))[:, None, None, None]
        texture = torch.tanh(samples[:, :3]).repeat_interleave(8, dim=2).repeat_interleave(8, dim=3).movedim(1, -1)
        return (weight * a + (1 - weight) * b + 0.08 * texture).clamp(0, 1)


def wan_vace_to_video(
    ctx,
    positive,
    negative,
    vae,
    width,
    height,
    length,
    batch_size,
    strength,
    control_video=None,
    control_masks=None,
    reference_image=None,
):
    """core's WanVaceToVideo on the stand-ins: the conditioning as given, a video latent of (length - 1) / 4 + 1 frames
    and one more in front for the reference image, which ``trim_latent`` says."""
    trim = 0 if reference_image is None else 1
    frames = (length - 1) // 4 + 1 + trim
    latent = {"samples": torch.zeros(batch_size, LATENT_CHANNELS, frames, height // 8, width // 8)}
    return positive, negative, latent, trim


def text_conditioning(text: str):
    generator = torch.Generator().manual_seed(sum(text.encode()) % (2**31))
    return [[torch.randn(1, 1, 8, generator=generator), {}]]


def ksampler(ctx, model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=1.0):
    """core KSampler (nodes.common_ksampler) on the stand-in model."""
    noise = prepare_noise(latent_image["samples"], seed, latent_image.get("batch_index"))
    out = latent_image.copy()
    out["samples"] = model.denoise(noise, latent_image["samples"], positive, negative, cfg, denoise)
    return (out,)


class Noise_RandomNoise:
    """core's NOISE from Random Noise (comfy_extras/nodes_custom_sampler.py, same class name): prepare_noise at its
    seed."""

    def __init__(self, seed):
        self.seed = seed

    def generate_noise(self, input_latent):
        return prepare_noise(input_latent["samples"], self.seed, input_latent.get("batch_index"))


class Noise_EmptyNoise:
    """core's NOISE from Disable Noise: zeros, seed 0."""

    def __init__(self):
        self.seed = 0

    def generate_noise(self, input_latent):
        return torch.zeros_like(input_latent["samples"])


class StandInGuider:
    """GUIDER on the stand-in model, as core's CFGGuider: ``sample(noise, latent_image, sampler, sigmas, ...)``; the
    stand-in's denoise strength is the schedule's first sigma (Basic Scheduler's denoise)."""

    def __init__(self, model, positive, negative, cfg):
        self.model_patcher, self.positive, self.negative, self.cfg = model, positive, negative, cfg

    @property
    def settings(self) -> dict:
        return dict(positive=self.positive, negative=self.negative, cfg=self.cfg)

    def sample(
        self, noise, latent_image, sampler, sigmas, denoise_mask=None, callback=None, disable_pbar=False, seed=None
    ):
        return self.model_patcher.denoise(noise, latent_image, self.positive, self.negative, self.cfg, float(sigmas[0]))


class StandInSampler:
    """SAMPLER: a named one of core's (KSampler Select) or, with ``name`` None, another pack's opaque sampler."""

    def __init__(self, name, splittable=True):
        self.name, self.splittable = name, splittable

    def sample(self, *args, **kwargs):  # core's KSAMPLER.sample: never called on the stand-in (its guider samples)
        raise AssertionError("the stand-in guider samples; a SAMPLER is only passed along")


def basic_scheduler(steps, denoise=1.0):
    """SIGMAS of the stand-in: steps + 1 levels from ``denoise`` down to 0."""
    return torch.linspace(float(denoise), 0.0, int(steps) + 1)


def sampler_custom_advanced(ctx, noise, guider, sampler, sigmas, latent_image):
    """core SamplerCustomAdvanced on the stand-in model: (output, denoised_output)."""
    out = latent_image.copy()
    out["samples"] = guider.sample(
        noise.generate_noise(latent_image), latent_image["samples"], sampler, sigmas, seed=noise.seed
    )
    return (out, out)


class StandInSampling:
    """The stand-in model's part of the pack's sampling backend: mixed into the pack's ``host.CoreSampling`` by
    ``stand_in_sampling``, it fills the backend's hooks (``describe``, ``check_splittable``, ``round_sampler``,
    ``decode``) and nothing else, so each round goes through the host's own ``sample_round`` and the library's
    ``run_round``: each candidate's noise from its own seed, the progress callback once per step.

    Keeps what a test asserts: the seeds of each call, and weak references to every tensor it made.
    """

    def __init__(self, host=None):
        self.host = host  # the pack's nodes.host (its input types, candidate_noise and error class)
        self.calls: list[list[int]] = []
        self.phase_calls: list[dict] = []
        self.made: list[weakref.ref] = []
        self.alive_at_call: list[int] = []
        self.plain_groups: list[int] = []
        """The size of each plain call's batch (candidates sampled in one call)."""

    def _made(self, tensor):
        self.made.append(weakref.ref(tensor))
        return tensor

    def _custom(self, inputs) -> bool:
        return isinstance(inputs, self.host.CustomSamplingInputs)

    def sample_round(self, inputs, seeds, latent, *, progress, done, stops=(), judge=None, prunes=True):
        """The host's ``sample_round``, with each call's seeds (and a judged round's stops) recorded."""
        self.alive_at_call.append(sum(ref() is not None for ref in self.made))
        self.calls.append(list(seeds))
        if judge is not None:
            call = {"seeds": list(seeds), "stops": list(stops), "prunes": prunes}
            self.phase_calls.append(dict(call, sampler=inputs.sampler.name) if self._custom(inputs) else call)
        result = super().sample_round(
            inputs, seeds, latent, progress=progress, done=done, stops=stops, judge=judge, prunes=prunes
        )
        if result.samples:
            joined = self._made(torch.cat(result.samples))
            result.samples = list(joined.split(1))
        return result

    @staticmethod
    def sampler_identity(sampler):
        """The stand-in SAMPLER's name: a named one of core's, or None for another pack's opaque sampler."""
        return sampler.name

    @staticmethod
    def is_core_guider(guider):
        """The stand-in guider stands for core's (it denoises row by row); a subclass, as another pack's, does not."""
        return type(guider) is StandInGuider

    def check_splittable(self, inputs):
        """As the host's: one line for a sampler that cannot be stopped at a step (the pack's own error class)."""
        if self._custom(inputs) and not inputs.sampler.splittable:
            errors = importlib.import_module(self.host.__name__.rsplit(".nodes.host", 1)[0] + ".masc_core.errors")
            raise errors.MascInputError(
                "sampler is a StandInSampler, which cannot be stopped at a step: disconnect MaSC Prune"
            )

    def round_sampler(self, inputs, seeds, latent, *, progress, done, stops, prunes):
        """``run_round``'s primitive on the stand-in model (``_StandInRoundSampler``), its phases the library's."""
        from masc_core.selection.pruning import phase_plan

        if self._custom(inputs):
            model, settings = inputs.guider.model_patcher, dict(inputs.guider.settings, denoise=float(inputs.sigmas[0]))

            def noise_for(seed):
                return self.host.candidate_noise(inputs.noise, seed).generate_noise(dict(latent))

            name = inputs.sampler.name
        else:
            model, name, noise_for = inputs.model, inputs.sampler_name, None
            settings = dict(positive=inputs.positive, negative=inputs.negative, cfg=inputs.cfg, denoise=inputs.denoise)
        plan = phase_plan(stops, inputs.steps, name, prunes if stops else False)
        return _StandInRoundSampler(self, model, seeds, latent, progress, done, inputs.steps, plan, settings, noise_for)

    @staticmethod
    def preview(model, seed, latent, step, steps, positive, negative, cfg, denoise):
        """The stand-in's denoised prediction after ``step`` of ``steps``: the final latent plus a per-seed wobble that
        shrinks to nothing at the last step (a known function of the seed, for pruning tests)."""
        image = latent["samples"]
        noise = prepare_noise(image, seed, latent.get("batch_index"))
        final = model.denoise(noise, image, positive, negative, cfg, denoise)
        wobble = prepare_noise(image, seed + PREVIEW_WOBBLE_SEED, latent.get("batch_index"))
        return final + (1.0 - step / steps) * PREVIEW_WOBBLE * wobble

    def decode(self, vae, samples):
        return self._made(vae.decode(samples))


class _StandInRoundSampler:
    """``run_round``'s primitive on the stand-in model, as the host's: a plain round's calls draw the group's noise from
    its seeds and report every step; a judged call counts one model evaluation per step it samples."""

    def __init__(self, backend, model, seeds, latent, progress, done, steps, plan, settings, noise_for=None):
        self.backend, self.model, self.seeds, self.latent, self.progress, self.done = (
            backend,
            model,
            seeds,
            latent,
            progress,
            done,
        )
        self.steps, self.plan, self.settings = steps, plan, settings
        self.noise_for = noise_for or (lambda seed: prepare_noise(latent["samples"], seed, latent.get("batch_index")))
        self.callback = progress.sampler_callback(model, done)
        self.executed = 0

    def sample(self, group, start, end, judged, stop_after):
        image, model, settings = self.latent["samples"], self.model, self.settings
        if not self.plan.judged:
            self.backend.plain_groups.append(len(group))
            noise = torch.cat([self.noise_for(self.seeds[j]) for j in group])
            callback = self.progress.sampler_callback(model, self.done + group[0])
            for step in range(self.steps):
                callback(step, None, None, self.steps)
            out = model.denoise(
                noise,
                image.repeat(len(group), *[1] * (image.ndim - 1)),
                settings["positive"],
                settings["negative"],
                settings["cfg"],
                settings["denoise"],
            )
            return [CandidateRun(final=out[i : i + 1]) for i in range(len(group))]
        (j,) = group
        for _ in range(start, end):
            self.callback(
                min(self.executed, len(self.seeds) * self.steps - 1), None, None, self.steps
            )  # one bar step per step
            self.executed += 1
        previews = {
            step: self.backend.preview(model, self.seeds[j], self.latent, step, self.steps, **settings)
            for step in judged
        }
        final = None
        if end == self.steps:
            noise = self.noise_for(self.seeds[j])
            final = model.denoise(
                noise, image, settings["positive"], settings["negative"], settings["cfg"], settings["denoise"]
            )
        return [CandidateRun(previews=previews, final=final, evaluations=end - start)]

    def drop(self, j):
        pass


PREVIEW_WOBBLE = 1.5
"""How far the stand-in's step-0 preview is from its final latent (in units of the seed's wobble)."""
PREVIEW_WOBBLE_SEED = 7777


@contextlib.contextmanager
def stand_in_sampling(pack):
    """Install the pack's own ``host.CoreSampling`` with ``StandInSampling``'s hooks as the sampling backend for the
    block."""
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    backend_class = type("StandInCoreSampling", (StandInSampling, host.CoreSampling), {})
    with host.use_sampling(backend_class(host)) as backend:
        yield backend


CORE_NODES = {
    "LoadImage": lambda ctx, **kw: LoadImage(ctx["input_dir"]).run(**kw),
    "LoadImageMask": lambda ctx, **kw: LoadImageMask(ctx["input_dir"]).run(**kw),
    "ImageBatch": lambda ctx, **kw: image_batch(**kw),
    "PrimitiveStringMultiline": lambda ctx, value: (value,),
    "PreviewAny": record("shown"),
    "PreviewImage": record("previews"),
    "SaveImage": save_image,
    "CheckpointLoaderSimple": lambda ctx, ckpt_name: (StandInModel(), StandInClip(), StandInVAE()),
    "CLIPTextEncode": lambda ctx, text, clip: (text_conditioning(text),),
    "EmptyLatentImage": lambda ctx, width, height, batch_size: (
        {"samples": torch.zeros(batch_size, LATENT_CHANNELS, height // 8, width // 8)},
    ),
    "KSampler": ksampler,
    "RandomNoise": lambda ctx, noise_seed: (Noise_RandomNoise(noise_seed),),
    "DisableNoise": lambda ctx: (Noise_EmptyNoise(),),
    "CFGGuider": lambda ctx, model, positive, negative, cfg: (StandInGuider(model, positive, negative, cfg),),
    "BasicGuider": lambda ctx, model, conditioning: (StandInGuider(model, conditioning, None, 1.0),),
    "KSamplerSelect": lambda ctx, sampler_name: (StandInSampler(sampler_name),),
    "BasicScheduler": lambda ctx, model, scheduler, steps, denoise: (basic_scheduler(steps, denoise),),
    "SamplerCustomAdvanced": sampler_custom_advanced,
    # The DiT templates' loaders and conditioning: on the stand-in model a loader gives the stand-in, a model patch or a
    # conditioning transform passes its input on, and VAE Encode gives the latent of the image's size.
    "UNETLoader": lambda ctx, unet_name, weight_dtype="default": (StandInModel(),),
    "VAELoader": lambda ctx, vae_name: (StandInVAE(),),
    "DualCLIPLoader": lambda ctx, clip_name1, clip_name2, type, device="default": (object(),),
    "CLIPLoader": lambda ctx, clip_name, type, device="default": (object(),),
    "ModelSamplingAuraFlow": lambda ctx, model, shift: (model,),
    "ModelSamplingSD3": lambda ctx, model, shift: (model,),
    "WanVaceToVideo": wan_vace_to_video,
    "SaveAnimatedWEBP": lambda ctx, images, **settings: record("saved")(ctx, images=images),
    "CFGNorm": lambda ctx, model, strength, pre_cfg=False: (model,),
    "FluxKontextImageScale": lambda ctx, image: (image,),
    "VAEEncode": lambda ctx, pixels, vae: (
        {"samples": torch.zeros(pixels.shape[0], LATENT_CHANNELS, pixels.shape[1] // 8, pixels.shape[2] // 8)},
    ),
    "ReferenceLatent": lambda ctx, conditioning, latent=None: (conditioning,),
    "FluxGuidance": lambda ctx, conditioning, guidance: (conditioning,),
    "TextEncodeQwenImageEditPlus": lambda ctx, clip, prompt, vae=None, image1=None, image2=None, image3=None: (
        text_conditioning(prompt),
    ),
    "VAEDecode": lambda ctx, samples, vae: (vae.decode(samples["samples"]),),
    # Core's LoRA training (0.33): the stand-in Train LoRA gives a LORA_MODEL the stand-in LoRA backend reads (a
    # shift in latent space that grows with the steps), a loss map, and the steps.
    "ImageScale": lambda ctx, image, upscale_method, width, height, crop: (
        torch.nn.functional.interpolate(image.movedim(-1, 1), size=(height, width), mode="bilinear").movedim(1, -1),
    ),
    "TrainLoraNode": lambda ctx, model, latents, positive, steps, **settings: (
        {"shift": torch.tensor(min(0.6, 0.05 * steps))},
        {"loss": [1.0 / (k + 1) for k in range(steps)]},
        steps,
    ),
    "LossGraphNode": lambda ctx, loss, filename_prefix: (),
    "SaveLoRA": lambda ctx, lora, prefix, steps=None: (),
}


def validate_widget(node_type: str, name: str, value, spec) -> None:
    kind, options = spec[0], (spec[1] if len(spec) > 1 else {})
    where = f"{node_type}.{name}={value!r}"
    if isinstance(kind, list):
        assert value in kind, f"{where} is not one of {kind}"
    elif kind == "INT":
        assert isinstance(value, int) and options.get("min", value) <= value <= options.get("max", value), where
    elif kind == "FLOAT":
        assert isinstance(value, (int, float)) and options.get("min", value) <= value <= options.get("max", value), (
            where
        )
    elif kind == "BOOLEAN":
        assert isinstance(value, bool), where
    elif kind == "STRING":
        assert isinstance(value, str), where
    else:
        raise AssertionError(f"{where}: a {kind} input must be a link")


def as_intermediate(value, dtype):
    """What ComfyUI's --fp16-intermediates does to the IMAGE and MASK tensors core nodes hand over."""
    if dtype is None:
        return value
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    if isinstance(value, dict) and isinstance(value.get("samples"), torch.Tensor):
        return {**value, "samples": value["samples"].to(dtype)}
    return value


HIDDEN_VALUES = {
    "EXTRA_PNGINFO": lambda ctx, node_id: ctx["extra_pnginfo"],
    "UNIQUE_ID": lambda ctx, node_id: node_id,
    "PROMPT": lambda ctx, node_id: ctx["prompt"],
}


FROM_FRONT_END = object()
"""run_graph's default extra_pnginfo: what the front end sends (a "workflow" entry)."""


def run_graph(
    graph: dict,
    mappings: dict,
    input_dir: str,
    blocker_type,
    output_dir: str | None = None,
    extra_pnginfo=FROM_FRONT_END,
    intermediate_dtype=None,
) -> dict:
    """Execute an API-format graph; returns what preview/save nodes received and each node's outputs.

    ``extra_pnginfo``: the dict ComfyUI hands to nodes (default: as from the front end); None is an API prompt
    sent without extra_data. ``intermediate_dtype`` (e.g. torch.float16) casts what the core stand-ins
    produce, as ComfyUI's --fp16-intermediates does, so the pack's nodes receive such tensors.
    """
    ctx = {
        "input_dir": input_dir,
        "shown": {},
        "previews": {},
        "saved": {},
        "outputs": {},
        "ui": {},
        "blocked": set(),
        "output_dir": output_dir,
        "saved_files": {},
        "prompt": graph,
        "extra_pnginfo": {"workflow": {"nodes": []}} if extra_pnginfo is FROM_FRONT_END else extra_pnginfo,
    }
    order, seen = [], set()

    def visit(node_id):
        if node_id in seen:
            return
        seen.add(node_id)
        for value in graph[node_id]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                visit(value[0])
        order.append(node_id)

    for node_id in graph:
        visit(node_id)
    for node_id in order:
        node = graph[node_id]
        node_type = node["class_type"]
        kwargs, blocked = {}, False
        for name, value in node["inputs"].items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                value = ctx["outputs"][value[0]][value[1]]
                blocked = blocked or isinstance(value, blocker_type)
            kwargs[name] = value
        if node_type in mappings:
            cls = mappings[node_type]
            spec = cls.INPUT_TYPES()
            for section in ("required", "optional"):
                for name, entry in spec.get(section, {}).items():
                    if section == "required":
                        assert name in kwargs, f"{node_type} misses required input {name}"
                    raw = node["inputs"].get(name)
                    if name in node["inputs"] and not isinstance(raw, list):
                        validate_widget(node_type, name, raw, entry)
        if blocked:
            ctx["blocked"].add(node_id)
            width = len(mappings[node_type].RETURN_TYPES) if node_type in mappings else 1
            ctx["outputs"][node_id] = tuple(blocker_type(None) for _ in range(width))
            continue
        if node_type in mappings:
            cls = mappings[node_type]
            for name, kind in cls.INPUT_TYPES().get("hidden", {}).items():
                kwargs[name] = HIDDEN_VALUES[kind](ctx, node_id)
            returned = getattr(cls(), cls.FUNCTION)(**kwargs)
            if isinstance(returned, dict):
                ctx["ui"][node_id] = returned.get("ui", {})
                returned = returned["result"]
        else:
            ctx["node_id"] = node_id
            returned = tuple(as_intermediate(v, intermediate_dtype) for v in CORE_NODES[node_type](ctx, **kwargs))
        ctx["outputs"][node_id] = tuple(returned)
    return ctx
