"""ComfyUI's own modules, imported once for the host package (None outside ComfyUI: the tests, scripts).

Every other module of ``nodes/host`` takes them from here, so "are we inside ComfyUI" is answered in one place.
"""

from __future__ import annotations

try:  # ComfyUI's modules are importable only inside ComfyUI.
    import folder_paths  # type: ignore
    import comfy.model_management as model_management  # type: ignore
    import comfy.model_patcher as model_patcher  # type: ignore
    import comfy.sample as comfy_sample  # type: ignore
    import comfy.samplers as comfy_samplers  # type: ignore
    import comfy.utils as comfy_utils  # type: ignore
    import comfy.k_diffusion.sampling as k_diffusion_sampling  # type: ignore
    import latent_preview  # type: ignore

    IN_COMFYUI = True
except ImportError:  # pragma: no cover - exercised by the tests without ComfyUI
    folder_paths = model_management = model_patcher = comfy_sample = comfy_samplers = comfy_utils = latent_preview = (
        None
    )
    k_diffusion_sampling = None
    IN_COMFYUI = False

try:  # core's VIDEO types (comfy_api.input, 0.3.64 and later)
    from comfy_api.input import VideoInput  # type: ignore
    from comfy_api.input_impl import VideoFromComponents  # type: ignore
except ImportError:  # pragma: no cover - outside ComfyUI
    VideoInput = VideoFromComponents = None

try:
    from comfy_execution.graph_utils import ExecutionBlocker  # type: ignore
except ImportError:

    class ExecutionBlocker:  # noqa: D401 - same contract as ComfyUI's
        """Stand-in for ComfyUI's ExecutionBlocker: an output value that blocks its consumers."""

        def __init__(self, message):
            self.message = message


def prompt_server():
    """ComfyUI's running PromptServer (its routes, websockets, the running prompt's client), or None."""
    try:
        from server import PromptServer  # type: ignore
    except ImportError:
        return None
    return getattr(PromptServer, "instance", None)
