"""Benchmark: what pruning saves in MaSC Sample Until, in a real ComfyUI, with its own diffusion model.

``python -m benchmarks pruning --url http://127.0.0.1:8188 --ckpt MODEL.safetensors`` queues workflow 4
(workflow 4 as shipped until 0.2.0, ``tests/data/saved_workflows/4_rejection_sampling_0.2.0.api.json``) on a running
ComfyUI that has this pack, a SigLIP2 and a CLIPSeg
(``--encoder`` / ``--segmenter`` name them), at ``--side`` pixels, with ``--candidates`` candidates in one round
and a threshold nothing reaches (the whole budget is spent: best-of-N). Once without pruning, once with
``--prune-at`` and ``--prune-keep``; each ``--repeat`` times. It reports the ledger (model evaluations spent and in
full, from the report) and the wall time of each prompt as the server timed it (``/history`` start and end),
so the preview scoring is part of the price. Defaults are the issue's: best-of-16 at 256 px, pruning at 0.3
keeping 4. A third setting judges at several steps (``--steps-judged``, default 0.1 keeping 8, then 0.3 keeping 2):
MaSC Sample Until cannot chain judged steps, so that row runs the same candidates through its custom twin (CFG Guider,
KSampler Select, Basic Scheduler and Random Noise built from the same inputs, MaSC Rules, chained MaSC Prune nodes),
which samples the same seeds to the same pixels. Nothing is downloaded; the models must be in ComfyUI's folders.
"""

from __future__ import annotations

import argparse
import re
import statistics

from .comfy_server import add_server_options, post, run_prompt, workflow
from .output import set_command

LEDGER = re.compile(r"(\d+) of (\d+) model evaluations")
REPLAYED = re.compile(r"; (\d+) evaluations replayed\)")


def graph(args, prune_at: float) -> dict:
    prompt = workflow(args)
    for item in prompt.values():
        if item["class_type"] == "MaSCSampleUntil":
            item["inputs"].update(
                steps=args.steps,
                batch_size=args.candidates,
                max_candidates=args.candidates,
                accept=1,
                min_cp=0.999,
                on_shortfall="return best",
                seed=args.seed,
                prune_at=prune_at,
                prune_keep=args.prune_keep,
                prune_study=False,
                sampler_name=args.sampler,
            )
    return prompt


def as_twin(prompt: dict, judged: list[tuple[float, int]]) -> dict:
    """MaSC Sample Until replaced by MaSC Sample Until (Custom) on the same model, conditioning, schedule and seeds,
    with one chained MaSC Prune per judged step (at, keep)."""
    (node_id,) = [i for i, n in prompt.items() if n["class_type"] == "MaSCSampleUntil"]
    inputs = prompt[node_id]["inputs"]
    prompt["twin_guider"] = {
        "class_type": "CFGGuider",
        "inputs": {k: inputs[k] for k in ("model", "positive", "negative", "cfg")},
    }
    prompt["twin_sampler"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": inputs["sampler_name"]}}
    prompt["twin_sigmas"] = {
        "class_type": "BasicScheduler",
        "inputs": {
            "model": inputs["model"],
            "scheduler": inputs["scheduler"],
            "steps": inputs["steps"],
            "denoise": 1.0,
        },
    }
    prompt["twin_noise"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": inputs["seed"]}}
    rules = ("rank_by", "cp_weight", "pf_weight", "min_cp", "min_pf", "reject_small_masks", "min_foreground")
    prompt["twin_rules"] = {
        "class_type": "MaSCRules",
        "inputs": {
            **{k: inputs[k] for k in rules + ("accept", "max_candidates", "batch_size", "on_shortfall")},
            "on_uncertain": inputs.get("on_uncertain", "keep but mark"),
            "on_blend": inputs.get("on_blend", "report"),
        },
    }
    previous = None
    for k, (at, keep) in enumerate(judged):
        prune = {"prune_at": at, "prune_keep": keep, "prune_study": False}
        if previous:
            prune["prune"] = [previous, 0]
        previous = f"twin_prune_{k}"
        prompt[previous] = {"class_type": "MaSCPrune", "inputs": prune}
    kept = ("latent_image", "vae", "encoder", "prompt", "subject", "reference_image", "reference_mask", "segmenter")
    prompt[node_id] = {
        "class_type": "MaSCSampleUntilCustom",
        "inputs": {
            **{k: inputs[k] for k in kept if k in inputs},
            "noise": ["twin_noise", 0],
            "guider": ["twin_guider", 0],
            "sampler": ["twin_sampler", 0],
            "sigmas": ["twin_sigmas", 0],
            "rules": ["twin_rules", 0],
            "prune": [previous, 0],
            "mask_subject": inputs["mask_subject"],
            "mask_threshold": inputs["mask_threshold"],
        },
    }
    return prompt


def judged_steps(text: str) -> list[tuple[float, int]]:
    """``--steps-judged`` "0.1:8,0.3:2" -> [(0.1, 8), (0.3, 2)]."""
    try:
        steps = [(float(at), int(keep)) for at, keep in (part.split(":") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give AT:KEEP pairs, e.g. 0.1:8,0.3:2") from None
    return steps


def run_once(args, prune_at: float, judged: list[tuple[float, int]] | None = None) -> dict:
    prompt = graph(args, prune_at)
    if judged:
        prompt = as_twin(prompt, judged)
    (node_id,) = [i for i, n in prompt.items() if n["class_type"] in ("MaSCSampleUntil", "MaSCSampleUntilCustom")]
    entry = run_prompt(args.url, prompt)
    messages = dict((kind, data) for kind, data in entry["status"].get("messages", []))
    seconds = (messages["execution_success"]["timestamp"] - messages["execution_start"]["timestamp"]) / 1000.0
    report = "\n".join(entry["outputs"][node_id]["text"])
    spent = LEDGER.search(report)
    evaluations = (
        (int(spent.group(1)), int(spent.group(2)))
        if spent
        else (args.candidates * args.steps, args.candidates * args.steps)
    )
    replayed = REPLAYED.search(report)
    return {
        "seconds": seconds,
        "spent": evaluations[0],
        "in_full": evaluations[1],
        "replayed": int(replayed.group(1)) if replayed else 0,
    }


def measure(args: argparse.Namespace) -> dict:
    post(args.url, "/free", {"unload_models": False, "free_memory": True})
    results = {
        "url": args.url,
        "ckpt": args.ckpt,
        "side": args.side,
        "steps": args.steps,
        "sampler": args.sampler,
        "candidates": args.candidates,
        "prune_at": args.prune_at,
        "prune_keep": args.prune_keep,
        "steps_judged": args.steps_judged,
        "repeat": args.repeat,
    }
    warm = argparse.Namespace(**vars(args))
    warm.candidates, warm.steps, warm.prune_keep = 2, 2, 1
    run_once(warm, 0.5)  # warm: every model loaded once, pruning's path included
    several = " then ".join(f"{at} ({keep})" for at, keep in args.steps_judged)
    settings = (
        ("no pruning", 0.0, None),
        (f"pruning at {args.prune_at}", args.prune_at, None),
        (f"at {several}", 0.0, args.steps_judged),
    )
    for label, prune_at, judged in settings:
        runs = []
        for i in range(args.repeat):
            args.seed += 100  # fresh candidates every run (ComfyUI would serve a repeat from its cache)
            runs.append(run_once(args, prune_at, judged))
        results[label] = {
            "seconds": statistics.median(r["seconds"] for r in runs),
            "spent": runs[-1]["spent"],
            "in_full": runs[-1]["in_full"],
            "replayed": runs[-1]["replayed"],
            "runs": runs,
        }
    return results


def table(results: dict) -> str:
    rows = [
        f"best-of-{results['candidates']} at {results['side']} px, {results['steps']} steps of "
        f"{results.get('sampler', 'euler')} ({results['ckpt']}), median of {results['repeat']}",
        "                     model evaluations   wall s",
    ]
    for label in [k for k in results if isinstance(results[k], dict) and "seconds" in results[k]]:
        r = results[label]
        rows.append(f"{label:<20} {r['spent']:>6} of {r['in_full']:<10} {r['seconds']:>7.1f}")
    return "\n".join(rows)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "pruning", help="Sample Until with and without pruning on a running ComfyUI: model evaluations and wall time"
    )
    add_server_options(parser)
    parser.add_argument("--steps", type=int, default=20, help="sampler steps (default 20)")
    parser.add_argument(
        "--sampler",
        default="euler",
        help="sampler_name (default euler; samplers that cannot resume at a split replay their survivors)",
    )
    parser.add_argument("--candidates", type=int, default=16, help="candidates, all in one round (default 16)")
    parser.add_argument("--prune-at", type=float, default=0.3, help="prune_at (default 0.3)")
    parser.add_argument("--prune-keep", type=int, default=4, help="prune_keep (default 4)")
    parser.add_argument(
        "--steps-judged",
        type=judged_steps,
        default=[(0.1, 8), (0.3, 2)],
        metavar="AT:KEEP,...",
        help="the several-step setting: judged steps and how many each keeps (default 0.1:8,0.3:2)",
    )
    parser.add_argument("--seed", type=int, default=5000, help="first seed (default 5000)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (default 1)")
    set_command(parser, measure, table)
