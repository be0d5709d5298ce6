"""A test's hand on a running evaluation, from outside the product: with $MASC_TEST_BATCH_TICKETS set, each batch waits
for a ticket.

A test that interrupts or kills an evaluation must know how far it got when the signal lands, whatever the
machine's load: racing a fast run against a polling loop is a verdict that depends on timing (on a busy machine
every row was written before the signal arrived). The test puts this folder on the run's PYTHONPATH and names a
ticket folder in $MASC_TEST_BATCH_TICKETS: Python then imports this module at start-up (``sitecustomize``) in the
run and in every Ray worker it starts, and the import hook below wraps ``BatchScorer.__call__`` when that module
loads, so a batch (under Ray, one unit of chunks) is scored only after claiming a ``ticket-*`` file (an atomic
rename, so each ticket lets exactly one batch through, in any process of the cluster). The test issues as many
tickets as batches it wants scored, waits for their first rows, then sends its signal while every other batch is
held. Without the variable nothing is installed; the product never knows.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
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


TARGET = "masc_core.evaluation.batch_scorer"


def _hold_batches(module) -> None:
    scorer = module.BatchScorer
    original = scorer.__call__

    def held(self, batch):
        wait_for_ticket()
        yield from original(self, batch)

    scorer.__call__ = held


class _HoldBatchesOnImport(importlib.abc.MetaPathFinder):
    """Finds ``TARGET`` as usual and wraps its BatchScorer once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _hold_batches(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get(TICKETS_ENV):
    sys.meta_path.insert(0, _HoldBatchesOnImport())
