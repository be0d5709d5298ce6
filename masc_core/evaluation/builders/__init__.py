"""Manifest builders: a benchmark's folders in, an evaluation manifest out, without hand work.

- ``dreambench``: the DreamBench (DreamBooth) dataset and a folder of
  generated images (``<method>/<subject>/<prompt index>_<seed>.png``);
- ``dreambench_multi``: the benchmark card's subject combinations (pairs, triplets) of DreamBench
  subjects and a folder of generated images, as several-subject rows;
- ``dreambench_plus``: DreamBench++'s released data, samples and human
  ratings (``ratings``: its rating files, one rater per group);
- ``pairs``: identity pairs from photos grouped by subject, labelled
  ``same_subject`` (the paper's ORIDa protocol);
- ``automasks``: the masks the rows name, made once with the built-in CLIPSeg
  and reused after;
- ``common``: what the builders share (rows, folder checks, writing the manifest).

``python -m masc_core manifest ...`` is the command line for them.
"""

from .automasks import AutoMaskOptions, MaskReport, ensure_masks
from .common import BuiltManifest, MaskJob, write_manifest

__all__ = ["AutoMaskOptions", "BuiltManifest", "MaskJob", "MaskReport", "ensure_masks", "write_manifest"]
