"""The command line, ``python -m stitchcore VERB ...``: one module per verb group.

``models`` (zoo train, zoo list, cuts), ``stitch``, ``matrix`` (matrix, similarity),
``lm`` (merge), ``sweep``, ``runs`` (runs list, runs show); ``_common`` holds what they
share and ``main`` assembles them. The CLI is the one part of stitchcore that prints.
"""

from stitchcore.cli.main import main

__all__ = ["main"]
