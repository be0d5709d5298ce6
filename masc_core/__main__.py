"""``python -m masc_core``: see :mod:`masc_core.cli`."""

import os
import sys

from .cli import main

code = main()
# Skip the interpreter's teardown (freeing a loaded model and every module
# takes most of a second): all output is written and flushed by now.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
