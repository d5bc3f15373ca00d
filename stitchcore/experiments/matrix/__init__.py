"""Experiment ``matrix``: stitch every sender cut of A into every receiver cut of B.

The heat map of stitched accuracies is Hernandez, Dangovski & Lu's functional similarity matrix.
Controls (``controls=True``, zoo models only): the same matrix with a random-init sender
(A?init=random&seed=SEED), a random-init receiver (B?init=random), both random, and a noise sender (each sender
cut's activations replaced by class-clustered noise of their shape and scale); debiased = values - control
values, one matrix per control made as the cells (like with like: :func:`debiased_refusal` says why a control
has none).  The controls' adapters are made as the cells (``control_training="matched"``), except those into a
random receiver where the cells never see the task loss: a fit there would only copy its activation and score
chance in every cell, so they are task-trained and drawn beside the matrix, never subtracted from it; runs
stored before say so (:func:`control_note`).

One kind, one package, imports running downward:

* :mod:`.spec` -- :class:`MatrixSpec` and the names the others share (the bottom);
* :mod:`.units` -- what a worker runs: :func:`receiver_unit`, :func:`streamed_unit`,
  :func:`sender_activations` and the workspace they work in;
* :mod:`.run` -- the driver :func:`run_matrix`, registered as ``matrix`` on import; only it writes the store;
* :mod:`.read` -- the readers of stored results (:func:`partial_cells`, :func:`cell_grid`,
  :func:`control_tables` ...), :func:`matrix_state`, what a page or a report draws, and
  :func:`similarity_beside`, the similarity run launched with the matrix;
* :mod:`.estimate` -- :func:`estimate_matrix`, how long a run will take;
* :mod:`.fields` -- its fields declared once (:mod:`stitchcore.params`): the page's form, links and CLI flags.
"""

from __future__ import annotations

from stitchcore.experiments.matrix.estimate import estimate_matrix
from stitchcore.experiments.matrix.read import (
    ControlTable,
    MatrixState,
    blank_cells_mean,
    cell_axes,
    cell_grid,
    control_note,
    control_tables,
    debiased,
    debiased_refusal,
    difference,
    failed_pairs,
    matrix_state,
    partial_cells,
    partial_path,
    similarity_beside,
    skipped_pairs,
)
from stitchcore.experiments.matrix.run import run_matrix  # registers the kind
from stitchcore.experiments.matrix.spec import (
    CELLS_ARTIFACT,
    CONTROL_NAMES,
    CONTROL_TRAININGS,
    CONTROLS,
    INTO_RANDOM,
    MATRIX_OBJECTIVES,
    MATRIX_PRESETS,
    MAX_SEEDS,
    MODE_RULES,
    MODES,
    VARIANTS,
    MatrixMode,
    MatrixSpec,
    cell_objective,
    made_alike,
    matrix_mode,
    matrix_objective,
    preset_fields,
)
from stitchcore.experiments.matrix.units import (
    noise_activations,
    receiver_unit,
    sender_activations,
    streamed_unit,
)
from stitchcore.experiments.matrix import fields  # noqa: E402, F401  (the kind's declared fields)

__all__ = ["CELLS_ARTIFACT", "CONTROLS", "CONTROL_NAMES", "CONTROL_TRAININGS", "INTO_RANDOM", "MATRIX_OBJECTIVES",
           "MATRIX_PRESETS", "MAX_SEEDS", "MODES", "MODE_RULES", "VARIANTS", "ControlTable", "MatrixMode",
           "MatrixSpec", "MatrixState", "blank_cells_mean", "cell_axes", "cell_grid", "cell_objective", "control_note",
           "control_tables", "debiased", "debiased_refusal", "difference", "estimate_matrix", "failed_pairs",
           "made_alike", "matrix_mode", "matrix_objective", "matrix_state", "noise_activations", "partial_cells",
           "partial_path", "preset_fields", "receiver_unit", "run_matrix", "sender_activations", "similarity_beside",
           "skipped_pairs", "streamed_unit"]  # fmt: skip
