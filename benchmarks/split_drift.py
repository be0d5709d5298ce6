"""Benchmark: what splitting a sampler's run at a step does to its image, in a real ComfyUI (why pruning replays).

``python -m benchmarks split-drift --url http://127.0.0.1:8188 --ckpt MODEL.safetensors`` builds, per sampler and
seed, one prompt from workflow 4's upstream nodes (checkpoint, prompt, reference, segmenter, encoder) with core
nodes only on the sampling side:

- a plain KSampler at the seed (the image the seed stands for);
- the same run split at ``--split-at`` of the steps the way a graph does it by hand (and the way resuming a
  run does it): KSamplerAdvanced 0..s with leftover noise, then KSamplerAdvanced s..end without new noise.

Both are decoded and scored with MaSC Concept Preservation against workflow 4's reference, and their pixels are
compared (8-bit, from the previews' PNGs). Reported per sampler: the largest and the mean pixel difference, the
share of pixels that differ, and the change in CP. MaSC Sample Until's pruning resumes only the samplers whose
split changes nothing (``masc_core.selection.samplers.RESUMABLE_SAMPLERS``) and replays the others from step 0; the host
suite asserts its survivors equal the plain KSampler (``tests/host/test_pruning.py``).
"""

from __future__ import annotations

import argparse
import io
import urllib.parse
import urllib.request

from masc_core.selection.pruning import judged_step

from .comfy_server import add_server_options, run_prompt, workflow
from .output import set_command

SAMPLERS = ("euler", "dpmpp_2m", "uni_pc", "euler_ancestral", "dpmpp_2m_sde")
UPSTREAM = (
    "CheckpointLoaderSimple",
    "PrimitiveStringMultiline",
    "CLIPTextEncode",
    "EmptyLatentImage",
    "LoadImage",
    "MaSCLoadAutoMaskModel",
    "MaSCAutoMask",
    "MaSCLoadEncoder",
)


def graph(args, sampler: str, seed: int) -> tuple[dict, dict]:
    """The prompt, and the ids of what to read back: the previews and the two CP values."""
    full = workflow(args)
    prompt = {i: n for i, n in full.items() if n["class_type"] in UPSTREAM}
    sample_until = next(n for n in full.values() if n["class_type"] == "MaSCSampleUntil")["inputs"]
    links = {
        k: sample_until[k]
        for k in (
            "model",
            "positive",
            "negative",
            "latent_image",
            "vae",
            "encoder",
            "reference_image",
            "reference_mask",
        )
    }
    shared = dict(
        model=links["model"],
        positive=links["positive"],
        negative=links["negative"],
        latent_image=links["latent_image"],
        steps=args.steps,
        cfg=args.cfg,
        sampler_name=sampler,
        scheduler=args.scheduler,
    )
    s = judged_step(args.split_at, args.steps)

    def add(class_type, **inputs):
        key = str(100 + len(prompt))
        prompt[key] = {"class_type": class_type, "inputs": inputs}
        return key

    plain = add("KSampler", seed=seed, denoise=1.0, **shared)
    first = add(
        "KSamplerAdvanced",
        add_noise="enable",
        noise_seed=seed,
        start_at_step=0,
        end_at_step=s,
        return_with_leftover_noise="enable",
        **shared,
    )
    second = add(
        "KSamplerAdvanced",
        add_noise="disable",
        noise_seed=seed,
        start_at_step=s,
        end_at_step=10000,
        return_with_leftover_noise="disable",
        **{**shared, "latent_image": [first, 0]},
    )
    ids = {}
    for label, latent in (("plain", plain), ("split", second)):
        decoded = add("VAEDecode", samples=[latent, 0], vae=links["vae"])
        ids[label + " image"] = add("PreviewImage", images=[decoded, 0])
        cp = add(
            "MaSCConceptPreservation",
            encoder=links["encoder"],
            reference_image=links["reference_image"],
            reference_mask=links["reference_mask"],
            image=[decoded, 0],
            heatmaps=False,
        )
        ids[label + " cp"] = add("PreviewAny", source=[cp, 0])
    return prompt, ids


def _pixels(url: str, picture: dict):
    import numpy as np
    from PIL import Image

    query = urllib.parse.urlencode({k: picture[k] for k in ("filename", "subfolder", "type")})
    with urllib.request.urlopen(f"{url}/view?{query}", timeout=60) as response:
        return np.asarray(Image.open(io.BytesIO(response.read())).convert("RGB")).astype(int)


def compare(args, sampler: str, seed: int) -> dict:
    """One seed: the split's pixel and CP differences from the plain run."""
    import numpy as np

    prompt, ids = graph(args, sampler, seed)
    entry = run_prompt(args.url, prompt)
    outputs = entry["outputs"]
    plain, split = (_pixels(args.url, outputs[ids[f"{label} image"]]["images"][0]) for label in ("plain", "split"))
    cp = {label: float("".join(outputs[ids[f"{label} cp"]]["text"])) for label in ("plain", "split")}
    difference = np.abs(plain - split)
    return {
        "seed": seed,
        "max_pixel": int(difference.max()),
        "mean_pixel": float(difference.mean()),
        "pixels_differ": float((difference > 0).any(-1).mean()),
        "cp_plain": cp["plain"],
        "cp_split": cp["split"],
        "cp_change": abs(cp["split"] - cp["plain"]),
    }


def measure(args: argparse.Namespace) -> dict:
    results = {
        "url": args.url,
        "ckpt": args.ckpt,
        "side": args.side,
        "steps": args.steps,
        "split_at": args.split_at,
        "split_step": judged_step(args.split_at, args.steps),
        "scheduler": args.scheduler,
        "samplers": {},
    }
    for sampler in args.samplers.split(","):
        runs = [compare(args, sampler, args.seed + k) for k in range(args.seeds)]
        results["samplers"][sampler] = {
            "max_pixel": max(r["max_pixel"] for r in runs),
            "mean_pixel": sum(r["mean_pixel"] for r in runs) / len(runs),
            "pixels_differ": sum(r["pixels_differ"] for r in runs) / len(runs),
            "cp_change": max(r["cp_change"] for r in runs),
            "runs": runs,
        }
    return results


def table(results: dict) -> str:
    rows = [
        f"split at step {results['split_step']} of {results['steps']} (KSamplerAdvanced pair) against one KSampler "
        "run, "
        f"{results['side']} px, {results['scheduler']} ({results['ckpt']}); over "
        f"{len(next(iter(results['samplers'].values()))['runs'])} seeds",
        "sampler           max px diff   mean px diff   pixels differ   largest |CP change|",
    ]
    for sampler, r in results["samplers"].items():
        rows.append(
            f"{sampler:<17} {r['max_pixel']:>11}   {r['mean_pixel']:>12.3f}   {100 * r['pixels_differ']:>12.1f}%   "
            f"{r['cp_change']:>19.5f}"
        )
    return "\n".join(rows)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "split-drift",
        help="a sampler run split at a step against the same run in one go, on a running ComfyUI: pixels and CP",
    )
    add_server_options(parser)
    parser.add_argument(
        "--samplers", default=",".join(SAMPLERS), help=f"comma-separated (default {','.join(SAMPLERS)})"
    )
    parser.add_argument("--scheduler", default="normal", help="scheduler (default normal)")
    parser.add_argument("--steps", type=int, default=10, help="sampler steps (default 10)")
    parser.add_argument("--cfg", type=float, default=7.0, help="CFG (default 7)")
    parser.add_argument(
        "--split-at", type=float, default=0.3, help="where to split, a share of the steps (default 0.3)"
    )
    parser.add_argument("--seed", type=int, default=7000, help="first seed (default 7000)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per sampler (default 2)")
    set_command(parser, measure, table)
