"""The artist's picks (MaSC Pick): a node waits for a choice made in the browser, never forever.

A node that shows candidates opens a ``PickRequest`` on the process's
``PickBoard`` and waits on it; the browser answers through an HTTP route,
which hands the request body to ``PickBoard.answer``. Everything a browser
(or anything else that can reach the server) sends is checked here: the
request must be open (its random token names one waiting node of this
server), the node id must be that node's, and the picks must be distinct
positions among the candidates shown, at least one. Nothing else is
accepted, and an answer is taken once.

Who is asked: only a page that has said it can answer (the pack's script
announces itself for its client id, ``announce``, on every load and every
reconnect of its websocket). Any other client (an API script following
progress over the websocket, a front end without the pack) gets the default
at once, as an API prompt does.

Waiting polls in short slices so that Cancel (``check_interrupt``) is
honoured within a fraction of a second, and ends at the timeout with the
default (the score order). While it waits, the ``Audience`` is watched: when
the page announces itself again (a reload, a reconnect) the request is shown
again; when its socket is gone for ``GRACE_SECONDS`` the default goes on. The
deadline and an answer are decided under one lock: an answer the route
accepted is the one used, and one that comes after the deadline is refused.
The board knows no ComfyUI nor HTTP: the node passes the interrupt check
and the audience in; the process's one board, the routes and their statuses
live in ``nodes.host.browser``.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ..errors import MascInputError
from ..limits import IntRange

PICKED = "picked"
PASSED_OVER = "passed over"
LABELS = (PICKED, PASSED_OVER)
"""The labels a candidate the artist saw gets in the score log; unshown candidates and defaults get none."""

CHOSEN = "chosen"
TIMED_OUT = "timed out"
NO_BROWSER = "no browser"
OUTCOMES = (CHOSEN, TIMED_OUT, NO_BROWSER)
"""How a wait ended: the artist chose, the timeout passed, or nobody could be asked (an API prompt)."""

POLL_SECONDS = 0.1
"""How often a waiting node checks for Cancel and for its page."""
GRACE_SECONDS = 10.0
"""How long a waiting node waits for its page's socket to come back (a reload takes a few seconds) before the
default."""
SHOWN = IntRange("show", 1, 64)
"""How many candidates a dialog shows (and ``keep`` at most): a person can compare a few dozen tiles, not thousands.
An answer is then a token, a node id and at most 64 small integers (the route's size cap is the nodes' side)."""
MAX_CLIENT_ID = 128
"""Longest client id a page may announce (ComfyUI's are 32 hex digits)."""
MAX_ANNOUNCED = 1024
"""Pages remembered as able to answer; the oldest is forgotten first."""


class Audience(Protocol):
    """The page a waiting pick is shown on, as ``PickBoard.wait`` watches it."""

    def reachable(self) -> bool:
        """Whether the page's socket is connected now."""

    def announcements(self) -> int:
        """How many times the page has announced itself (each load and reconnect adds one)."""

    def show(self, seconds_left: float) -> None:
        """Send the open request to the page (again), saying how long it still waits."""


MALFORMED = "malformed"
UNKNOWN = "unknown"
ANSWERED = "answered"
REFUSALS = (MALFORMED, UNKNOWN, ANSWERED)
"""Why the board refuses: not an answer or announcement it takes; no node waiting for that token (finished, timed
out, cancelled, or never); already answered. The route turns each into its HTTP status."""


class PickRefused(MascInputError):
    """An answer the board does not take; ``kind`` (``REFUSALS``) says why."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class PickRequest:
    """One node waiting for the artist: ``count`` candidates shown, ``default`` the positions taken without a choice."""

    node_id: str
    count: int
    default: list[int]
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    answer: list[int] | None = None
    _answered: threading.Event = field(default_factory=threading.Event, repr=False)


@dataclass(frozen=True)
class PickOutcome:
    """What a wait gave: the chosen positions (among those shown) and how they were chosen (``OUTCOMES``)."""

    picks: list[int]
    how: str
    waited: float

    @property
    def by_artist(self) -> bool:
        return self.how == CHOSEN

    def verdicts(self, count: int, shown: list[int], chosen: list[int]) -> list[str]:
        """Each candidate's verdict in the PNG entry and the log: what the artist (or the default) made of it."""
        if self.by_artist:
            taken, left = "picked", "passed over"
        else:
            taken = f"kept by default ({self.how})"
            left = f"{'shown, ' if self.how == TIMED_OUT else ''}not kept by default ({self.how})"
        shown_set, chosen_set = set(shown), set(chosen)
        return [taken if i in chosen_set else left if i in shown_set else "not shown" for i in range(count)]

    def report(self, count: int, shown: list[int], chosen: list[int], timeout: float) -> str:
        """A few short lines (a report box must not widen the node over its neighbours)."""
        numbers = ", ".join(f"#{i}" for i in chosen)
        if self.by_artist:
            return f"you picked {numbers}\nof the {len(shown)} shown (of {count}), after {self.waited:.0f} s"
        why = (
            f"no pick within {timeout:.0f} s"
            if self.how == TIMED_OUT
            else "no browser to ask\n(an API prompt, or the tab was closed)"
        )
        return f"{why}\nkept {numbers}: the first {len(chosen)} in score order\n(not logged as picks)"


class PickBoard:
    """The open pick requests of this process, safe to use from the executor and the server's threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._open: dict[str, PickRequest] = {}
        self._announced: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._clock = clock

    def announce(self, body: Any) -> int:
        """A page says it can answer picks: ``{"client": its client id}``; ``PickRefused`` otherwise. Returns the
        count."""
        client = body.get("client") if isinstance(body, dict) and set(body) == {"client"} else None
        if not isinstance(client, str) or not 0 < len(client) <= MAX_CLIENT_ID or not client.isprintable():
            raise PickRefused(
                MALFORMED,
                f"an announcement is a JSON object with exactly client, a client id of at most {MAX_CLIENT_ID} "
                "characters",
            )
        with self._lock:
            count = self._announced.pop(client, 0) + 1
            self._announced[client] = count
            while len(self._announced) > MAX_ANNOUNCED:
                self._announced.popitem(last=False)
        return count

    def announcements(self, client: str | None) -> int:
        """How many times the page of ``client`` has announced itself; 0 when it never did (it cannot answer)."""
        with self._lock:
            return self._announced.get(client, 0) if client is not None else 0

    def open(self, node_id: Any, count: int, default: list[int]) -> PickRequest:
        if count < 1 or not default or any(not 0 <= d < count for d in default):
            raise ValueError(f"a pick needs candidates and a default among them (count {count}, default {default})")
        request = PickRequest(node_id=str(node_id), count=int(count), default=list(default))
        with self._lock:
            self._open[request.token] = request
        return request

    def close(self, request: PickRequest) -> None:
        """The node stopped waiting (answered, timed out, cancelled): later answers are refused as finished."""
        with self._lock:
            self._open.pop(request.token, None)

    def waiting(self) -> int:
        with self._lock:
            return len(self._open)

    def answer(self, body: Any) -> PickRequest:
        """Take a browser's answer ``{"token": str, "node": str, "picks": [int, ...]}``; ``PickRefused`` otherwise."""
        if not isinstance(body, dict) or set(body) != {"token", "node", "picks"}:
            raise PickRefused(MALFORMED, "a pick is a JSON object with exactly token, node and picks")
        token, node, picks = body["token"], body["node"], body["picks"]
        if not isinstance(token, str) or not isinstance(node, str):
            raise PickRefused(MALFORMED, "token and node must be strings")
        with self._lock:
            request = self._open.get(token)
            if request is None:
                raise PickRefused(
                    UNKNOWN,
                    "no MaSC Pick of this server is waiting for that token: it finished, timed out or was cancelled",
                )
            if node != request.node_id:
                raise PickRefused(MALFORMED, f"that token belongs to node {request.node_id}, not to node {node[:40]!r}")
            if request.answer is not None:
                raise PickRefused(ANSWERED, "this pick was already answered")
            if (
                not isinstance(picks, list)
                or not picks
                or len(picks) > request.count
                or any(not isinstance(p, int) or isinstance(p, bool) for p in picks)
                or len(set(picks)) != len(picks)
                or any(not 0 <= p < request.count for p in picks)
            ):
                raise PickRefused(
                    MALFORMED, f"picks must be 1 to {request.count} distinct positions from 0 to {request.count - 1}"
                )
            request.answer = list(picks)
            request._answered.set()
        return request

    def _settle(self, request: PickRequest, how: str) -> PickOutcome:
        """Under the lock: the artist's answer if the route took one, else close the request (later answers get 404)."""
        with self._lock:
            if request.answer is not None:
                return PickOutcome(list(request.answer), CHOSEN, 0.0)
            self._open.pop(request.token, None)
        return PickOutcome(list(request.default), how, 0.0)

    def wait(
        self,
        request: PickRequest,
        timeout: float,
        check_interrupt: Callable[[], None],
        audience: Audience | None = None,
    ) -> PickOutcome:
        """Block until the artist answers, ``timeout`` seconds pass (the default), or ``check_interrupt`` raises.

        With an ``audience``, the request is shown on it first and again whenever the page announces itself
        anew; when the page's socket stays gone for ``GRACE_SECONDS`` the default goes on (``NO_BROWSER``).
        The request is closed however the wait ends, so an answer that comes later is refused.
        """
        started = self._clock()
        gone_since = None
        shown = audience.announcements() if audience is not None else 0
        if audience is not None:
            audience.show(timeout)
        try:
            while True:
                check_interrupt()
                left = timeout - (self._clock() - started)
                if request._answered.wait(max(0.0, min(POLL_SECONDS, left))):
                    return self._timed(self._settle(request, CHOSEN), started)
                now = self._clock()
                if now - started >= timeout:
                    return self._timed(self._settle(request, TIMED_OUT), started)
                if audience is None:
                    continue
                if audience.reachable():
                    gone_since = None
                    announced = audience.announcements()
                    if announced != shown:  # the page loaded again or reconnected: it lost the dialog
                        shown = announced
                        audience.show(max(0.0, timeout - (now - started)))
                elif gone_since is None:
                    gone_since = now
                elif now - gone_since >= GRACE_SECONDS:
                    return self._timed(self._settle(request, NO_BROWSER), started)
        finally:
            self.close(request)

    def _timed(self, outcome: PickOutcome, started: float) -> PickOutcome:
        return PickOutcome(outcome.picks, outcome.how, self._clock() - started)


def pick_labels(shown: list[int], count: int, outcome: PickOutcome) -> list[str | None]:
    """Per candidate (``count`` of them): "picked" / "passed over" for those the artist saw and chose among; else None.

    ``shown[j]`` is the candidate at position j of what was shown. A default (timeout, no browser) labels
    nothing: it is the score order, not the artist's taste, and must not teach ``calibrate``.
    """
    labels: list[str | None] = [None] * count
    if not outcome.by_artist:
        return labels
    chosen = {shown[p] for p in outcome.picks}
    for candidate in shown:
        labels[candidate] = PICKED if candidate in chosen else PASSED_OVER
    return labels


def check_counts(show: int, keep: int, count: int) -> None:
    """One-line errors for a pick that cannot be shown: more to show than the batch has, a default larger than shown."""
    SHOWN.check(show)
    IntRange("keep", SHOWN.low, SHOWN.high).check(keep)
    if show > count:
        raise MascInputError(f"show is {show} but the batch has {count} images: show at most {count}")
    if keep > show:
        raise MascInputError(f"keep is {keep} but only {show} are shown: keep at most show")


def timeout_seconds(value: Any) -> float:
    """The timeout widget's value as seconds; refused unless finite and from 0 to a day."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise MascInputError(f"timeout {value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= 86400:
        raise MascInputError(f"timeout {value!r} must be from 0 to 86400 seconds")
    return seconds
