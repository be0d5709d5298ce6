"""The front end the host ships (headless Debian Chromium + Playwright): workflows load with their widget values and
run from the page with one Queue press, the report boxes show the scores, read-only, never saved; the images saved
carry the workflow and the scores; a run leaves every node readable; the templates browser lists our workflows in
order, with their thumbnails. Classic renderer, then the Vue one.

One browser session per renderer (``browser.py``, run with the host's interpreter, which has Playwright);
the tests read its result. With ``MASC_WRITE_THUMBNAILS=1`` the classic session's thumbnails are also
written beside the UI workflows (``workflows/<name>.jpg``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import time

import pytest
from PIL import Image

from . import hostapi
from .conftest import ENCODER_NAME, EXAMPLE_PREFIX, HERE, ROOT, SEGMENTER_NAME, pack_mappings, write_json
from .graphs import BLUEPRINTS, DIT_LOADERS, UI_WORKFLOWS, check_saved_scores, load, node, page_widgets
from workflow_specs import all_nodes, subgraphs_of  # tests/ is on the path (tests/conftest.py)

NAMES = [os.path.splitext(os.path.basename(p))[0] for p in UI_WORKFLOWS]


def _types(path: str) -> set[str]:
    """Every node type of a UI workflow, those inside its subgraph definitions (a folded generator's) included."""
    return {node["type"] for node in all_nodes(load(path))}


RUN_FROM_PAGE = [name for name, path in zip(NAMES, UI_WORKFLOWS) if not _types(path) & DIT_LOADERS]
"""Workflows the page runs; the DiT templates' text encoders cannot exist here (they run in test_templates.py)."""
BLUEPRINT_NAMES = [os.path.splitext(os.path.basename(p))[0] for p in BLUEPRINTS]
PROMPT, SUBJECT = "a photo of a dog on the beach", "dog"


def _load_image(stem: str) -> dict:
    return {"type": "LoadImage", "widgets": {"image": f"{EXAMPLE_PREFIX}{stem}.jpg"}}


def _load_mask(stem: str) -> dict:
    return {"type": "LoadImageMask", "widgets": {"image": f"{EXAMPLE_PREFIX}{stem}_mask.png", "channel": "red"}}


# Each blueprint as a user places it: from the search box, its inputs wired to Load Image nodes, its text typed into
# the widgets it shows, its outputs shown by Preview Any nodes.
BLUEPRINT_PLAN = [
    {
        "name": "MaSC score a pair",
        "typed": {"prompt": PROMPT, "subject": SUBJECT},
        "show": ["cp", "pf", "stripped_prompt"],
        "wire": {
            "reference_image": _load_image("dog_00"),
            "reference_mask": _load_mask("dog_00"),
            "image": _load_image("dog_01"),
            "mask": _load_mask("dog_01"),
        },
    },
    {
        "name": "MaSC best-of-N",
        "typed": {"prompt": PROMPT, "subject": SUBJECT},
        "show": ["ranking"],
        "wire": {"reference_image": _load_image("dog_00"), "images": _load_image("dog_01")},
    },
]
PICK_TILES = [1]
"""MaSC Pick's dialog: the browser clicks the second tile shown (not the default, the first) and keeps it."""
# Settings a fresh user folder gets before the page opens: no first-visit templates dialog, no overlays in screenshots.
BASE_SETTINGS = {
    "Comfy.TutorialCompleted": True,
    "Comfy.Graph.CanvasInfo": False,
    "Comfy.Minimap.Visible": False,
    "Comfy.NodeBadge.NodeSourceBadgeMode": "None",
}


def _browse(host, server, installed, out_dir, sd15, vue: bool) -> dict:
    settings = os.path.join(installed["user"], "default", "comfy.settings.json")
    os.makedirs(os.path.dirname(settings), exist_ok=True)
    write_json(settings, {**BASE_SETTINGS, "Comfy.VueNodes.Enabled": vue})
    server.request("/free", {"unload_models": False, "free_memory": True})  # run from scratch, not from cache
    time.sleep(1.5)
    label = "vue" if vue else "classic"
    folder = os.path.join(out_dir, f"browser-{label}")
    thumbnails = os.path.join(folder, "thumbnails")
    os.makedirs(thumbnails, exist_ok=True)
    plan = {
        "url": server.url,
        "out": folder,
        "pack": host.pack_name,
        "templates": not vue,
        "widgets": page_widgets(sd15=sd15),
        # The front end's other places, once (classic session): help pages, blueprints placed from the search box.
        "help": None if vue else sorted(pack_mappings().nodes.NODE_CLASS_MAPPINGS),
        "blueprints": None if vue else BLUEPRINT_PLAN,
        "pick_reload": None
        if vue
        else {
            "path": next(p for p in UI_WORKFLOWS if any(n["type"] == "MaSCPick" for n in load(p)["nodes"])),
            "pick": [1],
        },
        "workflows": [
            {
                "name": name,
                "path": path,
                "run": name in RUN_FROM_PAGE,
                "thumbnail": None if vue else os.path.join(thumbnails, name + ".jpg"),
                "pick": PICK_TILES if any(n["type"] == "MaSCPick" for n in load(path)["nodes"]) else None,
            }
            for name, path in zip(NAMES, UI_WORKFLOWS)
        ]
        + [{"name": "saved-" + name, "path": path, "run": False, "saved": True} for name, path in SAVED.items()],
    }
    plan_path, result_path = os.path.join(folder, "plan.json"), os.path.join(folder, "result.json")
    write_json(plan_path, plan)
    started = time.monotonic()
    # A guard against a hung browser only: runs wait on stalls, not on time (browser.queue_and_wait).
    driven = host.run_python(os.path.join(HERE, "browser.py"), plan_path, result_path, timeout=4 * 3600)
    if driven.returncode != 0 and "No module named 'playwright'" in driven.stderr:
        pytest.skip(f"{host.python} has no playwright")
    assert driven.returncode == 0, f"browser session failed:\n{driven.stdout[-2000:]}\n{driven.stderr[-6000:]}"
    with open(result_path, encoding="utf-8") as handle:
        result = json.load(handle)
    result["seconds"] = round(time.monotonic() - started, 1)
    if not vue and os.environ.get("MASC_WRITE_THUMBNAILS") == "1":
        for name in NAMES:
            made = os.path.join(thumbnails, name + ".jpg")
            if os.path.isfile(made) and (
                result["workflows"][name].get("run") == "success" or name not in RUN_FROM_PAGE
            ):
                shutil.copy(made, os.path.join(ROOT, "workflows", name + ".jpg"))
    return result


@pytest.fixture(scope="session")
def classic(host, server, installed, out_dir, sd15, loras):
    return _browse(host, server, installed, out_dir, sd15, vue=False)


@pytest.fixture(scope="session")
def vue(host, server, installed, out_dir, sd15, loras):
    result = _browse(host, server, installed, out_dir, sd15, vue=True)
    previews = [text for item in result["workflows"].values() for text in (item.get("preview_any") or {}).values()]
    if not any(previews):  # 1.27's renderer is a hidden experiment: no node's text shows, core's included
        pytest.skip(
            f"front end {result['frontend']}'s Vue renderer shows no node text at all (core's Preview Any included)"
        )
    return result


@pytest.fixture(params=["classic", "vue"])
def session(request):
    return request.getfixturevalue(request.param)


# The design card's nodes, under the names users search for and the README documents.
DESIGN_CARD_NAMES = {
    "MaSCLoadEncoder": "Load MaSC Encoder",
    "MaSCConceptPreservation": "MaSC Concept Preservation",
    "MaSCPromptFollowing": "MaSC Prompt Following",
    "MaSCStripSubject": "Strip Subject",
}


def test_front_end_shows_every_node_under_its_display_name(classic):
    mappings = pack_mappings().nodes.NODE_DISPLAY_NAME_MAPPINGS
    assert classic["node_titles"] == mappings
    assert {k: classic["node_titles"].get(k) for k in DESIGN_CARD_NAMES} == DESIGN_CARD_NAMES


def _ours() -> set[str]:
    return set(pack_mappings().nodes.NODE_CLASS_MAPPINGS)


@pytest.mark.parametrize("name", NAMES)
def test_workflow_loads_with_every_node_known_and_nothing_flagged(session, name):
    loaded = session["workflows"][name]
    assert loaded["unknown_types"] == [] and loaded["node_count"] == loaded["file_node_count"]
    # Loaders of models the user brings (a diffusion checkpoint) may be flagged; our nodes and the example inputs never.
    ours = _ours() | {"LoadImage", "LoadImageMask"}
    flagged = [entry for entry in loaded["flagged_on_load"] if entry.split(" ", 1)[1] in ours]
    assert flagged == [], f"flagged when opened: {flagged}"
    assert loaded["overlaps_on_load"] == []


@pytest.mark.parametrize("name", NAMES)
def test_workflow_opens_with_the_widget_values_it_was_saved_with(session, host, name):
    """Every widget reads as the file says (a widget order the front end disagrees with would shift the values). On a
    host older than the templates' (0.33), a core node may lack a widget core added later (0.3.64's CFGNorm has no
    second one): its widgets are compared as far as the host has them; the pack's own nodes always in full."""
    loaded = {entry["id"]: entry["widgets_values"] for entry in session["workflows"][name]["widgets_on_load"]}
    workflow = load(os.path.join(ROOT, "workflows", name + ".json"))
    subgraphs = subgraphs_of(workflow)
    saved = [(str(n["id"]), n) for n in workflow["nodes"] if n["type"] not in subgraphs]  # a subgraph node's own
    saved += [(f"{g}/{n['id']}", n) for g, graph in subgraphs.items() for n in graph["nodes"]]  # values mirror these
    assert saved
    for key, entry in saved:
        if entry.get("widgets_values") is not None:
            expected = entry["widgets_values"]
            if host.version < (0, 33) and not entry["type"].startswith("MaSC") and loaded.get(key) is not None:
                expected = expected[: len(loaded[key])]
            assert loaded.get(key) == expected, f"{entry['type']} #{key}"


SAVED = {
    os.path.splitext(os.path.basename(p))[0]: p
    for p in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "saved_workflows", "*.json")))
    if not p.endswith(".api.json")
}
"""Workflows earlier versions saved (workflow 4 of 0.2.0, every node of 0.2.0): opened, not run."""


@pytest.mark.parametrize("name", sorted(SAVED))
def test_a_saved_workflow_opens_with_every_node_known_and_every_widget_as_saved(session, name):
    """The nodes moved to core's V3 schema: a workflow saved before opens with no missing node and every widget value
    where it was (a shifted widget order would move values between widgets)."""
    opened = session["workflows"]["saved-" + name]
    assert opened["unknown_types"] == [] and opened["node_count"] == opened["file_node_count"], opened
    loaded = {entry["id"]: entry["widgets_values"] for entry in opened["widgets_on_load"]}
    for saved in load(SAVED[name])["nodes"]:
        if saved.get("widgets_values") is not None:
            assert loaded.get(str(saved["id"])) == saved["widgets_values"], f"{saved['type']} #{saved['id']}"


def _with_node(*kinds: str) -> list[str]:
    """The workflows the page runs that hold a node of one of ``kinds``."""
    return [name for name, path in zip(NAMES, UI_WORKFLOWS) if name in RUN_FROM_PAGE and _types(path) & set(kinds)]


@pytest.mark.parametrize("name", _with_node("SaveImage"))
def test_images_saved_from_the_page_carry_the_workflow_and_the_scores(session, installed, name):
    """The front end sends the workflow with the prompt: Save Image writes it, and the MaSC nodes' scores, into each
    PNG."""
    ran = session["workflows"][name]
    prompt = json.loads(ran["saved"]["prompt"])
    for save in (i for i, n in prompt.items() if n["class_type"] == "SaveImage"):
        images = [image for image in ran["sent_images"].get(save, []) if image.get("type") == "output"]
        assert images, f"Save Image #{save} showed no saved image"
        for image in images:
            path = os.path.join(installed["output"], image.get("subfolder", ""), image["filename"])
            with Image.open(path) as png:
                chunks = dict(png.text)
            assert {"workflow", "prompt", "masc"} <= set(chunks), f"{path}: text chunks {sorted(chunks)}"
            assert {n["type"] for n in json.loads(chunks["workflow"])["nodes"]} >= {"SaveImage"}
            check_saved_scores(path, prompt, save)


@pytest.mark.parametrize("name", _with_node("MaSCSampleUntil", "MaSCSampleUntilCustom"))
def test_sample_until_samples_its_candidates_in_one_queue_press(session, name):
    """One press runs the whole loop: the candidates until enough pass or the budget is spent, then Save Image."""
    ran = session["workflows"][name]
    prompt = json.loads(ran["saved"]["prompt"])
    for node_id in (i for i, n in prompt.items() if n["class_type"] in ("MaSCSampleUntil", "MaSCSampleUntilCustom")):
        inputs = prompt[node_id]["inputs"]
        if "rules" in inputs:  # the custom twin: its rules are MaSC Rules' widgets
            inputs = prompt[inputs["rules"][0]]["inputs"]
        report = "\n".join(ran["sent_text"].get(node_id, []))
        counts = re.match(r"(\d+) of (\d+) accepted after (\d+) of (\d+) candidates", report)
        assert counts, report
        passed, accept, used, budget = map(int, counts.groups())
        assert (accept, budget) == (inputs["accept"], inputs["max_candidates"]), report
        assert used == budget if passed < accept else used <= budget, report
        if passed >= accept:
            kept = accept
        else:  # shortfall: the best so far, or nothing downstream
            kept = 0 if inputs["on_shortfall"] == "block" else min(accept, used)
        saves = [
            i for i, n in prompt.items() if n["class_type"] == "SaveImage" and n["inputs"]["images"] == [node_id, 0]
        ]
        shown = sum(len(ran["sent_images"].get(i, [])) for i in saves)
        assert shown == kept * len(saves), (report, ran["sent_images"])


@pytest.mark.parametrize("name", _with_node("MaSCSampleUntil", "MaSCSampleUntilCustom"))
def test_sample_until_shows_each_round_on_the_node_while_it_runs(session, name):
    """While the run goes on, the page receives core's progress text for the Sample Until node (the pace, then a line
    per candidate of the round) and previews tagged with the node's id: what the front end draws on the node."""
    ran = session["workflows"][name]
    prompt = json.loads(ran["saved"]["prompt"])
    for node_id in (i for i, n in prompt.items() if n["class_type"] in ("MaSCSampleUntil", "MaSCSampleUntilCustom")):
        texts = ran["progress_text"].get(node_id, [])
        assert texts, (node_id, sorted(ran["progress_text"]))
        lines = texts[0].splitlines()
        assert lines[0].startswith("time: ") and re.match(r"#0 seed \d+: CP ", lines[1]), texts[0]
        assert ran["previews_by_node"].get(node_id, 0) >= 1, ran["previews_by_node"]


def test_a_tab_reloaded_while_the_pick_dialog_is_open_is_shown_it_again_and_its_pick_is_used(classic, server):
    """The reloaded page keeps its client id, announces itself, and the server shows it the open pick again: the
    artist's click there is the pick the graph goes on with (not the timeout's default)."""
    reloaded = classic["pick_reload"]
    assert reloaded["client_before"] and reloaded["client_after"] == reloaded["client_before"], reloaded
    assert reloaded["tiles_after"] == reloaded["tiles_before"] and len(reloaded["tiles_after"]) >= 2, reloaded
    entry = server.wait(reloaded["prompt_id"], timeout=300)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    pick_id = next(i for i, n in entry["prompt"][2].items() if n["class_type"] == "MaSCPick")
    picked = reloaded["tiles_after"][reloaded["picked"][0]].split()[0]  # "#3" from the tile's caption
    assert hostapi.ui_text(entry, pick_id).startswith(f"you picked {picked}\n"), hostapi.ui_text(entry, pick_id)


@pytest.mark.parametrize("name", _with_node("MaSCPick"))
def test_a_click_in_the_pick_dialog_lets_the_graph_go_on_with_that_candidate(session, installed, name):
    """The dialog opens in the tab that queued the prompt; a mouse click on the second tile and Keep selected: the
    graph continues with that candidate (saved), and the log holds the labels, which calibrate reads."""
    import subprocess
    import sys

    ran = session["workflows"][name]
    assert ran["run"] == "success", ran["run"]
    dialog = ran["pick_dialog"]
    prompt = json.loads(ran["saved"]["prompt"])
    pick_id = next(i for i, n in prompt.items() if n["class_type"] == "MaSCPick")
    shown = prompt[pick_id]["inputs"]["show"]
    assert dialog["role"] == "dialog" and dialog["node"] == pick_id and len(dialog["tiles"]) == shown
    assert dialog["pressed"] == PICK_TILES and {"keep", "default", "heatmaps", "cancel"} <= set(dialog["buttons"])
    numbers = [int(re.match(r"#(\d+) ", tile).group(1)) for tile in dialog["tiles"]]
    assert all("CP " in tile and "PF " in tile and "seed " in tile for tile in dialog["tiles"]), dialog["tiles"]
    clicked = numbers[PICK_TILES[0]]
    report = "\n".join(ran["sent_text"][pick_id])
    assert report.startswith(f"you picked #{clicked}\nof the {shown} shown"), report
    saves = [i for i, n in prompt.items() if n["class_type"] == "SaveImage" and n["inputs"]["images"] == [pick_id, 0]]
    assert [len(ran["sent_images"].get(i, [])) for i in saves] == [1] * len(saves)
    log_id = next(i for i, n in prompt.items() if n["class_type"] == "MaSCLogScores")
    log = os.path.join(installed["output"], prompt[log_id]["inputs"]["filename"])
    rows = [json.loads(line) for line in open(log, encoding="utf-8")]
    run = rows[-1]["run"]
    labels = {row["index"]: row["label"] for row in rows if row["run"] == run}
    assert labels == {n: ("picked" if n == clicked else "passed over") if n in numbers else None for n in labels}
    calibrated = subprocess.run(
        [sys.executable, "-m", "masc_core", "calibrate", log, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert calibrated.returncode == 0, calibrated.stderr
    picks = json.loads(calibrated.stdout)
    assert (
        picks["picked"] >= 1 and picks["passed_over"] >= 1 and picks["warnings"]
    )  # one round: too few, and it says so


@pytest.mark.parametrize("name", RUN_FROM_PAGE)
def test_workflow_runs_from_the_page_and_leaves_every_node_readable(session, name):
    ran = session["workflows"][name]
    assert ran["run"] == "success", ran["run"]
    assert ran["overlaps_after_run"] == [], "nodes cover each other after a run"


@pytest.mark.parametrize("name", RUN_FROM_PAGE)
def test_report_boxes_show_what_the_server_sent_every_line_read_only(session, name):
    ran = session["workflows"][name]
    ours = _ours()
    sent = {node: "\n".join(text) for node, text in ran["sent_text"].items() if _type(ran, node) in ours}
    assert sent, "no MaSC node got text from the server"
    assert set(sent) <= set(ran["reports"]), (
        f"nodes that got text but show no report box: {set(sent) - set(ran['reports'])}"
    )
    for node_id, box in ran["reports"].items():
        assert box["value"] == sent.get(node_id, box["value"]) and box["value"], (
            f"node {node_id} shows {box['value']!r}"
        )
        assert box["readOnly"] and box["ariaLabel"] == "report" and box["label"] == "report"
        assert box["shown"] and box["scrollHeight"] <= box["clientHeight"] + 1, f"node {node_id}: lines cut off {box}"


def _type(result: dict, node_id: str) -> str:
    return next((n["type"] for n in result["saved"]["nodes"] if n["id"] == node_id), "")


@pytest.mark.parametrize("name", RUN_FROM_PAGE)
def test_report_is_never_saved_in_the_workflow_or_sent_in_the_prompt(session, name):
    """Our nodes' saved widget values and queued inputs hold no report (core's Preview Any may show the same text)."""
    ran = session["workflows"][name]
    saved = ran["saved"]
    ours = dict(ran["reports"])
    prompt = json.loads(saved["prompt"])
    for stored_node in saved["nodes"]:
        if stored_node["id"] not in ours:
            continue
        lines = [line for line in ours[stored_node["id"]]["value"].splitlines() if len(line) > 12]
        stored = json.dumps(stored_node["widgets_values"]) + json.dumps(
            prompt.get(stored_node["id"], {}).get("inputs", {})
        )
        assert "masc_report" not in stored and not [line for line in lines if line in stored], (stored_node, stored)


def test_score_report_on_workflow_1_matches_its_preview_of_cp(classic):
    """Workflow 1 queued from the page: the CP node's report shows the CP the Preview Any node shows."""
    ran = classic["workflows"]["01_score_a_pair"]
    cp_node = next(n for n in ran["saved"]["nodes"] if n["type"] == "MaSCConceptPreservation")["id"]
    previews = [text for node, text in ran["sent_text"].items() if _type(ran, node) == "PreviewAny"]
    values = [float(t[0]) for t in previews if _is_number(t[0])]
    assert any(f"{value:+.4f}" in ran["reports"][cp_node]["value"] for value in values), (
        ran["reports"][cp_node],
        previews,
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_front_end_reports_no_warning_about_the_pack(session):
    noisy = [
        line
        for line in session["console"]
        if "masc" in line.lower() or "internal module" in line or "inputEl is deprecated" in line
    ]
    assert noisy == []


def test_vue_renderer_shows_the_report_read_only_and_labelled(vue):
    ran = vue["workflows"]["01_score_a_pair"]
    assert ran["vue_reports"], "no report box in the Vue renderer"
    for node_id, box in ran["vue_reports"].items():
        assert box["present"], f"node {node_id}: no report box"
        assert box["readOnly"] and box["after_typing"] == box["value"], f"node {node_id}: typing changed the report"
        assert box["accessible_name"] == "report" and "masc_report" not in box["node_text"]
        assert box["every_line_visible"] and box["covered_by"] is None, f"node {node_id}: {box}"


def test_templates_browser_lists_the_workflows_in_order_with_thumbnails(classic):
    cards = classic["templates"]["cards"]
    assert [c["name"] for c in cards] == NAMES, cards
    for card in cards:
        path = os.path.join(ROOT, "workflows", card["name"] + ".jpg")
        assert os.path.isfile(path), f"{card['name']} has no thumbnail file"
        with Image.open(path) as thumbnail:
            width = thumbnail.size[0]
        # Not the front end's placeholder (1.49 shows default-template.png, 1.27 an icon): our picture.
        assert card["width"] == width and not card["placeholder"], f"{card['name']}: no thumbnail shown ({card})"


def test_every_template_opens_readable_with_no_overlap_and_a_screenshot(classic):
    """Opened from the templates browser in a 1600 x 1000 window, the front end fits each template to the view: it
    must fit at a zoom where nodes are drawn in full (below it LiteGraph draws blank boxes), with no node over
    another. The screenshots (``open-<name>.png`` in the run's browser-classic folder) are kept for review."""
    opened = classic["templates"]["opened"]
    assert list(opened) == NAMES
    for name, view in opened.items():
        assert not view["low_quality"], f"{name} opens at {view['scale']:.3f}: nodes drawn as blank boxes ({view})"
        if view["threshold"]:
            assert view["scale"] >= view["threshold"], view
        assert not view["overlaps"], f"{name}: {view['overlaps']}"
        assert os.path.getsize(view["screenshot"]) > 20_000, f"{name}: no screenshot"
    folded = {name for name, view in opened.items() if view["subgraphs"]}
    assert {"08_flux_kontext_best_of_n", "09_qwen_image_edit_2511", "10_wan_vace_best_of_n"} <= folded, folded


def _blueprints_served(classic) -> dict:
    if not classic.get("blueprint_defs"):
        pytest.skip(
            f"front end {classic['frontend']} on this host lists no subgraph blueprints (ComfyUI 0.3.64 serves none:"
            " the pack's subgraphs/ folder is inert there)"
        )
    return classic["blueprint_defs"]


@pytest.mark.parametrize("name", BLUEPRINT_NAMES)
def test_blueprint_is_listed_under_subgraph_blueprints_with_its_description(classic, name):
    listed = _blueprints_served(classic)
    assert name in listed, sorted(listed)
    entry = listed[name]
    blueprint = load(os.path.join(ROOT, "subgraphs", name + ".json"))
    (subgraph,) = blueprint["definitions"]["subgraphs"]
    assert entry["category"] == "Subgraph Blueprints/MaSC" and entry["description"] == subgraph["description"]
    assert entry["inputs"] == [i["name"] for i in subgraph["inputs"]]
    assert entry["outputs"] == [o["name"] for o in subgraph["outputs"]]
    # Measured: core 0.33 sends no search_aliases with a pack's blueprint and front ends 1.49/1.58 then drop the
    # file's (extra.BlueprintSearchAliases): the name and the description are what search finds. README says so.
    assert entry["search_aliases"] in (None, blueprint["extra"]["BlueprintSearchAliases"])


@pytest.mark.parametrize("name", BLUEPRINT_NAMES)
def test_blueprint_placed_from_the_search_box_runs_its_nodes(classic, name):
    _blueprints_served(classic)
    placed = classic["blueprints"][name]
    assert placed["placed"]["subgraph"] and placed["placed"]["title"] == name, placed["placed"]
    (subgraph,) = load(os.path.join(ROOT, "subgraphs", name + ".json"))["definitions"]["subgraphs"]
    assert placed["placed"]["inner"] == [n["type"] for n in subgraph["nodes"]]
    assert placed["placed"]["widgets"] == [i["name"] for i in subgraph["inputs"] if i["type"] == "STRING"]
    # The server never sees the subgraph: the front end queues the nodes inside it, ids prefixed with the placed node's.
    inner = sorted(
        kind for node_id, kind in placed["queued"].items() if node_id.startswith(placed["placed"]["id"] + ":")
    )
    assert inner == sorted(n["type"] for n in subgraph["nodes"])
    assert placed["run"] == "success", placed["run"]


def _same_graph_by_hand(server, graph: dict) -> dict:
    entry = server.run(graph)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    return entry


def test_score_a_pair_blueprint_shows_what_masc_score_wired_by_hand_gives(classic, server):
    _blueprints_served(classic)
    shown = classic["blueprints"]["MaSC score a pair"]["shown"]
    graph = {
        "1": node("LoadImage", image=f"{EXAMPLE_PREFIX}dog_00.jpg"),
        "2": node("LoadImageMask", image=f"{EXAMPLE_PREFIX}dog_00_mask.png", channel="red"),
        "3": node("LoadImage", image=f"{EXAMPLE_PREFIX}dog_01.jpg"),
        "4": node("LoadImageMask", image=f"{EXAMPLE_PREFIX}dog_01_mask.png", channel="red"),
        "5": node("MaSCLoadEncoder", model=ENCODER_NAME, device="auto", precision="auto", max_patches=1024),
        "6": node(
            "MaSCScore",
            encoder=["5", 0],
            reference_image=["1", 0],
            reference_mask=["2", 0],
            image=["3", 0],
            mask=["4", 0],
            prompt=PROMPT,
            subject=SUBJECT,
            heatmaps=True,
        ),
        "7": node("PreviewAny", source=["6", 0]),
        "8": node("PreviewAny", source=["6", 1]),
        "9": node("PreviewAny", source=["6", 3]),
    }
    entry = _same_graph_by_hand(server, graph)
    assert abs(float(shown["cp"][0]) - float(hostapi.ui_text(entry, "7"))) <= 1e-6
    assert abs(float(shown["pf"][0]) - float(hostapi.ui_text(entry, "8"))) <= 1e-6
    assert shown["stripped_prompt"][0] == hostapi.ui_text(entry, "9") == "a photo of on the beach"


def test_best_of_n_blueprint_ranks_as_auto_masks_score_and_select_best_wired_by_hand(classic, server):
    _blueprints_served(classic)
    shown = classic["blueprints"]["MaSC best-of-N"]["shown"]
    masks = {"subject": SUBJECT, "threshold": 0.4, "dilation": 0}
    graph = {
        "1": node("LoadImage", image=f"{EXAMPLE_PREFIX}dog_00.jpg"),
        "2": node("LoadImage", image=f"{EXAMPLE_PREFIX}dog_01.jpg"),
        "3": node("MaSCLoadAutoMaskModel", model=SEGMENTER_NAME, device="auto", precision="auto"),
        "4": node("MaSCAutoMask", segmenter=["3", 0], images=["1", 0], **masks),
        "5": node("MaSCAutoMask", segmenter=["3", 0], images=["2", 0], **masks),
        "6": node("MaSCLoadEncoder", model=ENCODER_NAME, device="auto", precision="auto", max_patches=1024),
        "7": node(
            "MaSCScore",
            encoder=["6", 0],
            reference_image=["1", 0],
            reference_mask=["4", 0],
            image=["2", 0],
            mask=["5", 0],
            prompt=PROMPT,
            subject=SUBJECT,
            heatmaps=True,
        ),
        "8": node(
            "MaSCSelectBest",
            scores=["7", 2],
            images=["2", 0],
            mask=["5", 0],
            rank_by="both",
            cp_weight=1.0,
            pf_weight=1.0,
            top_k=1,
            min_cp=-1.0,
            min_pf=-1.0,
            reject_small_masks=True,
            min_foreground=0.05,
        ),
        "9": node("PreviewAny", source=["8", 5]),
    }
    entry = _same_graph_by_hand(server, graph)
    assert shown["ranking"][0] == hostapi.ui_text(entry, "9") and "selected" in shown["ranking"][0]


def _help_headings(node_type: str) -> tuple[str, list[str]]:
    with open(os.path.join(ROOT, "web", "docs", node_type + ".md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return lines[0][2:], [line[3:] for line in lines if line.startswith("## ")]


@pytest.mark.parametrize("node_type", sorted(pack_mappings().nodes.NODE_CLASS_MAPPINGS))
def test_help_panel_shows_the_nodes_page(classic, out_dir, node_type):
    """Select the node, press the selection toolbox's Node Info button: the panel shows our page (screenshot kept)."""
    opened = classic["help"][node_type]
    if not opened["button"]:
        pytest.skip(f"front end {classic['frontend']} has no Node Info button in its selection toolbox")
    title, headings = _help_headings(node_type)
    shown = opened["shown"]
    assert shown, f"the panel shows no page titled {title!r} ({opened.get('error', 'no error')})"
    assert shown["h1"] == title == pack_mappings().nodes.NODE_DISPLAY_NAME_MAPPINGS[node_type]
    assert shown["h2"] == headings
    spec = pack_mappings().nodes.NODE_CLASS_MAPPINGS[node_type].INPUT_TYPES()
    for name in [*spec["required"], *spec.get("optional", {})]:
        assert name in shown["text"], f"the panel does not name the input {name}"
    pictures = re.findall(
        r"!\[[^\]]*\]\((images/[^)]+)\)",
        open(os.path.join(ROOT, "web", "docs", node_type + ".md"), encoding="utf-8").read(),
    )
    shown_pictures = {image["src"].split("/docs/", 1)[1]: image["width"] for image in opened.get("images", [])}
    for picture in pictures:  # served from the pack's web/docs/images/ and drawn in the panel
        assert shown_pictures.get(picture, 0) > 0, f"{picture} did not load in the panel: {opened.get('images')}"
    assert os.path.isfile(os.path.join(out_dir, "browser-classic", f"help-{node_type}.png"))
