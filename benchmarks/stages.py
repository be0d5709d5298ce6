"""Benchmark: where the time of one scoring node call goes, stage by stage.

``python -m benchmarks stages`` imports the node pack the way ComfyUI does
(``tests/comfy_harness.import_pack``), loads the encoder through the
``MaSCLoadEncoder`` node and runs ``MaSCScore`` on N outputs (default 8 at
1024x1024: the DreamBench photos, upscaled) against one reference, with
``heatmaps`` on and off. Each stage is timed by wrapping the function the
node calls for it, so the node runs its own code path, unchanged:

- ComfyUI tensors in: IMAGE/MASK tensors to uint8 arrays and masks;
- preprocessing: resize, normalize, patchify (``MascEncoder.prepare``);
- vision forwards, text forward: the towers (``forward_images``, ``forward_texts``);
- metric: the rest of ``score_images`` (masks on the grid, Eq. 1 and Eq. 2, caches);
- heatmap rendering: ``render_heatmaps`` (every map, captions included);
- IMAGE outputs: the heatmaps as ComfyUI IMAGE batches (float 0..1);
- previews: the on-node thumbnails and their PNG files (written for real,
  in a temporary folder: ``$MASC_PREVIEW_DIR``, as ComfyUI writes into its temp folder);
- other: the node's remaining time (reports, moving the model, ...).

Before each timed call the encoder's feature cache is cleared, so every call
runs its forwards. Each cell is the median over ``--repeats`` calls (after one
untimed warm-up call of each kind). Models: a tiny random-weight SigLIP2
(forwards cost almost nothing, so the table shows everything around them)
and, with ``--models tiny base``, the real base architecture with random
weights (random weights cost what real ones cost).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np

from .bench import ROOT, ensure_checkpoint, machine
from .output import add_output_options, publish

PHOTOS = ["dog_00", "dog_01", "dog_02", "cat_00", "cat_01", "teapot_00", "backpack_00", "duck_toy_00", "red_cartoon_00"]
PROMPT = "a photo of a dog on the beach"
SUBJECT = "dog"
STAGES = [
    ("tensors_in", "ComfyUI tensors in (IMAGE, MASK to arrays)"),
    ("preprocessing", "preprocessing (resize, normalize, patches)"),
    ("vision", "vision forwards"),
    ("text", "text forward"),
    ("metric", "metric (mask grids, CP, PF, caches)"),
    ("heatmaps", "heatmap rendering (every map, captions)"),
    ("image_outputs", "IMAGE outputs (to ComfyUI tensors)"),
    ("previews", "previews (thumbnails, PNG writing)"),
    ("other", "other (reports, model placement, ...)"),
]
MODELS = ("tiny", "base")


# ---------------------------------------------------------------- inputs


def photo_batch(count: int, size: int):
    """(reference IMAGE, reference MASK, outputs IMAGE [count], output MASKs) as ComfyUI tensors at ``size`` px."""
    import torch
    from PIL import Image

    def image(index: int) -> np.ndarray:
        name = PHOTOS[index % len(PHOTOS)]
        picture = Image.open(os.path.join(ROOT, "tests", "data", "dreambench", f"{name}.jpg")).convert("RGB")
        pixels = np.asarray(picture.resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32) / 255.0
        return np.flip(pixels, axis=1) if index >= len(PHOTOS) else pixels  # distinct pixels past the ninth photo

    def box(index: int) -> np.ndarray:
        mask = np.zeros((size, size), np.float32)
        shift = (index * size) // 64
        mask[size // 4 + shift // 2 : 3 * size // 4, size // 4 : 3 * size // 4 - shift // 3] = 1.0
        return mask

    reference = torch.from_numpy(image(0).copy())[None]
    outputs = torch.from_numpy(np.stack([image(i) for i in range(1, count + 1)]))
    masks = torch.from_numpy(np.stack([box(i) for i in range(1, count + 1)]))
    return reference, torch.from_numpy(box(0))[None], outputs, masks


def listed_under_models(workdir: str, folder: str) -> str:
    """``folder`` linked as ``<workdir>/models/masc/<its name>`` ($MASC_MODELS_DIR set there); the name the loader
    lists."""
    root = os.path.join(workdir, "models")
    os.environ["MASC_MODELS_DIR"] = root
    name = os.path.basename(os.path.normpath(folder))
    link = os.path.join(root, "masc", name)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.realpath(link) != os.path.realpath(folder):
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(folder, link)
    return name


def model_folder(workdir: str, model: str) -> str:
    """A random-weight checkpoint of ``model`` under ``workdir`` (built once)."""
    from masc_core.testing import build_checkpoint

    if model == "tiny":
        path = os.path.join(workdir, "random-siglip2-tiny-naflex")
        if not os.path.exists(os.path.join(path, "model.safetensors")):
            build_checkpoint(path, naflex=True, size="tiny", seed=0)
        return path
    return ensure_checkpoint(workdir, model)


# ---------------------------------------------------------------- timing


class StageClock:
    """Seconds spent per stage during one node call, from wrappers around the functions the node calls."""

    def __init__(self, device):
        self.device = device
        self.seconds: dict[str, float] = {}

    def _sync(self) -> None:
        import torch

        if getattr(self.device, "type", "") == "cuda":
            torch.cuda.synchronize()

    def wrap(self, stage: str, function):
        def timed(*args, **kwargs):
            self._sync()
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._sync()
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started

        return timed


_MISSING = object()


@contextmanager
def patched(pairs):
    """Set attributes (object, name, value) for the duration; restore them after."""
    saved = [(owner, name, owner.__dict__.get(name, _MISSING)) for owner, name, _ in pairs]
    for owner, name, value in pairs:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def timed_call(pack, encoder, inputs, heatmaps: bool) -> dict:
    """One MaSCScore call with every stage timed: milliseconds per stage, 'other', 'total'; and 'previews_written'
    (files)."""
    scoring_nodes, host = pack.nodes.scoring_nodes, pack.nodes.host
    core = encoder.core
    clock = StageClock(encoder.compute_device)
    pairs = [
        (scoring_nodes, "to_rgb_uint8_list", clock.wrap("tensors_in", scoring_nodes.to_rgb_uint8_list)),
        (scoring_nodes, "comfy_masks", clock.wrap("tensors_in", scoring_nodes.comfy_masks)),
        (scoring_nodes, "score_images", clock.wrap("score_images", scoring_nodes.score_images)),
        (core, "prepare", clock.wrap("preprocessing", core.prepare)),
        (core, "forward_images", clock.wrap("vision", core.forward_images)),
        (core, "forward_texts", clock.wrap("text", core.forward_texts)),
        (scoring_nodes, "render_heatmaps", clock.wrap("heatmaps", scoring_nodes.render_heatmaps)),
        (scoring_nodes, "image_output", clock.wrap("image_outputs", scoring_nodes.image_output)),
        (scoring_nodes, "with_caption", clock.wrap("previews", scoring_nodes.with_caption)),
        (host, "save_previews", clock.wrap("previews", host.save_previews)),
    ]
    reference, reference_mask, outputs, masks = inputs
    core.clear_cache()
    with patched(pairs):
        started = time.perf_counter()
        result = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScore"]().score(
            encoder, reference, reference_mask, outputs, PROMPT, SUBJECT, heatmaps=heatmaps, mask=masks
        )
        clock._sync()
        total = time.perf_counter() - started
    assert len(result["result"][2].scores) == outputs.shape[0]
    seconds = clock.seconds
    seconds["metric"] = seconds.pop("score_images") - sum(
        seconds.get(k, 0.0) for k in ("preprocessing", "vision", "text")
    )
    seconds["other"] = total - sum(seconds.values())
    seconds["total"] = total
    milliseconds = {stage: 1000.0 * value for stage, value in seconds.items()}
    milliseconds["previews_written"] = len(result["ui"]["images"])
    return milliseconds


def measure(pack, encoder, inputs, repeats: int) -> dict:
    """Median and minimum milliseconds per stage, heatmaps on and off (calls interleaved)."""
    timed_call(pack, encoder, inputs, True)  # warm-up: lazy imports, allocator, kernels
    timed_call(pack, encoder, inputs, False)
    runs = {"on": [], "off": []}
    for _ in range(repeats):
        for kind in ("on", "off"):
            runs[kind].append(timed_call(pack, encoder, inputs, kind == "on"))
    summary = {"previews_written": runs["on"][-1]["previews_written"]}
    for kind, calls in runs.items():
        keys = [stage for stage, _ in STAGES] + ["total"]
        summary[kind] = {
            "median_ms": {k: statistics.median(call.get(k, 0.0) for call in calls) for k in keys},
            "min_ms": {k: min(call.get(k, 0.0) for call in calls) for k in keys},
        }
    return summary


# ---------------------------------------------------------------- report


def markdown(report: dict, statistic: str = "median") -> str:
    """The stage tables; ``statistic`` is "median" (default) or "min" over the timed calls."""
    info = report["machine"]
    other = "min" if statistic == "median" else "median"
    lines = [
        f"Machine: {info['cpu']}, {info['logical_cpus']} logical CPUs, torch {info['torch']} ({info['torch_threads']} "
        "threads), "
        f"device {report['device']}" + (f" ({info['gpu']})" if info.get("gpu") else "") + ". "
        f"One MaSC Score call: {report['n']} outputs at {report['image_size']}x{report['image_size']} against one "
        "reference, "
        f"NaFlex {report['max_patches']} patches, fp32; {statistic} of {report['repeats']} calls ({other} in the "
        "JSON).",
    ]
    for row in report["models"]:
        on, off = row["on"][f"{statistic}_ms"], row["off"][f"{statistic}_ms"]
        lines += [
            "",
            f"{row['model']} ({row['checkpoint']}):",
            "",
            "| stage | heatmaps on (ms) | heatmaps off (ms) | on - off (ms) |",
            "| --- | --- | --- | --- |",
        ]
        for stage, label in STAGES + [("total", "**node total**")]:
            lines.append(f"| {label} | {on[stage]:.1f} | {off[stage]:.1f} | {on[stage] - off[stage]:+.1f} |")
        maps = row["maps"]
        own = on["heatmaps"] + on["image_outputs"]
        extra = on["total"] - off["total"]
        lines.append("")
        lines.append(
            f"Heatmaps, {maps} maps: rendering {on['heatmaps']:.0f} ms ({on['heatmaps'] / maps:.1f} ms a map); with "
            "their IMAGE outputs "
            f"{own:.0f} ms ({own / maps:.1f} ms a map); node total on - off {extra:.0f} ms ({extra / maps:.1f} ms a "
            "map, previews "
            "included, and so is the run-to-run noise of every other stage)."
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from comfy_harness import import_pack

    workdir = args.workdir or os.path.join(tempfile.gettempdir(), "masc-bench-stages")
    previews = tempfile.mkdtemp(prefix="masc-previews-")
    report = {
        "device": args.device,
        "n": args.n,
        "image_size": args.image_size,
        "max_patches": args.max_patches,
        "repeats": args.repeats,
        "models": [],
    }
    try:
        inputs = photo_batch(args.n, args.image_size)
        for model in args.models:
            if model == "custom" and not args.checkpoint:
                raise SystemExit("--models custom needs --checkpoint FOLDER")
            folder = os.path.abspath(args.checkpoint) if model == "custom" else model_folder(workdir, model)
            os.environ["MASC_PREVIEW_DIR"] = previews
            pack = import_pack(ROOT)
            # The loader opens only folders under its model roots, as in ComfyUI: link the checkpoint in there.
            name = listed_under_models(workdir, folder)
            encoder = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"]().load(
                model=name, device=args.device, precision="fp32", max_patches=args.max_patches
            )[0]
            row = {"model": model, "checkpoint": os.path.basename(folder), "maps": 3 * args.n, "outputs": args.n}
            row.update(measure(pack, encoder, inputs, args.repeats))
            report["models"].append(row)
            sys.stderr.write(
                f"{model}: on {row['on']['median_ms']['total']:.0f} ms, off {row['off']['median_ms']['total']:.0f} ms\n"
            )
        report["machine"] = machine()
        report["device"] = str(encoder.compute_device)
    finally:
        shutil.rmtree(previews, ignore_errors=True)
    return report


def add_parser(commands) -> None:
    parser = commands.add_parser("stages", help="per-stage cost of one MaSC Score node call (heatmaps on and off)")
    parser.add_argument(
        "--models",
        nargs="+",
        default=["tiny"],
        choices=MODELS + ("custom",),
        help="tiny random SigLIP2 and/or the real base architecture (random weights); custom = --checkpoint",
    )
    parser.add_argument("--checkpoint", default=None, help="with --models custom: a NaFlex checkpoint folder")
    parser.add_argument("--n", type=int, default=8, help="outputs scored in the call")
    parser.add_argument("--image-size", type=int, default=1024, help="side of the (square) images, px")
    parser.add_argument("--max-patches", type=int, default=1024, help="NaFlex patch budget (paper: 1024)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each kind")
    parser.add_argument(
        "--show",
        choices=("median", "min"),
        default="median",
        help="which statistic over the calls the table shows (min: closest to an idle machine)",
    )
    parser.add_argument("--workdir", default=None, help="where checkpoints are built and kept (default: a temp folder)")
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    report = run(args)
    publish(args, report, markdown(report, args.show))
    return 0
