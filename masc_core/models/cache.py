"""A least-recently-used cache bounded by bytes, for encoded images and prompts."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
"""Default budget: about 100 SO400M NaFlex images at 1024 patches (fp32)."""


def content_key(array: np.ndarray) -> str:
    """A digest of an array's shape and bytes: equal pixels, equal key."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((array.shape, str(array.dtype))).encode())
    digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


class LRUCache:
    """Maps keys to values, evicting the least recently used beyond ``max_bytes``.

    Values larger than the whole budget are not stored. ``max_bytes=0``
    disables caching. Thread-safe (ComfyUI may run nodes from other threads).
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        self.max_bytes = max(0, int(max_bytes))
        self._items: "OrderedDict[Any, tuple[Any, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Any, value: Any, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes and self._items:
                _, (_, size) = self._items.popitem(last=False)
                self._bytes -= size

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> dict:
        return {
            "entries": len(self),
            "bytes": self._bytes,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
        }
