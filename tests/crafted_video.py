"""The command line run as a user runs it, for the crafted-file tests (the crafted videos themselves:
``masc_core.testing.videos``).

- ``cli_in_a_fresh_process``: ``python -m masc_core`` in its own interpreter, with a hang guard judged by the exit
  (never by seconds) and the process's peak RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT
from masc_core.testing.videos import mjpeg_video, patch_avi_frame_count

__all__ = ["cli_in_a_fresh_process", "mjpeg_video", "patch_avi_frame_count"]

HANG_GUARD_SECONDS = 600
"""A command that has not exited after this long is waiting on something that never comes (a FIFO): a failure, not a
slow machine (the honest cases here take seconds)."""


PROBE = (
    "import json, sys\n"
    "from masc_core.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
    "print(json.dumps({'peak_mib': int(hwm.split()[1]) / 1024}), file=sys.stderr)\n"
    "sys.exit(code)\n"
)
"""The command's own peak RSS is VmHWM, its address space's high-water mark: ``getrusage``'s ru_maxrss is not, as Linux
carries over the peak of the process it was started from (the test runner's, over 1.3 GB in the full suite)."""


def cli_in_a_fresh_process(*argv) -> tuple[int, str, list[str], float]:
    """(exit code, stdout, stderr's lines without the probe's, peak RSS in MiB) of ``python -m masc_core ARGV``."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, *map(str, argv)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"masc_core {' '.join(map(str, argv[:1]))} never exited: it waits on its input") from None
    lines = done.stderr.strip().splitlines()
    peak = json.loads(lines[-1])["peak_mib"] if lines and lines[-1].startswith('{"peak_mib"') else float("nan")
    return done.returncode, done.stdout, lines[:-1], peak
