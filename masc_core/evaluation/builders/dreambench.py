"""DreamBench (the DreamBooth dataset, Ruiz et al. 2023) and a folder of generated images -> manifest rows.

The dataset: one folder per subject (``<subject>/00.jpg, 01.jpg, ...``) and
``prompts_and_classes.txt``: a ``subject_name,class`` table and two lists of
25 prompt templates, ``'a {0} {1} in the jungle'.format(unique_token,
class_token)``, "Object Prompts" and "Live Subject Prompts". Live subjects
are those of class cat or dog (the file has no flag; DreamBooth's README
counts 9 of them). Class rows without a folder are skipped and said (a
subset such as dreambench-mini has 8 of the 30).

The generated images (DreamBooth ships none; this is our convention)::

    OUTPUTS_DIR/<method>/<subject>/<prompt index>_<seed>.<png|jpg|jpeg|webp|bmp>

with the prompt index 0-24 into that subject's list (object or live). A row
per image: ``ref`` = the subject's views (all, or the first), ``prompt`` =
the template filled with the token and the class (``a sks dog in the
jungle``; token '' drops it: ``a dog in the jungle``), ``subject`` = ``"sks
dog, dog"`` (both stripped for PF) or the class alone, ``id`` =
``<subject>-<prompt index>``, ``method`` and ``seed`` from the path.
Masks (DreamBench has none) live in the masks folder as
``references/<subject>/<view>.png`` and ``outputs/<method>/<subject>/<name>.png``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...errors import MascInputError
from ...metric.stripping import collapse_whitespace
from .common import (
    BuiltManifest,
    MaskJob,
    count_text,
    images_in,
    is_image,
    mask_path,
    plan_mask,
    problems_error,
    require_folder,
    subfolders,
)

PROMPTS_FILE = "prompts_and_classes.txt"
LIVE_CLASSES = ("cat", "dog")
PROMPTS_PER_SUBJECT = 25
DEFAULT_TOKEN = "sks"
DATASET_LAYOUT = f"DreamBench's layout: one folder per subject (<subject>/00.jpg, ...) and {PROMPTS_FILE}"
OUTPUTS_LAYOUT = (
    "<method>/<subject>/<prompt index>_<seed>.png (or .jpg, .jpeg, .webp, .bmp), e.g. dreambooth/dog/0_0.png"
)
_TEMPLATE = re.compile(r"'([^']*)'\.format\(unique_token, class_token\)")
_OUTPUT_NAME = re.compile(r"^(\d+)_(\d+)\.[A-Za-z]+$")


@dataclass(frozen=True)
class PromptsAndClasses:
    """What prompts_and_classes.txt says."""

    classes: dict[str, str]
    """Subject folder -> class noun."""
    object_prompts: list[str]
    live_prompts: list[str]

    def templates(self, subject: str) -> list[str]:
        return self.live_prompts if self.classes[subject] in LIVE_CLASSES else self.object_prompts


def parse_prompts_and_classes(text: str, path: str) -> PromptsAndClasses:
    """The class table and both template lists, or one line saying what the file lacks."""
    expected = (
        "expected DreamBench's file: a 'subject_name,class' table, then 'Object Prompts' and 'Live Subject Prompts', "
        f"each {PROMPTS_PER_SUBJECT} lines of 'a {{0}} {{1}} ...'.format(unique_token, class_token)"
    )
    lines = text.splitlines()
    try:
        start = [line.strip() for line in lines].index("subject_name,class") + 1
    except ValueError:
        raise MascInputError(f"'{path}' has no 'subject_name,class' table: {expected}") from None
    classes: dict[str, str] = {}
    for line in lines[start:]:
        if not line.strip():
            break
        subject, _, noun = line.partition(",")
        if not noun.strip():
            raise MascInputError(f"'{path}': class row '{line.strip()}' is not '<subject>,<class>': {expected}")
        classes[subject.strip()] = noun.strip()
    object_part, live_marker, live_part = text.partition("Live Subject Prompts")
    _, object_marker, object_part = object_part.partition("Object Prompts")
    object_prompts, live_prompts = _TEMPLATE.findall(object_part), _TEMPLATE.findall(live_part)
    if not classes or not object_marker or not live_marker:
        raise MascInputError(f"'{path}' is not DreamBench's {PROMPTS_FILE}: {expected}")
    for name, found in (("Object Prompts", object_prompts), ("Live Subject Prompts", live_prompts)):
        if len(found) != PROMPTS_PER_SUBJECT:
            raise MascInputError(
                f"'{path}': '{name}' has {len(found)} templates, not {PROMPTS_PER_SUBJECT}: {expected}"
            )
    return PromptsAndClasses(classes, object_prompts, live_prompts)


def render_prompt(template: str, token: str, noun: str) -> str:
    """``'a {0} {1} in the jungle'`` -> ``a sks dog in the jungle`` (``a dog in the jungle`` without a token)."""
    return collapse_whitespace(template.format(token, noun))


def subject_names(token: str, noun: str) -> str:
    """What PF strips from the prompt: ``"sks dog, dog"`` (the full name first), or the class alone."""
    return f"{token} {noun}, {noun}" if token else noun


def read_dataset(dataset_dir: str) -> tuple[PromptsAndClasses, dict[str, list[str]], list[str]]:
    """(prompts and classes, subject -> its view paths, notes) for a DreamBench folder."""
    dataset_dir = require_folder(dataset_dir, "DreamBench folder", DATASET_LAYOUT)
    path = os.path.join(dataset_dir, PROMPTS_FILE)
    if not os.path.isfile(path):
        raise MascInputError(f"DreamBench folder '{dataset_dir}' has no {PROMPTS_FILE}: expected {DATASET_LAYOUT}")
    with open(path, encoding="utf-8") as handle:
        table = parse_prompts_and_classes(handle.read(), path)
    views: dict[str, list[str]] = {}
    strangers = []
    for name in subfolders(dataset_dir):
        images = images_in(os.path.join(dataset_dir, name))
        if name not in table.classes:
            if images:
                strangers.append(name)
            continue
        if images:
            views[name] = [os.path.join(dataset_dir, name, image) for image in images]
    if not views:
        raise MascInputError(
            f"DreamBench folder '{dataset_dir}' has no subject folder with images named in {PROMPTS_FILE}: expected "
            f"{DATASET_LAYOUT}"
        )
    notes = []
    absent = [s for s in table.classes if s not in views]
    if absent:
        notes.append(
            f"{count_text(len(absent), 'subject')} of {PROMPTS_FILE} have no images here (skipped): {', '.join(absent)}"
        )
    if strangers:
        notes.append(f"folders not in {PROMPTS_FILE} (skipped): {', '.join(strangers)}")
    return table, views, notes


@dataclass(frozen=True)
class OutputsLayout:
    """How a builder's generated images are laid out, for ``scan_outputs``' messages."""

    text: str
    """The layout, as the messages show it."""
    unknown: tuple[str, str]
    """(problem, hint) for image folders the benchmark does not know."""
    out_of_range: tuple[str, str]
    """(problem, hint) for a prompt index past the folder's prompts."""


SUBJECT_OUTPUTS = OutputsLayout(
    OUTPUTS_LAYOUT,
    ("subject folders have no reference images in the DreamBench folder", "name the subject folders as the dataset's"),
    ("images have a prompt index above 24", f"DreamBench has {PROMPTS_PER_SUBJECT} prompts (0-24)"),
)


def scan_outputs(
    outputs_dir: str, prompt_counts: dict[str, int], layout: OutputsLayout = SUBJECT_OUTPUTS
) -> list[tuple[str, str, int, int, str]]:
    """(method, folder, prompt index, seed, path) of every generated image under ``<method>/<folder>/<prompt>_<seed>``,
    sorted; one line for what does not fit. ``prompt_counts``: each known folder (a subject, or a combination of
    subjects) and how many prompts it has."""
    outputs_dir = require_folder(outputs_dir, "outputs folder", layout.text)
    found, misplaced, unknown, out_of_range = [], [], set(), []
    misplaced += images_in(outputs_dir)
    for method in subfolders(outputs_dir):
        method_dir = os.path.join(outputs_dir, method)
        misplaced += [f"{method}/{n}" for n in images_in(method_dir)]
        for subject in subfolders(method_dir):
            folder = os.path.join(method_dir, subject)
            for name in sorted(n for n in os.listdir(folder) if is_image(n)):
                match = _OUTPUT_NAME.match(name)
                if not match:
                    misplaced.append(f"{method}/{subject}/{name}")
                elif subject not in prompt_counts:
                    unknown.add(subject)
                elif int(match.group(1)) >= prompt_counts[subject]:
                    out_of_range.append(f"{method}/{subject}/{name}")
                else:
                    found.append(
                        (method, subject, int(match.group(1)), int(match.group(2)), os.path.join(folder, name))
                    )
    where = f"outputs folder '{outputs_dir}'"
    if misplaced:
        raise problems_error(where, "images do not follow the layout", misplaced, f"expected {layout.text}")
    if out_of_range:
        raise problems_error(where, layout.out_of_range[0], out_of_range, layout.out_of_range[1])
    if unknown:
        raise problems_error(where, layout.unknown[0], sorted(unknown), layout.unknown[1])
    if not found:
        raise MascInputError(f"{where} holds no generated images: expected {layout.text}")
    found.sort(key=lambda item: item[:4])
    twice = [f"{a[0]}/{a[1]}/{a[2]}_{a[3]}" for a, b in zip(found, found[1:]) if a[:4] == b[:4]]
    if twice:
        raise problems_error(
            where, "images are there twice (other extensions)", twice, "keep one file per prompt and seed"
        )
    return found


def build(
    dataset_dir: str, outputs_dir: str, masks_dir: str, *, token: str = DEFAULT_TOKEN, first_view_only: bool = False
) -> BuiltManifest:
    """Manifest rows for every generated image under ``outputs_dir``, against ``dataset_dir``'s references."""
    table, views, notes = read_dataset(dataset_dir)
    images = scan_outputs(outputs_dir, {subject: PROMPTS_PER_SUBJECT for subject in views})
    token = token.strip()
    jobs: dict[str, MaskJob] = {}

    def mask_for(image: str, subject: str, *folders: str) -> str:
        return plan_mask(
            jobs, image, mask_path(masks_dir, image, *folders), table.classes[subject]
        )  # CLIPSeg looks for the class word

    rows = []
    for method, subject, index, seed, path in images:
        noun = table.classes[subject]
        refs = views[subject][:1] if first_view_only else views[subject]
        rows.append(
            {
                "ref": refs,
                "ref_mask": [mask_for(ref, subject, "references", subject) for ref in refs],
                "out": path,
                "out_mask": mask_for(path, subject, "outputs", method, subject),
                "prompt": render_prompt(table.templates(subject)[index], token, noun),
                "subject": subject_names(token, noun),
                "method": method,
                "seed": seed,
                "id": f"{subject}-{index}",
            }
        )
    methods = {r["method"] for r in rows}
    subjects = {r["id"].rsplit("-", 1)[0] for r in rows}
    description = (
        f"{count_text(len(rows), 'row')}: {count_text(len(methods), 'method')}, "
        f"{count_text(len(subjects), 'subject')}, "
        f"{count_text(len({r['seed'] for r in rows}), 'seed')}"
    )
    return BuiltManifest(rows, list(jobs.values()), notes, description)
