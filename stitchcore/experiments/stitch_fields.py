"""The ``stitch`` kind's fields, declared once (:mod:`stitchcore.params`): the Stitch page's form and its links,
the CLI's ``stitch`` flags and a lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`).  The ranges are what a form offers; :class:`StitchSpec` refuses
beyond its own bounds (:mod:`stitchcore.experiments._bounds`).

>>> [f.flag for f in STITCH_FIELDS if f.name.startswith("adapter.")][:2]
['--adapter', '--norm']
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
    CUT_A,
    CUT_B,
    DATASET,
    EPOCHS,
    LR,
    MAX_TEST,
    MAX_TRAIN,
    MODEL_A,
    MODEL_B,
    OBJECTIVE,
    OBJECTIVES,
    OPTIMIZER,
    PRECISION,
    SEED,
    WEIGHT_DECAY,
)  # fmt: skip
from stitchcore.experiments.stitch import KEEPS, StitchSpec
from stitchcore.params import Field, declare

__all__ = ["ADAPTER_KEYS", "OBJECTIVES", "STITCH_FIELDS"]


STITCH_FIELDS = declare("stitch", [
    MODEL_A,
    MODEL_B,
    CUT_A,
    CUT_B,
    ADAPTER_KIND,
    ADAPTER_NORM,
    ADAPTER_RESAMPLE_ANY,
    ADAPTER_INIT,
    OBJECTIVE,
    OPTIMIZER,
    LR,
    EPOCHS,
    BATCH_SIZE,
    SEED,
    MAX_TRAIN,
    MAX_TEST,
    Field("head", str, choices=("b", "a")),
    PRECISION,
    Field("val_fraction", float, low=0.0, high=0.45, step=0.05),
    Field("split_seed", int, low=0, high=10**6),
    Field("keep", str, choices=KEEPS),
    Field("seeds", int, low=1, high=20),
    Field("noise_control", bool),
    WEIGHT_DECAY,
    Field("kd_temperature", float, low=0.1, high=20.0, step=0.1),
    ADAPTER_RANK,
    ADAPTER_CLS_TOKEN,
    ADAPTER_RESCALE,
    Field("head_cut", str, role="cut"),
    DATASET,
], spec=StitchSpec)  # fmt: skip
# a stitch's adapter by link key: what a matrix or assembly cell's link writes even at today's defaults
ADAPTER_KEYS = tuple(f.key for f in STITCH_FIELDS if f.name.startswith("adapter."))
