"""What the benchmarks that drive a running ComfyUI share: its options, workflow 4's models, queue and wait."""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
import uuid

from .bench import ROOT

WORKFLOW = os.path.join(ROOT, "tests", "data", "saved_workflows", "4_rejection_sampling_0.2.0.api.json")
"""MaSC Sample Until's KSampler-shaped graph (workflow 4 as shipped until 0.2.0)."""
"""Workflow 4 (API format): its checkpoint, prompt, reference, segmenter and encoder nodes are every benchmark's."""


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """``--url``, ``--ckpt``, ``--encoder``, ``--segmenter``, ``--side``: where to run and with which models."""
    parser.add_argument(
        "--url", default="http://127.0.0.1:8188", help="a running ComfyUI with this pack (default the local one)"
    )
    parser.add_argument("--ckpt", required=True, help="the diffusion checkpoint's name in ComfyUI's models/checkpoints")
    parser.add_argument(
        "--encoder", default=None, help="the SigLIP2 folder's name in models/masc (default the workflow's)"
    )
    parser.add_argument(
        "--segmenter", default=None, help="the CLIPSeg folder's name in models/clipseg (default the workflow's)"
    )
    parser.add_argument("--side", type=int, default=256, help="image side in pixels (default 256)")


def post(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")  # /free answers with an empty body


def get(url: str, path: str) -> dict:
    with urllib.request.urlopen(url + path, timeout=60) as response:
        return json.loads(response.read())


def workflow(args: argparse.Namespace) -> dict:
    """Workflow 4 with the options' checkpoint, encoder, segmenter and side (one latent: candidates are seeds)."""
    with open(WORKFLOW, encoding="utf-8") as handle:
        prompt = json.load(handle)
    for item in prompt.values():
        inputs = item["inputs"]
        if "ckpt_name" in inputs:
            inputs["ckpt_name"] = args.ckpt
        if item["class_type"] == "EmptyLatentImage":
            inputs.update(width=args.side, height=args.side, batch_size=1)
        if item["class_type"] == "MaSCLoadEncoder" and args.encoder:
            inputs["model"] = args.encoder
        if item["class_type"] == "MaSCLoadAutoMaskModel" and args.segmenter:
            inputs["model"] = args.segmenter
    return prompt


def run_prompt(url: str, prompt: dict) -> dict:
    """Queue ``prompt``, wait for its /history entry, and return it; a failed prompt ends the benchmark in one line."""
    prompt_id = post(url, "/prompt", {"prompt": prompt, "client_id": uuid.uuid4().hex})["prompt_id"]
    while True:
        entry = get(url, f"/history/{prompt_id}").get(prompt_id)
        if entry and entry.get("status", {}).get("completed") is not None:
            break
        time.sleep(1.0)
    if entry["status"].get("status_str") != "success":
        raise SystemExit(f"the prompt failed: {json.dumps(entry['status'])[:2000]}")
    return entry
