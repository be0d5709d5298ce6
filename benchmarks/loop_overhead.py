"""Benchmark: the own overhead of MaSC Sample Until's loop, per round.

``python -m benchmarks loop-overhead`` runs the node (imported as ComfyUI
imports the pack) with the tests' stand-in sampler and VAE
(``tests/comfy_harness.py``), a random-weight SigLIP2 of the real
architecture (random weights cost what real ones cost) and a tiny CLIPSeg,
on an unreachable threshold so the whole budget is spent. It times, with
wrappers around the very calls the node makes:

- sampling and decoding (the stand-in backend's ``sample_round`` / ``decode``),
- masking (the segmenter's ``masks``),
- encoder forwards (``forward_images`` / ``forward_texts``, and ``pool``:
  the vision tower's trained attention-pooling head PF runs over each
  candidate's background),

and calls everything else the loop's own overhead: converting tensors,
preprocessing images for the encoder, CP's patch matching, the acceptance
decisions, copying kept candidates, the report and the PNG metadata.
Preprocessing is also shown on its own. The overhead is stated per round
and as a share of a round; the stand-in sampler costs almost nothing, so a
round here is decode + mask + forwards + overhead (the worst case for the
share). ``--sampling-seconds S`` adds S per candidate to the round, for the
share in a run with a real sampler (e.g. one SD1.5 step at 256x256 on this
2-core CPU took 3.5 s).

Each configuration runs once untimed (weights read, allocator warm), then
``--repeat`` times; the median run is reported.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from .bench import ROOT, ensure_checkpoint, touch_weights
from .output import add_output_options, publish
from .stages import StageClock, patched


def load_nodes(models_dir: str):
    """The pack (imported as ComfyUI does), its loaders' outputs, and the harness's stand-ins."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    os.environ["MASC_MODELS_DIR"] = models_dir
    import comfy_harness

    return comfy_harness.import_pack(ROOT), comfy_harness


def prepare_models(workdir: str, size: str, given: str | None = None) -> tuple[str, str]:
    """models/masc/<random so400m or base, or a copy of ``given``> and models/clipseg/tiny-clipseg under ``workdir``:
    (models folder, encoder name)."""
    import shutil

    from masc_core.testing import build_clipseg_checkpoint

    models = os.path.join(workdir, "models")
    if given:
        checkpoint = os.path.join(models, "masc", "given")
        if not os.path.exists(checkpoint):
            shutil.copytree(given, checkpoint)
    else:
        checkpoint = ensure_checkpoint(os.path.join(models, "masc"), size)
    clipseg = os.path.join(models, "clipseg", "tiny-clipseg")
    if not os.path.exists(os.path.join(clipseg, "model.safetensors")):
        build_clipseg_checkpoint(clipseg, seed=0)
    return models, os.path.basename(checkpoint)


def one_run(pack, harness, encoder, segmenter, *, candidates: int, batch_size: int, resolution: int) -> dict:
    """One Sample Until run over the whole budget; seconds per part."""
    import numpy as np
    import torch
    from PIL import Image

    clock = StageClock(None)  # CPU: nothing to synchronize

    def timed(owner, name: str, part: str) -> tuple:
        return owner, name, clock.wrap(part, getattr(owner, name))

    core = encoder.core
    timed_parts = [
        timed(core, name, "encoder forwards") for name in ("forward_images", "forward_texts", "pool")
    ]  # the towers, and the vision tower's attention-pooling head
    timed_parts += [
        timed(core, "prepare", "preprocessing (part of the overhead)"),
        timed(segmenter.core, "masks", "masking"),
    ]
    core.clear_cache()
    reference = np.asarray(
        Image.open(os.path.join(ROOT, "tests", "data", "dreambench", "dog_00.jpg"))
        .convert("RGB")
        .resize((resolution, resolution))
    )
    mask = np.zeros((resolution, resolution), np.float32)
    mask[resolution // 4 : 3 * resolution // 4, resolution // 4 : 3 * resolution // 4] = 1
    with (
        harness.stand_in_sampling(pack) as backend,
        patched(
            timed_parts
            + [timed(backend, "sample_round", "sampling (stand-in)"), timed(backend, "decode", "decoding (stand-in)")]
        ),
    ):
        started = time.perf_counter()
        out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"]().sample(
            model=harness.StandInModel(),
            positive=harness.text_conditioning("a photo of sks dog in the snow"),
            negative=harness.text_conditioning("blurry"),
            latent_image={"samples": torch.zeros(1, 4, resolution // 8, resolution // 8)},
            vae=harness.StandInVAE(),
            seed=0,
            steps=1,
            cfg=7.0,
            sampler_name="euler",
            scheduler="normal",
            denoise=1.0,
            encoder=encoder,
            reference_image=torch.from_numpy(reference.astype(np.float32) / 255)[None],
            reference_mask=torch.from_numpy(mask)[None],
            prompt="a photo of sks dog in the snow",
            subject="sks dog, dog",
            accept=2,
            max_candidates=candidates,
            batch_size=batch_size,
            rank_by="both",
            cp_weight=1.0,
            pf_weight=1.0,
            min_cp=1.0,
            min_pf=-1.0,
            reject_small_masks=True,
            min_foreground=0.05,
            on_shortfall="return best",
            mask_subject="dog",
            mask_threshold=0.4,
            segmenter=segmenter,
            extra_pnginfo={},
            unique_id="1",
        )
        total = time.perf_counter() - started
    assert out["result"][4] == candidates
    parts = dict(clock.seconds)
    excluded = sum(v for k, v in parts.items() if "overhead" not in k)
    return {"total": total, "parts": parts, "overhead": total - excluded, "rounds": -(-candidates // batch_size)}


def measure(args) -> list[dict]:
    workdir = args.workdir or tempfile.mkdtemp(prefix="masc-loop-bench-")
    models, name = prepare_models(workdir, args.size, args.checkpoint)
    pack, harness = load_nodes(models)
    encoder = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadEncoder"]().load(name, "cpu", "fp32", args.max_patches)[0]
    segmenter = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLoadAutoMaskModel"]().load("tiny-clipseg", "cpu", "fp32")[0]
    touch_weights(encoder.core.model)
    results = []
    for batch_size in args.batch_sizes:
        kwargs = dict(candidates=args.candidates, batch_size=batch_size, resolution=args.resolution)
        one_run(pack, harness, encoder, segmenter, **kwargs)  # warm-up
        runs = sorted(
            (one_run(pack, harness, encoder, segmenter, **kwargs) for _ in range(args.repeat)), key=lambda r: r["total"]
        )
        median = runs[len(runs) // 2]
        rounds = median["rounds"]
        per_round = median["total"] / rounds
        with_sampling = per_round + args.sampling_seconds * batch_size
        results.append(
            {
                "size": "custom" if args.checkpoint else args.size,
                "candidates": args.candidates,
                "batch_size": batch_size,
                "rounds": rounds,
                "resolution": args.resolution,
                "max_patches": args.max_patches,
                "round_seconds": per_round,
                "overhead_per_round_ms": 1000 * median["overhead"] / rounds,
                "overhead_share": median["overhead"] / median["total"],
                "overhead_share_with_sampling": (median["overhead"] / rounds) / with_sampling
                if args.sampling_seconds
                else None,
                "parts_per_round_ms": {k: 1000 * v / rounds for k, v in sorted(median["parts"].items())},
                "overhead_spread_ms": [1000 * r["overhead"] / rounds for r in runs],
            }
        )
    return results


def table(results: list[dict], sampling_seconds: float) -> str:
    lines = [
        "| size | batch_size | rounds | round (s) | overhead / round (ms) | share of round | "
        + (f"share with {sampling_seconds:g} s sampling / candidate | " if sampling_seconds else "")
        + "preprocessing / round (ms) | forwards / round (ms) | masking / round (ms) |",
        "|---" * (9 + bool(sampling_seconds)) + "|",
    ]
    for r in results:
        parts = r["parts_per_round_ms"]
        lines.append(
            f"| {r['size']} | {r['batch_size']} | {r['rounds']} | {r['round_seconds']:.3f} | "
            f"{r['overhead_per_round_ms']:.1f} | "
            f"{100 * r['overhead_share']:.2f}% | "
            + (f"{100 * r['overhead_share_with_sampling']:.3f}% | " if sampling_seconds else "")
            + f"{parts.get('preprocessing (part of the overhead)', 0):.1f} | {parts.get('encoder forwards', 0):.0f} | "
            f"{parts.get('masking', 0):.0f} |"
        )
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "loop-overhead",
        help="MaSC Sample Until's own overhead per round (all but sampling, decoding, masking, forwards)",
    )
    parser.add_argument(
        "--size", default="base", choices=("base", "so400m"), help="SigLIP2 architecture (random weights)"
    )
    parser.add_argument(
        "--candidates", type=int, default=8, help="the budget (all spent: the threshold is unreachable)"
    )
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4], help="candidates per round")
    parser.add_argument("--resolution", type=int, default=512, help="candidate images are this many pixels square")
    parser.add_argument("--max-patches", type=int, default=1024, help="NaFlex patch budget (paper: 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per configuration (median reported)")
    parser.add_argument(
        "--sampling-seconds", type=float, default=0.0, help="also state the share with this much sampling per candidate"
    )
    parser.add_argument(
        "--checkpoint", default=None, help="use this NaFlex checkpoint folder instead of building a random one"
    )
    parser.add_argument("--workdir", default=None, help="where checkpoints are built and kept (default: a temp folder)")
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    results = measure(args)
    publish(args, results, table(results, args.sampling_seconds))
    return 0
