"""The model loaders' shared shape: a checkpoint folder (or the pack's one Hub id), a device, a precision.

Load MaSC Encoder, Load MaSC Auto Mask Model and Load MaSC SAM3 Model (the three subclasses of
``CheckpointLoader``) differ only in the model kind, its Hub id, their tooltips, any
option of their own (the encoder's patch budget) and how the masc_core object is built; the inputs and the loading
(``host.load_shared``: one model per settings, under ComfyUI's memory management) are written here once.
"""

from __future__ import annotations

from .declarations import MaSCNode
from . import host


class CheckpointLoader(MaSCNode):
    """Base of a loader node: ``KIND`` (models/<kind>), ``HUB_ID``, ``MODEL_TOOLTIP``, ``PRECISION_NOTE``, ``build``."""

    KIND = ""
    HUB_ID = ""
    MODEL_TOOLTIP = ""
    PRECISION_NOTE = ""
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": (host.checkpoint_choices(cls.KIND, cls.HUB_ID), {"tooltip": cls.MODEL_TOOLTIP}),
                "device": host.DEVICE_INPUT,
                "precision": host.precision_input(cls.PRECISION_NOTE),
                **cls.option_inputs(),
            }
        }

    @classmethod
    def option_inputs(cls) -> dict:
        """The loader's own inputs after model, device and precision (none by default)."""
        return {}

    def build(self, path: str, offload, dtype, download_dir, progress, **options):
        """The masc_core object for ``path`` (a folder, or the Hub id to download into ``download_dir``); ``progress``
        honours Cancel between the loading stages."""
        raise NotImplementedError

    def load_checkpoint(self, model: str, device: str, precision: str, **options):
        """The node's output: the shared model for these settings (each subclass's ``load`` names its inputs)."""

        def build(path, offload, dtype, download_dir):
            return self.build(path, offload, dtype, download_dir, host.interrupt_callback(), **options)

        return (host.load_shared(self.KIND, model, self.HUB_ID, device, precision, build, *options.values()),)
