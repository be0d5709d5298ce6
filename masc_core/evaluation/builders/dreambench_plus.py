"""DreamBench++ (Peng et al. 2025; github.com/yuangpeng/dreambench_plus) -> manifest rows with its human ratings.

The released layouts, as the benchmark's code reads and writes them:

- data (``data.zip``): ``images/<category path>/<NN>.jpg`` and
  ``captions/<category path>/<NN>.txt``, one reference per subject; a
  caption's first line is the subject's name, lines 2-10 the 9 prompts.
  The collection id is ``<category>_<NN>_<name, lower case, spaces as _>``
  with the category ``live_subject_animal``, ``live_subject_human``,
  ``object`` or ``style`` (the folder's name; animal and human are under
  ``live_subject/``).
- samples: ``<method dir>/tgt_image/<collection id>/<i>_<j>.jpg`` (prompt i,
  image j of that prompt), the prompt in ``<method dir>/text/<collection
  id>/<i>_<j>.txt`` (else caption line i + 2). Method dirs are long
  (``dreambooth_sd_gs7_5_step100_seed42_torch_float16``); the rating files
  use short names (``dreambooth_sd``): the part before ``_gs<digit>``, the
  IP-Adapter dirs of either known spelling mapped to DreamBench++'s names,
  or ``NAME=DIR`` given by the user.
- human ratings: ``merged_data/<group>/<method>-cp.json`` and ``-pf.json``,
  ``{"<collection id>-<i>": 0..4 or null}``, or the raw form
  ``raw_data/<group>/<prefix>-<method>.json``, ``{key: [cp, pf]}`` (several
  files merged in name order, a later file winning, as the benchmark's
  ``merge_data_human_rating`` does). Each group (``group1``, ``group2``) is
  one rater: the columns ``human_cp.<group>``, ``human_pf.<group>``. Keys
  are split on their last hyphen (collection ids contain hyphens:
  ``style_10_ukiyo-e-3``).

A row per generated image: ``id`` = the rating key, ``method`` = the short
name, ``seed`` = j (the benchmark draws one image per prompt, j = 0, from
one generator seeded in the method dir's name), ``subject`` = the caption's
name (what PF strips, and what CLIPSeg looks for). Masks live in the masks
folder as ``references/<collection id>.png`` and
``outputs/<method dir>/<collection id>/<i>_<j>.png``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...errors import MascInputError
from .common import BuiltManifest, MaskJob, count_text, images_in, plan_mask, problems_error, require_folder, subfolders
from .ratings import read_ratings

DATA_LAYOUT = "DreamBench++'s data folder: images/<category>/<NN>.jpg and captions/<category>/<NN>.txt"
SAMPLES_LAYOUT = "<method dir>/tgt_image/<collection id>/<prompt index>_<image index>.jpg (DreamBench++'s samples)"
_SAMPLE_NAME = re.compile(r"^(\d+)_(\d+)\.[A-Za-z]+$")
_METHOD_CUT = re.compile(r"_gs\d")
_IP_ADAPTERS = {
    # The names DreamBench++'s rating files use, for each spelling of its IP-Adapter sample dirs.
    "ip_adapter_plus_vit_h_sdxl": (
        "ip_adapter_plus_vit_h_sdxl",
        "ip_adapter_plus_sdxl_vit_huge",
        "ip_adapter_plus_vit_huge_sdxl",
    ),
    "ip_adapter_vit_g_sdxl": ("ip_adapter_vit_g_sdxl", "ip_adapter_sdxl_vit_giant", "ip_adapter_vit_giant_sdxl"),
}


@dataclass(frozen=True)
class Collection:
    """One DreamBench++ subject."""

    id: str
    name: str
    image: str
    prompts: list[str]


def collection_id(category: str, index: str, name: str) -> str:
    prefix = f"live_subject_{category}" if category in ("animal", "human") else category
    return f"{prefix}_{index}_{name.lower().replace(' ', '_')}"


def read_collections(data_dir: str) -> dict[str, Collection]:
    """Collection id -> subject, from the images and captions folders."""
    data_dir = require_folder(data_dir, "DreamBench++ data folder", DATA_LAYOUT)
    if not os.path.isdir(os.path.join(data_dir, "images")) and os.path.isdir(os.path.join(data_dir, "data", "images")):
        data_dir = os.path.join(data_dir, "data")  # the folder data.zip was unpacked in
    images_dir, captions_dir = os.path.join(data_dir, "images"), os.path.join(data_dir, "captions")
    if not os.path.isdir(images_dir) or not os.path.isdir(captions_dir):
        raise MascInputError(
            f"DreamBench++ data folder '{data_dir}' has no images/ and captions/: expected {DATA_LAYOUT}"
        )
    collections: dict[str, Collection] = {}
    uncaptioned = []
    for folder, _, _ in sorted(os.walk(images_dir)):
        relative = os.path.relpath(folder, images_dir)
        for image in images_in(folder):
            index = os.path.splitext(image)[0]
            caption = os.path.join(captions_dir, relative, index + ".txt")
            if not os.path.isfile(caption):
                uncaptioned.append(os.path.join(relative, image))
                continue
            with open(caption, encoding="utf-8") as handle:
                lines = [line.strip() for line in handle.read().splitlines()]
            if not lines or not lines[0]:
                raise MascInputError(f"caption '{caption}' is empty: its first line should be the subject's name")
            cid = collection_id(os.path.basename(folder), index, lines[0])
            collections[cid] = Collection(cid, lines[0], os.path.join(folder, image), lines[1:])
    if uncaptioned:
        raise problems_error(
            f"DreamBench++ data folder '{data_dir}'", "images have no caption", uncaptioned, f"expected {DATA_LAYOUT}"
        )
    if not collections:
        raise MascInputError(f"DreamBench++ data folder '{data_dir}' has no images: expected {DATA_LAYOUT}")
    return collections


def short_method(method_dir: str, given: dict[str, str]) -> str:
    """The name DreamBench++'s rating files use for a samples dir (``given``: dir -> name wins)."""
    if method_dir in given:
        return given[method_dir]
    stem = _METHOD_CUT.split(method_dir, maxsplit=1)[0]
    for name, spellings in _IP_ADAPTERS.items():
        if any(stem == s or stem.startswith(s + "_scale") for s in spellings):
            return name
    return stem


def method_dirs(samples_dir: str) -> list[str]:
    samples_dir = require_folder(samples_dir, "DreamBench++ samples folder", SAMPLES_LAYOUT)
    if os.path.isdir(os.path.join(samples_dir, "tgt_image")):
        return [samples_dir]  # one method's folder given directly
    found = [
        os.path.join(samples_dir, d)
        for d in subfolders(samples_dir)
        if os.path.isdir(os.path.join(samples_dir, d, "tgt_image"))
    ]
    if not found:
        raise MascInputError(
            f"DreamBench++ samples folder '{samples_dir}' has no <method dir>/tgt_image/: expected {SAMPLES_LAYOUT}"
        )
    return found


def _prompt(method_path: str, collection: Collection, cid: str, name: str, index: int) -> str:
    text_file = os.path.join(method_path, "text", cid, os.path.splitext(name)[0] + ".txt")
    if os.path.isfile(text_file):
        with open(text_file, encoding="utf-8") as handle:
            return handle.readline().strip()
    if index >= len(collection.prompts):
        raise MascInputError(
            f"sample '{os.path.join(method_path, 'tgt_image', cid, name)}' is for prompt {index}, but the caption of "
            f"'{cid}' has {len(collection.prompts)} prompts and there is no text/{cid}/{os.path.splitext(name)[0]}.txt"
        )
    return collection.prompts[index]


def scan_samples(samples_dir: str, collections: dict[str, Collection], methods: dict[str, str]) -> list[dict]:
    """One dict per generated image: method, method dir, collection id, prompt index, image index, path, prompt."""
    found, misplaced, unknown, by_name = [], [], set(), {}
    for method_path in method_dirs(samples_dir):
        method_dir = os.path.basename(method_path)
        name = short_method(method_dir, methods)
        if by_name.setdefault(name, method_dir) != method_dir:
            raise MascInputError(
                f"samples '{by_name[name]}' and '{method_dir}' are both method '{name}': tell them apart with "
                f"--method NAME={method_dir}"
            )
        targets = os.path.join(method_path, "tgt_image")
        for cid in subfolders(targets):
            for image in images_in(os.path.join(targets, cid)):
                match = _SAMPLE_NAME.match(image)
                if not match:
                    misplaced.append(f"{method_dir}/tgt_image/{cid}/{image}")
                elif cid not in collections:
                    unknown.add(cid)
                else:
                    index = int(match.group(1))
                    found.append(
                        {
                            "method": name,
                            "method_dir": method_dir,
                            "cid": cid,
                            "index": index,
                            "j": int(match.group(2)),
                            "path": os.path.join(targets, cid, image),
                            "prompt": _prompt(method_path, collections[cid], cid, image, index),
                        }
                    )
    where = f"DreamBench++ samples folder '{samples_dir}'"
    if misplaced:
        raise problems_error(where, "images do not follow the layout", misplaced, f"expected {SAMPLES_LAYOUT}")
    if unknown:
        raise problems_error(
            where, "collection ids are not in the data folder", sorted(unknown), "check the data folder and the ids"
        )
    if not found:
        raise MascInputError(f"{where} holds no generated images: expected {SAMPLES_LAYOUT}")
    return sorted(found, key=lambda s: (s["method"], s["cid"], s["index"], s["j"]))


def build(
    data_dir: str,
    samples_dir: str,
    masks_dir: str,
    *,
    ratings_dir: str | None = None,
    methods: dict[str, str] | None = None,
) -> BuiltManifest:
    """Manifest rows for every DreamBench++ sample, with the human ratings of each rater group when given."""
    collections = read_collections(data_dir)
    samples = scan_samples(samples_dir, collections, methods or {})
    ratings, groups, notes = read_ratings(ratings_dir) if ratings_dir else ({}, [], [])
    jobs: dict[str, MaskJob] = {}
    rows = []
    for sample in samples:
        collection = collections[sample["cid"]]
        key = f"{sample['cid']}-{sample['index']}"
        ref_mask = plan_mask(
            jobs, collection.image, os.path.join(masks_dir, "references", collection.id + ".png"), collection.name
        )
        out_mask = os.path.join(
            masks_dir, "outputs", sample["method_dir"], sample["cid"], f"{sample['index']}_{sample['j']}.png"
        )
        row = {
            "ref": [collection.image],
            "ref_mask": [ref_mask],
            "out": sample["path"],
            "out_mask": plan_mask(jobs, sample["path"], out_mask, collection.name),
            "prompt": sample["prompt"],
            "subject": collection.name,
            "method": sample["method"],
            "seed": sample["j"],
            "id": key,
        }
        given = ratings.get((sample["method"], key), {})
        for group in groups:
            for aspect in ("cp", "pf"):
                row[f"human_{aspect}.{group}"] = given.get((aspect, group))
        rows.append(row)
    if ratings_dir:
        notes += _rating_notes(ratings, rows)
    description = (
        f"{count_text(len(rows), 'row')}: {count_text(len({r['method'] for r in rows}), 'method')}, "
        f"{count_text(len({s['cid'] for s in samples}), 'subject')}"
        + (f", ratings of {count_text(len(groups), 'rater group')} ({', '.join(groups)})" if groups else "")
    )
    return BuiltManifest(rows, list(jobs.values()), notes, description)


def _rating_notes(ratings: dict, rows: list[dict]) -> list[str]:
    keys = {(r["method"], r["id"]) for r in rows}
    notes = []
    unrated = sum(1 for r in rows if not any(v is not None for k, v in r.items() if k.startswith("human_")))
    if unrated:
        notes.append(f"{count_text(unrated, 'row')} of {len(rows)} have no human rating")
    orphans = sorted(k for k in ratings if k not in keys)
    if orphans:
        first = ", ".join(f"{m} {k}" for m, k in orphans[:3])
        notes.append(f"{count_text(len(orphans), 'rated key')} have no generated image here (left out), e.g. {first}")
    return notes
