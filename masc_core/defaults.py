"""The library's default numbers and choices, in a module that imports nothing heavy.

The command line declares its options with these before it knows which command runs, and the commands that only
read logs or PNGs (``read``, ``calibrate``, ``prune-report``) never load torch or transformers; the modules that use
the values (``metric.masks``, ``models.devices``, ``models.sam3``) import them from here, so each is said once.
"""

FOREGROUND_THRESHOLD = 0.5
"""Patch-grid threshold of the paper (Sec. 3.1)."""

DEFAULT_MASK_THRESHOLD = 0.4
"""Probability at or above which a pixel of a predicted (CLIPSeg) mask is the subject."""

MIN_FOREGROUND_FRACTION = 0.05
"""The paper's filter: an output whose mask covers less than 5% of the image
usually means the subject was not rendered (Sec. 3.1, DreamBench++)."""

PRECISION_CHOICES = ("auto", "fp32", "bf16", "fp16")
"""The precisions a model may be loaded in ("auto": the device's best)."""

SAM3_SCORE_THRESHOLD = 0.5
"""An instance is part of the subject's mask when its score is at least this (core SAM3_Detect's default)."""

SAM3_PIXEL_THRESHOLD = 0.5
"""A pixel is the subject when the merged instances' mask probability is at least this (transformers' SAM3
post-processing default; core SAM3 Detect's logit > 0 is the same)."""
