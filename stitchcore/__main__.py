"""``python -m stitchcore``: see :mod:`stitchcore.cli`."""

import sys

from stitchcore.cli import main

sys.exit(main())
