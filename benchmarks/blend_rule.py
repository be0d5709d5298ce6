"""Study: which blend-warning rule tells a subject drawn twice from two different subjects.

``python -m benchmarks blend-rule`` builds composites of the repository's photos (``tests/data/dreambench``).
Each one is two photos side by side, the left half labelled subject A and the right half subject B:

- *different*: A's photo left, B's photo right;
- *duplicate*: A's photo left, another photo of A (or the same one) right, still labelled B.

It scores them with ``score_subjects`` (masks: a box in each half) and counts how often each rule fires:

- in-region: R[k][l] >= R[l][l] (another subject matches region l as well as its owner does);
- own-region (``masc_core.metric.subjects.blend_warnings``): R[k][l] >= R[k][k] (another subject appears in region
  l as strongly as in its own region).

With random-weight checkpoints (the tests' two tiny ones by default), the counts show whether a rule can
separate the cases at all, not how well it does with real SigLIP2 weights.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from PIL import Image

from .bench import ROOT
from .output import add_output_options, publish

PHOTOS = os.path.join(ROOT, "tests", "data", "dreambench")
PAIRS = [("dog", "cat"), ("dog", "teapot"), ("cat", "teapot"), ("dog", "backpack"), ("cat", "duck_toy")]
SIDE = 224


def _photo(name: str) -> np.ndarray:
    with Image.open(os.path.join(PHOTOS, f"{name}.jpg")) as image:
        return np.asarray(image.convert("RGB").resize((SIDE, SIDE), Image.BICUBIC))


def _box(width: int, left: int) -> np.ndarray:
    mask = np.zeros((SIDE, width), dtype=np.uint8)
    top, bottom = int(0.1 * SIDE), int(0.9 * SIDE)
    mask[top:bottom, left + int(0.1 * SIDE) : left + int(0.9 * SIDE)] = 255
    return mask


def _second_view(name: str) -> str:
    return f"{name}_01" if os.path.isfile(os.path.join(PHOTOS, f"{name}_01.jpg")) else f"{name}_00"


def in_region_rule(matrix) -> int:
    """How many (region, other subject) pairs R[k][l] >= R[l][l] flags."""
    size = len(matrix)
    return sum(1 for l in range(size) for k in range(size) if k != l and matrix[k][l] >= matrix[l][l])


def study(encoder) -> list[dict]:
    from masc_core import Subject, score_subjects

    box = _box(SIDE, 0)
    masks = [[_box(2 * SIDE, 0)], [_box(2 * SIDE, SIDE)]]
    rows = []
    for a, b in PAIRS:
        subjects = [Subject(a, _photo(f"{a}_00"), box), Subject(b, _photo(f"{b}_00"), box)]
        twin = "dog_02" if a == "dog" else _second_view(a)
        for case, right in (("different", _second_view(b)), ("duplicate", twin)):
            picture = np.concatenate([_photo(_second_view(a)), _photo(right)], axis=1)
            item = score_subjects(encoder, [picture], subjects=subjects, output_masks=masks).scores[0]
            rows.append(
                {
                    "pair": f"{a}/{b}",
                    "case": case,
                    "region_matrix": item.region_matrix,
                    "in_region": in_region_rule(item.region_matrix) > 0,
                    "own_region": bool(item.blends),
                }
            )
    return rows


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "blend-rule", help="which blend-warning rule separates a duplicated subject from two different ones"
    )
    parser.add_argument(
        "--checkpoint", nargs="*", default=None, help="checkpoint folders (default: the tests' two random-weight ones)"
    )
    parser.add_argument(
        "--workdir", default=None, help="where the default checkpoints are built (default: a temp folder)"
    )
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    from masc_core import MascEncoder

    folders = args.checkpoint
    if not folders:
        from masc_core.testing import build_checkpoint, train_tokenizer

        workdir = args.workdir or tempfile.mkdtemp(prefix="masc-blend-")
        tokenizer = train_tokenizer()
        folders = [
            build_checkpoint(os.path.join(workdir, "tiny-naflex"), naflex=True, tokenizer=tokenizer, seed=1),
            build_checkpoint(os.path.join(workdir, "tiny-fixed-224"), naflex=False, tokenizer=tokenizer, seed=2),
        ]
    results = {}
    lines = ["checkpoint            case        in-region fired  own-region fired"]
    for folder in folders:
        rows = study(MascEncoder.load(folder, device="cpu"))
        results[os.path.basename(folder)] = rows
        for case in ("different", "duplicate"):
            picked = [r for r in rows if r["case"] == case]
            lines.append(
                f"{os.path.basename(folder)[:20]:<20}  {case:<10}  {sum(r['in_region'] for r in picked):>4} of "
                f"{len(picked):<8}"
                f"  {sum(r['own_region'] for r in picked):>4} of {len(picked)}"
            )
    publish(args, results, "\n".join(lines))
    return 0
