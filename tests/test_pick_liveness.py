"""MaSC Pick never waits on a page that is gone, asks only a page that can answer, and uses every answer it accepted.

Deterministic: the board's clock is a stand-in that moves only when looked at, and the page is a stand-in
whose socket and announcements the test scripts, look by look. No test here depends on how fast the machine is.
"""

from __future__ import annotations

import importlib
import json

import pytest

from masc_core.io.files import JSONUnreadable, parse_json
from masc_core.selection.picks import (
    CHOSEN,
    GRACE_SECONDS,
    MALFORMED,
    MAX_ANNOUNCED,
    NO_BROWSER,
    POLL_SECONDS,
    SHOWN,
    TIMED_OUT,
    UNKNOWN,
    PickBoard,
    PickRefused,
)


class SteppingClock:
    """Each look moves time on by ``step``; ``at`` runs a callback at the first look at or past a time."""

    def __init__(self, step: float = POLL_SECONDS):
        self.now, self.step, self.events = 0.0, step, []

    def at(self, when: float, callback) -> None:
        self.events.append((when, callback))

    def __call__(self) -> float:
        self.now += self.step
        for event in [e for e in self.events if e[0] <= self.now]:
            self.events.remove(event)
            event[1]()
        return self.now


class ScriptedPage:
    """A page as ``PickBoard.wait`` sees it: its socket (``up``), its announcements, what was shown on it."""

    def __init__(self, board: PickBoard, client: str = "tab-1"):
        self.board, self.client, self.up, self.shown, self.left = board, client, True, 0, []
        board.announce({"client": client})

    def reachable(self) -> bool:
        return self.up

    def announcements(self) -> int:
        return self.board.announcements(self.client)

    def show(self, seconds_left: float) -> None:
        self.shown += 1
        self.left.append(seconds_left)


def never():
    return None


def test_a_reloaded_page_is_shown_the_pick_again_and_its_answer_is_used():
    clock = SteppingClock()
    board = PickBoard(clock=clock)
    page = ScriptedPage(board)
    request = board.open("7", 4, [0])
    clock.at(1.0, lambda: setattr(page, "up", False))  # the tab reloads: its socket closes ...
    clock.at(3.0, lambda: setattr(page, "up", True))  # ... opens again (same client id) ...
    clock.at(3.5, lambda: board.announce({"client": "tab-1"}))  # ... and the pack's script announces the page again
    clock.at(5.0, lambda: board.answer({"token": request.token, "node": "7", "picks": [2]}))
    outcome = board.wait(request, 600, never, page)
    assert page.shown == 2  # once when asked, once after the reload
    assert (
        page.left[0] == 600 and 596 <= page.left[1] <= 597
    )  # the reloaded dialog counts down what is left (reloaded at 3.5 s)
    assert outcome.how == CHOSEN and outcome.picks == [2]


def test_a_page_whose_socket_stays_gone_gets_the_default_after_the_grace_period():
    clock = SteppingClock()
    board = PickBoard(clock=clock)
    page = ScriptedPage(board)
    request = board.open("7", 4, [1])
    clock.at(2.0, lambda: setattr(page, "up", False))  # the tab is closed, nothing comes back
    outcome = board.wait(request, 86400, never, page)
    assert outcome.how == NO_BROWSER and outcome.picks == [1]
    assert 2.0 + GRACE_SECONDS <= clock.now < 2.0 + GRACE_SECONDS + 1.0  # not the day-long timeout
    with pytest.raises(PickRefused) as late:  # the dialog's answer after that is refused, not silently dropped
        board.answer({"token": request.token, "node": "7", "picks": [0]})
    assert late.value.kind == UNKNOWN and board.waiting() == 0


def test_a_socket_that_comes_back_within_the_grace_period_keeps_the_wait():
    clock = SteppingClock()
    board = PickBoard(clock=clock)
    page = ScriptedPage(board)
    request = board.open("7", 4, [0])
    clock.at(1.0, lambda: setattr(page, "up", False))
    clock.at(1.0 + GRACE_SECONDS - 1.0, lambda: setattr(page, "up", True))
    outcome = board.wait(request, 30, never, page)
    assert outcome.how == TIMED_OUT and clock.now >= 30  # waited for the artist to the end
    assert page.shown == 1  # no new announcement: the page kept its dialog


def test_an_answer_that_arrives_at_the_deadline_is_the_one_used():
    for offset in (-POLL_SECONDS, 0.0):  # just before the last look, and exactly at it
        clock = SteppingClock()
        board = PickBoard(clock=clock)
        request = board.open("7", 4, [0])
        accepted = []
        clock.at(
            5.0 + offset, lambda: accepted.append(board.answer({"token": request.token, "node": "7", "picks": [3]}))
        )
        outcome = board.wait(request, 5.0, never)
        assert accepted, "the route refused the answer"
        assert outcome.how == CHOSEN and outcome.picks == [3]  # accepted (200) means used


def test_an_answer_after_the_deadline_is_refused():
    clock = SteppingClock()
    board = PickBoard(clock=clock)
    request = board.open("7", 4, [0])
    outcome = board.wait(request, 1.0, never)
    assert outcome.how == TIMED_OUT
    with pytest.raises(PickRefused) as late:
        board.answer({"token": request.token, "node": "7", "picks": [3]})
    assert late.value.kind == UNKNOWN


def test_announcements_are_checked_and_bounded():
    board = PickBoard()
    for body in [
        None,
        [],
        {},
        {"client": 7},
        {"client": ""},
        {"client": "x" * 129},
        {"client": "a\x1b[2J"},
        {"client": "a", "more": 1},
    ]:
        with pytest.raises(PickRefused) as refused:
            board.announce(body)
        assert refused.value.kind == MALFORMED and "\n" not in str(refused.value)
    assert board.announce({"client": "tab"}) == 1 and board.announce({"client": "tab"}) == 2
    for n in range(MAX_ANNOUNCED + 50):
        board.announce({"client": f"c{n}"})
    assert board.announcements("tab") == 0 and board.announcements(f"c{MAX_ANNOUNCED + 49}") == 1
    assert len(board._announced) == MAX_ANNOUNCED
    assert board.announcements(None) == 0


def test_the_largest_answer_the_dialog_can_send_fits_the_route(pack):
    MAX_BODY_BYTES = importlib.import_module(pack.__name__ + ".nodes.host").MAX_BODY_BYTES
    board = PickBoard()
    node_id = ":".join(["12345"] * 40)  # a node deep inside nested subgraphs
    request = board.open(node_id, SHOWN.high, list(range(SHOWN.high)))
    body = {"token": request.token, "node": node_id, "picks": list(range(SHOWN.high))}
    sent = json.dumps(body).encode()  # JSON.stringify writes fewer bytes than this (no spaces)
    assert len(sent) <= MAX_BODY_BYTES // 2
    board.answer(parse_json(sent))
    assert request.answer == list(range(SHOWN.high))


def test_the_pick_widgets_stay_within_what_the_route_takes(pack):
    declared = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPick"].INPUT_TYPES()["required"]
    for name in ("show", "keep"):
        assert declared[name][1]["max"] == SHOWN.high and declared[name][1]["min"] == 1
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    picks = importlib.import_module(pack.__name__ + ".masc_core.selection.picks")
    with pytest.raises(errors.MascInputError, match="show is 1100"):
        picks.check_counts(1100, 1, 2000)  # a value that came over a link, past the widget's range


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 2000 + b"]" * 2000,  # 4 KB of nesting: Python's parser would raise RecursionError
        b'{"token": "a", "node": "1", "picks": [' + b"9" * 3000 + b"]}",  # past Python's integer-conversion limit
        b'{"token": NaN}',
        b"\xff\xfe",
        b'{"a": [[[[[[1]]]]]]}',
    ],
)
def test_a_crafted_route_body_is_one_refusal(body):
    with pytest.raises(JSONUnreadable) as refused:
        parse_json(body, max_depth=4)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200


def test_a_page_that_never_announced_is_not_asked(pack):
    """An API script following progress on the websocket (or a front end without the pack's script) is never
    asked: the default at once, whatever the timeout, and nothing is sent to it."""
    from test_pick import Browser, run_pick

    board = importlib.import_module(pack.__name__ + ".nodes.host").pick_board()
    script = Browser(board, client="automation-script", script=False)
    out, _ = run_pick(pack, script, timeout=86400)
    assert script.events == []
    assert out["result"][5].startswith("no browser to ask")
    assert out["result"][3].context.labels == [None] * 6
