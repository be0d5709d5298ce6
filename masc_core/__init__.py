"""MaSC for ComfyUI: the engine.

MaSC (Masked Similarity for Concept-driven generation) scores a generated
image against a reference view of a personalized subject with one frozen
SigLIP2 forward pass per image:

- CP, concept preservation (Eq. 1): for each reference patch under the
  reference mask, its best cosine with any output patch; their mean.
- PF, prompt following (Eq. 2): SigLIP2's attention pooler over the output's
  background patches only, against the text embedding of the prompt with
  the subject's name removed.

Pure torch + transformers; this package never imports ComfyUI.

>>> from masc_core import MascEncoder, score_images
>>> encoder = MascEncoder.load("path/to/siglip2-so400m-patch16-naflex")
>>> batch = score_images(encoder, outputs, reference=ref, reference_mask=ref_mask,
...                      mask=out_masks, prompt="a dog on the beach", subject="dog")
>>> batch.cp, batch.pf
"""

from .checkpoint import PAPER_MODEL_ID
from .encoder import ImageTokens, MascEncoder
from .errors import MascError, MascInputError, MascModelError
from .masks import FOREGROUND_THRESHOLD, MIN_FOREGROUND_FRACTION
from .scoring import Heatmaps, ImageScore, ReferenceInfo, ScoreBatch, score_images
from .segmentation import CLIPSEG_MODEL_ID, ClipSegSegmenter
from .stripping import parse_subject_names, strip_subject

__version__ = "0.1.0"

__all__ = [
    "CLIPSEG_MODEL_ID",
    "FOREGROUND_THRESHOLD",
    "MIN_FOREGROUND_FRACTION",
    "PAPER_MODEL_ID",
    "ClipSegSegmenter",
    "Heatmaps",
    "ImageScore",
    "ImageTokens",
    "MascEncoder",
    "MascError",
    "MascInputError",
    "MascModelError",
    "ReferenceInfo",
    "ScoreBatch",
    "__version__",
    "parse_subject_names",
    "score_images",
    "strip_subject",
]
