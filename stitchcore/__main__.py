"""``python -m stitchcore``: see :mod:`stitchcore.cli`."""

import sys

from stitchcore.cli.main import main

sys.exit(main())
