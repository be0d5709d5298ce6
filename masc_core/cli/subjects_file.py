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
import os
import time

from ..errors import MascInputError
from ..io.files import JSONUnreadable, check_regular_file, parse_json
from ..safe_text import printable, shown
from ..metric.stripping import parse_subject_names
from ..metric.subjects import MAX_SUBJECTS, Subject, check_subjects, every_or_none

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
    """The subjects declared in ``path`` (their images read) and each subject's output mask files (or None).

    Everything the file says is checked (its JSON, the number of subjects, each subject's keys, names and
    file counts) before any image is decoded: a crafted file costs no memory before it is refused.
    """
    from ..io.images import load_image_file, load_mask_file

    label = shown(path)
    check_regular_file(path, "--subjects", label=f"--subjects {label}")
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise MascInputError(f"--subjects {label} is over 1 MB: a subjects file lists a few file names")
        with open(path, "rb") as handle:
            document = parse_json(handle.read())
    except (OSError, JSONUnreadable) as error:
        why = type(error).__name__ if isinstance(error, OSError) else printable(error)
        raise MascInputError(
            f"--subjects {label} could not be read as JSON ({why}): give a JSON file as in --help"
        ) from None
    entries = document.get("subjects") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise MascInputError(
            f'--subjects {label} has no \'subjects\' list: give {{"subjects": [{{"names": ..., ...}}, ...]}}'
        )
    if len(entries) > MAX_SUBJECTS:
        raise MascInputError(
            f"--subjects {label} declares {len(entries)} subjects: at most {MAX_SUBJECTS} are supported in one image"
        )
    folder = os.path.dirname(os.path.abspath(path))
    declared = []
    for k, entry in enumerate(entries):
        where = f"--subjects {label}, subject {k}"
        if not isinstance(entry, dict):
            raise MascInputError(
                f"{where} is not an object: give names, references, reference_masks (and output_masks)"
            )
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise MascInputError(
                f"{where} has the unknown key {shown(unknown[0], 40)}: the keys are {', '.join(sorted(KEYS))}"
            )
        names = entry.get("names")
        if (
            not isinstance(names, (str, list))
            or not names
            or (isinstance(names, list) and not all(isinstance(n, str) for n in names))
        ):
            raise MascInputError(f"{where}: 'names' must be the subject's name(s), e.g. \"sks dog, dog\"")
        parse_subject_names(names, what=f"{where} 'names'")
        refs = _paths(entry, "references", where, folder, required=True)
        masks = _paths(entry, "reference_masks", where, folder, required=True)
        if len(masks) not in (1, len(refs)):
            raise MascInputError(
                f"{where} has {len(masks)} reference_masks for {len(refs)} references: give one per reference"
            )
        out_masks = _paths(entry, "output_masks", where, folder, required=False)
        if out_masks is not None and len(out_masks) != outputs:
            raise MascInputError(
                f"--subjects {label}, subject {k} has {len(out_masks)} output_masks for {outputs} --out images: give "
                "one per output"
            )
        declared.append((where, names, refs, masks, out_masks))
    try:  # names shared between subjects, output masks for some but not all: still before any image is read
        named = check_subjects([Subject(d[1], None, None) for d in declared])
        output_masks = every_or_none(named, [d[4] for d in declared])
    except MascInputError as exc:
        raise MascInputError(f"--subjects {label}: {exc}") from None
    subjects = [
        Subject(
            names,
            [load_image_file(p, f"{where} reference") for p in refs],
            [load_mask_file(p, f"{where} reference mask") for p in masks],
        )
        for where, names, refs, masks, _ in declared
    ]
    return subjects, output_masks


def score_subject_files(args: argparse.Namespace, *, heatmaps: bool = False):
    """Read --subjects and --out, load the encoder, score: (encoder, SubjectBatch, load seconds, score seconds,
    the subjects, the output images)."""
    from ..io.images import load_image_file, load_mask_file
    from ..scoring.subject_scoring import score_subjects
    from .options import load_encoder

    if args.ref or args.ref_mask or args.subject or args.out_mask:
        raise MascInputError("--subjects replaces --ref, --ref-mask, --subject and --out-mask: drop them")
    subjects, mask_files = read_subjects_file(args.subjects, len(args.out))
    outs = [load_image_file(p, "--out") for p in args.out]
    masks = None if mask_files is None else [[load_mask_file(p, "output mask") for p in files] for files in mask_files]
    started = time.perf_counter()
    encoder = load_encoder(args)
    loaded = time.perf_counter()
    batch = score_subjects(
        encoder,
        outs,
        subjects=subjects,
        output_masks=masks,
        prompt=args.prompt,
        min_foreground=args.min_foreground,
        heatmaps=heatmaps,
    )
    return encoder, batch, loaded - started, time.perf_counter() - loaded, subjects, outs


def write_subject_heatmaps(directory: str, batch, subjects, outs, out_paths, device=None) -> list[str]:
    """Per output: each subject's reference map(s) and presence map (``<stem>.<subject>.reference_match.png``,
    ``<stem>.<subject>.presence.png``), and PF's attention once (``<stem>.background_attention.png``)."""
    from PIL import Image

    from ..metric.heatmaps import render_heatmaps
    from .mask import subject_slug

    os.makedirs(directory, exist_ok=True)
    written = []
    for k, subject in enumerate(subjects):
        refs = subject.references if isinstance(subject.references, list) else [subject.references]
        pictures = render_heatmaps(batch.subject_view(k), refs, outs, captions=False, attention=k == 0, device=device)
        slug, views = subject_slug(subject.label), pictures.views
        for n, path in enumerate(out_paths):
            stem = os.path.join(directory, os.path.splitext(os.path.basename(path))[0])
            names = (
                [f"{stem}.{slug}.reference_match.png"]
                if views == 1
                else [f"{stem}.{slug}.reference_match.view{v}.png" for v in range(views)]
            )
            images = {
                **dict(zip(names, pictures.reference[n * views : (n + 1) * views])),
                f"{stem}.{slug}.presence.png": pictures.presence[n],
            }
            if k == 0 and pictures.attention:
                images[f"{stem}.background_attention.png"] = pictures.attention[n]
            for target, pixels in images.items():
                Image.fromarray(pixels).save(target)
                written.append(target)
    return written
