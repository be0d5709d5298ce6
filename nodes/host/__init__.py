"""What the nodes need from ComfyUI, with stand-ins when ComfyUI is absent: the only part of the pack that talks to it.

One module per concern, each usable without ComfyUI (the pack's tests, scripts), so node code has a single path:

- ``comfy``: ComfyUI's modules, imported once (``IN_COMFYUI``), ``ExecutionBlocker``, the PromptServer;
- ``models``: the model folders and checkpoint lookup, the example inputs, the output folder;
- ``execution``: devices and dtypes, ModelPatcher memory management and the shared models, the progress bar,
  Cancel, the previews shown on a node;
- ``sampling``: what both MaSC Sample Until nodes sample with (KSampler's inputs or NOISE/GUIDER/SAMPLER/SIGMAS), one
  sampler per run, and the backend (``use_sampling`` installs the tests' stand-in); ``core_rounds``: core's sampling
  calls for one round, pruning's phases included;
- ``browser``: MaSC Pick's tab and routes (``use_pick_browser`` installs the tests' stand-in);
- ``refusals``: how a refusal reaches the person (its sentence first, no console traceback).
- ``video``: core's VIDEO as the frames the pack scores (a file's read by the pack's bounded reader);
- ``sweep``: MaSC Sweep's cells as core's LoraLoader patches them, each image as KSampler (or, for MaSC Sweep
  (Custom), SamplerCustomAdvanced with the guider re-prompted per cell) + VAE Decode (``use_loras`` installs the
  tests' stand-in).

Nodes use ``host.<name>`` for every name imported here (the package's interface: pyproject's ruff settings let
these imports stand unused here, so they are not listed twice).
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
from .core_rounds import candidate_noise
from .sampling import (
    CandidateProgress,
    ComfyCandidateSampler,
    CoreSampling,
    CustomSamplingInputs,
    KSamplerInputs,
    SamplerTraits,
    sampler_names,
    sampling,
    scheduler_names,
    use_sampling,
)
from .sweep import ComfySweepSampler, GuiderCells, KSamplerCells, check_lora_model, check_sweep_latent, loras, use_loras
from .video import is_video, video_frames
