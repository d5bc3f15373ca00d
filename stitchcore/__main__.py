"""``python -m stitchcore``: see :mod:`stitchcore.cli`."""

import sys

from stitchcore.cli.main import main

if __name__ == "__main__":  # importing this module (doctest collection) runs nothing
    sys.exit(main())
