"""Logs that several writers append to, and that a crash may cut at any byte: nothing lost, nothing doubled.

A score log may have two ComfyUI instances (one output folder) or a script
beside a node appending to it; an evaluation's results.jsonl is appended to
chunk by chunk and its run may be killed. The rules, for every writer:

- Each append takes an exclusive lock on the file (``flock`` on POSIX, a
  byte-range lock on Windows) around everything it does: look at the tail,
  cut a torn record, write, flush, sync. Under the lock no other writer is
  half-way through a record, so a record without its end is a crash's
  remnant, never another writer's work in progress.
- A record's end is found by the log's format: JSON lines end at a newline
  (JSON text never holds a raw one); a CSV record ends at a newline outside
  quotes, so a prompt with line breaks is one record and a tear inside it is
  cut whole (cutting at the last newline would leave a quote open and
  swallow every row appended after it).
- A file is recognised before anything is cut: a file that is not a log of
  this kind (say ``notes.csv`` picked by mistake) is refused and left
  byte for byte as it was.
- A log's header (CSV) is written by whoever finds the file empty, under the
  lock: once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable

from ..errors import MascInputError
from ..io.files import check_regular_file

HEAD_BYTES = 1 << 20
"""How much of a file's start is read to recognise it (its first record lies within this)."""
_WINDOWS_LOCK_OFFSET = 1 << 62
"""On Windows the lock is a byte range far past any real end of file, so it never blocks a reader."""


def jsonl_record_end(data: bytes, start: int = 0, *, first: bool = False) -> int:
    """The offset just past the last (or ``first``) complete JSON line at or after ``start``; ``start`` if none."""
    newline = data.find(b"\n", start) if first else data.rfind(b"\n", start)
    return start if newline < 0 else newline + 1


def csv_record_end(data: bytes, start: int = 0, *, first: bool = False) -> int:
    """The offset just past the last (or ``first``) complete CSV record at or after ``start``; ``start`` if none.

    A record ends at a newline outside quotes. A doubled quote inside a quoted field flips the state
    twice, so counting quotes line by line is exact.
    """
    end, position, quoted = start, start, False
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            return end
        quoted ^= data.count(b'"', position, newline) % 2 == 1
        position = newline + 1
        if not quoted:
            end = position
            if first:
                return end


def first_record(head: bytes, record_end: Callable[..., int]) -> bytes | None:
    """The file's first complete record (without its newline), or None when a crash left less."""
    end = record_end(head, 0, first=True)
    return head[: end - 1] if end else None


@dataclass(frozen=True)
class LogFormat:
    """How one kind of log is laid out: where its records end, its header, and how its files are recognised.

    ``recognise(first_record_or_None, head)`` says whether a file is such a log; it sees the first complete
    record (None if a crash left less) and the file's first bytes.
    """

    what: str
    record_end: Callable[..., int]
    recognise: Callable[[bytes | None, bytes], bool]
    header: bytes = b""


def jsonl_format(what: str, keys: frozenset[str], start: bytes) -> LogFormat:
    """A JSON-lines log whose rows are objects holding ``keys`` and whose lines begin with ``start``.

    A file is such a log when its first line is such an object, or, when a crash left less than one
    line, when what is there could be the beginning of one (a prefix of ``start``, or ``start`` and more).
    """

    def recognise(first: bytes | None, head: bytes) -> bool:
        if first is None:
            return start.startswith(head[: len(start)])
        try:
            value = json.loads(first.decode("utf-8"))
        except ValueError:
            return False
        return isinstance(value, dict) and keys <= set(value)

    return LogFormat(what=what, record_end=jsonl_record_end, recognise=recognise)


class AppendLog:
    """A log file opened for appending whole records (``write``), each append locked, repaired, flushed and synced.

    Opening it recognises the file (``LogFormat.recognise``) under the lock, before anything is changed:
    a file of another kind gets a one-line MascInputError naming it, and is left untouched. ``label``
    names the file in that message (default: its quoted path; a node passes the name the workflow gave,
    never the server's path).
    """

    def __init__(
        self, path: str, log_format: LogFormat, *, label: str | None = None, hint: str = "choose another file name"
    ):
        self.path = path
        self.format = log_format
        label = label or f"'{path}'"
        check_regular_file(path, "log", label=label, hint=hint)  # opening a pipe to append would block
        self._handle = open(path, "a+b")
        self._boundary = 0
        """An offset known to end a record: what this writer last left (other writers may have appended since)."""
        try:
            with self._locked():
                self._recognise(label, hint)
        except BaseException:
            self._handle.close()
            raise

    def _recognise(self, label: str, hint: str) -> None:
        self._handle.seek(0)
        head = self._handle.read(HEAD_BYTES)
        if head and not self.format.recognise(first_record(head, self.format.record_end), head):
            raise MascInputError(f"{label} is not a {self.format.what}: {hint}; the file was left as it was")

    def _locked(self):
        return _FileLock(self._handle)

    def _cut_torn_tail(self) -> int:
        """Under the lock: drop a record a crashed writer left without its end; the file's size after."""
        size = os.fstat(self._handle.fileno()).st_size
        start = self._boundary if self._boundary <= size else 0
        if start == size:
            return size
        self._handle.seek(start)
        end = self.format.record_end(self._handle.read(size - start), 0) + start
        if end < size:
            self._handle.truncate(end)
        return end

    def write(self, text: str) -> None:
        """Append ``text`` (whole records), with the header first if the log is empty; synced before returning."""
        data = text.encode("utf-8")
        with self._locked():
            size = self._cut_torn_tail()
            if size == 0:
                data = self.format.header + data
            self._handle.seek(0, os.SEEK_END)
            self._handle.write(data)
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._boundary = size + len(data)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "AppendLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _FileLock:
    """An exclusive lock on an open file for the length of a ``with`` block (waits for other holders)."""

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        if os.name == "nt":  # pragma: no cover - Windows
            import msvcrt

            self.handle.seek(_WINDOWS_LOCK_OFFSET)
            while True:
                try:
                    msvcrt.locking(self.handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s: keep waiting, as flock does
                    continue
        else:
            import fcntl

            fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.handle.flush()
        if os.name == "nt":  # pragma: no cover - Windows
            import msvcrt

            self.handle.seek(_WINDOWS_LOCK_OFFSET)
            msvcrt.locking(self.handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
