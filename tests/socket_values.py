"""A value of each socket type a pack node takes, for tests whose node body never runs (a widget or another socket is
refused first): made without loading any model, each accepted by the pack's socket check (``nodes/inputs.SOCKETS``)."""

from __future__ import annotations

from importlib import import_module

import torch

from comfy_harness import Noise_RandomNoise, StandInGuider, StandInModel, StandInSampler, StandInVAE


class CoreVideo:
    """A stand-in of core's VIDEO (comfy_api's VideoInput): the methods the pack calls, and whether it decoded."""

    def __init__(self, images: torch.Tensor, frame_count: int | None = None):
        self.images, self.frame_count, self.decoded = images, frame_count, False

    def get_dimensions(self):
        return self.images.shape[2], self.images.shape[1]

    def get_frame_count(self):
        return self.frame_count if self.frame_count is not None else self.images.shape[0]

    def get_components(self):
        from types import SimpleNamespace

        self.decoded = True
        return SimpleNamespace(images=self.images, audio=None, frame_rate=8)


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
        "VIDEO": lambda: CoreVideo(torch.zeros(2, 8, 8, 3)),
        "IMAGE,VIDEO": lambda: torch.zeros(1, 8, 8, 3),
    }
    maker = makers.get(kind)
    return maker() if maker else None
