"""The Ray driver takes Ctrl-C whichever thread the kernel hands it to (no Ray needed: the iterator is plain Python).

A process-wide signal may be delivered to any of its threads; Python then runs its handler in the main thread only,
and only once that thread is back in Python code. A main thread blocked on a lock with no timeout (as Ray's iterator
waits for the next batch) would never take it. Here the signal is sent to a thread other than the main one on
purpose, so the case that hung the driver under load happens every time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

_CHILD = textwrap.dedent(
    """
    import signal, sys, threading, time
    from masc_core.evaluation.ray_driver import waking as _waking

    # Ctrl-C as an interactive shell gives it: a job started with & by a non-interactive shell (a CI script, a
    # nohup'd run) inherits SIGINT ignored, and the signal this test sends would then never arrive at all.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    never, waiting = threading.Event(), threading.Event()

    def held_batches():  # as Ray's iterator while every worker is busy: waits on a lock, no timeout
        waiting.set()
        never.wait()
        yield "a batch"

    def send_to_this_thread():
        waiting.wait()
        time.sleep(0.5)  # lets the main thread settle into its wait; sent earlier or later, it must still end
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    try:
        threading.Thread(target=send_to_this_thread).start()
        for _ in _waking(held_batches()):
            pass
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
    """
)
HANG_GUARD = 120.0
"""Seconds before the test calls the child hung: a guard, never the verdict (it wakes every half second)."""


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_kill"), reason="POSIX threads' signals")
def test_ctrl_c_on_another_thread_still_ends_the_wait():
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD)
    assert (done.returncode, done.stdout.strip()) == (130, "interrupted"), done.stderr


def test_batches_errors_and_the_end_come_through_in_order():
    from masc_core.evaluation.ray_driver import waking as _waking

    assert list(_waking(iter([1, 2, 3]), period=0.01)) == [1, 2, 3]

    def failing():
        yield 1
        raise ValueError("a worker failed")

    seen = []
    with pytest.raises(ValueError, match="a worker failed"):
        for batch in _waking(failing(), period=0.01):
            seen.append(batch)
    assert seen == [1]
