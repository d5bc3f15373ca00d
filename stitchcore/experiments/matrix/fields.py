"""The ``matrix`` kind's fields, declared once (:mod:`stitchcore.params`): the Similarity page's matrix form and
its links, the CLI's ``matrix`` flags and a lesson's open controls are generated from this list (labels and
help: :mod:`stitchcore.experiments.field_words`).  The ranges are what a form offers; :class:`MatrixSpec`
refuses beyond its own bounds, and says which fields a mode leaves unused (:meth:`MatrixSpec.unused`).
Sender and receiver cuts are lists, written comma-separated in a link and on the command line.

>>> [f.flag for f in MATRIX_FIELDS][:6]
['--a', '--b', '--senders', '--receivers', '--dataset', '--mode']
"""

from __future__ import annotations

from stitchcore.experiments.common_fields import (
    ADAPTER_CLS_TOKEN,
    ADAPTER_INIT,
    ADAPTER_KIND,
    ADAPTER_NORM,
    ADAPTER_RANK,
    ADAPTER_RESAMPLE_ANY,
    ADAPTER_RESCALE,
    BATCH_SIZE,
    DATASET,
    EPOCHS,
    LR,
    MAX_TEST,
    MAX_TRAIN,
    MODEL_A,
    MODEL_B,
    OPTIMIZER,
    PRECISION,
    RECEIVERS,
    SEED,
    SENDERS,
    TWIN_SEEDS_FIELD,
    WEIGHT_DECAY,
)  # fmt: skip
from stitchcore.experiments.matrix.spec import (
    CONTROL_TRAININGS,
    MATRIX_OBJECTIVES,
    MAX_SEEDS,
    MODES,
    MatrixSpec,
    matrix_objective,
)
from stitchcore.params import Field, declare

__all__ = ["MATRIX_FIELDS", "OBJECTIVES"]

OBJECTIVES = (*MATRIX_OBJECTIVES, "task+0.5*match")  # offered; any sum matrix_objective reads is taken


MATRIX_FIELDS = declare("matrix", [
    MODEL_A,
    MODEL_B,
    SENDERS,
    RECEIVERS,
    DATASET,
    Field("mode", str, choices=MODES),
    ADAPTER_KIND,
    ADAPTER_RESAMPLE_ANY,
    ADAPTER_INIT,
    ADAPTER_NORM,
    Field("objective", str, suggestions=OBJECTIVES, check=matrix_objective),
    EPOCHS.narrowed(low=1, high=100),
    Field("controls", bool),
    MAX_TRAIN,
    Field("seeds", int, low=1, high=MAX_SEEDS),
    MAX_TEST,
    SEED,
    OPTIMIZER,
    LR,
    WEIGHT_DECAY,
    BATCH_SIZE,
    PRECISION,
    Field("noise_sender", bool),
    Field("control_training", str, choices=CONTROL_TRAININGS),
    TWIN_SEEDS_FIELD,
    ADAPTER_RANK,
    ADAPTER_CLS_TOKEN,
    ADAPTER_RESCALE,
], spec=MatrixSpec)  # fmt: skip
