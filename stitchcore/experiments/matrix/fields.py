"""The ``matrix`` kind's fields, declared once (:mod:`stitchcore.params`): the Similarity page's matrix form and
its links, the CLI's ``matrix`` flags and a lesson's open controls are generated from this list (labels and
help: :mod:`stitchcore.experiments.field_words`).  The ranges are what a form offers; :class:`MatrixSpec`
refuses beyond its own bounds, and says which fields a mode leaves unused (:meth:`MatrixSpec.unused`).
Sender and receiver cuts are lists, written comma-separated in a link and on the command line.

>>> [f.flag for f in MATRIX_FIELDS][:6]
['--a', '--b', '--senders', '--receivers', '--dataset', '--mode']
>>> cut_names(" block1, fc1,")
('block1', 'fc1')
"""

from __future__ import annotations

from stitchcore.experiments.matrix.spec import (
    CONTROL_TRAININGS,
    MATRIX_OBJECTIVES,
    MAX_SEEDS,
    MODES,
    MatrixSpec,
    matrix_objective,
)
from stitchcore.models.refs import TWIN_SEEDS
from stitchcore.params import Field, declare
from stitchcore.stitching.adapters import CLS_TOKENS, INITS, NORMS, RESAMPLES, RESCALES, list_adapters
from stitchcore.stitching.precision import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS

__all__ = ["MATRIX_FIELDS", "OBJECTIVES", "cut_names"]

OBJECTIVES = (*MATRIX_OBJECTIVES, "task+0.5*match")  # offered; any sum matrix_objective reads is taken


def cut_names(text: str) -> tuple[str, ...]:
    """Comma-separated cut names (or their aliases) as a tuple; ``()`` names none (the spec refuses it)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


MATRIX_FIELDS = declare("matrix", [
    Field("a", str, role="model"),
    Field("b", str, role="model"),
    Field("senders", tuple, role="cuts", parse=cut_names),
    Field("receivers", tuple, role="cuts", parse=cut_names),
    Field("dataset", str, role="dataset"),
    Field("mode", str, choices=MODES),
    Field("adapter.kind", str, choices=tuple(list_adapters()), key="kind", flag="--adapter"),
    Field("adapter.resample", str, choices=RESAMPLES),
    Field("adapter.init", str, choices=INITS),
    Field("adapter.norm", str, choices=NORMS),
    Field("objective", str, suggestions=OBJECTIVES, check=matrix_objective),
    Field("epochs", int, low=1, high=100),
    Field("controls", bool),
    Field("max_train", int, low=0, high=10**7, none_as=0),
    Field("seeds", int, low=1, high=MAX_SEEDS),
    Field("max_test", int, low=0, high=10**7, none_as=0),
    Field("seed", int, low=0, high=10**6),
    Field("optimizer", str, choices=tuple(OPTIMIZERS)),
    Field("lr", float, low=1e-5, high=1.0, step=1e-4),
    Field("weight_decay", float, low=0.0, high=1.0, step=0.01),
    Field("batch_size", int, low=4, high=4096),
    Field("precision", str, choices=PRECISIONS),
    Field("noise_sender", bool),
    Field("control_training", str, choices=CONTROL_TRAININGS),
    Field("twin_seeds", str, choices=TWIN_SEEDS),
    Field("adapter.rank", int, low=0, high=4096, none_as=0),
    Field("adapter.cls_token", str, choices=CLS_TOKENS),
    Field("adapter.rescale", str, choices=RESCALES),
], spec=MatrixSpec)  # fmt: skip
