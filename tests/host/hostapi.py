"""Talking to a real ComfyUI: start and stop its server, call its HTTP API, read its websocket.

Standard library only (the test interpreter has no HTTP or websocket client
packages): ``urllib`` for HTTP, a minimal RFC 6455 reader for the progress
messages ComfyUI sends to the client that queued a prompt.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field

FROM_FRONT_END = {
    "extra_pnginfo": {"workflow": {"note": "sent by the MaSC host suite, as the front end sends its workflow"}}
}
"""The ``extra_data`` the front end sends with every prompt: core Save Image writes ``extra_pnginfo`` into each PNG."""

PORTS = range(18000, 18100)
"""Ports this suite may use (MASC_HOST_PORTS="first-last" overrides)."""


def port_range() -> range:
    spec = os.environ.get("MASC_HOST_PORTS")
    if not spec:
        return PORTS
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def free_port() -> int:
    """The first port of the range nobody listens on (other engineers' servers share the machine)."""
    for port in port_range():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {port_range()}")


class ComfyError(RuntimeError):
    """An HTTP call to ComfyUI that did not answer 200."""

    def __init__(self, status: int, body):
        super().__init__(f"HTTP {status}: {json.dumps(body)[:2000]}")
        self.status = status
        self.body = body


@dataclass
class Server:
    """A ComfyUI server process started by this suite (stopped by its PID, never by name)."""

    port: int
    process: subprocess.Popen
    log_path: str
    args: list[str]
    client_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    # --- HTTP -----------------------------------------------------------------------------------------------
    def request(self, path: str, data=None, *, raw: bool = False, timeout: float = 60):
        body = None if data is None else json.dumps(data).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        req = urllib.request.Request(
            self.url + path, data=body, headers=headers, method="POST" if body is not None else "GET"
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                parsed = json.loads(payload or b"null")
            except ValueError:
                parsed = payload.decode(errors="replace")
            raise ComfyError(error.code, parsed) from None
        return payload if raw else json.loads(payload or b"null")

    def status_of(self, path: str) -> int:
        """HTTP status of a GET (no exception for 4xx)."""
        try:
            self.request(path, raw=True)
            return 200
        except ComfyError as error:
            return error.status

    def queue(self, prompt: dict, extra_data: dict | None = None) -> str:
        """POST /prompt; the prompt id. ComfyError when validation refuses any part of the graph.

        ``extra_data``: sent along as the front end sends it (``FROM_FRONT_END``: the PNG metadata nodes add to);
        None, as a bare API client does.
        """
        body = {"prompt": prompt, "client_id": self.client_id}
        if extra_data is not None:
            body["extra_data"] = extra_data
        answer = self.request("/prompt", body)
        if answer.get("node_errors"):  # ComfyUI queues the valid outputs and reports the others: refuse both
            raise ComfyError(200, answer)
        return answer["prompt_id"]

    def wait(self, prompt_id: str, timeout: float = 900) -> dict:
        """The /history entry of a prompt once it has finished (success, error or interrupted)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                history = self.request(f"/history/{prompt_id}")
            except (TimeoutError, urllib.error.URLError) as slow:  # a server busy on a loaded machine: ask again
                if isinstance(slow, urllib.error.URLError) and not isinstance(slow.reason, TimeoutError):
                    raise
                history = None
            entry = history.get(prompt_id) if history else None
            if entry and entry.get("status", {}).get("completed") is not None:
                if entry["status"].get("status_str") in ("success", "error"):
                    return entry
            if self.process.poll() is not None:
                raise RuntimeError(f"ComfyUI exited ({self.process.returncode}); log {self.log_path}")
            time.sleep(0.2)
        raise TimeoutError(f"prompt {prompt_id} not finished after {timeout}s")

    def run(self, prompt: dict, timeout: float = 900, *, extra_data: dict | None = None) -> dict:
        return self.wait(self.queue(prompt, extra_data), timeout)

    def stop(self, timeout: float = 30) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)


def start_server(python: str, comfy_dir: str, args: list[str], log_path: str, timeout: float = 240) -> Server:
    """Start ``main.py`` on 127.0.0.1 and a free port; return once /object_info answers.

    HF_HUB_OFFLINE=1: a graph naming a Hub model that is not on disk fails at once instead of downloading. Two
    sessions starting at once may pick the same port: the one whose server logs it in use (0.33 then keeps running
    without a site, and the port answers for the other session's server; 0.3.64 exits) starts again on another port.
    """
    for _ in range(START_ATTEMPTS):
        server = _start_once(python, comfy_dir, args, log_path, timeout)
        if server is not None:
            return server
    raise RuntimeError(f"ComfyUI found every port it tried in use ({START_ATTEMPTS} tries): see {log_path}")


START_ATTEMPTS = 5


def _start_once(python: str, comfy_dir: str, args: list[str], log_path: str, timeout: float) -> Server | None:
    """The server on a free port once its own log says it serves there; None if another took the port first."""
    port = free_port()
    command = [python, "main.py", "--listen", "127.0.0.1", "--port", str(port), *args]
    log = open(log_path, "w", encoding="utf-8")
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)  # the host imports its own modules, never the test checkout
    process = subprocess.Popen(
        command, cwd=comfy_dir, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    log.close()
    server = Server(port, process, log_path, command)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if "address already in use" in server.log().lower():  # 0.3.64 exits on the clash (OSError from bind)
                return None
            raise RuntimeError(f"ComfyUI exited during start-up ({process.returncode}):\n{server.log()[-4000:]}")
        text = server.log()
        if f"Port {port} is already in use" in text:
            server.stop()
            return None
        if f"127.0.0.1:{port}" not in text:  # "To see the GUI go to: http://127.0.0.1:<port>": its site is up
            time.sleep(0.5)
            continue
        try:
            server.request("/object_info/KSampler", timeout=5)
            return server
        except (OSError, ComfyError):
            time.sleep(0.5)
    server.stop()
    raise TimeoutError(f"ComfyUI did not answer on port {port} within {timeout}s:\n{server.log()[-4000:]}")


class Messages:
    """The websocket messages ComfyUI sends to ``client_id``, collected by a thread (with arrival times)."""

    def __init__(self, server: Server, *, announce: bool = False):
        """``announce``: say, as the pack's script does for its page, that this client can answer MaSC Pick."""
        self.items: list[tuple[float, dict]] = []
        self.binary: list[tuple[float, int, bytes]] = []
        self._sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self._sock.sendall(
            (
                f"GET /ws?clientId={server.client_id} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: "
                "13\r\n\r\n"
            ).encode()
        )
        header = b""
        while b"\r\n\r\n" not in header:
            header += self._sock.recv(1)
        if b" 101 " not in header.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"websocket refused: {header[:200]!r}")
        self._sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        if announce:
            server.request("/masc/pick/hello", {"client": server.client_id})

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _read(self) -> None:
        try:
            while True:
                first, second = self._exactly(2)
                length = second & 0x7F
                if length == 126:
                    length = struct.unpack(">H", self._exactly(2))[0]
                elif length == 127:
                    length = struct.unpack(">Q", self._exactly(8))[0]
                payload = self._exactly(length)
                opcode = first & 0x0F
                if opcode == 8:
                    return
                if opcode == 1:
                    self.items.append((time.monotonic(), json.loads(payload)))
                elif opcode == 2:  # core's binary events: a 4-byte type, then its data (server.py encode_bytes)
                    self.binary.append((time.monotonic(), struct.unpack(">I", payload[:4])[0], payload[4:]))
        except (OSError, EOFError, ValueError):
            return

    def of_type(self, kind: str, prompt_id: str | None = None) -> list[tuple[float, dict]]:
        return [
            (at, message["data"])
            for at, message in list(self.items)
            if message.get("type") == kind
            and (prompt_id is None or message.get("data", {}).get("prompt_id") == prompt_id)
        ]

    def texts(self, node_id: str) -> list[str]:
        """The progress texts core sent for a node (binary event 3: node id length, node id, UTF-8 text)."""
        found = []
        for _, kind, data in list(self.binary):
            if kind == 3:
                length = struct.unpack(">I", data[:4])[0]
                if data[4 : 4 + length].decode() == str(node_id):
                    found.append(data[4 + length :].decode("utf-8"))
        return found

    def preview_images(self) -> list[bytes]:
        """The preview pictures core sent (binary event 1: a 4-byte format, then JPEG or PNG bytes), in order."""
        return [data[4:] for _, kind, data in list(self.binary) if kind == 1]

    def close(self) -> None:
        """Hang up as a closed tab does: shutdown sends the FIN at once (a bare close() would wait for the reader
        thread's recv to return, so the server would never see the socket go)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass


# --- /history helpers ---------------------------------------------------------------------------------------


def status(entry: dict) -> str:
    return entry["status"].get("status_str")


def error_of(entry: dict) -> dict | None:
    """The execution_error message of a failed prompt, or None."""
    for kind, message in entry["status"].get("messages", []):
        if kind == "execution_error":
            return message
    return None


def was_interrupted(entry: dict) -> bool:
    return any(kind == "execution_interrupted" for kind, _ in entry["status"].get("messages", []))


def ui_text(entry: dict, node_id: str) -> str:
    """The ``ui.text`` a node returned (joined), e.g. PreviewAny's value or a MaSC node's report."""
    return "\n".join(entry.get("outputs", {}).get(node_id, {}).get("text", []))


def saved_images(entry: dict, node_id: str, output_dir: str) -> list[str]:
    """Paths of the images a Save Image node wrote (empty when it was skipped or blocked)."""
    images = entry.get("outputs", {}).get(node_id, {}).get("images", [])
    return [
        os.path.join(output_dir, image.get("subfolder", ""), image["filename"])
        for image in images
        if image.get("type") == "output"
    ]


def explain(entry: dict) -> str:
    """One paragraph for an assertion message: status and the node error, if any."""
    error = error_of(entry)
    if error is None:
        return f"status {status(entry)}"
    return (
        f"status {status(entry)}: node {error.get('node_id')} ({error.get('node_type')}) "
        f"{error.get('exception_type')}: {error.get('exception_message')}"
    )
