"""A value of each socket type a pack node takes, for tests whose node body never runs (a widget or another socket is
refused first): made without loading any model, each accepted by the pack's socket check (``nodes/inputs.SOCKETS``)."""

from __future__ import annotations

from importlib import import_module

import torch

from comfy_harness import Noise_RandomNoise, StandInClip, StandInGuider, StandInModel, StandInSampler, StandInVAE


class CoreVideo:
    """A stand-in of core's VideoFromComponents (Create Video, a model's output): frames held in memory."""

    def __init__(self, images: torch.Tensor):
        self.images, self.decoded = images, False

    def get_dimensions(self):
        return self.images.shape[2], self.images.shape[1]

    def get_components(self):
        from types import SimpleNamespace

        self.decoded = True
        return SimpleNamespace(images=self.images, audio=None, frame_rate=8)


class CoreVideoFile:
    """A stand-in of core's VideoFromFile (Load Video): a path on the server, a header to ask, a whole-file decode.

    The pack must read its frames through its own bounded reader (``get_stream_source``), never ask core to decode
    (``decoded``) and never trust the header (``get_frame_count``, ``get_dimensions`` as the container says)."""

    def __init__(self, path, start: float = 0.0, duration: float = 0.0):
        self.path, self.window, self.decoded = str(path), (start, duration), False

    def get_stream_source(self):
        return self.path

    def get_active_trim_window(self):
        return self.window

    def get_dimensions(self):
        import av

        with av.open(self.path) as container:
            stream = container.streams.video[0]
            return stream.width, stream.height

    def get_frame_count(self):
        import av

        with av.open(self.path) as container:
            return container.streams.video[0].frames

    def get_components(self):
        self.decoded = True
        raise AssertionError("core was asked to decode the whole file")


def _bare(cls):
    """An instance of ``cls`` that was never initialised: the right type, nothing loaded."""
    return cls.__new__(cls)


def socket_value(pack, kind: str):
    """A value of socket type ``kind`` (None for a type the pack does not check)."""
    module = lambda name: import_module(f"{pack.__name__}.{name}")  # noqa: E731 - a short local alias
    host = module("nodes.host")

    def managed(core):
        value = _bare(host.ManagedModel)
        value.core = core
        return value

    makers = {
        "IMAGE": lambda: torch.zeros(1, 8, 8, 3),
        "MASK": lambda: torch.zeros(1, 8, 8),
        "LATENT": lambda: {"samples": torch.zeros(1, 4, 8, 8)},
        "SIGMAS": lambda: torch.tensor([1.0, 0.0]),
        "CONDITIONING": lambda: [],
        "MODEL": StandInModel,
        "CLIP": StandInClip,
        "VAE": StandInVAE,
        "NOISE": lambda: Noise_RandomNoise(0),
        "GUIDER": lambda: StandInGuider(StandInModel(), [], [], 1.0),
        "SAMPLER": lambda: StandInSampler("euler"),
        "MASC_ENCODER": lambda: managed(_bare(module("masc_core.models.encoder").MascEncoder)),
        "MASC_SEGMENTER": lambda: managed(_bare(module("masc_core.models.clipseg").ClipSegSegmenter)),
        "MASC_SCORES": lambda: _bare(module("masc_core.metric.scores").ScoreBatch),
        "MASC_SUBJECTS": tuple,
        "MASC_RULES": lambda: _bare(module("masc_core.selection.acceptance").RunRules),
        "MASC_PRUNE": lambda: module("masc_core.selection.pruning").PruneRules(),
        "MASC_VIDEO": lambda: module("masc_core.selection.clip").ClipChoice(),
        "MASC_SWEEP_CELLS": lambda: (module("masc_core.selection.sweep_cells").LoraChoice("x.safetensors", 1.0, 1.0),),
        "LORA_MODEL": lambda: {"shift": torch.tensor(0.1)},  # core's LORA_MODEL: weight names and tensors
        "VIDEO": lambda: CoreVideo(torch.zeros(2, 8, 8, 3)),
        "IMAGE,VIDEO": lambda: torch.zeros(1, 8, 8, 3),
    }
    maker = makers.get(kind)
    return maker() if maker else None
