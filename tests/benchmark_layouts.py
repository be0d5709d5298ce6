"""Benchmark folders in their real layouts, built at test time from the repo's photos.

- ``dreambench_dataset``: the DreamBench dataset layout (``<subject>/00.jpg``
  + the dataset's own prompts_and_classes.txt) from tests/data/dreambench;
- ``generated_outputs``: a folder of "generated" images in the documented
  layout ``<method>/<subject>/<prompt index>_<seed>.png`` (crops and flips of
  the subject's photos, sometimes of another subject's);
- ``dreambench_plus``: DreamBench++'s data (images/captions), samples
  (tgt_image/text, one IP-Adapter dir in its other spelling) and human
  ratings (merged and raw), synthetic but in the real formats, with the
  cases that matter: a hyphenated collection id, a null rating, a key one
  group did not rate, a rated key without an image.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from PIL import Image, ImageOps

from conftest import DATA

PHOTOS = {
    "backpack": ["backpack_00"],
    "cat": ["cat_00", "cat_01"],
    "dog": ["dog_00", "dog_01", "dog_02"],
    "duck_toy": ["duck_toy_00"],
    "red_cartoon": ["red_cartoon_00"],
    "teapot": ["teapot_00"],
}


def dreambench_dataset(folder: str) -> str:
    for subject, photos in PHOTOS.items():
        os.makedirs(os.path.join(folder, subject), exist_ok=True)
        for view, photo in enumerate(photos):
            shutil.copy(os.path.join(DATA, f"{photo}.jpg"), os.path.join(folder, subject, f"{view:02d}.jpg"))
    shutil.copy(os.path.join(DATA, "prompts_and_classes.txt"), folder)
    return folder


def fake_output(photo: str, seed: int) -> Image.Image:
    """A "generated" image: a seeded random crop (70-95%) of a photo, flipped half the time."""
    rng = np.random.default_rng(seed)
    image = Image.open(os.path.join(DATA, f"{photo}.jpg")).convert("RGB")
    share = rng.uniform(0.7, 0.95)
    width, height = int(image.width * share), int(image.height * share)
    left, top = int(rng.integers(0, image.width - width + 1)), int(rng.integers(0, image.height - height + 1))
    image = image.crop((left, top, left + width, top + height))
    return ImageOps.mirror(image) if rng.random() < 0.5 else image


def generated_outputs(
    folder: str,
    *,
    methods=("dreambooth", "textual_inversion"),
    subjects=("dog", "cat", "teapot"),
    prompts=(0, 11, 24),
    seeds=(0, 1),
) -> list[str]:
    paths = []
    counter = 0
    for method in methods:
        for subject in subjects:
            os.makedirs(os.path.join(folder, method, subject), exist_ok=True)
            for prompt in prompts:
                for seed in seeds:
                    counter += 1
                    own = PHOTOS[subject]
                    photo = (
                        own[counter % len(own)] if counter % 4 else PHOTOS["duck_toy"][0]
                    )  # a quarter show another subject
                    path = os.path.join(folder, method, subject, f"{prompt}_{seed}.png")
                    fake_output(photo, counter).save(path)
                    paths.append(path)
    return paths


# ---------------------------------------------------------------- DreamBench++

COLLECTIONS = {
    # collection id: (images/ sub-folder, index, name, photo)
    "live_subject_animal_00_kitten": ("live_subject/animal", "00", "kitten", "cat_00"),
    "object_00_teapot": ("object", "00", "teapot", "teapot_00"),
    "style_10_ukiyo-e": ("style", "10", "ukiyo-e", "red_cartoon_00"),
}
METHOD_DIRS = {
    "dreambooth_sd": "dreambooth_sd_gs7_5_step100_seed42_torch_float16",
    # The spelling a third-party copy of the released samples uses; the ratings say ip_adapter_plus_vit_h_sdxl.
    "ip_adapter_plus_vit_h_sdxl": "ip_adapter_plus_vit_huge_sdxl_scale0_6_gs7_5_step100_seed42_torch_float16",
}
SAMPLED_PROMPTS = (0, 3, 8)


def caption_prompts(name: str) -> list[str]:
    return [f"A photograph of a {name} number {i} on a quiet street at dusk" for i in range(9)]


def dreambench_plus(root: str) -> dict[str, str]:
    """data/, samples/ and data_human_rating/ under ``root``; returns their paths and the expected ratings."""
    data, samples, ratings = (os.path.join(root, n) for n in ("data", "samples", "data_human_rating"))
    for cid, (category, index, name, photo) in COLLECTIONS.items():
        for kind in ("images", "captions"):
            os.makedirs(os.path.join(data, kind, category), exist_ok=True)
        shutil.copy(os.path.join(DATA, f"{photo}.jpg"), os.path.join(data, "images", category, f"{index}.jpg"))
        with open(os.path.join(data, "captions", category, f"{index}.txt"), "w", encoding="utf-8") as handle:
            handle.write("\n".join([name] + caption_prompts(name)) + "\n")
    counter = 0
    for method, method_dir in METHOD_DIRS.items():
        for cid, (_, _, name, photo) in COLLECTIONS.items():
            for kind in ("tgt_image", "text"):
                os.makedirs(os.path.join(samples, method_dir, kind, cid), exist_ok=True)
            for i in SAMPLED_PROMPTS:
                counter += 1
                fake_output(photo if counter % 3 else "dog_01", counter).save(
                    os.path.join(samples, method_dir, "tgt_image", cid, f"{i}_0.jpg"), quality=95
                )
                if i != 8:  # prompt 8 has no text file: the caption's line is used
                    with open(
                        os.path.join(samples, method_dir, "text", cid, f"{i}_0.txt"), "w", encoding="utf-8"
                    ) as handle:
                        handle.write(f"a {name} as generated, prompt {i}\n")
    rng = np.random.default_rng(0)
    expected = {}
    for group in ("group1", "group2"):
        os.makedirs(os.path.join(ratings, "merged_data", group), exist_ok=True)
        for method in METHOD_DIRS:
            for aspect in ("cp", "pf"):
                given = {}
                for cid in COLLECTIONS:
                    for i in range(9):  # every prompt is rated; only some were sampled here
                        given[f"{cid}-{i}"] = int(rng.integers(0, 5))
                if group == "group2" and method == "dreambooth_sd":
                    del given["object_00_teapot-3"]  # not rated by this group
                if aspect == "cp" and method == "ip_adapter_plus_vit_h_sdxl":
                    given["live_subject_animal_00_kitten-0"] = None
                expected.update({(group, method, aspect, k): v for k, v in given.items()})
                with open(os.path.join(ratings, "merged_data", group, f"{method}-{aspect}.json"), "w") as handle:
                    json.dump(dict(sorted(given.items())), handle, indent=4)
    return {"data": data, "samples": samples, "ratings": ratings, "expected": expected}


def raw_ratings(root: str) -> tuple[str, dict]:
    """raw_data/<group>/<prefix>-<method>.json ({key: [cp, pf]}); the second file of group1 overrides one key."""
    folder = os.path.join(root, "raw_ratings")
    first = {f"{cid}-{i}": [i % 5, (i + 1) % 5] for cid in COLLECTIONS for i in range(9)}
    second = {"object_00_teapot-0": [4, 0]}
    for group, files in (
        ("group1", {"a-dreambooth_sd.json": first, "b-dreambooth_sd.json": second}),
        ("group2", {"a-dreambooth_sd.json": first}),
    ):
        os.makedirs(os.path.join(folder, "raw_data", group), exist_ok=True)
        for name, content in files.items():
            with open(os.path.join(folder, "raw_data", group, name), "w") as handle:
                json.dump(content, handle)
    return folder, {"first": first, "second": second}
