"""Benchmark: best-of-N scoring against the paper's package and against the encoder-forward floor.

``python -m benchmarks best-of-n`` measures, in one run, on the same random-weight
checkpoint of the real SigLIP2 NaFlex architecture (random weights cost what
real ones cost), for each size and N:

- ``masc``:  the paper's package (masc-metric) scoring N pairs, one call each
  (2N vision forwards + N text forwards);
- ``ours``:  this package's batch path, ``score_images`` once for the N
  outputs (N + 1 vision forwards, batched, + 1 text forward);
- ``floor``: the encoder forwards alone: the same N + 1 images through the
  vision tower in the same batches, plus one text forward, on tensors
  prepared beforehand (no preprocessing, no masks, no CP/PF arithmetic),
  through the encoder's public uncached forwards (``forward_images``,
  ``forward_texts``).

Each measurement runs in its own fresh process (so peak memory is its own),
after one untimed warm-up forward. It also times best-of-N as whole
processes (imports and model loading included): a script running
masc-metric's N calls against ``python -m masc_core score`` on the same N
files. Results are printed as a table and can be saved as JSON/Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from .output import add_output_options, publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The checkout: the processes a benchmark starts import masc_core and benchmarks from here."""
SIZES = ("base", "so400m")
PROMPT = "a photo of a dog on the beach"
SUBJECT = "dog"


# ---------------------------------------------------------------- inputs


def synthetic_image(index: int, size: int = 512) -> np.ndarray:
    """A distinct, deterministic RGB uint8 image (content does not change the cost, distinctness defeats caches)."""
    rng = np.random.default_rng(1000 + index)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    base = np.stack([np.sin(6 * x + index), np.cos(5 * y - index), np.sin(4 * (x + y) + 0.3 * index)], axis=-1)
    noise = rng.normal(0, 0.15, (size, size, 3))
    return np.clip((base * 0.5 + 0.5 + noise) * 255, 0, 255).astype(np.uint8)


def subject_mask(index: int, size: int = 512) -> np.ndarray:
    """A box around the centre, shifted per image: the 'subject'."""
    mask = np.zeros((size, size), np.uint8)
    offset = (index * 17) % (size // 8)
    mask[size // 4 + offset : 3 * size // 4 + offset // 2, size // 4 : 3 * size // 4 - offset] = 255
    return mask


def write_inputs(folder: str, count: int) -> dict:
    """Reference + ``count`` outputs with masks, as PNG files; returns their paths."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    paths = {
        "ref": os.path.join(folder, "ref.png"),
        "ref_mask": os.path.join(folder, "ref_mask.png"),
        "out": [],
        "out_mask": [],
    }
    if not os.path.exists(paths["ref"]):
        Image.fromarray(synthetic_image(0)).save(paths["ref"])
        Image.fromarray(subject_mask(0)).save(paths["ref_mask"])
    for i in range(1, count + 1):
        image, mask = os.path.join(folder, f"out_{i:03d}.png"), os.path.join(folder, f"out_{i:03d}_mask.png")
        if not os.path.exists(image):
            Image.fromarray(synthetic_image(i)).save(image)
            Image.fromarray(subject_mask(i)).save(mask)
        paths["out"].append(image)
        paths["out_mask"].append(mask)
    return paths


def ensure_checkpoint(folder: str, size: str) -> str:
    """A random-weight SigLIP2 NaFlex checkpoint of the real ``size`` architecture (built once)."""
    from masc_core.testing import build_checkpoint

    path = os.path.join(folder, f"random-siglip2-{size}-patch16-naflex")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        build_checkpoint(path, naflex=True, size=size, seed=0)
    return path


# ---------------------------------------------------------------- workers (one per process)


def _sync(device) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize()


def _read(paths: dict, count: int):
    from masc_core.io.images import load_image_file, load_mask_file

    return (
        load_image_file(paths["ref"]),
        load_mask_file(paths["ref_mask"]),
        [load_image_file(p) for p in paths["out"][:count]],
        [load_mask_file(p) for p in paths["out_mask"][:count]],
    )


def touch_weights(model) -> None:
    """Read every weight once, so page faults on memory-mapped checkpoints happen before timing.

    Checkpoints are memory-mapped: the first forward otherwise pays for
    reading whatever the page cache has evicted, which made single
    measurements jump by seconds.
    """
    import torch

    with torch.inference_mode():
        for parameter in model.parameters():
            parameter.sum()


def warm_up(encoder, count: int) -> None:
    """One untimed forward of every batch shape the timed run will use (N outputs + 1 reference), and one text forward.

    Nothing is cached by it: the forwards bypass the content cache.
    """
    from masc_core.models.encoder import plan_batches

    sample = encoder.prepare(synthetic_image(9999))
    shapes = {len(batch) for batch in plan_batches([sample.pixels.shape[0]] * (count + 1), encoder.batch_size)}
    for size in sorted(shapes):
        encoder.forward_images([sample] * size)
    encoder.forward_texts(["warm up"])
    encoder.reset_forward_counts()


def worker_masc(checkpoint: str, paths: dict, count: int, device: str, max_patches: int) -> dict:
    # The paper's package is imported only here, in its own worker process, when the comparison is asked for.
    import masc
    import torch
    from PIL import Image

    from masc_core.resources import peak_memory

    started = time.perf_counter()
    model = masc.MaSC(model_id=checkpoint, device=None if device == "auto" else device, naflex_max_patches=max_patches)
    loaded = time.perf_counter() - started
    ref, ref_mask, outs, out_masks = _read(paths, count)
    ref_image = Image.fromarray(ref)
    out_images = [Image.fromarray(o) for o in outs]
    # Warm-up: all weights read, then one whole call on another pair (allocator and kernel caches
    # filled, nothing reused).
    touch_weights(model.model)
    model.score(
        Image.fromarray(synthetic_image(9999)),
        ref_mask,
        Image.fromarray(synthetic_image(9998)),
        out_masks[0],
        "warm up",
        object_name=SUBJECT,
    )
    _sync(model.device)
    started = time.perf_counter()
    for image, mask in zip(out_images, out_masks):
        model.score(ref_image, ref_mask, image, mask, PROMPT, object_name=SUBJECT)
    _sync(model.device)
    return {"seconds": time.perf_counter() - started, "load_seconds": loaded, **peak_memory(torch.device(model.device))}


def worker_ours(checkpoint: str, paths: dict, count: int, device: str, max_patches: int, batch_size: int) -> dict:
    from masc_core import MascEncoder, score_images
    from masc_core.resources import peak_memory

    started = time.perf_counter()
    encoder = MascEncoder.load(checkpoint, device=device, max_num_patches=max_patches, batch_size=batch_size)
    loaded = time.perf_counter() - started
    ref, ref_mask, outs, out_masks = _read(paths, count)
    warm_up(encoder, count)
    _sync(encoder.device)
    started = time.perf_counter()
    batch = score_images(
        encoder, outs, reference=ref, reference_mask=ref_mask, mask=out_masks, prompt=PROMPT, subject=SUBJECT
    )
    _sync(encoder.device)
    elapsed = time.perf_counter() - started
    assert all(s.cp is not None and s.pf is not None for s in batch.scores)
    return {
        "seconds": elapsed,
        "load_seconds": loaded,
        "forwards": dict(encoder.forward_counts),
        **peak_memory(encoder.device),
    }


def worker_floor(checkpoint: str, paths: dict, count: int, device: str, max_patches: int, batch_size: int) -> dict:
    from masc_core import MascEncoder, strip_subject
    from masc_core.models.encoder import plan_batches
    from masc_core.resources import peak_memory

    encoder = MascEncoder.load(checkpoint, device=device, max_num_patches=max_patches, batch_size=batch_size)
    ref, _, outs, _ = _read(paths, count)
    prepared = [encoder.prepare(image) for image in [ref] + outs]
    warm_up(encoder, count)
    text = strip_subject(PROMPT, SUBJECT)
    batches = plan_batches([p.pixels.shape[0] for p in prepared], encoder.batch_size)
    _sync(encoder.device)
    started = time.perf_counter()
    for batch in batches:
        encoder.forward_images([prepared[j] for j in batch])
    encoder.forward_texts([text])
    _sync(encoder.device)
    return {"seconds": time.perf_counter() - started, **peak_memory(encoder.device)}


def child_env(**extra: str) -> dict:
    """The environment of a process a benchmark starts: this one's, the checkout first on PYTHONPATH, then ``extra``."""
    return dict(os.environ, **extra, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))


def run_worker(kind: str, **kwargs) -> dict:
    """Run one measurement in a fresh interpreter and return its JSON result."""
    command = [sys.executable, "-m", "benchmarks.bench", "--worker", kind, "--worker-args", json.dumps(kwargs)]
    completed = subprocess.run(command, capture_output=True, text=True, env=child_env())
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": last}
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- whole processes


def _masc_script(checkpoint: str, paths: dict, count: int, device: str, max_patches: int) -> str:
    return (
        "import numpy as np\nfrom PIL import Image\nimport masc\n"
        f"m = masc.MaSC(model_id={checkpoint!r}, device={None if device == 'auto' else device!r}, "
        f"naflex_max_patches={max_patches})\n"
        f"ref = Image.open({paths['ref']!r}); ref_mask = np.array(Image.open({paths['ref_mask']!r}).convert('L'))\n"
        f"for out, mask in zip({paths['out'][:count]!r}, {paths['out_mask'][:count]!r}):\n"
        f"    m.score(ref, ref_mask, Image.open(out), np.array(Image.open(mask).convert('L')), {PROMPT!r}, "
        f"object_name={SUBJECT!r})\n"
    )


def time_process(command: list[str]) -> dict:
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=child_env())
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        return {"error": (completed.stderr.strip().splitlines() or ["failed"])[-1]}
    return {"seconds": elapsed}


def whole_process(checkpoint: str, paths: dict, count: int, device: str, max_patches: int, batch_size: int) -> dict:
    masc_run = time_process([sys.executable, "-c", _masc_script(checkpoint, paths, count, device, max_patches)])
    ours_run = time_process(
        [
            sys.executable,
            "-m",
            "masc_core",
            "score",
            "--model",
            checkpoint,
            "--device",
            device,
            "--max-patches",
            str(max_patches),
            "--batch-size",
            str(batch_size),
            "--ref",
            paths["ref"],
            "--ref-mask",
            paths["ref_mask"],
            "--out",
            *paths["out"][:count],
            "--out-mask",
            *paths["out_mask"][:count],
            "--prompt",
            PROMPT,
            "--subject",
            SUBJECT,
            "--json",
        ]
    )
    return {"masc": masc_run, "ours": ours_run}


# ---------------------------------------------------------------- report


def machine() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _fmt(value, digits=2, suffix="") -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{suffix}"


def _gib(result: dict, key: str) -> str:
    value = result.get(key)
    return _fmt(value / 1024 if value is not None else None)


def markdown(report: dict) -> str:
    cuda = any("peak_cuda_mib" in row[kind] for row in report["rows"] for kind in ("masc", "ours", "floor"))
    header = (
        "| size | N | masc-metric, N calls (s) | ours, batch (s) | floor: forwards only (s) | masc / ours | "
        "ours / floor | peak RSS masc / ours / floor (GiB) |"
    )
    if cuda:
        header += " peak CUDA masc / ours / floor (GiB) |"
    lines = [
        f"Machine: {report['machine']['cpu']}, {report['machine']['logical_cpus']} logical CPUs, torch "
        f"{report['machine']['torch']}"
        f" ({report['machine']['torch_threads']} threads), transformers {report['machine'].get('transformers', '?')}, "
        f"device {report['device']}"
        + (f" ({report['machine']['gpu']})" if report["machine"].get("gpu") else "")
        + f", NaFlex {report['max_patches']} patches, fp32, batch size {report['batch_size']}.",
        "",
        header,
        "| --- " * (header.count("|") - 1) + "|",
    ]
    for row in report["rows"]:
        masc, ours, floor = row["masc"], row["ours"], row["floor"]
        line = (
            f"| {row['size']} | {row['n']} | {_fmt(masc.get('seconds'))} | {_fmt(ours.get('seconds'))} | "
            f"{_fmt(floor.get('seconds'))} | "
            f"{_fmt(row.get('masc_over_ours'), suffix='x')} | {_fmt(row.get('ours_over_floor'), 3, 'x')} | "
            + " / ".join(_gib(r, "peak_rss_mib") for r in (masc, ours, floor))
            + " |"
        )
        if cuda:
            line += " " + " / ".join(_gib(r, "peak_cuda_mib") for r in (masc, ours, floor)) + " |"
        lines.append(line)
    for item in report.get("whole_process", []):
        masc, ours = item["masc"], item["ours"]
        lines.append("")
        lines.append(
            f"Whole process, best-of-{item['n']} ({item['size']}; imports, model load and file I/O included): "
            f"masc-metric {_fmt(masc.get('seconds'))} s, `python -m masc_core score` {_fmt(ours.get('seconds'))} s: "
            f"{_fmt(item.get('speedup'), suffix='x')} faster."
        )
    return "\n".join(lines)


def _ratio(a: dict, b: dict) -> float | None:
    if "seconds" in a and "seconds" in b and b["seconds"] > 0:
        return a["seconds"] / b["seconds"]
    return None


def run(args: argparse.Namespace) -> dict:
    from masc_core.models.devices import resolve_device

    device = str(resolve_device(args.device))
    workdir = args.workdir or os.path.join(tempfile.gettempdir(), "masc-bench")
    os.makedirs(workdir, exist_ok=True)
    paths = write_inputs(os.path.join(workdir, "inputs"), max(max(args.n), args.process_n))
    report = {
        "machine": machine(),
        "device": device,
        "max_patches": args.max_patches,
        "batch_size": args.batch_size,
        "rows": [],
        "whole_process": [],
    }
    sizes = ["custom"] if args.checkpoint else args.sizes
    for size in sizes:
        checkpoint = args.checkpoint or ensure_checkpoint(workdir, size)
        for count in args.n:
            common = dict(checkpoint=checkpoint, paths=paths, count=count, device=device, max_patches=args.max_patches)
            row = {"size": size, "n": count}
            row["masc"] = {"skipped": True} if args.skip_masc else run_worker("masc", **common)
            row["ours"] = run_worker("ours", batch_size=args.batch_size, **common)
            row["floor"] = run_worker("floor", batch_size=args.batch_size, **common)
            row["masc_over_ours"] = _ratio(row["masc"], row["ours"])
            row["ours_over_floor"] = _ratio(row["ours"], row["floor"])
            report["rows"].append(row)
            sys.stderr.write(
                f"{size} N={count}: masc {row['masc'].get('seconds')} ours {row['ours'].get('seconds')} floor "
                f"{row['floor'].get('seconds')}\n"
            )
        if (size == args.process_size or args.checkpoint) and args.process_n and not args.skip_masc:
            item = {
                "size": size,
                "n": args.process_n,
                **whole_process(checkpoint, paths, args.process_n, device, args.max_patches, args.batch_size),
            }
            item["speedup"] = _ratio(item["masc"], item["ours"])
            report["whole_process"].append(item)
    return report


def add_parser(commands) -> None:
    parser = commands.add_parser("best-of-n", help="best-of-N scoring vs masc-metric and the forward floor")
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=list(SIZES),
        choices=SIZES,
        help="SigLIP2 sizes (random weights, real architecture)",
    )
    parser.add_argument("--n", nargs="+", type=int, default=[1, 8, 32], help="outputs per reference")
    parser.add_argument("--max-patches", type=int, default=1024, help="NaFlex patch budget (paper: 1024)")
    parser.add_argument("--batch-size", type=int, default=8, help="images per vision forward on our path")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda")
    parser.add_argument(
        "--checkpoint", default=None, help="benchmark this NaFlex checkpoint folder instead of building random ones"
    )
    parser.add_argument(
        "--workdir", default=None, help="where checkpoints and inputs are built and kept (default: a temp folder)"
    )
    parser.add_argument("--process-n", type=int, default=8, help="N for the whole-process comparison (0 skips it)")
    parser.add_argument("--process-size", default="base", choices=SIZES, help="size for the whole-process comparison")
    parser.add_argument("--skip-masc", action="store_true", help="do not run the paper's package")
    add_output_options(parser)
    parser.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    report = run(args)
    publish(args, report, markdown(report))
    return 0


def _worker_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", required=True, choices=("masc", "ours", "floor"))
    parser.add_argument("--worker-args", required=True)
    args = parser.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import warnings

    warnings.filterwarnings("ignore")
    kwargs = json.loads(args.worker_args)
    result = {"masc": worker_masc, "ours": worker_ours, "floor": worker_floor}[args.worker](**kwargs)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    _worker_main()
