"""Values from a shared workflow: every node holds each input to its own declaration, and loaders stay in models/.

ComfyUI checks a combo's list and an INT/FLOAT's range only for a value typed into the widget; a value that
arrives over a link reaches the node as sent. These tests call the node functions as ComfyUI does, with such
values, and expect one line naming the input before the node does any work (the host suite sends the same
values over links from core primitive nodes in a real ComfyUI).
"""

from __future__ import annotations

import math
import os
import re
import shutil
from importlib import import_module

import pytest

from comfy_harness import import_pack
from socket_values import socket_value

PACK = import_pack()
NODES = PACK.nodes.NODE_CLASS_MAPPINGS
SERVER_PATH = re.compile(r"(^|[\s'(\"=])/(tmp|root|home|work|srv|opt|usr|etc|var|mnt)\b")
"""An absolute path of this machine in a message (the tests' folders live under /tmp)."""


def errors(pack):
    return import_module(pack.__name__ + ".masc_core.errors")


def valid_inputs(node_class) -> dict:
    """Every required input: a widget's default (a combo's first choice), a value of its type for a socket (the body
    never gets to use it when a widget value is refused)."""
    values = {}
    for name, declaration in node_class.INPUT_TYPES()["required"].items():
        kind, options = declaration[0], declaration[1]
        if isinstance(kind, list):  # an empty list: no files of that kind (LoRAs outside ComfyUI)
            values[name] = options.get("default", kind[0] if kind else "")
        elif kind in ("INT", "FLOAT", "BOOLEAN", "STRING"):
            values[name] = options.get("default", {"INT": 0, "FLOAT": 0.0, "BOOLEAN": False, "STRING": ""}[kind])
        else:
            values[name] = socket_value(PACK, kind)
    return values


def bounded_numbers():
    for node_id, node_class in sorted(NODES.items()):
        for name, (kind, options) in node_class.INPUT_TYPES()["required"].items():
            if kind in ("INT", "FLOAT") and "max" in options:
                yield node_id, name, kind, options


def refusal(pack, node_id: str, **changes) -> str:
    node_class = NODES[node_id]
    with pytest.raises(errors(pack).MascInputError) as refused:
        getattr(node_class(), node_class.FUNCTION)(**{**valid_inputs(node_class), **changes})
    message = str(refused.value)
    assert "\n" not in message and not SERVER_PATH.search(message), message
    return message


def test_every_node_checks_its_inputs(pack):
    assert all(getattr(node_class, "INPUTS_CHECKED", False) for node_class in pack.nodes.NODE_CLASS_MAPPINGS.values())


@pytest.mark.parametrize(
    "node_id,name,kind,options", list(bounded_numbers()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_number_over_a_link_is_held_to_the_widgets_range(pack, comfy_dirs, node_id, name, kind, options):
    high = options["max"]
    over = high + 1 if kind == "INT" else high + 0.5
    message = refusal(pack, node_id, **{name: over})
    assert message.startswith(f"{name} is {over:g}" if kind == "FLOAT" else f"{name} is {over},"), message
    assert "outside the range this input takes" in message
    if "min" in options:
        under = options["min"] - 1
        assert refusal(pack, node_id, **{name: under}).startswith(
            f"{name} is {under:g}" if kind == "FLOAT" else f"{name} is {under},"
        )


@pytest.mark.parametrize(
    "value,expected",
    [
        (10**6, "max_patches is 1000000, outside the range this input takes: set it between 16 and 4096"),
        (512.0, "max_patches is 512.0, not a whole number"),
        (True, "max_patches is True, not a whole number"),
        ("1024", "max_patches is '1024', not a whole number"),
    ],
)
def test_the_patch_budget_that_ran_for_ten_minutes_is_refused_at_once(pack, comfy_dirs, value, expected):
    assert (
        refusal(pack, "MaSCLoadEncoder", max_patches=value) == expected + ": connect an INT or type a number"
        if "whole" in expected
        else refusal(pack, "MaSCLoadEncoder", max_patches=value) == expected
    )


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_floats_that_are_not_finite_are_refused(pack, comfy_dirs, value):
    assert refusal(pack, "MaSCGate", min_cp=value).startswith(f"min_cp is {value!r}: give a finite number")


def test_other_kinds_of_value_are_refused_with_their_input_named(pack, comfy_dirs):
    assert refusal(pack, "MaSCGate", reject_small_masks=1).startswith("reject_small_masks is 1, not true or false")
    assert refusal(pack, "MaSCStripSubject", prompt=["a", "list"]).startswith("prompt is ['a', 'list'], not text")
    assert refusal(pack, "MaSCStripSubject", subject="x" * 20_001) == (
        "subject is 20,001 characters long: this input takes at most 20,000"
    )
    assert refusal(pack, "MaSCSelectBest", rank_by="cp; rm -rf /").startswith(
        "rank_by is 'cp; rm -rf /', not one of its choices ('cp', 'pf', 'both'): pick one from the list"
    )
    assert refusal(pack, "MaSCLoadEncoder", device="cuda:7").startswith("device is 'cuda:7', not one of its choices")
    # An escape sequence in a refused value is shown escaped, never sent to a log or terminal as is.
    assert "\x1b" not in refusal(pack, "MaSCLoadEncoder", precision="\x1b[2Jfp32")


def test_values_within_the_declarations_reach_the_node(pack):
    strip = NODES["MaSCStripSubject"]()
    assert strip.strip(prompt="a photo of a dog on the beach", subject="dog")["result"][0] == "a photo of on the beach"
    assert strip.strip("a photo of a dog", "dog")["result"][0] == "a photo of"  # positional, as a script might call it


# ---------------------------------------------------------------- loaders: model folders only, two known ids


@pytest.fixture
def outside(tmp_path, naflex_dir):
    """A valid SigLIP2 checkpoint outside models/masc, and its path written with '..' from inside models/masc."""
    folder = tmp_path / "elsewhere" / "siglip2"
    shutil.copytree(naflex_dir, folder)
    return str(folder)


def _model_refusals(pack, node_id: str, names: list[str]) -> list[str]:
    return [refusal(pack, node_id, model=name, device="cpu", precision="fp32") for name in names]


def test_a_loader_opens_no_folder_outside_the_model_folders(pack, comfy_dirs, outside):
    models = os.path.join(comfy_dirs["models"], "masc")
    climbing = os.path.relpath(outside, models)
    assert climbing.startswith("..") and os.path.isfile(os.path.join(models, climbing, "config.json"))
    for message in _model_refusals(pack, "MaSCLoadEncoder", [outside, climbing]):
        assert "not one of its choices" in message, message


def test_the_host_resolver_itself_refuses_what_the_list_does_not_show(pack, comfy_dirs, outside):
    """Below the input check (say a future node that forgets it): the same refusal, whether the path exists or not."""
    host = import_module(pack.__name__ + ".nodes.host")
    models = os.path.join(comfy_dirs["models"], "masc")
    existing = [outside, os.path.relpath(outside, models), "/etc", "../../.."]
    missing = ["/no/such/folder", "../../no-such-folder"]
    messages = []
    for name in existing + missing:
        with pytest.raises(errors(pack).MascInputError) as refused:
            host.checkpoint_folder("masc", name, "google/siglip2-so400m-patch16-naflex")
        messages.append(str(refused.value).replace(name, "NAME"))
    assert len(set(messages)) == 1, messages  # no file-system probe: an existing path reads like a missing one
    assert messages[0] == (
        "model 'NAME' is not a checkpoint folder in models/masc: choose one the list shows, or put the checkpoint's "
        "folder (with config.json) in models/masc and refresh; only google/siglip2-so400m-patch16-naflex is downloaded "
        "by name"
    )


def test_only_the_packs_own_hub_ids_download(pack, comfy_dirs, monkeypatch):
    host = import_module(pack.__name__ + ".nodes.host")
    checkpoints = import_module(pack.__name__ + ".masc_core.models.checkpoints")
    asked = []

    def download(repo_id, **where):
        asked.append((repo_id, where.get("local_dir")))
        raise errors(pack).MascModelError("offline in this test")

    monkeypatch.setattr(checkpoints, "download", download)
    monkeypatch.setattr(host.models, "list_checkpoints", lambda kind: [])  # as on a server without the checkpoints
    monkeypatch.setattr(host.models, "local_hub_folder", lambda kind, repo_id: None)
    for node_id, known in (
        ("MaSCLoadEncoder", "google/siglip2-so400m-patch16-naflex"),
        ("MaSCLoadAutoMaskModel", "CIDAS/clipseg-rd64-refined"),
    ):
        loader = host.checkpoint_folder
        with pytest.raises(errors(pack).MascInputError):
            loader(node_id == "MaSCLoadEncoder" and "masc" or "clipseg", "someone/huge-model", known)
        for message in _model_refusals(pack, node_id, ["someone/huge-model"]):
            assert "not one of its choices" in message
        with pytest.raises(errors(pack).MascModelError, match="offline in this test"):
            getattr(NODES[node_id](), NODES[node_id].FUNCTION)(
                **{**valid_inputs(NODES[node_id]), "model": known, "device": "cpu"}
            )
    kinds = [os.path.basename(os.path.dirname(local)) for _, local in asked]
    assert [repo for repo, _ in asked] == ["google/siglip2-so400m-patch16-naflex", "CIDAS/clipseg-rd64-refined"]
    assert kinds == ["masc", "clipseg"]  # into models/<kind>/owner--name, nowhere else


def test_the_gated_sam3_id_downloads_into_models_sam3_and_says_how_to_get_access(pack, comfy_dirs, monkeypatch):
    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    host = import_module(pack.__name__ + ".nodes.host")
    checkpoints = import_module(pack.__name__ + ".masc_core.models.checkpoints")
    asked = []

    def download(repo_id, **where):
        asked.append((repo_id, where.get("local_dir")))
        raise errors(pack).MascModelError(
            f"could not get '{repo_id}' from the Hugging Face Hub (401 gated): check the id"
        )

    monkeypatch.setattr(checkpoints, "download", download)
    monkeypatch.setattr(host.models, "list_checkpoints", lambda kind: [])
    monkeypatch.setattr(host.models, "local_hub_folder", lambda kind, repo_id: None)
    loader = NODES["MaSCLoadSAM3Model"]
    with pytest.raises(errors(pack).MascModelError) as error:
        loader().load(model="facebook/sam3", device="cpu", precision="fp32", score_threshold=0.5)
    message = str(error.value)
    assert "\n" not in message and "facebook/sam3 is gated" in message and "hf auth login" in message
    assert [(repo, os.path.basename(os.path.dirname(local))) for repo, local in asked] == [("facebook/sam3", "sam3")]
    with pytest.raises(errors(pack).MascInputError, match="not one of its choices"):  # only the one Hub id downloads
        loader().load(model="someone/other-sam3", device="cpu", precision="fp32", score_threshold=0.5)
    with pytest.raises(
        errors(pack).MascInputError, match="put the checkpoint's folder \\(with config.json\\) in models/sam3"
    ):
        host.checkpoint_folder("sam3", "someone/other-sam3", "facebook/sam3")


def test_a_listed_folder_still_loads(pack, comfy_dirs):
    encoder = NODES["MaSCLoadEncoder"]().load(
        model="google/siglip2-so400m-patch16-naflex", device="cpu", precision="fp32", max_patches=256
    )[0]
    assert os.path.samefile(encoder.core.info.folder, comfy_dirs["checkpoint"])
