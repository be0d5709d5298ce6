"""``python -m masc_core``: see :mod:`masc_core.cli`."""

import sys

from .cli import main

sys.exit(main())
