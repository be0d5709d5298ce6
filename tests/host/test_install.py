"""The pack installed in a real ComfyUI: it loads, copies its examples, declares every node fully, serves its templates,
help pages and subgraph blueprints."""

from __future__ import annotations

import filecmp
import json
import os
import re

import pytest

from .conftest import ENCODER_NAME, EXAMPLE_PREFIX, NOT_SIGLIP_NAME, ROOT, SEGMENTER_NAME, pack_mappings
from .graphs import BLUEPRINTS, UI_WORKFLOWS


def test_pack_is_a_copy_of_the_repository_without_git_or_ci(host, installed):
    copied = set(installed["files"])
    assert {"__init__.py", "pyproject.toml", "web/masc_scores.js"} <= copied
    assert not any(name.split("/")[0] in (".git", ".ci") for name in copied)
    for folder, dirs, _ in os.walk(host.pack_dir):
        assert ".git" not in dirs and ".ci" not in dirs, folder


def test_pack_loads_without_errors(server, host):
    log = server.log()
    loaded = re.search(
        r"\d+\.\d+ seconds( \(IMPORT FAILED\))?: .*custom_nodes[/\\]" + re.escape(host.pack_name) + r"\s*$", log, re.M
    )
    assert loaded, f"no import line for {host.pack_name} in the log"
    assert "IMPORT FAILED" not in loaded.group(0), loaded.group(0)
    assert "MaSC: example inputs not copied" not in log


def test_example_inputs_are_copied_without_overwriting_a_users_file(server, installed):
    source = os.path.join(ROOT, "example_inputs")
    names = [name for name in os.listdir(source) if name.startswith(EXAMPLE_PREFIX)]
    assert len(names) >= 6
    for name in names:
        copied = os.path.join(installed["input"], name)
        if copied == installed["users_file"]:
            with open(copied, "rb") as handle:
                assert b"a user's own copy" in handle.read(64), "the pack overwrote a user's file"
        else:
            assert filecmp.cmp(os.path.join(source, name), copied, shallow=False), name


def combo_choices(spec: list) -> list | None:
    """A choice input's options, as V1 lists them (``[[...], {...}]``) or V3 (``["COMBO", {"options": [...]}]``)."""
    if isinstance(spec[0], list):
        return spec[0]
    return spec[1].get("options") if spec[0] == "COMBO" else None


HOST_LISTED = {"model", "sampler_name", "scheduler", "lora_name"}
"""Choices the server lists from what it has (model folders, core's samplers): the driver's own lists differ.
models/loras may be empty (a host with no LoRA yet); the others never are."""


def test_object_info_declares_every_node_input_and_output(server, host):
    pack = pack_mappings()
    info = server.request("/object_info")
    for node_id, cls in pack.nodes.NODE_CLASS_MAPPINGS.items():
        assert node_id in info, f"{node_id} is missing from /object_info"
        entry = info[node_id]
        # Served from a V3 schema: core's V3 info (comfy_api's NodeInfoV1, every field) always carries "experimental";
        # server.py's V1 info only for a node that declares itself experimental (none of ours).
        assert "experimental" in entry and not entry["experimental"], f"{node_id} is not a V3 node"
        assert entry["display_name"] == pack.nodes.NODE_DISPLAY_NAME_MAPPINGS[node_id]
        assert entry["category"] == "MaSC" and entry["description"] == cls.DESCRIPTION
        assert entry["python_module"] == f"custom_nodes.{host.pack_name}", "another copy of the pack was loaded"
        declared = cls.INPUT_TYPES()
        for section in ("required", "optional"):
            served = entry["input"].get(section, {})
            assert list(served) == list(declared.get(section, {})), f"{node_id}: {section} inputs or their order"
            for name, spec in served.items():
                kind, options = declared[section][name][0], dict(declared[section][name][1])
                assert len(spec) > 1 and spec[1].get("tooltip") == options.pop("tooltip"), f"{node_id}.{name}"
                if isinstance(kind, list) and name in HOST_LISTED:
                    choices = combo_choices(spec)  # the server's own folders and samplers
                    assert (choices or name == "lora_name") and all(isinstance(c, str) for c in choices), name
                elif isinstance(kind, list):
                    assert combo_choices(spec) == kind, f"{node_id}.{name}"
                else:
                    assert spec[0] == kind, f"{node_id}.{name}: {spec[0]} for {kind}"
                for option, value in options.items():  # default, min, max, step, round, multiline, ...
                    assert spec[1].get(option) == value, f"{node_id}.{name}.{option}: {spec[1].get(option)!r}"
        assert set(declared.get("hidden", {})) <= set(entry["input"].get("hidden", {})), node_id  # V3 adds "prompt"
        assert entry["output"] == list(cls.RETURN_TYPES) and entry["output_name"] == list(cls.RETURN_NAMES)
        assert entry["output_tooltips"] == list(cls.OUTPUT_TOOLTIPS) and all(entry["output_tooltips"]), node_id
        assert entry["output_node"] == bool(getattr(cls, "OUTPUT_NODE", False)), node_id
    strangers = {k for k, v in info.items() if k.startswith("MaSC") and k not in pack.nodes.NODE_CLASS_MAPPINGS}
    assert not strangers, f"MaSC nodes this checkout does not define: {strangers}"


def test_model_menus_list_the_local_checkpoint_folders(server):
    encoder = combo_choices(
        server.request("/object_info/MaSCLoadEncoder")["MaSCLoadEncoder"]["input"]["required"]["model"]
    )
    segmenter = combo_choices(
        server.request("/object_info/MaSCLoadAutoMaskModel")["MaSCLoadAutoMaskModel"]["input"]["required"]["model"]
    )
    assert ENCODER_NAME in encoder and NOT_SIGLIP_NAME in encoder and "google/siglip2-so400m-patch16-naflex" in encoder
    assert SEGMENTER_NAME in segmenter


def test_templates_are_listed(server, host):
    names = {os.path.splitext(os.path.basename(p))[0] for p in UI_WORKFLOWS}
    assert set(server.request("/api/workflow_templates").get(host.pack_name, [])) == names


def test_help_pages_are_served_where_the_node_library_fetches_them(server, host):
    """The front end's node help fetches /extensions/<pack>/docs/<NodeClass>.md from the pack's web directory."""
    for node_id in pack_mappings().nodes.NODE_CLASS_MAPPINGS:
        text = server.request(f"/extensions/{host.pack_name}/docs/{node_id}.md", raw=True).decode("utf-8")
        assert text.startswith("# ") and "## Inputs" in text, node_id


def test_search_aliases_reach_object_info(server, host):
    info = server.request("/object_info")
    aliases = info["MaSCSampleUntil"].get("search_aliases")
    if host.version < (0, 33, 0):
        assert aliases is None  # 0.3.64 does not serve them (the attribute is ignored)
    else:
        assert "rejection sampling" in aliases, aliases


def test_blueprints_are_served_where_the_front_end_lists_them(server, host):
    """Core after 0.3.64 serves every custom_nodes/*/subgraphs/*.json at /global_subgraphs (the list) and
    /global_subgraphs/<id> (the file's text). ComfyUI 0.3.64 has no such route: there the files are inert."""
    names = {os.path.splitext(os.path.basename(path))[0]: path for path in BLUEPRINTS}
    if host.version <= (0, 3, 64):
        assert server.status_of("/global_subgraphs") == 404
        return
    listed = server.request("/global_subgraphs")
    ours = {
        entry["name"]: entry_id
        for entry_id, entry in listed.items()
        if entry["source"] == "custom_node" and entry["info"]["node_pack"] == f"custom_nodes.{host.pack_name}"
    }
    assert set(ours) == set(names)
    for name, entry_id in ours.items():
        with open(names[name], encoding="utf-8") as handle:
            assert server.request(f"/global_subgraphs/{entry_id}")["data"] == handle.read(), name


@pytest.mark.parametrize("path", UI_WORKFLOWS, ids=os.path.basename)
def test_template_is_served_with_its_thumbnail(server, host, path):
    base = f"/api/workflow_templates/{host.pack_name}/{os.path.splitext(os.path.basename(path))[0]}"
    assert server.status_of(base + ".json") == 200
    assert server.status_of(base + ".jpg") == 200, "no thumbnail: the templates browser shows a blank card"
    assert server.request(base + ".jpg", raw=True)[:3] == b"\xff\xd8\xff", "the thumbnail is not a JPEG"


def test_requires_comfyui_admits_this_host(host):
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        requirement = tomllib.load(handle)["tool"]["comfy"]["requires-comfyui"]
    match = re.fullmatch(r">=\s*(\d+(?:\.\d+)*)", requirement)
    assert match, f"requires-comfyui {requirement!r}: expected '>=X.Y.Z'"
    assert host.version >= tuple(int(p) for p in match.group(1).split(".")), (
        f"ComfyUI {host.label} is older than {requirement}"
    )


def test_the_hosts_own_reader_of_pyproject_sees_the_registry_fields(host, installed):
    """ComfyUI's comfy_config (what it and the Registry tooling read) parses our pyproject as intended."""
    code = (
        "import json, sys; sys.path[0] = '.'; from comfy_config import config_parser; "
        "c = config_parser.extract_node_configuration(sys.argv[1]); "
        "print(json.dumps({'os': c.project.supported_os, 'accelerators': c.project.supported_accelerators, "
        "'comfyui': c.project.supported_comfyui_version, 'repository': c.project.urls.repository, "
        "'icon': c.tool_comfy.icon, 'publisher': c.tool_comfy.publisher_id}))"
    )
    probed = host.run_python("-c", code, host.pack_dir, timeout=300)
    if probed.returncode != 0 and "No module named 'comfy_config'" in probed.stderr:
        pytest.skip(f"ComfyUI {host.label} has no comfy_config")
    assert probed.returncode == 0, probed.stderr[-3000:]
    seen = json.loads(probed.stdout.strip().splitlines()[-1])
    # No accelerator listed: ComfyUI-Manager reads one as exclusive (see test_packaging).
    assert seen["os"] == ["OS Independent"] and seen["accelerators"] == [], seen
    assert (
        seen["comfyui"].startswith(">=") and seen["repository"].startswith("https://") and seen["icon"].endswith(".png")
    )
    assert seen["publisher"], seen


def test_comfyui_starts_and_serves_with_two_copies_of_the_pack(host, installed, out_dir):
    """A Registry or Manager install beside a git clone under another folder name: the server must start, serve both
    copies' nodes and MaSC Pick's routes (registered once), and say in the log that a second copy was found."""
    import json
    import shutil
    import urllib.request

    from . import hostapi
    from .conftest import server_args

    second = host.pack_dir + "-second-copy"
    shutil.rmtree(second, ignore_errors=True)
    shutil.copytree(host.pack_dir, second, ignore=shutil.ignore_patterns("__pycache__"))
    args = server_args(host, installed)
    args[args.index("--whitelist-custom-nodes") + 1 : args.index("--whitelist-custom-nodes") + 2] = [
        host.pack_name,
        os.path.basename(second),
    ]
    try:
        started = hostapi.start_server(host.python, host.dir, args, os.path.join(out_dir, "server-two-copies.log"))
        try:
            info = started.request("/object_info/MaSCPick")
            request = urllib.request.Request(
                started.url + "/masc/pick/hello",
                data=json.dumps({"client": "tab"}).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                hello = response.status
            log = started.log()
        finally:
            started.stop()
    finally:
        shutil.rmtree(second, ignore_errors=True)
    assert "MaSCPick" in info and hello == 200
    assert "another copy of the pack is installed" in log
    # Both copies imported: core's import-times list marks a failed one. (Core's own modules may fail on a host
    # without their extras, e.g. nodes_audio.py without torchaudio: not this pack's business.)
    for copy in (host.pack_name, os.path.basename(second)):
        imported = re.search(
            r"seconds( \(IMPORT FAILED\))?: .*custom_nodes[/\\]" + re.escape(copy) + r"\s*$", log, re.M
        )
        assert imported and not imported.group(1), f"{copy}: {imported and imported.group(0)}"
