"""``python -m masc_core sweep``: which variant (LoRA file, training step, strength) keeps the subject, from folders.

Each ``--cell NAME=DIR`` is one variant's outputs, sampled at the same prompts and seeds as every other cell (a
paired design), listed weakest first (the order breaks ties: of cells the data cannot tell apart, the first is
recommended). ``DIR`` holds ``p<N>_s<SEED>.png`` (prompt N of ``--prompt``/``--prompts``, from 1; ASCII digits
only; ComfyUI's ``_00001_`` counter allowed) and its mask ``<that stem>_mask.png`` (the name ``mask`` writes); other
files are ignored. The decision is
``masc_core.selection.sweep``'s (docs/sweep.md); this module reads the folders, scores each cell with one encoder
and writes the table, the JSON, the chart and the grid.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from ..errors import MascInputError
from ..safe_text import shown
from ..selection.sweep_figures import MAX_GRID_COLUMNS, check_grid
from .options import add_model_options, bootstrap_seed, number_in, positive_int, whole_number_in

MAX_CELLS = 64
MAX_PROMPTS = 1000
MAX_SWEEP_IMAGES = 20_000
"""Images a sweep reads at most (every cell's), counted from the file names before any is opened."""
_IMAGE_NAME = re.compile(r"p([0-9]{1,4})_s([0-9]{1,20})(_[0-9]{5}_)?\.png", re.ASCII)
"""An output's name: ``p<N>_s<SEED>.png``, or with the counter ComfyUI's Save Image adds (``p1_s7_00001_.png``)."""
_CELL_NAME = re.compile(r"[^\x00-\x1f=]{1,80}")


def _cell(text: str) -> tuple[str, str]:
    name, equals, folder = text.partition("=")
    name = name.strip()
    if not equals or not folder:
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=FOLDER (e.g. epoch08=out/epoch08)")
    if not _CELL_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"cell name '{shown(name)}' must be 1 to 80 printable characters")
    return name, folder


def register(commands) -> None:
    """Register the ``sweep`` sub-command on the CLI's sub-parsers."""
    from ..selection.sweep import DEFAULT_BOOTSTRAP, DEFAULT_CONFIDENCE, DEFAULT_PF_MARGIN

    parser = commands.add_parser(
        "sweep", help="which LoRA file, step or strength keeps the subject: cells scored at paired prompts and seeds"
    )
    add_model_options(parser)
    parser.add_argument("--ref", nargs="+", required=True, metavar="REF", help="the subject's reference image(s)")
    parser.add_argument(
        "--ref-mask", nargs="+", required=True, metavar="MASK", help="one foreground mask per reference"
    )
    parser.add_argument("--subject", required=True, help="subject name(s) to strip from the prompts; comma-separated")
    prompts = parser.add_mutually_exclusive_group(required=True)
    prompts.add_argument(
        "--prompt", action="append", metavar="TEXT", help="a prompt; repeat for several (prompt 1, 2, ... in order)"
    )
    prompts.add_argument("--prompts", metavar="FILE", help="a text file of prompts, one per line (line 1 = p1)")
    parser.add_argument(
        "--cell",
        action="append",
        type=_cell,
        required=True,
        metavar="NAME=DIR",
        help="a variant and the folder of its p<N>_s<SEED>.png outputs and _mask.png masks; repeat, weakest first",
    )
    parser.add_argument(
        "--baseline", default="baseline", help="the cell without the LoRA, PF's reference (default: 'baseline')"
    )
    parser.add_argument(
        "--pf-margin",
        type=number_in(0.0, 2.0, "(PF is a cosine)"),
        default=DEFAULT_PF_MARGIN,
        help=f"mean PF a recommended cell may lose against the baseline (default {DEFAULT_PF_MARGIN})",
    )
    parser.add_argument(
        "--confidence",
        type=number_in(0.5, 1.0, "(e.g. 0.95)", below_high=True),
        default=DEFAULT_CONFIDENCE,
        help=f"confidence of the paired intervals that call a tie (default {DEFAULT_CONFIDENCE})",
    )
    parser.add_argument(
        "--bootstrap",
        type=whole_number_in(100, 100_000, "bootstrap resamples"),
        default=DEFAULT_BOOTSTRAP,
        help=f"bootstrap resamples, 100 to 100,000 (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument("--seed", type=bootstrap_seed, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument("--chart", metavar="PNG", help="also write the CP-PF chart")
    parser.add_argument("--grid", metavar="PNG", help="also write the grid: a row per cell, a column per pair")
    parser.add_argument(
        "--grid-tile", type=positive_int, default=192, help="grid tile width in pixels, 64 to 512 (default 192)"
    )
    parser.set_defaults(run=run)


def _read_prompts(args: argparse.Namespace) -> list[str]:
    from ..io.files import check_regular_file

    if args.prompt is not None:
        prompts = list(args.prompt)
    else:
        path = args.prompts
        if not os.path.isfile(path):
            raise MascInputError(f"--prompts '{path}' is not a file: give a text file of prompts, one per line")
        check_regular_file(path, "--prompts")
        if os.path.getsize(path) > 1024 * 1024:
            raise MascInputError(f"--prompts '{path}' is over 1 MiB: give one prompt per line, at most {MAX_PROMPTS}")
        try:
            with open(path, encoding="utf-8") as handle:
                prompts = [line.strip() for line in handle.read().splitlines()]
        except UnicodeDecodeError:
            raise MascInputError(f"--prompts '{path}' is not UTF-8 text: save it as UTF-8") from None
        while prompts and not prompts[-1]:
            prompts.pop()
    if not prompts or len(prompts) > MAX_PROMPTS:
        raise MascInputError(f"{len(prompts)} prompts given: give 1 to {MAX_PROMPTS}")
    repeated = next((k for k, prompt in enumerate(prompts) if prompt in prompts[:k]), None)
    if repeated is not None:
        raise MascInputError(
            f"prompt {repeated + 1} repeats prompt {prompts.index(prompts[repeated]) + 1}: give each prompt once "
            "(the files are numbered by prompt)"
        )
    return prompts


def _cell_files(name: str, folder: str, prompts: list[str]) -> dict:
    """(prompt, seed) -> (image path, mask path) of one cell's folder, or one line naming what is wrong."""
    from ..io.files import check_regular_file

    if not os.path.isdir(folder):
        raise MascInputError(f"--cell {name}: '{folder}' is not a folder: give the folder of the cell's outputs")
    files = {}
    for entry in sorted(os.listdir(folder)):
        match = _IMAGE_NAME.fullmatch(entry)
        if not match:
            continue
        number, seed = int(match.group(1)), int(match.group(2))
        if not 1 <= number <= len(prompts):
            raise MascInputError(
                f"--cell {name}: '{entry}' is for prompt {number}, but {len(prompts)} prompts are given: give every "
                "prompt the cells were sampled with"
            )
        if seed > 2**64 - 1:
            raise MascInputError(f"--cell {name}: '{entry}' has a seed over 2^64-1: name files by the seed used")
        image, mask = os.path.join(folder, entry), os.path.join(folder, entry[:-4] + "_mask.png")
        if not os.path.exists(mask):
            raise MascInputError(
                f"--cell {name}: '{entry}' has no mask '{entry[:-4]}_mask.png' beside it: PF needs the outputs' masks "
                "(python -m masc_core mask --out-dir the same folder writes them)"
            )
        for path in (image, mask):
            check_regular_file(path, f"--cell {name}")
        key = (prompts[number - 1], seed)
        if key in files:
            raise MascInputError(
                f"--cell {name}: '{os.path.basename(files[key][0])}' and '{entry}' are both prompt {number} seed "
                f"{seed}: keep one output per prompt and seed"
            )
        files[key] = (image, mask)
    if not files:
        raise MascInputError(
            f"--cell {name}: '{folder}' holds no p<N>_s<SEED>.png outputs: name each output by its prompt number and "
            "seed (p1_s7.png)"
        )
    return files


def _read_cells(args: argparse.Namespace, prompts: list[str]) -> tuple[list, dict]:
    """The cells (weakest first, one baseline) and every cell's files, the pairs checked equal before any is read."""
    from ..selection.sweep import SweepCell

    names = [name for name, _ in args.cell]
    if len(names) > MAX_CELLS:
        raise MascInputError(f"{len(names)} cells given: give at most {MAX_CELLS}")
    if len(set(names)) != len(names):
        raise MascInputError(f"cell '{next(n for n in names if names.count(n) > 1)}' is given twice: name each once")
    if args.baseline not in names:
        raise MascInputError(
            f"--baseline '{args.baseline}' is not one of the cells ({', '.join(names)}): add --cell "
            f"{args.baseline}=DIR with the outputs sampled without the LoRA, or name the baseline with --baseline"
        )
    if len(names) < 2:
        raise MascInputError("a sweep needs the baseline and at least one other cell: add --cell NAME=DIR")
    files = {name: _cell_files(name, folder, prompts) for name, folder in args.cell}
    reference = files[args.baseline]
    for name in names:
        missing = sorted(((prompts.index(p) + 1, s) for p, s in set(reference) - set(files[name])))
        extra = sorted(((prompts.index(p) + 1, s) for p, s in set(files[name]) - set(reference)))
        if missing or extra:
            number, seed = (missing or extra)[0]
            which = "lacks" if missing else "has"
            whereas = "has" if missing else "lacks"
            raise MascInputError(
                f"--cell {name} {which} prompt {number} seed {seed}, which the baseline {whereas}: sample every cell "
                "at the same prompts and seeds (a paired sweep)"
            )
    total = sum(len(f) for f in files.values())
    if total > MAX_SWEEP_IMAGES:
        raise MascInputError(f"the cells hold {total:,} outputs, over the {MAX_SWEEP_IMAGES:,} a sweep reads")
    cells = [SweepCell(name, baseline=name == args.baseline, weakness=(k,)) for k, name in enumerate(names)]
    return cells, files


def _score_cells(args, cells, files, refs, ref_masks, keep: set) -> tuple[dict, dict, dict]:
    """Every cell scored with one encoder: (cell -> pair -> (cp, pf), cell -> pair -> thumbnail for the grid, model)."""
    from ..io.images import load_image_file, load_mask_file
    from ..scoring.batch import score_images
    from ..selection.contact_sheet import thumbnail
    from .options import load_encoder

    encoder = load_encoder(args)
    scores, pictures = {}, {}
    for cell in cells:
        pairs = sorted(files[cell.name])
        scores[cell.name], pictures[cell.name] = {}, {}
        for start in range(0, len(pairs), 64):  # a chunk at a time: a cell's images are never all held at once
            chunk = pairs[start : start + 64]
            outs = [load_image_file(files[cell.name][p][0], f"--cell {cell.name}") for p in chunk]
            masks = [load_mask_file(files[cell.name][p][1], f"--cell {cell.name}") for p in chunk]
            batch = score_images(
                encoder,
                outs,
                reference=refs,
                reference_mask=ref_masks,
                mask=masks,
                prompt=[p[0] for p in chunk],
                subject=args.subject,
                cache_outputs=False,
            )
            for pair, item, out in zip(chunk, batch.scores, outs):
                scores[cell.name][pair] = (item.cp, item.pf)
                if pair in keep:
                    pictures[cell.name][pair] = thumbnail(out, args.grid_tile)
    return scores, pictures, encoder.describe()


def _check_png(path: str | None, flag: str) -> None:
    if path is None:
        return
    if not path.lower().endswith(".png"):
        raise MascInputError(f"{flag} '{path}': give the picture a .png name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise MascInputError(f"{flag} '{path}': the folder '{folder}' does not exist")


def _write_png(path: str, pixels) -> None:
    from PIL import Image

    from ..io.files import replace_atomically

    replace_atomically(path, lambda temporary: Image.fromarray(pixels).save(temporary, format="PNG"))


def run(args: argparse.Namespace) -> int:
    """Read, score, decide and report; exit 0."""
    from ..selection.sweep import SweepRule, sweep_verdict
    from ..selection.sweep_figures import verdict_table
    from .options import read_references

    rule = SweepRule(pf_margin=args.pf_margin, confidence=args.confidence, bootstrap=args.bootstrap, seed=args.seed)
    _check_png(args.chart, "--chart")
    _check_png(args.grid, "--grid")
    prompts = _read_prompts(args)
    cells, files = _read_cells(args, prompts)
    number = {prompt: k for k, prompt in enumerate(prompts)}
    pairs = sorted(files[args.baseline], key=lambda pair: (number[pair[0]], pair[1]))  # p1 s1, p1 s2, ..., p2 s1
    if args.grid is not None:
        check_grid(len(cells), len(pairs), args.grid_tile)  # before any image is read
    refs, ref_masks = read_references(args)
    shown_pairs = set(pairs[:MAX_GRID_COLUMNS]) if args.grid is not None else set()
    scores, pictures, model = _score_cells(args, cells, files, refs, ref_masks, shown_pairs)
    verdict = sweep_verdict(cells, scores, rule)
    if args.chart is not None:
        from ..selection.sweep_figures import sweep_chart

        _write_png(args.chart, sweep_chart(verdict, rule.pf_margin))
    if args.grid is not None:
        from ..selection.sweep_figures import sweep_grid

        _write_png(args.grid, sweep_grid(verdict, pairs, pictures, scores, tile=args.grid_tile))
    if args.json:
        document = {
            "model": model,
            "rule": {
                "pf_margin": rule.pf_margin,
                "confidence": rule.confidence,
                "bootstrap": rule.bootstrap,
                "seed": rule.seed,
            },
            "prompts": prompts,
            "pairs": [{"prompt": number[p] + 1, "seed": s} for p, s in pairs],
            **verdict.to_dict(),
            "scores": {
                name: [
                    {"prompt": number[pair[0]] + 1, "seed": pair[1], "cp": given[pair][0], "pf": given[pair][1]}
                    for pair in pairs
                    if pair in given
                ]
                for name, given in scores.items()
            },
        }
        json.dump(document, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(verdict_table(verdict))
    return 0
