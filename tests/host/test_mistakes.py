"""The graph mistakes users make, sent to a real ComfyUI: each fails at the right node with one line that says
which input was wrong and what to do (ComfyUI's /history keeps it), never a silent wrong score."""

from __future__ import annotations

import pytest

from . import hostapi
from .conftest import ENCODER_NAME, EXAMPLE_PREFIX, NOT_SIGLIP_NAME
from .graphs import node

PROMPT = "a photo of a dog on the beach"


def _encoder(model: str = ENCODER_NAME) -> dict:
    return node("MaSCLoadEncoder", model=model, device="cpu", precision="fp32", max_patches=1024)


def _image(name: str) -> dict:
    return node("LoadImage", image=EXAMPLE_PREFIX + name)


def _cp_graph(model: str = ENCODER_NAME, *, reference_mask=("3", 0)) -> dict:
    return {
        "1": _encoder(model),
        "2": _image("dog_00.jpg"),
        "3": node("LoadImageMask", image=EXAMPLE_PREFIX + "dog_00_mask.png", channel="red"),
        "4": _image("dog_01.jpg"),
        "5": node(
            "MaSCConceptPreservation",
            encoder=["1", 0],
            reference_image=["2", 0],
            reference_mask=list(reference_mask),
            image=["4", 0],
            heatmaps=False,
        ),
        "6": node("PreviewAny", source=["5", 0]),
    }


def masks_of_another_batch_size() -> tuple[dict, str]:
    graph = {
        "1": _encoder(),
        "2": _image("dog_01.jpg"),
        "3": _image("dog_02.jpg"),
        "4": _image("cat_00.jpg"),
        "5": node("ImageBatch", image1=["2", 0], image2=["3", 0]),
        "6": node("ImageBatch", image1=["5", 0], image2=["4", 0]),  # 3 images
        "7": _image("dog_00_mask.png"),
        "8": _image("dog_01_mask.png"),
        "9": node("ImageBatch", image1=["7", 0], image2=["8", 0]),
        "10": node("ImageToMask", image=["9", 0], channel="red"),  # 2 masks
        "11": node(
            "MaSCPromptFollowing",
            encoder=["1", 0],
            image=["6", 0],
            mask=["10", 0],
            prompt=PROMPT,
            subject="dog",
            heatmaps=False,
        ),
        "12": node("PreviewAny", source=["11", 0]),
    }
    return graph, "11"


def latents_of_another_batch_size() -> tuple[dict, str]:
    graph = _cp_graph()
    graph["4"] = node("ImageBatch", image1=["20", 0], image2=["21", 0])  # 2 images
    graph["20"], graph["21"] = _image("dog_01.jpg"), _image("dog_02.jpg")
    graph["22"] = node("EmptyLatentImage", width=64, height=64, batch_size=3)  # 3 latents
    graph["23"] = node(
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
        latent=["22", 0],
    )
    graph["24"] = node("PreviewAny", source=["23", 5])
    return graph, "23"


def empty_load_image_mask() -> tuple[dict, str]:
    return _cp_graph(reference_mask=("2", 1)), "5"  # the photo has no alpha: Load Image's MASK is empty


def folder_that_is_not_siglip2() -> tuple[dict, str]:
    return _cp_graph(NOT_SIGLIP_NAME), "1"


def missing_model() -> tuple[dict, str]:
    # The templates' default: the paper's checkpoint, not in models/masc; the server runs with HF_HUB_OFFLINE=1.
    return _cp_graph("google/siglip2-so400m-patch16-naflex"), "1"


MISTAKES = {
    "masks of another batch size": (masks_of_another_batch_size, "mask has 2 masks for 3 images"),
    "latents of another batch size": (latents_of_another_batch_size, "latent has 3 samples for 2 images"),
    "empty Load Image mask": (empty_load_image_mask, "it is the empty 64x64 mask Load Image gives"),
    "a folder that is not SigLIP2": (folder_that_is_not_siglip2, "holds a 'clipseg' model, not SigLIP2"),
    "a missing model": (missing_model, "could not get 'google/siglip2-so400m-patch16-naflex'"),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_mistake_fails_at_its_node_with_one_line(server, mistake):
    build, expected = MISTAKES[mistake]
    graph, culprit = build()
    entry = server.run(graph)
    assert hostapi.status(entry) == "error", f"{mistake}: {hostapi.explain(entry)}"
    error = hostapi.error_of(entry)
    message = error["exception_message"].strip()
    assert error["node_id"] == culprit, hostapi.explain(entry)
    assert error["exception_type"].endswith(("MascInputError", "MascModelError")), hostapi.explain(entry)
    assert expected in message and "\n" not in message, message


def test_missing_model_names_where_to_put_the_folder(server, host):
    graph, _ = missing_model()
    message = hostapi.error_of(server.run(graph))["exception_message"]
    # The folder as a workflow sees it, never the server's path (which once stood here).
    assert "create the folder models/masc/" in message and host.dir not in message, message


def test_a_model_the_menu_does_not_list_is_refused_before_running(server, host):
    """A workflow naming a folder the user does not have: ComfyUI's own validation names the input. ComfyUI 0.3.64
    validates only V1 combo lists (a V3 Combo's options are not checked there): on it the node's own check of its
    choices refuses the name, in one line, before any model is built."""
    graph = _cp_graph("no-such-checkpoint")
    if host.version > (0, 3, 64):
        with pytest.raises(hostapi.ComfyError) as refused:
            server.queue(graph)
        errors = refused.value.body["node_errors"]["1"]["errors"]
        assert any(e["extra_info"].get("input_name") == "model" for e in errors), errors
        return
    entry = server.run(graph)
    error = hostapi.error_of(entry)
    message = error["exception_message"].strip()
    assert error["node_id"] == "1" and error["exception_type"].endswith("MascInputError"), hostapi.explain(entry)
    assert message.startswith("model is 'no-such-checkpoint', not one of its choices (") and message.endswith(
        "): pick one from the list"
    ), message
    assert "masc-host-test-siglip2" in message, message
    assert "\n" not in message, message
