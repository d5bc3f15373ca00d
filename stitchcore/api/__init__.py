"""The Python API: one function per run kind, sharing one store with the app and the CLI.

>>> import stitchcore
>>> m = stitchcore.train(arch="cnn", dataset="digits", seed=0, epochs=1, store=tmp)  # doctest: +SKIP
>>> r = stitchcore.stitch(m.ref, m.ref, "block1", "block1", epochs=1, store=tmp)     # doctest: +SKIP
>>> r.summary["accuracy"], r.link()                                                    # doctest: +SKIP

Every run function takes the spec's fields by name (today's defaults otherwise; see ``help(stitchcore.stitch)``)
and ``store``, ``background``, ``progress``, ``rerun``, ``device``, ``threads``; it returns a :class:`Result`
(``.run_id``, ``.summary``, ``.to_pandas()``, ``.figure()``, ``.link()``, ``.python()``), or with
``background=True`` a :class:`RunHandle` (``.progress``, ``.wait()``, ``.cancel()``).
"""

from __future__ import annotations

from stitchcore.api.progress import ProgressBar, quiet_tqdm_auto

quiet_tqdm_auto()  # first: the model libraries the run functions import load tqdm.auto, which warns in a notebook

from stitchcore.api.adapters import StitchAdapter, load_adapter  # noqa: E402
from stitchcore.api.background import RunHandle  # noqa: E402
from stitchcore.api.calls import KIND_FUNCTIONS, load, run, runs  # noqa: E402
from stitchcore.api.reproduce import python_call, spec_from_call  # noqa: E402
from stitchcore.api.result import Result, Runs  # noqa: E402

train = KIND_FUNCTIONS["train"]
stitch = KIND_FUNCTIONS["stitch"]
matrix = KIND_FUNCTIONS["matrix"]
similarity = KIND_FUNCTIONS["similarity"]
sweep = KIND_FUNCTIONS["sweep"]
assemble = KIND_FUNCTIONS["assemble"]
merge = KIND_FUNCTIONS["merge"]
lmstitch = KIND_FUNCTIONS["lmstitch"]
lmdepth = KIND_FUNCTIONS["lmdepth"]
transfer = KIND_FUNCTIONS["transfer"]

__all__ = ["ProgressBar", "Result", "RunHandle", "Runs", "StitchAdapter", "assemble", "load", "load_adapter",
           "lmdepth", "lmstitch", "matrix", "merge", "python_call", "run", "runs", "similarity", "spec_from_call",
           "stitch", "sweep", "train", "transfer"]
