"""A shared workflow's values over links, sent to a real ComfyUI: ComfyUI checks a widget's list and range only
for a typed-in value, so out-of-range numbers from core's Int/Float/String primitives (and, on 0.33, an
out-of-list model name through core's If/Else Switch) reach the MaSC nodes as sent. Each must fail at the
MaSC node with one line naming the input, in /history, before any work (and before any file is opened)."""

from __future__ import annotations

import os

import pytest

from . import hostapi
from .conftest import ENCODER_NAME, EXAMPLE_PREFIX, SAM3_NAME
from .graphs import node


def _design_card(**encoder_inputs) -> dict:
    """Load MaSC Encoder -> Concept Preservation -> Select Best (widget values typed, as a saved workflow has them)."""
    encoder = dict(model=ENCODER_NAME, device="cpu", precision="fp32", max_patches=1024)
    encoder.update(encoder_inputs)
    return {
        "1": node("MaSCLoadEncoder", **encoder),
        "2": node("LoadImage", image=EXAMPLE_PREFIX + "dog_00.jpg"),
        "3": node("LoadImageMask", image=EXAMPLE_PREFIX + "dog_00_mask.png", channel="red"),
        "4": node("LoadImage", image=EXAMPLE_PREFIX + "dog_01.jpg"),
        "5": node(
            "MaSCConceptPreservation",
            encoder=["1", 0],
            reference_image=["2", 0],
            reference_mask=["3", 0],
            image=["4", 0],
            heatmaps=False,
        ),
        "6": node(
            "MaSCSelectBest",
            scores=["5", 1],
            images=["4", 0],
            rank_by="cp",
            cp_weight=1.0,
            pf_weight=1.0,
            top_k=1,
            min_cp=-1.0,
            min_pf=-1.0,
            reject_small_masks=False,
            min_foreground=0.05,
        ),
        "7": node("PreviewAny", source=["6", 5]),
    }


def patch_budget_over_a_link() -> tuple[dict, str, str]:
    graph = _design_card(max_patches=["20", 0])
    graph["20"] = node("PrimitiveInt", value=1_000_000)  # ran for over ten minutes on one image before
    return graph, "1", "max_patches is 1000000, outside the range this input takes: set it between 16 and 4096"


def top_k_over_a_link() -> tuple[dict, str, str]:
    graph = _design_card()
    graph["6"]["inputs"]["top_k"] = ["20", 0]
    graph["20"] = node("PrimitiveInt", value=10**9)
    return graph, "6", "top_k is 1000000000, outside the range this input takes: set it between 1 and 4096"


def threshold_over_a_link() -> tuple[dict, str, str]:
    graph = _design_card()
    graph["6"]["inputs"]["min_cp"] = ["20", 0]
    graph["20"] = node("PrimitiveFloat", value=7.5)
    return graph, "6", "min_cp is 7.5, outside the range this input takes: set it between -1 and 1"


def a_book_as_the_subject() -> tuple[dict, str, str]:
    graph = {
        "1": node("MaSCStripSubject", prompt="a photo of a dog", subject=["20", 0]),
        "2": node("PreviewAny", source=["1", 0]),
        "20": node("PrimitiveString", value="dog " * 10_000),
    }
    return graph, "1", "subject is 40,000 characters long: this input takes at most 20,000"


OVER_LINKS = {
    "patch budget from an Int primitive": patch_budget_over_a_link,
    "top_k from an Int primitive": top_k_over_a_link,
    "min_cp from a Float primitive": threshold_over_a_link,
    "40,000 characters from a String primitive": a_book_as_the_subject,
}


def _refused(server, graph: dict, culprit: str, expected: str) -> str:
    entry = server.run(graph)
    assert hostapi.status(entry) == "error", hostapi.explain(entry)
    error = hostapi.error_of(entry)
    message = error["exception_message"].strip()
    assert error["node_id"] == culprit, hostapi.explain(entry)
    assert error["exception_type"].endswith("MascInputError"), hostapi.explain(entry)
    assert "\n" not in message, message
    assert message == expected or message.startswith(expected), message
    return message


@pytest.mark.parametrize("case", list(OVER_LINKS))
def test_a_value_over_a_link_from_a_core_primitive_is_refused_by_the_node(server, case):
    graph, culprit, expected = OVER_LINKS[case]()
    _refused(server, graph, culprit, expected)


def _switch(value: str) -> dict:
    """Core's If/Else Switch (0.33) passing a String primitive's text on: it can feed a combo input."""
    return {
        "30": node("PrimitiveString", value=value),
        "31": node("ComfySwitchNode", switch=False, on_false=["30", 0], on_true=["30", 0]),
    }


def test_a_model_path_over_a_link_is_never_opened(server, host):
    """An absolute path to a real checkpoint, and one climbing out of models/masc: refused as 'not a choice'."""
    if host.version < (0, 33, 0):
        pytest.skip("0.3.64 has no core node whose output links into a combo (its validation refuses STRING there)")
    real = os.path.join(host.models("masc"), ENCODER_NAME)
    assert os.path.isfile(os.path.join(real, "config.json"))
    for name in (real, os.path.join("..", "..", "models", "masc", ENCODER_NAME), "/etc"):
        graph = _design_card(model=["31", 0])
        graph.update(_switch(name))
        message = _refused(server, graph, "1", "model is '")
        assert "not one of its choices" in message, message


def _auto_mask(segmenter) -> dict:
    return {
        "2": node("LoadImage", image=EXAMPLE_PREFIX + "dog_00.jpg"),
        "5": node("MaSCAutoMask", segmenter=segmenter, images=["2", 0], subject="dog", threshold=0.4, dilation=0),
        "6": node("PreviewAny", source=["5", 2]),
    }


@pytest.mark.parametrize("socket", ["segmenter", "encoder"])
def test_text_through_the_switch_into_a_socket_is_refused_before_any_work(server, host, socket):
    """A STRING through core's If/Else Switch once reached the node's body: 'str' object has no attribute 'ready'."""
    if host.version < (0, 33, 0):
        pytest.skip("0.3.64 has no If/Else Switch (its validation refuses a STRING link into these sockets)")
    if socket == "segmenter":
        graph = _auto_mask(["31", 0])
        expected = "segmenter is not a MaSC segmenter ('clipseg' arrived): connect Load MaSC Auto Mask Model's"
        culprit = "5"
    else:
        graph = _design_card()
        graph["5"]["inputs"]["encoder"] = ["31", 0]
        expected = "encoder is not a MaSC encoder ('clipseg' arrived): connect Load MaSC Encoder's 'encoder' output"
        culprit = "5"
    graph.update(_switch("clipseg"))
    _refused(server, graph, culprit, expected)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_crafted_sam3_folder_is_refused_with_the_servers_memory_flat(server, host):
    """A 3 KB config.json asking 10^7 queries of weights holding 16 grew the server by 1,373 MiB before its refusal."""
    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5 in the driver to edit its config")
    import json
    import shutil

    source = os.path.join(host.models("sam3"), SAM3_NAME)
    crafted = os.path.join(host.models("sam3"), "masc-host-test-crafted-sam3")
    shutil.rmtree(crafted, ignore_errors=True)
    shutil.copytree(source, crafted)
    try:
        with open(os.path.join(crafted, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        config["detr_decoder_config"]["num_queries"] = 10**7
        with open(os.path.join(crafted, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(config, handle)
        # The real folder first, so what SAM3's first load imports is in memory before the measured one.
        warm = _auto_mask(["4", 0])
        warm["4"] = node("MaSCLoadSAM3Model", model=SAM3_NAME, device="cpu", precision="fp32", score_threshold=0.5)
        entry = server.run(warm)
        assert hostapi.status(entry) == "success", hostapi.explain(entry)
        before = _rss_mib(server.pid)
        graph = _auto_mask(["4", 0])
        graph["4"] = node(
            "MaSCLoadSAM3Model",
            model="masc-host-test-crafted-sam3",
            device="cpu",
            precision="fp32",
            score_threshold=0.5,
        )
        entry = server.run(graph)
        after = _rss_mib(server.pid)
        error = hostapi.error_of(entry)
        message = error["exception_message"].strip()
        assert error["node_id"] == "4" and "\n" not in message, hostapi.explain(entry)
        assert message.startswith(
            "SAM3 model folder 'models/sam3/masc-host-test-crafted-sam3': config.json asks "
            "detr_decoder_config.num_queries = 10000000"
        ), message
        assert host.dir not in message
        assert after - before < 100, (before, after)  # was +1,373 MiB
    finally:
        shutil.rmtree(crafted, ignore_errors=True)
