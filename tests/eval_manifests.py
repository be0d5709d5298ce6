"""DreamBench-style evaluation manifests built from the test photos, for the eval tests.

Rows pair a reference photo with "generated" outputs (other test photos),
prompts, methods and seeds, with box masks as files (written next to the
manifest and referenced by relative paths) and synthetic human ratings:
concept ratings are high when the output shows the reference's subject,
plus noise, from two raters, the second of whom rated only some rows.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
from PIL import Image

from conftest import DATA, box_mask

PHOTOS = ["backpack_00", "cat_00", "cat_01", "dog_00", "dog_01", "dog_02", "duck_toy_00", "red_cartoon_00", "teapot_00"]
PROMPTS = [
    "a photo of a {} on the beach",
    "a {} in the snow",
    "a {} with a city in the background",
    "a {} on top of a wooden floor",
    "a red {}",
]


def subject_of(photo: str) -> str:
    return photo.rsplit("_", 1)[0].replace("_", " ")


def write_masks(folder: str) -> None:
    """masks/<photo>.png (a centred box, 25% of the image) and masks/tiny.png (1%, below the paper's filter)."""
    os.makedirs(os.path.join(folder, "masks"), exist_ok=True)
    for photo in PHOTOS:
        image = Image.open(os.path.join(DATA, f"{photo}.jpg"))
        Image.fromarray(box_mask(image.height, image.width)).save(os.path.join(folder, "masks", f"{photo}.png"))
    Image.fromarray(box_mask(100, 100, 0.45, 0.45, 0.55, 0.55)).save(os.path.join(folder, "masks", "tiny.png"))


def dreambench_rows(
    *,
    references=("dog_00", "cat_00", "teapot_00", "duck_toy_00"),
    methods=("dreambooth", "textual_inversion", "ip_adapter"),
    prompts: int = 5,
    seeds: int = 5,
    ratings: bool = True,
    seed: int = 0,
) -> list[dict]:
    """Rows as dicts of manifest columns (CSV-ready strings and numbers)."""
    rng = np.random.default_rng(seed)
    rows = []
    for reference in references:
        subject = subject_of(reference)
        for method in methods:
            for prompt in PROMPTS[:prompts]:
                for s in range(seeds):
                    # Most outputs show the subject; some show another one.
                    same = [p for p in PHOTOS if subject_of(p) == subject]
                    photo = str(rng.choice(same if rng.random() < 0.6 else PHOTOS))
                    mask = f"masks/{photo}.png"
                    roll = rng.random()
                    if roll < 0.05:
                        mask = "masks/tiny.png"  # the subject "was not rendered": dropped by the filter
                    elif roll < 0.10:
                        mask = ""  # no mask: PF undefined
                    row = {
                        "ref": os.path.join(DATA, f"{reference}.jpg"),
                        "ref_mask": f"masks/{reference}.png",
                        "out": os.path.join(DATA, f"{photo}.jpg"),
                        "out_mask": mask,
                        "prompt": prompt.format(subject),
                        "subject": subject,
                        "method": method,
                        "seed": s,
                    }
                    if ratings:
                        base = 3.0 if subject_of(photo) == subject else 1.0
                        row["human_cp.r1"] = int(np.clip(round(base + rng.normal(0, 0.8)), 0, 4))
                        row["human_cp.r2"] = (
                            int(np.clip(round(base + rng.normal(0, 0.8)), 0, 4)) if rng.random() < 0.5 else ""
                        )
                        row["human_pf.r1"] = int(rng.integers(0, 5))
                    rows.append(row)
    return rows


def small_rows() -> list[dict]:
    """The small manifest the eval, batch-scorer and Ray tests share: 36 rows, 3 references, 2 methods, ratings."""
    return dreambench_rows(references=("dog_00", "cat_00", "teapot_00"), methods=("a", "b"), prompts=3, seeds=2, seed=1)


def write_csv(path: str, rows: list[dict]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: str, rows: list[dict]) -> str:
    """The same rows as JSONL, in its own idioms: lists for ref/ref_mask, null for no mask, rating objects."""
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            record = {k: v for k, v in row.items() if not k.startswith("human_")}
            record["ref"] = row["ref"].split("|")
            record["ref_mask"] = row["ref_mask"].split("|")
            record["out_mask"] = row["out_mask"] or None
            for aspect in ("cp", "pf"):
                given = {k.split(".", 1)[1]: v for k, v in row.items() if k.startswith(f"human_{aspect}.") and v != ""}
                if given:
                    record[f"human_{aspect}"] = given
            handle.write(json.dumps(record) + "\n")
    return path
