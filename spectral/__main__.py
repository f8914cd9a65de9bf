"""``python -m spectral``: the command line (see :mod:`spectral.cli`)."""

import sys

from .cli import main

sys.exit(main())
