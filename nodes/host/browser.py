"""MaSC Pick's browser: the tab that queued the prompt (ComfyUI's websocket), and the pick routes.

The board the routes answer is kept on ComfyUI's server object, one per process, whichever copy of the pack loaded
first (``register_pick_route``); outside ComfyUI there is no browser unless a stand-in is installed with
``use_pick_browser`` (the tests').
"""

from __future__ import annotations

import contextlib
import logging
import os

from ...masc_core.selection.picks import ANSWERED, MALFORMED, UNKNOWN, PickBoard
from .comfy import IN_COMFYUI, prompt_server

MAX_BODY_BYTES = 4096
"""A pick is a token, a node id and at most 64 small integers; an announcement a client id: anything longer is refused
unread (the largest answer the dialog can send stays under a quarter of this)."""
STATUS = {MALFORMED: 400, UNKNOWN: 404, ANSWERED: 409}
"""The HTTP status of each of the board's refusals."""
BOARD = PickBoard()
"""This copy's board: the routes answer it when this copy registered them (``pick_board``)."""

PICK_EVENT = "masc.pick"
"""Sent to the browser that queued the prompt: show these candidates and answer with a pick."""
PICK_CLOSED_EVENT = "masc.pick.closed"
"""Sent when a node stops waiting (answered, timed out, cancelled): the browser closes its dialog."""
PICK_ROUTE = "/masc/pick"
"""Where the browser posts its answer (ComfyUI serves it under /api too)."""
PICK_HELLO_ROUTE = "/masc/pick/hello"
"""Where the pack's script announces that its page can answer picks (on load and on every reconnect)."""
PICK_CONFIG_ROUTE = "/masc/pick/config"
"""Where the pack's script reads the event names and the routes above (GET), so they are written only here."""


def pick_config() -> dict:
    """What the pack's script needs to know of the server's side: the events it listens to and the routes it posts
    to."""
    return {
        "events": {"show": PICK_EVENT, "closed": PICK_CLOSED_EVENT},
        "routes": {"answer": PICK_ROUTE, "hello": PICK_HELLO_ROUTE},
    }


class ComfyBrowser:
    """The browser tab that queued the running prompt, through ComfyUI's websocket (PromptServer.send_sync)."""

    @staticmethod
    def _server():
        return prompt_server()

    def client(self) -> str | None:
        """The id of the connected browser that queued the running prompt; None for an API prompt or a closed tab."""
        server = self._server()
        if server is None:
            return None
        client_id = getattr(server, "client_id", None)
        return client_id if client_id is not None and self.connected(client_id) else None

    def connected(self, client: str) -> bool:
        """Whether ``client`` has a websocket open now (a reloading tab has none for a moment)."""
        server = self._server()
        return server is not None and client in getattr(server, "sockets", {})

    def send(self, event: str, data: dict, client: str) -> None:
        server = self._server()
        if server is not None:
            server.send_sync(event, data, client)


_BROWSER = ComfyBrowser() if IN_COMFYUI else None
_BOARD_ATTRIBUTE = "masc_pick_board"
"""Where the PromptServer keeps the pick board its routes answer: one per process, whichever copy of the pack came
first."""


def pick_browser():
    """Who a MaSC Pick asks: the browser behind the running prompt inside ComfyUI; outside it, a stand-in or None."""
    return _BROWSER


def pick_board(own: PickBoard = BOARD):
    """The board this process's pick routes answer (``register_pick_route``), or ``own`` when there is none.

    With two copies of the pack installed, the first copy's board is the one the routes serve; a copy's
    nodes wait on it so that answers reach them. A board without the calls this copy needs (an older copy)
    is not used: then ``own`` has no announced page and every pick takes its default at once.
    """
    server = ComfyBrowser._server() if IN_COMFYUI else None
    shared = getattr(server, _BOARD_ATTRIBUTE, None) if server is not None else None
    return (
        shared
        if shared is not None and all(hasattr(shared, name) for name in ("announcements", "announce", "wait"))
        else own
    )


@contextlib.contextmanager
def use_pick_browser(browser):
    """Ask ``browser`` (``client()``, ``connected(client)``, ``send(event, data, client)`` as ``ComfyBrowser``) inside
    the block: the tests'."""
    global _BROWSER
    previous, _BROWSER = _BROWSER, browser
    try:
        yield browser
    finally:
        _BROWSER = previous


def _json_body_error(message: str, status: int = 400):
    from aiohttp import web  # ComfyUI's own web server

    return web.json_response({"error": message}, status=status)


async def _read_json_body(request, what: str):
    """A route's JSON body (at most ``MAX_BODY_BYTES``, its length given), or the refusal to answer with."""
    from ...masc_core.io.files import JSONUnreadable, parse_json

    length = request.content_length
    if length is None or length > MAX_BODY_BYTES:
        return None, _json_body_error(
            f"{what} is a JSON body of at most {MAX_BODY_BYTES} bytes, with its length given", 413
        )
    try:
        return parse_json(await request.read(), max_depth=4), None
    except JSONUnreadable as why:  # deep nesting included: one line, never a 500
        return None, _json_body_error(f"{what} is not JSON ({why})")


def _board_route(take, what: str):
    """A POST handler: the body read and parsed strictly, handed to ``take`` (a board call); its refusals as
    statuses."""
    from ...masc_core.selection.picks import PickRefused

    async def handle(request):
        body, refusal = await _read_json_body(request, what)
        if refusal is not None:
            return refusal
        try:
            take(body)
        except PickRefused as refused:
            return _json_body_error(str(refused), STATUS[refused.kind])
        from aiohttp import web

        return web.json_response({"ok": True})

    return handle


def register_pick_route(board: PickBoard = BOARD) -> bool:
    """Serve MaSC Pick's routes, once per process; True when this call registered them.

    - POST ``PICK_ROUTE``: a browser's answer for a waiting MaSC Pick, handed to ``board.answer`` (checked there).
    - POST ``PICK_HELLO_ROUTE``: the pack's script announces that its page can answer picks (``board.announce``).
    - GET ``PICK_CONFIG_ROUTE``: the event names and routes above, for the pack's script (``pick_config``).

    Bodies are read only when they declare a length of at most ``MAX_BODY_BYTES``; every refusal is a JSON
    ``{"error": one line}`` with the board's status (400 malformed, 404 nobody waiting, 409 answered, 413 too long).
    A second copy of the pack (another folder in custom_nodes) finds the routes taken, says so in the log and
    registers nothing: aiohttp would refuse the same route twice and the server would not start.
    """
    if not IN_COMFYUI:
        return False
    server = ComfyBrowser._server()
    if server is None:
        return False
    taken = any(
        getattr(route, "path", None) in (PICK_ROUTE, PICK_HELLO_ROUTE, PICK_CONFIG_ROUTE)
        for route in getattr(server, "routes", ())
    )
    if (
        getattr(server, _BOARD_ATTRIBUTE, None) is not None or taken
    ):  # taken: an older copy that did not leave its board
        logging.warning(
            "MaSC: another copy of the pack is installed (this one at %s); MaSC Pick's routes stay with the first copy "
            "loaded. Remove one of the two folders from custom_nodes.",
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        )
        return False
    server.routes.post(PICK_ROUTE)(_board_route(board.answer, "a pick"))
    server.routes.post(PICK_HELLO_ROUTE)(_board_route(board.announce, "an announcement"))

    @server.routes.get(PICK_CONFIG_ROUTE)
    async def tell_config(request):
        from aiohttp import web

        return web.json_response(pick_config())

    setattr(server, _BOARD_ATTRIBUTE, board)
    return True
