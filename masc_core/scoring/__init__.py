"""The metric run with the encoder, one module each:

- ``batch``: ``score_images``, the batch API in its steps (one vision forward per distinct image);
- ``subject_scoring``: several subjects in each output;
- ``mask_bands``: how much a score hangs on its masks (the bands);
- ``clip``: a clip's chosen frames scored and summarised;
- ``candidates``: a Sample Until run checked and called, its candidates masked and scored round after round;
- ``sweep_run``: a MaSC Sweep run, every cell sampled at the same prompts and seeds (by the host's ``SweepSampler``),
  scored and raced round after round.

Nothing is imported here: each module is imported by name.
"""
