"""What the nodes need from ComfyUI, with stand-ins when ComfyUI is absent: the only part of the pack that talks to it.

One module per concern, each usable without ComfyUI (the pack's tests, scripts), so node code has a single path:

- ``comfy``: ComfyUI's modules, imported once (``IN_COMFYUI``), ``ExecutionBlocker``, the PromptServer;
- ``models``: the model folders and checkpoint lookup, the example inputs, the output folder;
- ``execution``: devices and dtypes, ModelPatcher memory management and the shared models, the progress bar,
  Cancel, the previews shown on a node;
- ``sampling``: core's sampling for both MaSC Sample Until nodes (KSampler's inputs or NOISE/GUIDER/SAMPLER/SIGMAS),
  pruning's phases included (``use_sampling`` installs the
  tests' stand-in);
- ``browser``: MaSC Pick's tab and routes (``use_pick_browser`` installs the tests' stand-in);
- ``refusals``: how a refusal reaches the person (its sentence first, no console traceback).
- ``video``: core's VIDEO as the frames the pack scores (a file's read by the pack's bounded reader).

Nodes use ``host.<name>`` for everything listed here.
"""

from __future__ import annotations

from ...masc_core.io.images import preview_thumbnail, thumbnail_size
from .browser import (
    MAX_BODY_BYTES,
    PICK_CLOSED_EVENT,
    PICK_CONFIG_ROUTE,
    PICK_EVENT,
    PICK_HELLO_ROUTE,
    PICK_ROUTE,
    STATUS,
    ComfyBrowser,
    pick_board,
    pick_browser,
    pick_config,
    register_pick_route,
    use_pick_browser,
)
from .comfy import IN_COMFYUI, ExecutionBlocker
from .execution import (
    DEVICE_INPUT,
    PREVIEW_DIR_ENV,
    ManagedModel,
    check_interrupt,
    interrupt_callback,
    load_shared,
    make_patcher,
    precision_input,
    progress_callback,
    save_previews,
    show_text,
)
from .models import (
    EXAMPLE_PREFIX,
    MODEL_FOLDERS,
    checkpoint_choices,
    checkpoint_folder,
    copy_example_inputs,
    list_checkpoints,
    output_directory,
    register_model_folders,
)
from .refusals import as_refusal, quiet_console
from .sampling import (
    CandidateProgress,
    CoreSampling,
    candidate_noise,
    check_custom_inputs,
    sampler_names,
    sampling,
    scheduler_names,
    use_sampling,
)
from .video import is_video, video_frames

__all__ = [
    "is_video",
    "video_frames",
    "as_refusal",
    "quiet_console",
    "DEVICE_INPUT",
    "EXAMPLE_PREFIX",
    "IN_COMFYUI",
    "MAX_BODY_BYTES",
    "MODEL_FOLDERS",
    "PICK_CLOSED_EVENT",
    "PICK_CONFIG_ROUTE",
    "PICK_EVENT",
    "PICK_HELLO_ROUTE",
    "PICK_ROUTE",
    "STATUS",
    "PREVIEW_DIR_ENV",
    "CandidateProgress",
    "ComfyBrowser",
    "CoreSampling",
    "candidate_noise",
    "check_custom_inputs",
    "ExecutionBlocker",
    "ManagedModel",
    "check_interrupt",
    "checkpoint_choices",
    "checkpoint_folder",
    "copy_example_inputs",
    "interrupt_callback",
    "list_checkpoints",
    "load_shared",
    "make_patcher",
    "output_directory",
    "pick_board",
    "pick_browser",
    "pick_config",
    "precision_input",
    "preview_thumbnail",
    "progress_callback",
    "register_model_folders",
    "register_pick_route",
    "sampler_names",
    "sampling",
    "save_previews",
    "scheduler_names",
    "show_text",
    "thumbnail_size",
    "use_pick_browser",
    "use_sampling",
]
