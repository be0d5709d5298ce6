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

>>> from masc_core import MascEncoder, score_images, rank, render_heatmaps
>>> encoder = MascEncoder.load("path/to/siglip2-so400m-patch16-naflex")
>>> batch = score_images(encoder, outputs, reference=ref, reference_mask=ref_mask,
...                      mask=out_masks, prompt="a dog on the beach", subject="dog")
>>> batch.cp, batch.pf
>>> rank(batch.scores, by="both", top_k=2).selected

Layout, by layer (each imports only those before it; ``tests/test_layering.py``
holds it): ``io`` (files, images, PNG text); ``metric`` (the equations, masks,
stripping, scores, reports, heatmaps: no model code); ``selection`` on
``metric`` (ranking, the sample-until loop's decisions, pruning, the contact
sheet, a clip's frames); ``models`` (checkpoint folders checked against their weights,
SigLIP2, CLIPSeg, SAM3); ``scoring`` (the batch API, a clip's frames); ``evaluation``
(manifests, benchmarks, agreement); ``cli`` (the command line). ``testing``
builds random-weight checkpoints for tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import MascError, MascInputError, MascModelError
from .lazy import lazy_exports
from .version import __version__

# The public names, imported when first used (PEP 562): a command that only reads a log or a PNG
# (``prune-report``, ``calibrate``, ``read``) then starts without torch or transformers.
_PUBLIC = {
    ".metric.heatmaps": ("HeatmapImages", "render_heatmaps"),
    ".defaults": ("DEFAULT_MASK_THRESHOLD", "FOREGROUND_THRESHOLD", "MIN_FOREGROUND_FRACTION"),
    ".models.checkpoints": ("PAPER_MODEL_ID",),
    ".models.clipseg": ("CLIPSEG_MODEL_ID", "ClipSegSegmenter"),
    ".models.sam3": ("SAM3_MODEL_ID", "Sam3Segmenter"),
    ".models.segmenter_folders": ("load_segmenter",),
    ".models.segmenters": ("Segmenter",),
    ".models.encoder": ("ImageTokens", "MascEncoder"),
    ".selection.ranking": ("RANK_KEYS", "PassRules", "Ranking", "rank"),
    ".metric.scores": ("Heatmaps", "ImageScore", "ReferenceInfo", "ScoreBatch"),
    ".scoring.batch": ("score_images",),
    ".scoring.subject_scoring": ("score_subjects",),
    ".scoring.clip": ("ScoredClip", "score_clip"),
    ".selection.clip": ("ClipScore", "frames_to_score"),
    ".metric.subjects": ("MultiSubjectScore", "Subject", "SubjectBatch", "SubjectScore"),
    ".metric.stripping": ("parse_subject_names", "strip_subject"),
}
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)


if TYPE_CHECKING:  # what editors and type checkers see
    from .metric.heatmaps import HeatmapImages, render_heatmaps
    from .defaults import DEFAULT_MASK_THRESHOLD, FOREGROUND_THRESHOLD, MIN_FOREGROUND_FRACTION
    from .metric.scores import Heatmaps, ImageScore, ReferenceInfo, ScoreBatch
    from .metric.stripping import parse_subject_names, strip_subject
    from .metric.subjects import MultiSubjectScore, Subject, SubjectBatch, SubjectScore
    from .models.checkpoints import PAPER_MODEL_ID
    from .models.clipseg import CLIPSEG_MODEL_ID, ClipSegSegmenter
    from .models.encoder import ImageTokens, MascEncoder
    from .models.sam3 import SAM3_MODEL_ID, Sam3Segmenter
    from .models.segmenter_folders import load_segmenter
    from .models.segmenters import Segmenter
    from .scoring.batch import score_images
    from .scoring.clip import ScoredClip, score_clip
    from .scoring.subject_scoring import score_subjects
    from .selection.clip import ClipScore, frames_to_score
    from .selection.ranking import RANK_KEYS, PassRules, Ranking, rank

__all__ = [
    "CLIPSEG_MODEL_ID",
    "ClipScore",
    "ScoredClip",
    "frames_to_score",
    "score_clip",
    "DEFAULT_MASK_THRESHOLD",
    "FOREGROUND_THRESHOLD",
    "MIN_FOREGROUND_FRACTION",
    "PAPER_MODEL_ID",
    "SAM3_MODEL_ID",
    "RANK_KEYS",
    "ClipSegSegmenter",
    "HeatmapImages",
    "Heatmaps",
    "ImageScore",
    "ImageTokens",
    "MascEncoder",
    "MascError",
    "MascInputError",
    "MascModelError",
    "PassRules",
    "Ranking",
    "Sam3Segmenter",
    "Segmenter",
    "ReferenceInfo",
    "ScoreBatch",
    "Subject",
    "SubjectBatch",
    "SubjectScore",
    "MultiSubjectScore",
    "__version__",
    "parse_subject_names",
    "rank",
    "load_segmenter",
    "render_heatmaps",
    "score_images",
    "score_subjects",
    "strip_subject",
]
