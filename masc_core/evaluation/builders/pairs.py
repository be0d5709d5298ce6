"""Identity pairs from real photos grouped by subject (the paper's ORIDa protocol, Sec. 4.2) -> manifest rows.

``PHOTOS_DIR/<subject>/<photo>`` (any image names; a DreamBench folder
fits). Rows:

- every same-subject pair: for each subject, each two of its photos
  (i < j in name order; the first is the reference), ``same_subject`` 1;
- a seeded sample of cross-subject pairs, ``same_subject`` 0: from every
  (photo of subject a, photo of subject b) with a < b, ``--cross-pairs``
  of them (default: as many as same-subject pairs, the paper's balance:
  2,250 and 2,250) drawn without replacement by
  ``numpy.random.default_rng(seed).choice``, in pool order.

``--per-subject K`` keeps the first K photos of each subject (the paper: 10
per subject, one per background). Prompts are empty (PF is not part of this
regime); ``subject`` is the reference's subject; masks live in the masks
folder as ``<subject>/<photo name>.png``, and CLIPSeg (``--auto-masks``) is
prompted with the subject's class from prompts_and_classes.txt when the
folder has one, else with the folder's name (underscores as spaces).
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from ...errors import MascInputError
from .common import BuiltManifest, MaskJob, count_text, images_in, mask_path, plan_mask, require_folder, subfolders
from .dreambench import PROMPTS_FILE, parse_prompts_and_classes

LAYOUT = "one folder per subject holding its photos (<subject>/<photo>.jpg)"


def _class_words(photos_dir: str, subjects: list[str]) -> dict[str, str]:
    words = {subject: subject.replace("_", " ") for subject in subjects}
    path = os.path.join(photos_dir, PROMPTS_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            classes = parse_prompts_and_classes(handle.read(), path).classes
        words.update({s: classes[s] for s in subjects if s in classes})
    return words


def _cross_pool(photos: dict[str, list[str]]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The subject pairs (a < b) and the cumulative count of photo pairs up to each: the pool without listing it."""
    pairs = list(itertools.combinations(sorted(photos), 2))
    sizes = np.array([len(photos[a]) * len(photos[b]) for a, b in pairs], dtype=np.int64)
    return pairs, np.cumsum(sizes)


def _sample_cross(
    photos: dict[str, list[str]], count: int | None, seed: int, same: int
) -> tuple[list[tuple[str, str]], list[str]]:
    pairs, cumulative = _cross_pool(photos)
    pool = int(cumulative[-1]) if len(cumulative) else 0
    notes = []
    if count is None:
        count = min(same, pool)
        if count < same:
            notes.append(f"only {pool} cross-subject pairs exist: all of them are used ({same} same-subject pairs)")
    elif count > pool:
        raise MascInputError(
            f"--cross-pairs {count}: only {pool} cross-subject pairs exist here; ask for at most {pool}"
        )
    picked = (
        np.sort(np.random.default_rng(seed).choice(pool, size=count, replace=False))
        if count
        else np.array([], dtype=np.int64)
    )
    result = []
    for flat in picked.tolist():
        at = int(np.searchsorted(cumulative, flat, side="right"))
        a, b = pairs[at]
        offset = flat - (int(cumulative[at - 1]) if at else 0)
        result.append((photos[a][offset // len(photos[b])], photos[b][offset % len(photos[b])]))
    return result, notes


def build(
    photos_dir: str, masks_dir: str, *, cross_pairs: int | None = None, seed: int = 0, per_subject: int | None = None
) -> BuiltManifest:
    """Same-subject pairs and a seeded sample of cross-subject pairs, labelled ``same_subject`` 1/0."""
    photos_dir = require_folder(photos_dir, "photos folder", LAYOUT)
    if per_subject is not None and per_subject < 2:
        raise MascInputError(f"--per-subject {per_subject}: keep at least 2 photos per subject to form a pair")
    if cross_pairs is not None and cross_pairs < 0:
        raise MascInputError(f"--cross-pairs {cross_pairs}: give 0 or more")
    photos = {}
    for subject in subfolders(photos_dir):
        names = images_in(os.path.join(photos_dir, subject))[:per_subject]
        if names:
            photos[subject] = [os.path.join(photos_dir, subject, name) for name in names]
    if len(photos) < 2:
        raise MascInputError(
            f"photos folder '{photos_dir}' has {len(photos)} subject folder(s) with photos: cross-subject pairs need "
            f"two or more; expected {LAYOUT}"
        )
    same = [pair for subject in photos for pair in itertools.combinations(photos[subject], 2)]
    if not same:
        raise MascInputError(
            f"photos folder '{photos_dir}': no subject has two photos, so there is no same-subject pair"
        )
    cross, notes = _sample_cross(photos, cross_pairs, seed, len(same))
    subject_of = {path: subject for subject, paths in photos.items() for path in paths}
    words = _class_words(photos_dir, list(photos))
    jobs: dict[str, MaskJob] = {}

    def mask_for(path: str) -> str:
        subject = subject_of[path]
        return plan_mask(jobs, path, mask_path(masks_dir, path, subject), words[subject])

    def name(path: str) -> str:
        return f"{subject_of[path]}/{os.path.basename(path)}"

    rows = [
        {
            "ref": [ref],
            "ref_mask": [mask_for(ref)],
            "out": out,
            "out_mask": mask_for(out),
            "prompt": "",
            "subject": subject_of[ref],
            "id": f"{name(ref)}~{name(out)}",
            "same_subject": label,
        }
        for pairs, label in ((same, 1), (cross, 0))
        for ref, out in pairs
    ]
    unpaired = [s for s, paths in photos.items() if len(paths) < 2]
    if unpaired:
        notes.append(
            f"{count_text(len(unpaired), 'subject')} with one photo only (cross-subject pairs only): "
            f"{', '.join(unpaired)}"
        )
    description = (
        f"{count_text(len(rows), 'pair')} over {count_text(len(photos), 'subject')}: "
        f"{len(same)} same-subject, {len(cross)} cross-subject (seed {seed})"
    )
    return BuiltManifest(rows, list(jobs.values()), notes, description)
