"""MaSC Pick without a browser: the board's checks, the wait (answer, timeout, Cancel), labels, outputs, the log."""

from __future__ import annotations

import importlib
import json
import threading

import pytest
import torch

from masc_core.selection.picks import (
    ANSWERED,
    CHOSEN,
    MALFORMED,
    NO_BROWSER,
    TIMED_OUT,
    UNKNOWN,
    PickBoard,
    PickOutcome,
    PickRefused,
    pick_labels,
)

KIND = {400: MALFORMED, 404: UNKNOWN, 409: ANSWERED}
"""The board's refusals by the HTTP status the route answers them with (nodes.host.STATUS)."""


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += (
            0.05  # every look at the clock moves it: a wait with nobody answering ends after timeout / 0.05 looks
        )
        return self.now


def test_board_takes_one_checked_answer_for_a_waiting_node():
    board = PickBoard()
    request = board.open("12", 4, [0])
    good = {"token": request.token, "node": "12", "picks": [2, 0]}
    for body, status in [
        ([1], 400),
        ({"token": request.token, "node": "12"}, 400),
        (dict(good, extra=1), 400),
        (dict(good, node="13"), 400),
        (dict(good, token="f" * 32), 404),
        (dict(good, token=7), 400),
        (dict(good, picks=[]), 400),
        (dict(good, picks=[4]), 400),
        (dict(good, picks=[-1]), 400),
        (dict(good, picks=[1, 1]), 400),
        (dict(good, picks=[True]), 400),
        (dict(good, picks=[0.0]), 400),
        (dict(good, picks="0"), 400),
        (dict(good, picks=[0, 1, 2, 3, 0]), 400),
    ]:
        with pytest.raises(PickRefused) as refused:
            board.answer(body)
        assert refused.value.kind == KIND[status], body
        assert "\n" not in str(refused.value)
    assert request.answer is None  # nothing refused left a mark
    board.answer(good)
    with pytest.raises(PickRefused) as again:
        board.answer(good)
    assert again.value.kind == ANSWERED
    outcome = board.wait(request, 10, lambda: None)
    assert outcome.picks == [2, 0] and outcome.how == CHOSEN
    with pytest.raises(PickRefused) as finished:
        board.answer(good)
    assert finished.value.kind == UNKNOWN and board.waiting() == 0


def test_wait_times_out_with_the_default_and_honours_cancel():
    board = PickBoard(clock=FakeClock())
    request = board.open("3", 5, [0, 1])
    outcome = board.wait(request, 1.0, lambda: None)
    assert outcome.how == TIMED_OUT and outcome.picks == [0, 1] and board.waiting() == 0
    request = board.open("3", 5, [0])
    calls = []

    def cancel():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("Cancel")

    with pytest.raises(KeyboardInterrupt):
        board.wait(request, 3600, cancel)
    assert board.waiting() == 0  # closed: a late answer is refused as finished
    with pytest.raises(PickRefused):
        board.answer({"token": request.token, "node": "3", "picks": [0]})


def test_labels_come_only_from_the_artists_choice():
    shown = [4, 1, 2]
    assert pick_labels(shown, 6, PickOutcome([0, 2], CHOSEN, 1.0)) == [
        None,
        "passed over",
        "picked",
        None,
        "picked",
        None,
    ]
    assert pick_labels(shown, 6, PickOutcome([0], TIMED_OUT, 9.0)) == [None] * 6
    assert pick_labels(shown, 6, PickOutcome([0], NO_BROWSER, 0.0)) == [None] * 6


class Browser:
    """A stand-in tab: records what the node sends and answers a pick like the dialog would (from another thread)."""

    def __init__(self, board, picks=None, before_answer=None, client="tab-1", script=True):
        self.board, self.picks, self.before_answer = board, picks, before_answer
        self.events, self.threads, self.id = [], [], client
        if script:  # the pack's script announces its page as it loads
            board.announce({"client": client})

    def client(self):
        return self.id

    def connected(self, client):
        return client == self.id

    def send(self, event, data, client):
        assert client == self.id
        self.events.append((event, json.loads(json.dumps(data))))  # what goes over the websocket must be JSON
        if event == "masc.pick" and self.picks is not None:
            answer = {"token": data["token"], "node": data["node"], "picks": self.picks}
            thread = threading.Thread(target=self.board.answer, args=(answer,))
            thread.start()
            self.threads.append(thread)


def scored(pack, count=6):
    scores = importlib.import_module(pack.__name__ + ".masc_core.metric.scores")
    cps = [0.40, 0.90, 0.55, 0.70, 0.20, 0.65]
    items = [
        scores.ImageScore(index=i, cp=cps[i], pf=0.1, foreground_fraction=0.3, prompt="a sks dog", encoded_prompt="a")
        for i in range(count)
    ]
    context = scores.ScoreContext(node="MaSCScore", subject="sks dog", seeds=[100 + i for i in range(count)])
    batch = scores.ScoreBatch(
        scores=items, references=[scores.ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context
    )
    images = torch.stack([torch.full((32, 32, 3), i / 10) for i in range(count)])
    latent = {"samples": torch.arange(count, dtype=torch.float32).reshape(count, 1, 1, 1).repeat(1, 4, 4, 4)}
    return batch, images, latent


def run_pick(pack, browser, *, show=4, keep=1, timeout=60, extra=None, **optional):
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    batch, images, latent = scored(pack)
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPick"]()
    with host.use_pick_browser(browser):
        out = node.pick(
            batch,
            images,
            show,
            keep,
            "cp",
            1.0,
            1.0,
            timeout,
            latent=latent,
            extra_pnginfo=extra,
            unique_id="9",
            **optional,
        )
    for thread in getattr(browser, "threads", []):
        thread.join()
    return out, images


def test_a_pick_in_the_browser_passes_those_candidates_on_with_labels(pack, comfy_dirs):
    board = importlib.import_module(pack.__name__ + ".nodes.host").pick_board()
    browser = Browser(board, picks=[2, 0])  # positions among those shown: the 3rd and the 1st best by CP
    extra = {}
    out, images = run_pick(pack, browser, extra=extra)
    chosen_images, latent, mask, scores, indices, report = out["result"]
    # CP order: #1 0.90, #3 0.70, #5 0.65, #2 0.55 shown; picked positions 0 and 2 = #1 and #5, in score order.
    assert indices == "1, 5" and torch.equal(chosen_images, images[[1, 5]])
    assert latent["samples"][:, 0, 0, 0].tolist() == [1.0, 5.0] and latent["batch_index"] == [1, 5]
    assert scores.context.labels == [None, "picked", "passed over", "passed over", None, "picked"]
    assert scores.context.kept == [1, 5] and scores.context.verdicts[0] == "not shown"
    event, shown = browser.events[0]
    assert event == "masc.pick" and shown["indices"] == [1, 3, 5, 2] and shown["keep"] == 1 and shown["node"] == "9"
    assert shown["captions"][0] == ["#1  seed 101  mask 30%", "CP +0.900  PF +0.100"]
    assert browser.events[-1][0] == "masc.pick.closed" and board.waiting() == 0
    assert report.startswith("you picked #1, #5\nof the 4 shown (of 6), after ")
    entry = extra["masc"]["nodes"]["9"]
    assert entry["node"] == "MaSCPick" and [r["verdict"] for r in entry["images"]][:3] == [
        "not shown",
        "picked",
        "passed over",
    ]
    # MaSC Log Scores writes the labels; calibrate reads them back.
    log = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, "picks.jsonl", "")
    score_log = importlib.import_module(pack.__name__ + ".masc_core.evaluation.score_log")
    rows = score_log.read_log(f"{comfy_dirs['output']}/{log['result'][0]}")[-6:]
    assert [r["label"] for r in rows] == [None, "picked", "passed over", "passed over", None, "picked"]


def test_no_browser_takes_the_score_order_at_once_and_teaches_nothing(pack):
    out, images = run_pick(pack, None, keep=2, timeout=86400)  # an API prompt: never waits, whatever the timeout
    chosen_images, _, _, scores, indices, report = out["result"]
    assert indices == "1, 3" and torch.equal(chosen_images, images[[1, 3]])
    assert scores.context.labels == [None] * 6 and scores.context.verdicts[1] == "kept by default (no browser)"
    assert report.startswith("no browser to ask")


def test_timeout_keeps_the_default(pack, monkeypatch):
    board = importlib.import_module(pack.__name__ + ".nodes.host").pick_board()
    monkeypatch.setattr(board, "_clock", FakeClock())  # 20 looks at the clock = 1 s: no real waiting
    browser = Browser(board)  # shows the dialog, nobody clicks
    out, _ = run_pick(pack, browser, timeout=1)
    assert out["result"][4] == "1" and out["result"][3].context.labels == [None] * 6
    assert out["result"][5] == "no pick within 1 s\nkept #1: the first 1 in score order\n(not logged as picks)"
    assert [e for e, _ in browser.events] == ["masc.pick", "masc.pick.closed"]


def test_cancel_while_waiting_stops_the_prompt_and_closes_the_dialog(pack, monkeypatch):
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    board = host.pick_board()

    class Interrupted(Exception):
        pass

    browser = Browser(board)

    def check():
        if browser.events:  # the dialog is up: the user presses Cancel
            raise Interrupted()

    monkeypatch.setattr(host, "check_interrupt", check)
    with pytest.raises(Interrupted):
        run_pick(pack, browser, timeout=3600)
    assert [e for e, _ in browser.events] == ["masc.pick", "masc.pick.closed"] and board.waiting() == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"show": 7}, "show is 7 but the batch has 6 images"),
        ({"show": 2, "keep": 3}, "keep is 3 but only 2 are shown"),
        ({"heatmaps": torch.zeros(2, 8, 8, 3)}, "heatmaps has 2 pictures for 6 images"),
    ],
)
def test_bad_counts_are_one_line(pack, kwargs, message):
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    with pytest.raises(errors.MascInputError, match=message) as refused:
        run_pick(pack, None, **kwargs)
    assert "\n" not in str(refused.value)


def test_a_pick_is_never_served_from_the_cache(pack):
    value = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPick"].IS_CHANGED(show=4)
    assert value != value  # NaN never equals the previous run's value


def test_the_route_answers_each_refusal_with_its_status(pack):
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    assert {kind: host.STATUS[kind] for kind in KIND.values()} == {MALFORMED: 400, UNKNOWN: 404, ANSWERED: 409}
    config = host.pick_config()
    assert config == {
        "events": {"show": host.PICK_EVENT, "closed": host.PICK_CLOSED_EVENT},
        "routes": {"answer": host.PICK_ROUTE, "hello": host.PICK_HELLO_ROUTE},
    }
