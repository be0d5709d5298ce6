"""API-format graphs for the host suite: the shipped workflows (made small enough for a CPU) and hand-built ones."""

from __future__ import annotations

import copy
import glob
import json
import os

from .conftest import ENCODER_NAME, ROOT, SD15_NAME, SEGMENTER_NAME, metadata_writers, read_scores, this_image

API_WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, "workflows", "api", "*.json")))
UI_WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json")))
BLUEPRINTS = sorted(glob.glob(os.path.join(ROOT, "subgraphs", "*.json")))
"""The subgraph blueprints (core after 0.3.64 serves them at /global_subgraphs; the front end lists them by file
name)."""
LATENT_SIDE = 256
AT_MOST = {"batch_size": 2, "max_candidates": 2, "accept": 2, "show": 2, "seeds": 1}
"""Integer inputs capped wherever they appear (Empty Latent's batch, MaSC Sample Until's budget, MaSC Pick's shown): few
images per run."""


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


TRAINING = {"ImageScale": {"width": 64, "height": 64}, "TrainLoraNode": {"steps": 2}}
"""A training template on this CPU: its photos at 64 px (a bf16 Train LoRA step at 256 px took 8 minutes here) and 2
steps (core's Plot Loss Graph divides by the loss's range: one step fails with ZeroDivisionError)."""


def for_cpu(graph: dict, *, sd15: str = SD15_NAME) -> dict:
    """A copy of a shipped API graph that runs on this machine: the test checkpoints, small latents, one step.

    Rules go by node type and input name, so workflows added later are covered without edits here.
    """
    graph = copy.deepcopy(graph)
    for node in graph.values():
        inputs, kind = node["inputs"], node["class_type"]
        if kind == "MaSCLoadEncoder":
            inputs["model"] = ENCODER_NAME
        elif kind == "MaSCLoadAutoMaskModel":
            inputs["model"] = SEGMENTER_NAME
        if "ckpt_name" in inputs:
            inputs["ckpt_name"] = sd15
        if kind.startswith("EmptyLatentImage") or kind == "EmptySD3LatentImage":
            inputs["width"] = inputs["height"] = LATENT_SIDE
        for name, most in AT_MOST.items():
            if isinstance(inputs.get(name), int):
                inputs[name] = min(inputs[name], most)
        if isinstance(inputs.get("steps"), int):
            inputs["steps"] = 1
        inputs.update(TRAINING.get(kind, {}))
    return graph


def page_widgets(*, sd15: str = SD15_NAME) -> dict:
    """The same edits as ``for_cpu``, as widget values the browser test sets on a loaded UI workflow."""
    return {
        "byType": {
            "MaSCLoadEncoder": {"model": ENCODER_NAME},
            "MaSCLoadAutoMaskModel": {"model": SEGMENTER_NAME},
            "EmptyLatentImage": {"width": LATENT_SIDE, "height": LATENT_SIDE},
            **TRAINING,
        },
        "byWidget": {"ckpt_name": sd15, "steps": 1},
        "atMost": AT_MOST,
    }


def of_type(graph: dict, class_type: str) -> list[str]:
    """Ids of the graph's nodes of one type, in id order."""
    return sorted((i for i, n in graph.items() if n["class_type"] == class_type), key=lambda i: (len(i), i))


def ancestors(graph: dict, node_id: str) -> set[str]:
    """Every node a node's inputs depend on (the nodes that run before it)."""
    found, todo = set(), [node_id]
    while todo:
        for value in graph[todo.pop()]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and value[0] not in found:
                found.add(value[0])
                todo.append(value[0])
    return found


def node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def plain_sampler(graph: dict, inputs: dict, seed: int, *, custom: bool) -> list:
    """Add to ``graph`` the plain sampler a Sample Until node with ``inputs`` stands for, at ``seed`` (batch 1):
    SamplerCustomAdvanced with Random Noise on the twin's guider, sampler and sigmas, or KSampler; its output link."""
    if custom:
        graph["noise"] = node("RandomNoise", noise_seed=seed)
        graph["plain"] = node(
            "SamplerCustomAdvanced",
            noise=["noise", 0],
            guider=inputs["guider"],
            sampler=inputs["sampler"],
            sigmas=inputs["sigmas"],
            latent_image=inputs["latent_image"],
        )
    else:
        graph["plain"] = node(
            "KSampler",
            model=inputs["model"],
            positive=inputs["positive"],
            negative=inputs["negative"],
            latent_image=inputs["latent_image"],
            seed=seed,
            steps=inputs["steps"],
            cfg=inputs["cfg"],
            sampler_name=inputs["sampler_name"],
            scheduler=inputs["scheduler"],
            denoise=inputs["denoise"],
        )
    return ["plain", 0]


def design_card(reference: str, reference_mask: str, image: str, image_mask: str, prompt: str, subject: str) -> dict:
    """Load MaSC Encoder -> Concept Preservation, Prompt Following, Strip Subject, with each value shown as text."""
    return {
        "1": node("MaSCLoadEncoder", model=ENCODER_NAME, device="cpu", precision="fp32", max_patches=1024),
        "2": node("LoadImage", image=reference),
        "3": node("LoadImageMask", image=reference_mask, channel="red"),
        "4": node("LoadImage", image=image),
        "5": node("LoadImageMask", image=image_mask, channel="red"),
        "6": node(
            "MaSCConceptPreservation",
            encoder=["1", 0],
            reference_image=["2", 0],
            reference_mask=["3", 0],
            image=["4", 0],
            heatmaps=True,
            mask=["5", 0],
        ),
        "7": node(
            "MaSCPromptFollowing",
            encoder=["1", 0],
            image=["4", 0],
            mask=["5", 0],
            prompt=prompt,
            subject=subject,
            heatmaps=True,
        ),
        "8": node("MaSCStripSubject", prompt=prompt, subject=subject),
        "9": node("PreviewAny", source=["6", 0]),
        "10": node("PreviewAny", source=["7", 0]),
        "11": node("PreviewAny", source=["8", 0]),
    }


DERIVED_PICTURES = {"MaSCSweep": (5, 6)}
"""Outputs that are pictures made from the scored images (MaSC Sweep's grid and chart), not scored images themselves:
their PNG holds the same entry, and ``read`` says no scored image has their pixels, then lists every score."""


def check_saved_scores(path: str, graph: dict, save_id: str) -> None:
    """A PNG written by Save Image ``save_id`` of ``graph`` (API format): ``python -m masc_core read`` prints, for this
    very image (matched by its pixels), the scores of every MaSC node upstream that saves scores; for a derived picture
    (``DERIVED_PICTURES``), every score of those nodes."""
    writers = metadata_writers()
    origin, slot = graph[save_id]["inputs"]["images"]
    derived = slot in DERIVED_PICTURES.get(graph[origin]["class_type"], ())
    expected = {
        f"{'' if derived else 'from '}{graph[i]['class_type']} (node {i}):"
        for i in ancestors(graph, save_id)
        if graph[i]["class_type"] in writers
    }
    read = read_scores(path)
    assert read.returncode == 0, f"read {path}: {read.stderr}"
    if derived:
        assert "this file's pixels match no scored image" in read.stdout, read.stdout
        headers = {line.strip() for line in read.stdout.splitlines() if line.startswith("  ") and "(node " in line}
        found = {h for h in expected if any(line.startswith(h) for line in headers)}
        assert found == expected, f"{path}: expected scores {sorted(expected)}, read printed\n{read.stdout}"
        return
    sources = [source for _, source in this_image(read.stdout)]
    found = {header for header in expected if any(source.startswith(header) for source in sources)}
    assert found == expected, f"{path}: expected scores {sorted(expected)}, read printed\n{read.stdout}"


DIT_LOADERS = {"UNETLoader", "DualCLIPLoader", "CLIPLoader"}
"""Loaders of the DiT and video templates (8, 9, 10): their text encoders cannot exist here, so those graphs run through
``for_tiny_dits``."""
TINY_DITS = {
    "flux": ("masc-host-test-flux.safetensors", "masc-host-test-flux-vae.safetensors", 64, 768),
    "qwen": ("masc-host-test-qwen_image.safetensors", "masc-host-test-qwen_image-vae.safetensors", 3584, 0),
    "wan": ("masc-host-test-wan_vace.safetensors", "masc-host-test-wan_vace-vae.safetensors", 4096, 0),
}
"""Per family: the tiny transformer and VAE ``build_dits.py`` writes, and the text width and pooled size its
conditioning has (Flux: T5 shrunk to 64 and CLIP-L's 768; Qwen-Image: Qwen2.5-VL's 3584, nothing pooled; Wan:
UMT5's 4096, nothing pooled)."""
VIDEO_SIZE = dict(width=128, height=128, length=9)
"""A tiny Wan's clip here: 128 x 128, 9 frames (3 latent frames, and the reference's)."""


def needs_text_encoders(graph: dict) -> bool:
    return any(n["class_type"] in DIT_LOADERS for n in graph.values())


def for_tiny_dits(graph: dict, *, steps: int = 4, side: int = 256) -> dict:
    """A DiT or video template made to run here, generator wiring kept: the tiny models of its family, each text
    encoder replaced by the test-only conditioning node (Qwen's edit encoder by that node + ReferenceLatent of the
    VAE-encoded image1, which is what TextEncodeQwenImageEditPlus adds), images scaled to ``side`` px in place of
    Flux Kontext Image Scale, a video's size ``VIDEO_SIZE``, ``steps`` steps."""
    graph = copy.deepcopy(graph)
    names = " ".join(str(n["inputs"].get("unet_name", "")) for n in graph.values())
    family = "qwen" if "qwen" in names else "wan" if "wan" in names else "flux"
    unet, vae, width, pooled = TINY_DITS[family]
    top = max(int(part) for i in graph for part in i.split(":"))  # ids inside a subgraph node read "50:6"
    for node_id, n in list(graph.items()):
        kind, inputs = n["class_type"], n["inputs"]
        if kind == "UNETLoader":
            inputs["unet_name"] = unet
        elif kind == "VAELoader":
            inputs["vae_name"] = vae
        elif kind == "FluxKontextImageScale":
            graph[node_id] = node(
                "ImageScale", image=inputs["image"], upscale_method="bilinear", width=side, height=side, crop="center"
            )
        elif kind == "CLIPTextEncode":
            graph[node_id] = node("HostTestConditioning", text=inputs["text"], width=width, tokens=8, pooled=pooled)
        elif kind == "TextEncodeQwenImageEditPlus":
            top += 2
            text, encoded = str(top - 1), str(top)
            graph[text] = node("HostTestConditioning", text=inputs["prompt"], width=width, tokens=8, pooled=pooled)
            graph[encoded] = node("VAEEncode", pixels=inputs["image1"], vae=inputs["vae"])
            graph[node_id] = node("ReferenceLatent", conditioning=[text, 0], latent=[encoded, 0])
        elif kind == "WanVaceToVideo":
            inputs.update(VIDEO_SIZE)
        elif kind in ("BasicScheduler", "MaSCSampleUntil") and isinstance(inputs.get("steps"), int):
            inputs["steps"] = steps
        elif kind == "MaSCLoadEncoder":
            inputs["model"] = ENCODER_NAME
        elif kind == "MaSCLoadAutoMaskModel":
            inputs["model"] = SEGMENTER_NAME
    for node_id in [i for i, n in graph.items() if n["class_type"] in ("DualCLIPLoader", "CLIPLoader")]:
        del graph[node_id]
    return graph
