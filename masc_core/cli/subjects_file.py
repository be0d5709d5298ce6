"""``--subjects FILE`` of ``score`` and ``rank``: several subjects in each output, declared in a small JSON file.

The file (paths relative to the file's folder)::

    {"subjects": [
      {"names": "sks dog, dog", "references": ["dog_00.jpg"], "reference_masks": ["dog_00_mask.png"],
       "output_masks": ["out0_dog.png", "out1_dog.png"]},
      {"names": "cat", "references": ["cat_00.jpg"], "reference_masks": ["cat_00_mask.png"],
       "output_masks": ["out0_cat.png", "out1_cat.png"]}
    ]}

``output_masks`` (one per ``--out`` image, in order) is optional, for all subjects or none; without it
each subject's CP searches the whole output and PF is undefined.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from ..errors import MascInputError
from ..subjects import Subject, every_or_none

KEYS = {"names", "references", "reference_masks", "output_masks"}
MAX_FILE_BYTES = 1 << 20


def _paths(entry: dict, key: str, where: str, folder: str, *, required: bool) -> list[str] | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p for p in value):
        raise MascInputError(f"{where}: '{key}' must be a file name or a non-empty list of file names")
    return [p if os.path.isabs(p) else os.path.join(folder, p) for p in value]


def read_subjects_file(path: str, outputs: int) -> tuple[list[Subject], list[list[str]] | None]:
    """The subjects declared in ``path`` (their images read) and each subject's output mask files (or None)."""
    from ..images import load_image_file, load_mask_file

    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise MascInputError(f"--subjects '{path}' is over 1 MB: a subjects file lists a few file names")
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MascInputError(f"--subjects '{path}' could not be read as JSON ({type(error).__name__}): give a JSON file as in --help") from None
    entries = document.get("subjects") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise MascInputError(f"--subjects '{path}' has no 'subjects' list: give {{\"subjects\": [{{\"names\": ..., ...}}, ...]}}")
    folder = os.path.dirname(os.path.abspath(path))
    subjects, output_masks = [], []
    for k, entry in enumerate(entries):
        where = f"--subjects '{path}', subject {k}"
        if not isinstance(entry, dict):
            raise MascInputError(f"{where} is not an object: give names, references, reference_masks (and output_masks)")
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise MascInputError(f"{where} has the unknown key '{unknown[0]}': the keys are {', '.join(sorted(KEYS))}")
        names = entry.get("names")
        if not isinstance(names, (str, list)) or not names:
            raise MascInputError(f"{where}: 'names' must be the subject's name(s), e.g. \"sks dog, dog\"")
        refs = _paths(entry, "references", where, folder, required=True)
        masks = _paths(entry, "reference_masks", where, folder, required=True)
        if len(masks) not in (1, len(refs)):
            raise MascInputError(f"{where} has {len(masks)} reference_masks for {len(refs)} references: give one per reference")
        subjects.append(Subject(names, [load_image_file(p, f"{where} reference") for p in refs],
                                [load_mask_file(p, f"{where} reference mask") for p in masks]))
        output_masks.append(_paths(entry, "output_masks", where, folder, required=False))
    try:
        output_masks = every_or_none(subjects, output_masks)
    except MascInputError as exc:
        raise MascInputError(f"--subjects '{path}': {exc}") from None
    if output_masks is None:
        return subjects, None
    for k, masks in enumerate(output_masks):
        if len(masks) != outputs:
            raise MascInputError(f"--subjects '{path}', subject {k} has {len(masks)} output_masks for {outputs} --out images: give one per output")
    return subjects, output_masks


def score_subject_files(args: argparse.Namespace, *, heatmaps: bool = False):
    """Read --subjects and --out, load the encoder, score: (encoder, SubjectBatch, load seconds, score seconds,
    the subjects, the output images)."""
    from ..images import load_image_file, load_mask_file
    from ..subject_scoring import score_subjects
    from .options import load_encoder

    if args.ref or args.ref_mask or args.subject or args.out_mask:
        raise MascInputError("--subjects replaces --ref, --ref-mask, --subject and --out-mask: drop them")
    subjects, mask_files = read_subjects_file(args.subjects, len(args.out))
    outs = [load_image_file(p, "--out") for p in args.out]
    masks = None if mask_files is None else [[load_mask_file(p, "output mask") for p in files] for files in mask_files]
    started = time.perf_counter()
    encoder = load_encoder(args)
    loaded = time.perf_counter()
    batch = score_subjects(encoder, outs, subjects=subjects, output_masks=masks, prompt=args.prompt,
                           min_foreground=args.min_foreground, heatmaps=heatmaps)
    return encoder, batch, loaded - started, time.perf_counter() - loaded, subjects, outs


def write_subject_heatmaps(directory: str, batch, subjects, outs, out_paths, device=None) -> list[str]:
    """Per output: each subject's reference map(s) and presence map (``<stem>.<subject>.reference_match.png``,
    ``<stem>.<subject>.presence.png``), and PF's attention once (``<stem>.background_attention.png``)."""
    from PIL import Image

    from ..heatmaps import render_heatmaps
    from .mask import subject_slug

    os.makedirs(directory, exist_ok=True)
    written = []
    for k, subject in enumerate(subjects):
        refs = subject.references if isinstance(subject.references, list) else [subject.references]
        pictures = render_heatmaps(batch.subject_view(k), refs, outs, captions=False, attention=k == 0, device=device)
        slug, views = subject_slug(subject.label), pictures.views
        for n, path in enumerate(out_paths):
            stem = os.path.join(directory, os.path.splitext(os.path.basename(path))[0])
            names = [f"{stem}.{slug}.reference_match.png"] if views == 1 else [f"{stem}.{slug}.reference_match.view{v}.png" for v in range(views)]
            images = {**dict(zip(names, pictures.reference[n * views:(n + 1) * views])), f"{stem}.{slug}.presence.png": pictures.presence[n]}
            if k == 0 and pictures.attention:
                images[f"{stem}.background_attention.png"] = pictures.attention[n]
            for target, pixels in images.items():
                Image.fromarray(pixels).save(target)
                written.append(target)
    return written
