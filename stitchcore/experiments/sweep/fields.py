"""The ``sweep`` kind's fields, declared once (:mod:`stitchcore.params`): the CLI's ``sweep`` flags and a
lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`).  The ranges are what a form offers; :class:`SweepSpec` refuses
beyond its own bounds (:mod:`stitchcore.experiments._bounds`).  Cuts and metrics are lists, written
comma-separated in a link and on the command line (``class_acc:3,5`` stays one metric).

>>> [f.flag for f in SWEEP_FIELDS][:4]
['--a', '--b', '--positions', '--metrics']
>>> metric_list("accuracy, class_acc:3,5,confusion:3->8")
('accuracy', 'class_acc:3,5', 'confusion:3->8')
"""

from __future__ import annotations

import re

from stitchcore.experiments.common_fields import (
    ADAPTER_CLS_TOKEN,
    ADAPTER_INIT,
    ADAPTER_KIND,
    ADAPTER_NORM,
    ADAPTER_RANK,
    ADAPTER_RESAMPLE,
    ADAPTER_RESCALE,
    BATCH_SIZE,
    DATASET,
    EPOCHS,
    LR,
    MAX_TEST,
    MAX_TRAIN,
    MODEL_A,
    MODEL_B,
    OBJECTIVE,
    OPTIMIZER,
    SEED,
    TWIN_SEEDS_FIELD,
    WEIGHT_DECAY,
)  # fmt: skip
from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.measures.traits import parse_metric
from stitchcore.params import Field, declare, names_text

__all__ = ["SWEEP_FIELDS", "metric_list"]

_CLASSES = re.compile(r"\d+")  # a part that only continues a class list: class_acc:3,5


def metric_list(text: str) -> tuple[str, ...]:
    """Comma-separated trait metrics as a tuple: a part of bare class numbers continues the ``class_acc:``
    metric before it (``class_acc:3,5`` is one metric, the accuracy on classes 3 and 5)."""
    out: list[str] = []
    for part in names_text(text):
        if out and _CLASSES.fullmatch(part) and out[-1].replace(" ", "").startswith("class_acc:"):
            out[-1] += "," + part
        else:
            out.append(part)
    return tuple(out)


def check_metrics(metrics: tuple[str, ...]) -> None:
    """StitchError naming the grammar for a metric that is not one (``parse_metric``'s)."""
    for metric in metrics:
        parse_metric(metric)


SWEEP_FIELDS = declare("sweep", [
    MODEL_A,
    MODEL_B,
    Field("positions", tuple, parse=names_text, none_as=()),
    Field("metrics", tuple, parse=metric_list, check=check_metrics),
    DATASET,
    Field("train_data", str, role="dataset"),
    ADAPTER_KIND,
    ADAPTER_INIT,
    OBJECTIVE,
    EPOCHS,
    LR,
    SEED,
    Field("control", bool),
    Field("control_seeds", int, low=1, high=20),
    Field("noise_control", bool),
    Field("simplicity", bool),
    Field("sharpness_eps", float, low=0.0, high=1.0, step=0.01),
    Field("sharpness_draws", int, low=1, high=100),
    MAX_TRAIN,
    MAX_TEST,
    OPTIMIZER,
    WEIGHT_DECAY,
    BATCH_SIZE,
    ADAPTER_NORM,
    ADAPTER_RESAMPLE,
    ADAPTER_RANK,
    ADAPTER_CLS_TOKEN,
    ADAPTER_RESCALE,
    TWIN_SEEDS_FIELD,
    Field("simplicity_adapter", bool),
    Field("simplicity_report", bool),
], spec=SweepSpec)  # fmt: skip
