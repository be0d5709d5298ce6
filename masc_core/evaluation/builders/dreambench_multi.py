"""DreamBench subject combinations (pairs, triplets) and a folder of generated images -> several-subject manifest rows.

The benchmark card in ``../shared/seeds/`` (MUSAR, Guo et al. 2025) evaluates customization "individually
and in combination": besides DreamBench's 750 single-subject samples, 60 pairs and 20 triplets of
DreamBench subjects, each generated with 4 seeds, scored with CLIP-I and DINO averaged over every
reference image of every subject and CLIP-T on the prompt. The card publishes neither the combinations
nor their prompts, so they come in a file (JSON)::

    {"combinations": [
      {"subjects": ["dog", "cat"], "prompts": ["a {0} and a {1} on the beach", "a {0} next to a {1} in the snow"]},
      {"subjects": ["dog", "cat", "teapot"], "prompts": ["a {0}, a {1} and a {2} on a table"]}
    ]}

``{0}``, ``{1}``, ... become each subject's ``<token> <class>`` (``--token``; default none: methods that
take reference images are prompted with the class word, ``a dog and a cat on the beach``). Each
subject's names (``sks dog, dog`` with a token, else ``dog``) are stripped for PF.

The generated images::

    OUTPUTS_DIR/<method>/<subject>+<subject>[+<subject>]/<prompt index>_<seed>.png (or .jpg, .jpeg, .webp, .bmp)

with the folder naming the combination's subjects in its file's order and the prompt index into its list.
(Multi-subject repositories we looked at publish no common layout: ImagenHub's multi-subject results are
``<model>/sample_<i>.jpg`` keyed by its own dataset index, which names neither subjects nor seeds. This
layout follows the single-subject builder's.) Masks live in the masks folder as
``references/<subject>/<view>.png`` (shared with the single-subject builder) and
``outputs/<method>/<combination>/<name>.<subject>.png`` (one per subject, CLIPSeg prompted with its class).

Rows: the first subject in the single-subject columns, the others in ``subject_2``, ``ref_2``, ... (see
``masc_core.evaluation.manifest``), ``id`` = ``<combination>-<prompt index>``, ``method`` and ``seed``
from the path. Two subjects of one class cannot be told apart by their names or by CLIPSeg's prompt, so
such a combination is refused.
"""

from __future__ import annotations

import json
import os

from ...errors import MascInputError
from ...metric.subjects import MAX_SUBJECTS
from ..manifest import column
from .common import BuiltManifest, MaskJob, count_text, mask_path, plan_mask
from ...metric.stripping import collapse_whitespace
from .dreambench import OutputsLayout, read_dataset, scan_outputs, subject_names

JOINER = "+"
OUTPUTS_LAYOUT = (
    "<method>/<subject>+<subject>[+...]/<prompt index>_<seed>.png (or .jpg, .jpeg, .webp, .bmp), e.g. "
    "musar/dog+cat/0_0.png"
)
COMBINATIONS_LAYOUT = (
    '{"combinations": [{"subjects": ["dog", "cat"], "prompts": ["a {0} and a {1} on the beach"]}, ...]}'
)


def read_combinations(
    path: str, classes: dict[str, str], views: dict[str, list[str]]
) -> dict[str, tuple[list[str], list[str]]]:
    """Folder name (``dog+cat``) -> (its subjects, its prompt templates), checked against the dataset; one line
    otherwise."""
    where = f"combinations file '{path}'"
    if not os.path.isfile(path):
        raise MascInputError(f"{where} does not exist: give a JSON file {COMBINATIONS_LAYOUT}")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MascInputError(
            f"{where} is not JSON ({str(exc).splitlines()[0]}): expected {COMBINATIONS_LAYOUT}"
        ) from None
    entries = data.get("combinations") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise MascInputError(f"{where} has no 'combinations' list: expected {COMBINATIONS_LAYOUT}")
    found: dict[str, tuple[list[str], list[str]]] = {}
    for n, entry in enumerate(entries):
        at = f"{where}, combination {n}"
        subjects = entry.get("subjects") if isinstance(entry, dict) else None
        prompts = entry.get("prompts") if isinstance(entry, dict) else None
        if not (
            isinstance(subjects, list)
            and all(isinstance(s, str) and s for s in subjects)
            and 2 <= len(subjects) <= MAX_SUBJECTS
        ):
            raise MascInputError(
                f'{at}: \'subjects\' must list 2 to {MAX_SUBJECTS} DreamBench subject folders, e.g. ["dog", "cat"]'
            )
        if not (isinstance(prompts, list) and prompts and all(isinstance(p, str) for p in prompts)):
            raise MascInputError(f"{at}: 'prompts' must be a list of templates with {{0}}, {{1}}, ... for the subjects")
        unknown = [s for s in subjects if s not in views]
        if unknown:
            raise MascInputError(
                f"{at}: '{unknown[0]}' has no reference images in the DreamBench folder: name the dataset's subject "
                "folders"
            )
        nouns = [classes[s] for s in subjects]
        shared = next((s for s in nouns if nouns.count(s) > 1), None)
        if shared is not None:
            twins = [s for s in subjects if classes[s] == shared]
            raise MascInputError(
                f"{at}: '{twins[0]}' and '{twins[1]}' are both a {shared}: their names and CLIPSeg's prompt cannot "
                "tell them "
                "apart; combine subjects of different classes"
            )
        for t, template in enumerate(prompts):
            try:
                template.format(*nouns)
            except (IndexError, KeyError, ValueError):
                raise MascInputError(
                    f"{at}, prompt {t} {template!r}: use {{0}} .. {{{len(subjects) - 1}}} for the subjects, nothing "
                    "else in braces"
                ) from None
            missing = [k for k in range(len(subjects)) if f"{{{k}}}" not in template]
            if missing:
                raise MascInputError(
                    f"{at}, prompt {t} {template!r} never names subject {missing[0]} ('{subjects[missing[0]]}'): give "
                    f"it {{{missing[0]}}}"
                )
        name = JOINER.join(subjects)
        if name in found:
            raise MascInputError(f"{at}: '{name}' is listed twice: merge its prompts into one entry")
        found[name] = (list(subjects), list(prompts))
    return found


MULTI_OUTPUTS = OutputsLayout(
    OUTPUTS_LAYOUT,
    (
        "combination folders are not in the combinations file",
        f"name each folder as its subjects joined with '{JOINER}', in the file's order",
    ),
    (
        "images have a prompt index past their combination's prompts",
        "number the prompts from 0 in the combinations file's order",
    ),
)


def build(
    dataset_dir: str,
    combinations_file: str,
    outputs_dir: str,
    masks_dir: str,
    *,
    token: str = "",
    first_view_only: bool = False,
) -> BuiltManifest:
    """Several-subject manifest rows for every generated image under ``outputs_dir``."""
    table, views, notes = read_dataset(dataset_dir)
    combinations = read_combinations(combinations_file, table.classes, views)
    images = scan_outputs(
        outputs_dir, {name: len(prompts) for name, (_, prompts) in combinations.items()}, MULTI_OUTPUTS
    )
    token = token.strip()
    jobs: dict[str, MaskJob] = {}

    def mask_for(image: str, subject: str, *folders: str, suffix: str = "") -> str:
        return plan_mask(
            jobs, image, mask_path(masks_dir, image, *folders, suffix=suffix), table.classes[subject]
        )  # CLIPSeg looks for the class word

    rows = []
    for method, combination, index, seed, path in images:
        subjects, prompts = combinations[combination]
        nouns = [table.classes[s] for s in subjects]
        row = {
            "out": path,
            "prompt": _prompt(prompts[index], token, nouns),
            "method": method,
            "seed": seed,
            "id": f"{combination}-{index}",
        }
        for k, (subject, noun) in enumerate(zip(subjects, nouns), start=1):
            refs = views[subject][:1] if first_view_only else views[subject]
            row[column("ref", k)] = refs
            row[column("ref_mask", k)] = [mask_for(ref, subject, "references", subject) for ref in refs]
            row[column("out_mask", k)] = mask_for(path, subject, "outputs", method, combination, suffix=f".{subject}")
            row[column("subject", k)] = subject_names(token, noun)
        rows.append(row)
    description = (
        f"{count_text(len(rows), 'row')}: {count_text(len({r['method'] for r in rows}), 'method')}, "
        f"{count_text(len({r['id'].rsplit('-', 1)[0] for r in rows}), 'combination')}, "
        f"{count_text(len({r['seed'] for r in rows}), 'seed')}"
    )
    return BuiltManifest(rows, list(jobs.values()), notes, description)


def _prompt(template: str, token: str, nouns: list[str]) -> str:
    """``'a {0} and a {1} on the beach'`` -> ``a dog and a cat on the beach`` (``a sks dog and a sks cat ...`` with a
    token)."""
    return collapse_whitespace(template.format(*[f"{token} {noun}" for noun in nouns]))
