"""Experiments: pure functions spec -> result, run through one cached runner.

Each experiment is registered by kind (``stitch``, ``zoo`` ...) and has the
signature ``fn(spec, ctx: RunContext) -> dict`` (the summary).  Call
:func:`run_experiment` to get caching, store bookkeeping, progress and
cancellation for free; the CLI and the app's job runner both use it.

Importing this package registers the built-in kinds.  Each kind's module holds
its spec and the readers of its own stored results (``matrix.partial_cells``,
``sweep.partial_positions``, ``lm.partial_points``, ``assemble.assembled_cells``);
:func:`spec_from_record` rebuilds the spec of any stored run.

>>> list_experiments()
['assemble', 'lmdepth', 'lmstitch', 'matrix', 'merge', 'similarity', 'stitch', 'sweep', 'transfer', 'zoo']
"""

from __future__ import annotations

from stitchcore.experiments._data_id import streamed_folder
from stitchcore.experiments._registry import (
    Experiment,
    ProgressFn,
    RunContext,
    RunOutcome,
    check_spec,
    get_experiment,
    list_experiments,
    new_spec,
    register_experiment,
    run_experiment,
    spec_from_record,
)

__all__ = [
    "Experiment",
    "ProgressFn",
    "RunContext",
    "RunOutcome",
    "check_spec",
    "get_experiment",
    "list_experiments",
    "new_spec",
    "register_experiment",
    "run_experiment",
    "spec_from_record",
    "streamed_folder",
]

# The built-in kinds register themselves on import (after the names above exist, though they
# import them from _registry, so a partially initialised package never matters).
from stitchcore.experiments import assemble, lm, matrix, similarity, stitch, sweep, transfer, zoo  # noqa: E402, F401
from stitchcore.experiments import similarity_fields, stitch_fields, transfer_fields, zoo_fields  # noqa: E402, F401  (declared fields)
