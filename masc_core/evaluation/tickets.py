"""A test's hand on a running evaluation: with $MASC_TEST_BATCH_TICKETS set, each batch waits for a ticket.

A test that interrupts or kills an evaluation must know how far it got when the
signal lands, whatever the machine's load: racing a fast run against a polling
loop is a verdict that depends on timing (on a busy machine every row was
written before the signal arrived). With the variable naming a folder,
``BatchScorer`` scores a batch (under Ray, one unit of chunks) only after
claiming a ``ticket-*`` file there (an atomic rename, so each ticket lets
exactly one batch through, in any process of a Ray cluster); the test issues
as many tickets as batches it wants scored, waits for their first rows, then
sends its signal while every other batch is held. Unset (as always outside the
tests), this costs one environment lookup per batch.
"""

from __future__ import annotations

import os
import time

TICKETS_ENV = "MASC_TEST_BATCH_TICKETS"
_POLL_SECONDS = 0.05


def wait_for_ticket() -> None:
    """Return at once without $MASC_TEST_BATCH_TICKETS; else once this process has claimed a ticket there."""
    folder = os.environ.get(TICKETS_ENV)
    if not folder:
        return
    while True:
        for name in sorted(os.listdir(folder)):
            if name.startswith("ticket-"):
                try:
                    os.rename(os.path.join(folder, name), os.path.join(folder, f"used-{name[7:]}-{os.getpid()}"))
                    return
                except OSError:  # another worker claimed it first
                    continue
        time.sleep(_POLL_SECONDS)


def issue_tickets(folder: str, count: int) -> None:
    """Let ``count`` more batches through (the test's side)."""
    os.makedirs(folder, exist_ok=True)
    issued = sum(1 for name in os.listdir(folder) if name.startswith(("ticket-", "used-")))
    for number in range(issued, issued + count):
        with open(os.path.join(folder, f"ticket-{number:06d}"), "w"):
            pass
