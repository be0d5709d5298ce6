"""The driver's side of ``eval --engine ray``, with no Ray imported: reaching a cluster, reading its failures, waiting.

- ``check_reachable``: a TCP handshake with ``--address`` first, so an unreachable cluster fails in seconds (Ray's own
  connect loop takes minutes), and ``connect_env``: Ray's connect timeouts shortened for ``--address`` only;
- ``worker_error`` / ``init_failure``: what a worker's or the cluster's failure comes to, one line (``RayEngineError``,
  or the worker's own MascError rebuilt from Ray's text); ``captured_stderr`` keeps what Ray prints for that;
- ``waking``: the workers' batches read on a helper thread so the main thread takes Ctrl-C and SIGTERM
  (``interrupt_signal``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import socket
import sys
import tempfile
import threading

from ..errors import MascError, MascInputError, MascModelError

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for the TCP handshake with ``--address`` before giving up."""
CONNECT_ENV = {
    # Ray's own connect loop takes ~14 minutes to give up on an address that does not answer:
    # one attempt of a few seconds instead, for --address only (a local start needs the defaults).
    "RAY_gcs_server_port_wait_time_s": "1",
    "RAY_py_gcs_connect_timeout_s": "5",
    "RAY_gcs_rpc_server_connect_timeout_s": "2",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MASC_LINE = re.compile(r"^masc_core\.errors\.(Masc\w*Error): (.*)$", re.M)
ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.+)$", re.M)


class RayEngineError(MascError):
    """The Ray cluster cannot be reached or used, or a worker failed (one line; the run resumes)."""


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A TCP handshake with ``HOST:PORT`` (``ray://`` allowed): fails in at most ``timeout`` seconds, not minutes."""
    if address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise MascInputError(
            f"--address '{address}' is not HOST:PORT (the head's address, as 'ray start --head' prints it) or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc) or type(exc).__name__)
        raise RayEngineError(
            f"cannot reach a Ray cluster at {address}: {reason}; start one with 'ray start --head' there, or leave out "
            "--address for a local one"
        ) from None


def worker_error(exc: BaseException) -> MascError:
    """The one line a worker's failure comes to: the worker's own MascError if it raised one."""
    text = ANSI.sub("", f"{exc}\n{getattr(exc, 'traceback_str', '')}")
    found = MASC_LINE.search(text)
    if found:  # Ray carries the worker's exception as text only: rebuild it
        kind = {"MascInputError": MascInputError, "MascModelError": MascModelError}.get(found.group(1), RayEngineError)
        return kind(found.group(2))
    for name, message in ERROR_LINE.findall(text):
        if not name.startswith(("ray.", "Ray")) and name.rsplit(".", 1)[-1] not in (
            "UserCodeException",
            "SystemException",
        ):
            return RayEngineError(
                f"a Ray worker failed: {name.rsplit('.', 1)[-1]}: {message.strip()} (rerun to resume; Ray's logs are "
                "in /tmp/ray)"
            )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return RayEngineError(
        f"the Ray run failed: {type(exc).__name__}: {first} (rerun to resume; Ray's logs are in /tmp/ray)"
    )


def init_failure(address: str | None, exc: Exception, log: str) -> str:
    """The one line for a cluster that could not be started or joined."""
    if "InvalidAuthToken" in log or "Unauthenticated" in log:
        return (
            f"the Ray cluster at {address} asks for its token (Ray's token authentication): set RAY_AUTH_MODE=token, "
            "and RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH unless the token is in ~/.ray/auth_token"
        )
    where = f"join the Ray cluster at {address}" if address else "start a local Ray cluster"
    reason = " ".join(ANSI.sub("", str(exc)).split())[:300] or type(exc).__name__
    return f"cannot {where}: {reason}"


@contextlib.contextmanager
def captured_stderr():
    """File descriptor 2 into a temporary file; yields a function returning what was written there so far."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield lambda: (capture.seek(0), capture.read().decode("utf-8", "replace"))[1]
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def connect_env(address: str | None):
    saved = {key: os.environ.get(key) for key in CONNECT_ENV}
    if address:
        for key, value in CONNECT_ENV.items():
            os.environ.setdefault(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


WAKE_SECONDS = 0.5
"""How often the driver's main thread wakes while it waits for the workers' next batch, to take a signal."""


def waking(batches, period: float = WAKE_SECONDS):
    """``batches``, read by a helper thread, so this thread never blocks for more than ``period`` seconds.

    Why: Python runs signal handlers in the main thread only, and only when that thread returns to Python code. Ray's
    iterator waits on a lock with no timeout; when the kernel hands Ctrl-C or SIGTERM to one of Ray's own threads (it
    may pick any thread of the process) that wait never ends, and the run hangs instead of stopping (seen: one
    interrupted run in three under load). A timed wait returns to Python every ``period`` and the signal is taken.
    """
    handoff: queue.Queue = queue.Queue(maxsize=1)

    def pump():
        try:
            for batch in batches:
                handoff.put(("batch", batch))
            handoff.put(("end", None))
        except BaseException as exc:  # handed to the main thread, which raises it as its own
            handoff.put(("error", exc))

    # A daemon: after an interrupt it may stay blocked in Ray's iterator until ray.shutdown(), and must not hold
    # the process open.
    threading.Thread(target=pump, name="masc-ray-batches", daemon=True).start()
    while True:
        try:
            kind, value = handoff.get(timeout=period)
        except queue.Empty:
            continue
        if kind == "end":
            return
        if kind == "error":
            raise value
        yield value


def interrupt_signal(signum, frame):
    """SIGTERM as Ctrl-C: the run stops as an interrupted one (what it finished is kept)."""
    raise KeyboardInterrupt(f"signal {signum}")
