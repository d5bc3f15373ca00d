"""stitchcore: the model-stitching library behind StitchLab (UI-free), and its Python API.

``import stitchcore`` is cheap; the API's names load on first use (:mod:`stitchcore.api`):
``stitchcore.train``, ``stitch``, ``matrix``, ``similarity``, ``sweep``, ``assemble``, ``merge``, ``lmstitch``,
``lmdepth``, ``transfer``, ``load``, ``runs``, ``run``; ``stitchcore.cuts(ref)`` lists a model's cuts.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

API = ("Result", "RunHandle", "Runs", "StitchAdapter", "assemble", "load", "load_adapter", "lmdepth", "lmstitch",
       "matrix", "merge", "python_call", "run", "runs", "similarity", "stitch", "sweep", "train", "transfer")  # fmt: skip


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (the package's submodules stay importable on their own)."""
    if name in API:
        import stitchcore.api as api

        return getattr(api, name)
    if name == "cuts":  # the package, callable: stitchcore.cuts(ref)
        import stitchcore.cuts as cuts

        return cuts
    raise AttributeError(f"module 'stitchcore' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API, "cuts"])
