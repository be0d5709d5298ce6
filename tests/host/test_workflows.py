"""Graphs run by a real ComfyUI: every shipped API workflow (and the scores its saved PNGs carry), the design card
against masc_core, JPEG decoding."""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pytest
from PIL import Image

from . import hostapi
from .conftest import EXAMPLE_PREFIX, ROOT, write_json
from .graphs import API_WORKFLOWS, check_saved_scores, design_card, for_cpu, load, needs_text_encoders, node, of_type

PROMPT = "a photo of a dog on the beach"


@pytest.mark.parametrize("path", API_WORKFLOWS, ids=os.path.basename)
def test_shipped_api_workflow_runs(server, sd15, loras, installed, out_dir, path):
    """Each workflow runs as sent with the front end's extra_data; its reports show; every PNG it saves carries the
    scores of each MaSC node upstream, which ``python -m masc_core read`` prints (for this very image)."""
    graph = load(path)
    if needs_text_encoders(graph):
        pytest.skip("a DiT template: run end to end on tiny models, its text encoders replaced, in test_templates.py")
    graph = for_cpu(graph, sd15=sd15)
    try:
        entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END)
    except hostapi.ComfyError as refused:
        pytest.fail(f"/prompt refused the graph: {refused}")
    write_json(os.path.join(out_dir, "history-" + os.path.basename(path)), entry)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    info = server.request("/object_info")
    for node_id, spec in graph.items():
        kind = spec["class_type"]
        if kind.startswith("MaSC") and info[kind].get("output_node"):
            assert hostapi.ui_text(entry, node_id), f"{kind} #{node_id} showed no report"
        if kind == "PreviewAny":
            shown = hostapi.ui_text(entry, node_id)
            assert shown and shown.lower() != "nan", f"PreviewAny #{node_id} shows {shown!r}"
    for save in of_type(graph, "SaveImage"):
        saved = hostapi.saved_images(entry, save, installed["output"])
        assert saved, f"Save Image #{save} saved nothing"
        for png in saved:
            check_saved_scores(png, graph, save)


def _png_inputs(installed) -> dict:
    """The examples as PNG (lossless: every ComfyUI decodes them to the same pixels) in input/masc_test/."""
    folder = os.path.join(installed["input"], "masc_test")
    os.makedirs(folder, exist_ok=True)
    names = {}
    for stem in ("dog_00", "dog_01"):
        target = os.path.join(folder, f"{stem}.png")
        Image.open(os.path.join(ROOT, "example_inputs", f"{EXAMPLE_PREFIX}{stem}.jpg")).convert("RGB").save(target)
        names[stem] = f"masc_test/{stem}.png"
    return names


def _pixels(path: str) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def _mask(path: str) -> np.ndarray:
    """What LoadImageMask(channel red) gives, as float32 0..1."""
    return np.asarray(Image.open(path).convert("RGB"))[..., 0].astype(np.float32) / 255.0


def _masc_core_scores(tiny_models, reference, image, reference_mask, image_mask):
    from masc_core import MascEncoder, score_images

    encoder = MascEncoder.load(tiny_models["encoder"], device="cpu", precision="fp32")
    batch = score_images(
        encoder,
        [image],
        reference=reference,
        reference_mask=reference_mask,
        mask=image_mask,
        prompt=PROMPT,
        subject="dog",
    )
    return batch.cp[0], batch.pf[0], batch.scores[0].encoded_prompt


def _examples(installed, name):
    return os.path.join(installed["input"], EXAMPLE_PREFIX + name)


def test_design_card_graph_gives_masc_cores_scores(server, installed, tiny_models, out_dir):
    check_design_card(server, installed, tiny_models, os.path.join(out_dir, "history-design-card.json"))


def check_design_card(server, installed, tiny_models, history_path: str) -> None:
    """Load MaSC Encoder -> CP, PF, Strip Subject on PNG inputs: masc_core's scores on the same files (<= 1e-5)."""
    png = _png_inputs(installed)
    graph = design_card(
        png["dog_00"],
        f"{EXAMPLE_PREFIX}dog_00_mask.png",
        png["dog_01"],
        f"{EXAMPLE_PREFIX}dog_01_mask.png",
        PROMPT,
        "dog",
    )
    entry = server.run(graph)
    write_json(history_path, entry)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    cp, pf = float(hostapi.ui_text(entry, "9")), float(hostapi.ui_text(entry, "10"))
    expected_cp, expected_pf, stripped = _masc_core_scores(
        tiny_models,
        _pixels(os.path.join(installed["input"], png["dog_00"])),
        _pixels(os.path.join(installed["input"], png["dog_01"])),
        _mask(_examples(installed, "dog_00_mask.png")),
        _mask(_examples(installed, "dog_01_mask.png")),
    )
    assert abs(cp - expected_cp) <= 1e-5 and abs(pf - expected_pf) <= 1e-5, (cp, expected_cp, pf, expected_pf)
    assert hostapi.ui_text(entry, "11") == stripped == "a photo of on the beach"
    for node_id in ("6", "7"):  # the report box text: one line per image, then what PF compared with
        assert "#0" in hostapi.ui_text(entry, node_id)


def test_jpeg_inputs_are_scored_as_the_host_decodes_them(server, installed, tiny_models, out_dir):
    """PNG decodes to the file's pixels on every host; a JPEG to whatever the host's decoder gives (PyAV in 0.33+).

    The node scores exactly the pixels Load Image produced (checked through a lossless Save Image); how far
    those are from Pillow's decode (the command line's) is measured and kept in jpeg-decode.json.
    """
    stems = ("dog_00", "dog_01")
    graph = design_card(
        f"{EXAMPLE_PREFIX}dog_00.jpg",
        f"{EXAMPLE_PREFIX}dog_00_mask.png",
        f"{EXAMPLE_PREFIX}dog_01.jpg",
        f"{EXAMPLE_PREFIX}dog_01_mask.png",
        PROMPT,
        "dog",
    )
    graph["20"] = node("SaveImage", images=["2", 0], filename_prefix="masc_decoded/dog_00")
    graph["21"] = node("SaveImage", images=["4", 0], filename_prefix="masc_decoded/dog_01")
    entry = server.run(graph)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    decoded = {}
    for stem in stems:
        (path,) = glob.glob(os.path.join(installed["output"], "masc_decoded", f"{stem}_*.png"))
        decoded[stem] = _pixels(path)
        os.remove(path)
    pillow = {stem: _pixels(_examples(installed, f"{stem}.jpg")) for stem in stems}
    masks = [_mask(_examples(installed, f"{stem}_mask.png")) for stem in stems]
    cp, pf = float(hostapi.ui_text(entry, "9")), float(hostapi.ui_text(entry, "10"))
    as_decoded = _masc_core_scores(tiny_models, decoded["dog_00"], decoded["dog_01"], *masks)
    as_cli = _masc_core_scores(tiny_models, pillow["dog_00"], pillow["dog_01"], *masks)
    assert abs(cp - as_decoded[0]) <= 1e-5 and abs(pf - as_decoded[1]) <= 1e-5
    differences = {stem: np.abs(decoded[stem].astype(int) - pillow[stem].astype(int)) for stem in stems}
    same_pixels = all(not d.any() for d in differences.values())
    if same_pixels:  # a Pillow decode: the command line's scores exactly
        assert abs(cp - as_cli[0]) <= 1e-5 and abs(pf - as_cli[1]) <= 1e-5
    measured = {
        "host": server.request("/system_stats")["system"].get("comfyui_version"),
        "same_pixels_as_pillow": same_pixels,
        "max_level_difference": {s: int(d.max()) for s, d in differences.items()},
        "share_of_values_differing": {s: float((d > 0).mean()) for s, d in differences.items()},
        "cp_host": cp,
        "cp_cli": as_cli[0],
        "pf_host": pf,
        "pf_cli": as_cli[1],
        "cp_difference": abs(cp - as_cli[0]),
        "pf_difference": abs(pf - as_cli[1]),
    }
    write_json(os.path.join(out_dir, "jpeg-decode.json"), measured)
    print("JPEG decode:", json.dumps(measured))
    # Either way the difference stays small: a different decoder, not a different image.
    assert max(int(d.max()) for d in differences.values()) <= 32 and math.isfinite(cp)
