"""Memory of the running process: the heap freed by a round goes back to the system (glibc)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from masc_core.resources import release_freed_memory

# In a fresh process, so the heap holds nothing but this: 1,500 buffers of 60 KB (below glibc's mmap threshold, so
# on the heap), every one freed but the last (which pins the heap's top, so nothing is returned by itself).
# Resident memory is read from /proc, in pages touched, not from what Python thinks it holds.
_CHILD = textwrap.dedent(
    """
    import json
    from masc_core.resources import release_freed_memory

    def resident_mib():
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * 4096 / 2**20

    buffers = [bytearray(b"x" * 60_000) for _ in range(1_500)]
    last = buffers.pop()
    del buffers
    before = resident_mib()
    trimmed = release_freed_memory()
    print(json.dumps({"before": before, "after": resident_mib(), "trimmed": trimmed}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim is Linux's")
def test_freed_heap_goes_back_to_the_system():
    import json

    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    assert figures["trimmed"] is True
    # 90 MB were freed but still resident; the trim gives back nearly all of it.
    assert figures["before"] - figures["after"] > 60, figures


def test_a_second_call_is_harmless():
    first = release_freed_memory()
    assert release_freed_memory() is first
