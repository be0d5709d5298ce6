"""Shared model folders and shared sockets: what a crafted folder or a wrong link costs before it is refused.

- A checkpoint folder's config is held against the shapes in its safetensors headers before any module is built
  (SigLIP2, CLIPSeg, SAM3; node and command line alike): a config asking 10^7 queries or 3,000 layers of weights
  that hold 16 and 2 is one line naming the file and the field, and nothing is built.
- A processor config that does not fit its backbone (or asks 7000 px) is the same kind of line, not an internal
  error after every photo was resized.
- Every socket of every node is checked for its type where it arrives (one table, ``nodes/inputs.SOCKETS``).
- A refusal a workflow sees names model folders as models/<kind>/<name>, never the server's absolute path.
- Cancel pressed while a loader runs ends the load at the next stage, as an interruption.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import import_module

import pytest

from comfy_harness import import_pack, stand_in_loras
from conftest import call
from masc_core.errors import MascModelError
from masc_core.models import checkpoints, siglip_checkpoint
from masc_core.models.clipseg import ClipSegSegmenter
from masc_core.models.encoder import MascEncoder
from masc_core.models.sam3 import Sam3Segmenter
from masc_core.models.weight_shapes import MAX_INPUT_SIDE
from socket_values import socket_value
from test_node_inputs import SERVER_PATH, valid_inputs

PACK = import_pack()
NODES = PACK.nodes.NODE_CLASS_MAPPINGS
LOADERS = {"sam3": Sam3Segmenter, "clipseg": ClipSegSegmenter, "siglip": MascEncoder, "siglip_fixed": MascEncoder}


def edit_json(folder, name: str, change) -> None:
    path = os.path.join(folder, name)
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def sam3_processor_config(folder, size: int) -> None:
    """transformers 5's single processor_config.json in place of preprocessor_config.json, asking ``size`` px."""
    with open(os.path.join(folder, "preprocessor_config.json"), encoding="utf-8") as handle:
        image_processor = json.load(handle)
    os.remove(os.path.join(folder, "preprocessor_config.json"))
    image_processor["size"] = {"height": size, "width": size}
    with open(os.path.join(folder, "processor_config.json"), "w", encoding="utf-8") as handle:
        json.dump({"processor_class": "Sam3Processor", "image_processor": image_processor}, handle)


def header_claims(folder, length: int) -> None:
    """model.safetensors whose first 8 bytes claim a header of ``length`` bytes."""
    path = os.path.join(folder, "model.safetensors")
    with open(path, "r+b") as handle:
        handle.write(length.to_bytes(8, "little"))


CRAFTED = {
    # family, what is changed, the words the refusal must hold
    "sam3 queries 10^7": (
        "sam3",
        lambda f: edit_json(f, "config.json", lambda c: c["detr_decoder_config"].update(num_queries=10**7)),
        "config.json asks detr_decoder_config.num_queries = 10000000, but model.safetensors holds "
        "detr_decoder.query_embed.weight of shape [16, 32]",
    ),
    "sam3 3000 ViT layers": (
        "sam3",
        lambda f: edit_json(
            f, "config.json", lambda c: c["vision_config"]["backbone_config"].update(num_hidden_layers=3000)
        ),
        "config.json asks vision_config.backbone_config.num_hidden_layers = 3000, but model.safetensors holds 2 of "
        "vision_encoder.backbone.layers.N",
    ),
    "sam3 vocabulary": (
        "sam3",
        lambda f: edit_json(f, "config.json", lambda c: c["text_config"].update(vocab_size=10**9)),
        "config.json asks text_config.vocab_size = 1000000000",
    ),
    "sam3 processor 1008 px": (
        "sam3",
        lambda f: sam3_processor_config(f, 1008),
        "processor_config.json asks 1008x1008 inputs, but the backbone takes 224x224",
    ),
    "sam3 processor 7000 px": (
        "sam3",
        lambda f: sam3_processor_config(f, 7000),
        "processor_config.json asks 7000x7000 inputs, but the backbone takes 224x224",
    ),
    "sam3 backbone 7000 px": (
        "sam3",
        lambda f: edit_json(f, "config.json", lambda c: c["vision_config"]["backbone_config"].update(image_size=7000)),
        "asks an input size of 7000 px (vision_config.backbone_config.image_size): this loader takes 1 to "
        f"{MAX_INPUT_SIDE} px",
    ),
    "sam3 queries not a number": (
        "sam3",
        lambda f: edit_json(f, "config.json", lambda c: c["detr_decoder_config"].update(num_queries="many")),
        "config.json cannot be read as a Sam3Config (Validation error for field 'num_queries'",
    ),
    "clipseg 3000 layers": (
        "clipseg",
        lambda f: edit_json(f, "config.json", lambda c: c["vision_config"].update(num_hidden_layers=3000)),
        "config.json asks vision_config.num_hidden_layers = 3000, but model.safetensors holds 4 of "
        "clip.vision_model.encoder.layers.N",
    ),
    "clipseg vocabulary": (
        "clipseg",
        lambda f: edit_json(f, "config.json", lambda c: c["text_config"].update(vocab_size=10**9)),
        "config.json asks text_config.vocab_size = 1000000000, but model.safetensors holds "
        "clip.text_model.embeddings.token_embedding.weight",
    ),
    "clipseg processor 7000 px": (
        "clipseg",
        lambda f: edit_json(f, "preprocessor_config.json", lambda c: c.update(size={"height": 7008, "width": 7008})),
        f"preprocessor_config.json asks an input size of 7008 px (size): this loader takes 1 to {MAX_INPUT_SIDE} px",
    ),
    "siglip 3000 layers": (
        "siglip",
        lambda f: edit_json(f, "config.json", lambda c: c["vision_config"].update(num_hidden_layers=3000)),
        "config.json asks vision_config.num_hidden_layers = 3000, but model.safetensors holds 2 of "
        "vision_model.encoder.layers.N",
    ),
    "siglip vocabulary": (
        "siglip",
        lambda f: edit_json(f, "config.json", lambda c: c["text_config"].update(vocab_size=10**9)),
        "config.json asks text_config.vocab_size = 1000000000",
    ),
    "siglip position grid": (
        "siglip",
        lambda f: edit_json(f, "config.json", lambda c: c["vision_config"].update(num_patches=10**8)),
        "config.json asks vision_config.num_patches = 100000000",
    ),
    "siglip heads": (
        "siglip",
        lambda f: edit_json(f, "config.json", lambda c: c["vision_config"].update(num_attention_heads=7)),
        "config.json's vision_config.num_attention_heads (7) does not divide its width (64)",
    ),
    "siglip fixed processor": (
        "siglip_fixed",
        lambda f: edit_json(f, "preprocessor_config.json", lambda c: c.update(size={"height": 384, "width": 384})),
        "preprocessor_config.json asks 384x384 inputs, but the vision tower takes 224x224",
    ),
    "header of 2^60 bytes": (
        "siglip",
        lambda f: header_claims(f, 2**60),
        "'model.safetensors' could not be read (no safetensors header, or cut short)",
    ),
}


@pytest.fixture
def never_built(monkeypatch):
    """Fails the test if any model is built or any weight read: the refusal must come first."""

    def built(*args, **kwargs):
        raise AssertionError("a module was built before the folder was refused")

    monkeypatch.setattr(checkpoints, "load_pretrained", built)
    monkeypatch.setattr(siglip_checkpoint, "load_model", built)
    monkeypatch.setattr(siglip_checkpoint, "read_safetensors", built)


def crafted_copy(case: str, tmp_path, sources: dict) -> tuple[str, str]:
    family, change, _ = CRAFTED[case]
    folder = tmp_path / "crafted"
    shutil.copytree(sources[family], folder)
    change(str(folder))
    return family, str(folder)


@pytest.fixture
def sources(naflex_dir, fixed_dir, tiny_clipseg_dir, tiny_sam3_dir) -> dict:
    return {"siglip": naflex_dir, "siglip_fixed": fixed_dir, "clipseg": tiny_clipseg_dir, "sam3": tiny_sam3_dir}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_config_that_does_not_fit_its_weights_is_one_line_before_anything_is_built(
    case, tmp_path, sources, never_built
):
    if CRAFTED[case][0] == "sam3":
        pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    family, folder = crafted_copy(case, tmp_path, sources)
    with pytest.raises(MascModelError) as refused:
        LOADERS[family].load(folder, device="cpu")
    message = str(refused.value)
    assert CRAFTED[case][2] in message and "\n" not in message, message
    assert "re-download" in message  # and what to do


@pytest.mark.parametrize("family", list(LOADERS))
def test_the_untouched_folders_still_pass_the_check(family, sources):
    loaded = LOADERS[family].load(sources[family], device="cpu")
    assert loaded.info.weight_shapes().shapes  # the check read every header, and loading went on


def test_the_weights_of_a_video_checkpoint_are_checked_under_its_detector(tiny_sam3_dir, tmp_path, never_built):
    """A sam3_video config nests the detector's sizes; its checked sizes are the detector's."""
    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    folder = tmp_path / "video"
    shutil.copytree(tiny_sam3_dir, folder)
    edit_json(
        folder,
        "config.json",
        lambda c: (
            c.clear()
            or c.update(
                model_type="sam3_video",
                detector_config=dict(
                    json.load(open(os.path.join(tiny_sam3_dir, "config.json"))),
                    detr_decoder_config={"num_queries": 10**7, "hidden_size": 32, "num_layers": 1},
                ),
            )
        ),
    )
    with pytest.raises(MascModelError, match="detr_decoder_config.num_queries = 10000000"):
        Sam3Segmenter.load(str(folder), device="cpu")


@pytest.mark.parametrize("command", ["mask", "manifest"])
def test_the_command_line_refuses_a_processor_that_does_not_fit_in_one_line(command, tiny_sam3_dir, tmp_path):
    """`mask` and `manifest pairs --auto-masks` once exited with 'internal error (RuntimeError: The size of tensor a
    (5184) must match ...)'."""
    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    folder = tmp_path / "sam3"
    shutil.copytree(tiny_sam3_dir, folder)
    sam3_processor_config(str(folder), 1008)
    photo = os.path.join(os.path.dirname(__file__), "data", "dreambench", "dog_00.jpg")
    if command == "mask":
        code, out, err = call(
            "mask",
            "--model",
            folder,
            "--device",
            "cpu",
            "--image",
            photo,
            "--subject",
            "dog",
            "--out-dir",
            tmp_path / "out",
        )
    else:
        photos = tmp_path / "photos"
        for subject in ("dog", "cat"):  # pairs need two subjects of two photos each
            (photos / subject).mkdir(parents=True)
            for view in ("00", "01"):
                shutil.copy(photo.replace("dog_00", f"{subject}_00"), photos / subject / f"{view}.jpg")
        code, out, err = call(
            "manifest", "pairs", photos, "-o", tmp_path / "m.jsonl", "--auto-masks", folder, "--device", "cpu"
        )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "internal error" not in lines[0], err
    assert "processor_config.json asks 1008x1008 inputs, but the backbone takes 224x224" in lines[0]


# ---------------------------------------------------------------- the nodes: paths, sockets, Cancel


def errors():
    return import_module(PACK.__name__ + ".masc_core.errors")


@pytest.fixture
def in_models(comfy_dirs):
    """Put a folder into the test ComfyUI's models/<kind>/<name> for one test."""
    made = []

    def place(source, kind: str, name: str) -> str:
        target = os.path.join(comfy_dirs["models"], kind, name)
        shutil.copytree(source, target)
        made.append(target)
        return target

    yield place
    for target in made:
        shutil.rmtree(target, ignore_errors=True)


@pytest.mark.parametrize(
    "case, node_id, kind",
    [
        ("sam3 queries 10^7", "MaSCLoadSAM3Model", "sam3"),
        ("sam3 processor 7000 px", "MaSCLoadSAM3Model", "sam3"),
        ("clipseg vocabulary", "MaSCLoadAutoMaskModel", "clipseg"),
        ("siglip 3000 layers", "MaSCLoadEncoder", "masc"),
    ],
)
def test_a_loader_node_names_the_folder_as_models_kind_name(
    case, node_id, kind, tmp_path, sources, in_models, never_built
):
    if kind == "sam3":
        pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    _, crafted = crafted_copy(case, tmp_path, sources)
    in_models(crafted, kind, "crafted-one")
    node = NODES[node_id]
    with pytest.raises(errors().MascModelError) as refused:
        getattr(node(), node.FUNCTION)(**{**valid_inputs(node), "model": "crafted-one", "device": "cpu"})
    message = str(refused.value)
    assert message.startswith(
        f"{'SAM3 model folder' if kind == 'sam3' else 'CLIPSeg model folder' if kind == 'clipseg' else 'model folder'} "
        f"'models/{kind}/crafted-one'"
    ), message
    assert CRAFTED[case][2] in message and not SERVER_PATH.search(message) and str(tmp_path) not in message


def test_a_clipseg_folder_in_models_sam3_is_refused_without_the_servers_path(tiny_clipseg_dir, in_models):
    pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    in_models(tiny_clipseg_dir, "sam3", "not-sam3")
    with pytest.raises(errors().MascModelError) as refused:
        NODES["MaSCLoadSAM3Model"]().load(model="not-sam3", device="cpu", precision="fp32", score_threshold=0.5)
    message = str(refused.value)
    assert message.startswith("SAM3 model folder 'models/sam3/not-sam3' holds a 'clipseg' model, not SAM3"), message
    assert not SERVER_PATH.search(message)


@pytest.mark.parametrize(
    "node_id, hub_id, kind",
    [
        ("MaSCLoadEncoder", "google/siglip2-so400m-patch16-naflex", "masc"),
        ("MaSCLoadSAM3Model", "facebook/sam3", "sam3"),
    ],
)
def test_an_offline_hub_id_says_which_models_folder_without_the_servers_path(
    node_id, hub_id, kind, comfy_dirs, monkeypatch
):
    """The real download function, offline: its line said 'put it in /.../models/sam3'."""
    if kind == "sam3":
        pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    import huggingface_hub

    host = import_module(PACK.__name__ + ".nodes.host")

    def offline(**kwargs):
        raise OSError("We have no connection or you passed local_files_only=True")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    monkeypatch.setattr(host.models, "list_checkpoints", lambda kind: [])  # as on a server without the folder
    monkeypatch.setattr(host.models, "local_hub_folder", lambda kind, repo_id: None)
    node = NODES[node_id]
    with pytest.raises(errors().MascModelError) as refused:
        getattr(node(), node.FUNCTION)(**{**valid_inputs(node), "model": hub_id, "device": "cpu"})
    message = str(refused.value)
    folder = f"models/{kind}/{hub_id.split('/')[-1]}"
    assert f"create the folder {folder} holding the files of https://huggingface.co/{hub_id}" in message, message
    assert not SERVER_PATH.search(message), message


def test_server_folders_are_named_as_a_workflow_sees_them(comfy_dirs):
    models = import_module(PACK.__name__ + ".nodes.host.models")
    root = comfy_dirs["models"]
    assert (
        models.without_server_paths(f"SAM3 model folder '{root}/sam3/x': bad")
        == "SAM3 model folder 'models/sam3/x': bad"
    )
    assert models.without_server_paths(f"put it in {root}/masc and choose it") == "put it in models/masc and choose it"
    assert models.without_server_paths(f"wrote {comfy_dirs['output']}/a/b.png") == "wrote output/a/b.png"
    # Any other absolute path keeps its last part only; text that merely holds slashes is left alone.
    assert models.without_server_paths("file '/home/someone/secret/x.json' is bad") == "file '.../x.json' is bad"
    assert models.without_server_paths("C:\\Users\\me\\x.png broke") == ".../x.png broke"
    gate = import_module(
        PACK.__name__ + ".masc_core.models.sam3"
    ).SAM3_GATE  # holds https://huggingface.co/facebook/sam3
    for text in ("cp_weight*CP + pf_weight/PF", "between 0 and 1 / 2", "fp16/bf16", "models/sam3/<name>", gate):
        assert models.without_server_paths(text) == text


def socket_inputs():
    """(node, input, type, required) for every input of every node that is a socket, not a widget."""
    for node_id, node_class in sorted(NODES.items()):
        spec = node_class.INPUT_TYPES()
        for section in ("required", "optional"):
            for name, declaration in (spec.get(section) or {}).items():
                kind = declaration[0]
                if not isinstance(kind, (list, tuple)) and kind not in ("INT", "FLOAT", "BOOLEAN", "STRING"):
                    yield node_id, name, kind, section == "required"


def test_every_socket_type_a_node_takes_is_checked_where_it_arrives():
    sockets = import_module(PACK.__name__ + ".nodes.inputs").SOCKETS
    unchecked = sorted({(node_id, name, kind) for node_id, name, kind, _ in socket_inputs() if kind not in sockets})
    assert not unchecked, unchecked


@pytest.mark.parametrize(
    "node_id, name, kind, required", list(socket_inputs()), ids=lambda v: v if isinstance(v, str) else ""
)
@pytest.mark.parametrize("value", ["abc", 7])
def test_a_plain_value_over_a_link_into_any_socket_is_one_line_naming_it(
    node_id, name, kind, required, value, comfy_dirs
):
    node = NODES[node_id]
    with stand_in_loras(PACK, {"x.safetensors": 0.1}):  # a LoRA name to pick (outside ComfyUI the list is empty)
        values = {**valid_inputs(node), name: value}
        with pytest.raises(errors().MascInputError) as refused:
            getattr(node(), node.FUNCTION)(**values)
    message = str(refused.value)
    assert (
        message.startswith(f"{name} is not ") and f"({value!r} arrived): connect " in message and "\n" not in message
    ), message


def test_a_value_of_the_right_type_passes_the_socket_check():
    inputs = import_module(PACK.__name__ + ".nodes.inputs")
    for kind in inputs.SOCKETS:
        value = socket_value(PACK, kind)
        assert inputs.check_value("x", value, (kind, {})) is value, kind
        with pytest.raises(errors().MascInputError):
            inputs.check_value("x", "text", (kind, {}))


class Cancelled(Exception):
    """Stands for ComfyUI's InterruptProcessingException."""


@pytest.mark.parametrize(
    "node_id, options",
    [
        ("MaSCLoadSAM3Model", {"model": "tiny-sam3", "score_threshold": 0.37}),
        ("MaSCLoadAutoMaskModel", {"model": "CIDAS/clipseg-rd64-refined"}),
        ("MaSCLoadEncoder", {"model": "google/siglip2-so400m-patch16-naflex", "max_patches": 272}),
    ],
)
def test_cancel_during_a_load_ends_it_at_the_next_stage_as_an_interruption(node_id, options, comfy_dirs, monkeypatch):
    """Cancel pressed 2 s into a 32 s load once took the whole load and ended as an error: now the load stops after
    the stage running when Cancel was pressed (here: after the folder check, before any weight is built)."""
    if node_id == "MaSCLoadSAM3Model":
        pytest.importorskip("transformers.models.sam3", reason="SAM3 needs transformers 5")
    execution = import_module(PACK.__name__ + ".nodes.host.execution")
    built = []
    monkeypatch.setattr(
        checkpoints, "load_pretrained", lambda *a, **k: built.append(a) or pytest.fail("built after Cancel")
    )
    monkeypatch.setattr(
        siglip_checkpoint, "load_model", lambda *a, **k: built.append(a) or pytest.fail("built after Cancel")
    )

    def pressed():
        raise Cancelled()

    monkeypatch.setattr(execution, "check_interrupt", pressed)
    node = NODES[node_id]
    with pytest.raises(Cancelled):
        node().load(device="cpu", precision="fp32", **options)
    assert built == []
    monkeypatch.undo()
    loaded = node().load(device="cpu", precision="fp32", **options)[0]  # nothing half-loaded was kept: it loads now
    assert loaded.core.info.weight_shapes().shapes
