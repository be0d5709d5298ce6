"""MaSC Pick in a real ComfyUI, over HTTP and the websocket (the browser's click is in test_frontend): an API prompt
never waits, the pick route takes only a checked answer for the node waiting now, the timeout keeps the default, and
Cancel while waiting frees the queue."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
import urllib.parse
import urllib.request

import pytest

from . import hostapi
from .conftest import ROOT, write_json
from .graphs import for_cpu, load, of_type

WORKFLOW = os.path.join(ROOT, "workflows", "api", "07_pick_and_calibrate.json")


@pytest.fixture(autouse=True, scope="module")
def from_scratch_afterwards(server):
    """MaSC Pick always runs again, the nodes upstream of it come from ComfyUI's cache: the PNG a later test saves from
    this graph would carry MaSC Pick's entry only. Later tests start from an empty cache."""
    yield
    server.request("/free", {"unload_models": False, "free_memory": True})
    time.sleep(1.5)


def pick_graph(sd15: str, timeout: int) -> tuple[dict, str]:
    graph = for_cpu(load(WORKFLOW), sd15=sd15)
    (pick_id,) = of_type(graph, "MaSCPick")
    graph[pick_id]["inputs"]["timeout"] = timeout
    return graph, pick_id


def _asked(messages, deadline_s: float = 600) -> dict:
    """The masc.pick message the server sent this client (the dialog's contents)."""
    deadline = time.monotonic() + deadline_s
    while not messages.of_type("masc.pick"):
        assert time.monotonic() < deadline, "MaSC Pick never asked"
        time.sleep(0.05)
    return messages.of_type("masc.pick")[-1][1]


def _post_to(server, route: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.url + route, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _post(server, body: bytes) -> tuple[int, dict]:
    """An answer to the pick route."""
    return _post_to(server, "/masc/pick", body)


def _log_rows(installed, graph, run_text: str) -> list[dict]:
    (log_id,) = of_type(graph, "MaSCLogScores")
    path = os.path.join(installed["output"], graph[log_id]["inputs"]["filename"])
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    return [row for row in rows if row["run"] == rows[-1]["run"]]


def test_an_api_prompt_never_waits_and_takes_the_score_order(server, sd15, installed, out_dir):
    graph, pick_id = pick_graph(sd15, timeout=86400)  # no websocket is connected for this client: nobody to ask
    entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END)
    write_json(os.path.join(out_dir, "pick-api.json"), entry)
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    report = hostapi.ui_text(entry, pick_id)
    assert report.startswith("no browser to ask") and "(not logged as picks)" in report, report
    assert [row["label"] for row in _log_rows(installed, graph, report)] == [None, None]


def test_the_route_takes_only_a_checked_answer_for_the_node_waiting_now(server, sd15, installed, out_dir):
    graph, pick_id = pick_graph(sd15, timeout=600)
    messages = hostapi.Messages(server, announce=True)
    try:
        prompt_id = server.queue(graph, extra_data=hostapi.FROM_FRONT_END)
        asked = _asked(messages)
        token = asked["token"]
        assert (
            asked["node"] == pick_id
            and len(asked["images"]) == len(asked["captions"]) == 2
            and len(asked["heatmaps"]) == 2
        )
        for image in asked["images"] + asked["heatmaps"]:  # the previews the dialog shows are served
            query = urllib.parse.urlencode(
                {"filename": image["filename"], "subfolder": image["subfolder"], "type": image["type"]}
            )
            assert server.request(f"/view?{query}", raw=True)[:8] == b"\x89PNG\r\n\x1a\n"
        good = {"token": token, "node": pick_id, "picks": [1]}
        refused = {
            "not json": _post(server, b"{not json"),
            "wrong node": _post(server, json.dumps(dict(good, node="999")).encode()),
            "unknown token": _post(server, json.dumps(dict(good, token="0" * 32)).encode()),
            "out of range": _post(server, json.dumps(dict(good, picks=[2])).encode()),
            "duplicates": _post(server, json.dumps(dict(good, picks=[0, 0])).encode()),
            "extra key": _post(server, json.dumps(dict(good, more=1)).encode()),
            "too long": _post(server, json.dumps(dict(good, pad="x" * 5000)).encode()),
        }
        assert {k: s for k, (s, _) in refused.items()} == {
            "not json": 400,
            "wrong node": 400,
            "unknown token": 404,
            "out of range": 400,
            "duplicates": 400,
            "extra key": 400,
            "too long": 413,
        }
        assert all(isinstance(b.get("error"), str) and "\n" not in b["error"] for _, b in refused.values())
        assert _post(server, json.dumps(good).encode()) == (200, {"ok": True})
        entry = server.wait(prompt_id)
        late = _post(server, json.dumps(good).encode())
        closed = messages.of_type("masc.pick.closed")
    finally:
        messages.close()
    write_json(os.path.join(out_dir, "pick-route.json"), {"refused": refused, "entry": entry})
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    assert late[0] == 404 and closed and closed[-1][1]["token"] == token
    picked = asked["indices"][1]
    assert hostapi.ui_text(entry, pick_id).startswith(f"you picked #{picked}\nof the 2 shown")
    labels = {row["index"]: row["label"] for row in _log_rows(installed, graph, "")}
    assert labels == {picked: "picked", asked["indices"][0]: "passed over"}


def test_the_timeout_keeps_the_default_and_logs_no_pick(server, sd15, installed):
    graph, pick_id = pick_graph(sd15, timeout=2)
    messages = hostapi.Messages(server, announce=True)
    try:
        entry = server.run(graph, extra_data=hostapi.FROM_FRONT_END)
        asked = messages.of_type("masc.pick")
    finally:
        messages.close()
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    assert asked, "a connected client was not asked"
    first = asked[-1][1]["indices"][0]
    assert (
        hostapi.ui_text(entry, pick_id)
        == f"no pick within 2 s\nkept #{first}: the first 1 in score order\n(not logged as picks)"
    )
    assert [row["label"] for row in _log_rows(installed, graph, "")] == [None, None]


def test_cancel_while_waiting_frees_the_queue(server, sd15, installed):
    graph, pick_id = pick_graph(sd15, timeout=3600)
    messages = hostapi.Messages(server, announce=True)
    try:
        prompt_id = server.queue(graph, extra_data=hostapi.FROM_FRONT_END)
        token = _asked(messages)["token"]
        server.request("/interrupt", {})
        entry = server.wait(prompt_id, timeout=120)
        late = _post(server, json.dumps({"token": token, "node": pick_id, "picks": [0]}).encode())
        closed = messages.of_type("masc.pick.closed")
    finally:
        messages.close()
    assert hostapi.was_interrupted(entry), hostapi.explain(entry)
    assert late[0] == 404 and closed and closed[-1][1]["token"] == token
    assert server.request("/queue")["queue_running"] == []
    after, _ = pick_graph(sd15, timeout=0)
    assert hostapi.status(server.run(after)) == "success"  # the queue runs the next prompt


def test_a_websocket_client_without_the_pack_script_is_never_asked(server, sd15):
    """An automation script following progress over the websocket, as ComfyUI's own API examples do: the prompt
    takes the default at once, whatever the timeout, and nothing is sent to the script."""
    graph, pick_id = pick_graph(sd15, timeout=86400)
    script = dataclasses.replace(server, client_id=uuid.uuid4().hex)  # a client id no page ever announced
    messages = hostapi.Messages(script)  # connected, never announced
    try:
        entry = script.run(graph, extra_data=hostapi.FROM_FRONT_END, timeout=600)
        asked = messages.of_type("masc.pick")
    finally:
        messages.close()
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    assert asked == [] and hostapi.ui_text(entry, pick_id).startswith("no browser to ask")


def test_a_page_whose_socket_closes_for_good_gets_the_default_after_the_grace_period(server, sd15, installed):
    graph, pick_id = pick_graph(sd15, timeout=86400)
    messages = hostapi.Messages(server, announce=True)
    try:
        prompt_id = server.queue(graph, extra_data=hostapi.FROM_FRONT_END)
        _asked(messages)
    finally:
        messages.close()  # the tab is closed and never comes back
    entry = server.wait(prompt_id, timeout=300)  # not the day-long timeout
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    assert hostapi.ui_text(entry, pick_id).startswith("no browser to ask")
    assert [row["label"] for row in _log_rows(installed, graph, "")] == [None, None]


def test_a_page_that_reconnects_is_shown_the_open_pick_again_and_its_answer_is_used(server, sd15, installed):
    graph, pick_id = pick_graph(sd15, timeout=600)
    first = hostapi.Messages(server, announce=True)
    try:
        prompt_id = server.queue(graph, extra_data=hostapi.FROM_FRONT_END)
        asked = _asked(first)
    finally:
        first.close()  # the websocket drops (a reload, a network blip) ...
    again = hostapi.Messages(server, announce=True)  # ... and the same client id comes back and announces itself
    try:
        shown_again = _asked(again, deadline_s=60)
        assert shown_again["token"] == asked["token"] and shown_again["indices"] == asked["indices"]
        status = _post(server, json.dumps({"token": asked["token"], "node": pick_id, "picks": [1]}).encode())
        entry = server.wait(prompt_id)
    finally:
        again.close()
    assert status == (200, {"ok": True})
    assert hostapi.status(entry) == "success", hostapi.explain(entry)
    assert hostapi.ui_text(entry, pick_id).startswith(f"you picked #{asked['indices'][1]}\n")


def test_crafted_bodies_are_one_line_refusals_never_a_server_error(server):
    nested = b"[" * 2000 + b"]" * 2000  # 4 KB: Python's JSON parser alone raises RecursionError (HTTP 500)
    answers = {
        "pick nested": _post_to(server, "/masc/pick", nested),
        "pick huge number": _post_to(
            server, "/masc/pick", b'{"token": "a", "node": "1", "picks": [' + b"9" * 3000 + b"]}"
        ),
        "hello nested": _post_to(server, "/masc/pick/hello", nested),
        "hello no client": _post_to(server, "/masc/pick/hello", b"{}"),
        "hello control": _post_to(server, "/masc/pick/hello", json.dumps({"client": "a\x1b[2J"}).encode()),
        "hello too long": _post_to(server, "/masc/pick/hello", json.dumps({"client": "x" * 5000}).encode()),
    }
    assert {k: s for k, (s, _) in answers.items()} == {
        "pick nested": 400,
        "pick huge number": 400,
        "hello nested": 400,
        "hello no client": 400,
        "hello control": 400,
        "hello too long": 413,
    }
    assert all(isinstance(b.get("error"), str) and "\n" not in b["error"] for _, b in answers.values())
    assert _post_to(server, "/masc/pick/hello", json.dumps({"client": "some-page"}).encode()) == (200, {"ok": True})
