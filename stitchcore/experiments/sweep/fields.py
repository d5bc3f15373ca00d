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

from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.measures.traits import parse_metric
from stitchcore.models.refs import TWIN_SEEDS
from stitchcore.params import Field, declare
from stitchcore.stitching.adapters import CLS_TOKENS, INITS, NORMS, RESAMPLES, RESCALES, list_adapters
from stitchcore.stitching.train import OPTIMIZERS

__all__ = ["SWEEP_FIELDS", "cut_list", "metric_list"]

_CLASSES = re.compile(r"\d+")  # a part that only continues a class list: class_acc:3,5


def cut_list(text: str) -> tuple[str, ...]:
    """Comma-separated cut names as a tuple (``()`` for none: every cut).

    >>> cut_list("block1, fc1,")
    ('block1', 'fc1')
    """
    return tuple(n.strip() for n in text.split(",") if n.strip())


def metric_list(text: str) -> tuple[str, ...]:
    """Comma-separated trait metrics as a tuple: a part of bare class numbers continues the ``class_acc:``
    metric before it (``class_acc:3,5`` is one metric, the accuracy on classes 3 and 5)."""
    out: list[str] = []
    for part in cut_list(text):
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
    Field("a", str, role="model"),
    Field("b", str, role="model"),
    Field("positions", tuple, parse=cut_list, none_as=()),
    Field("metrics", tuple, parse=metric_list, check=check_metrics),
    Field("dataset", str, role="dataset"),
    Field("train_data", str, role="dataset"),
    Field("adapter.kind", str, choices=tuple(list_adapters()), key="kind", flag="--adapter"),
    Field("adapter.init", str, choices=INITS),
    Field("epochs", int, low=0, high=500),
    Field("lr", float, low=1e-5, high=1.0, step=1e-4),
    Field("seed", int, low=0, high=10**6),
    Field("control", bool),
    Field("control_seeds", int, low=1, high=20),
    Field("noise_control", bool),
    Field("simplicity", bool),
    Field("sharpness_eps", float, low=0.0, high=1.0, step=0.01),
    Field("sharpness_draws", int, low=1, high=100),
    Field("max_train", int, low=0, high=10**7, none_as=0),
    Field("max_test", int, low=0, high=10**7, none_as=0),
    Field("optimizer", str, choices=tuple(OPTIMIZERS)),
    Field("weight_decay", float, low=0.0, high=1.0, step=0.01),
    Field("batch_size", int, low=4, high=4096),
    Field("adapter.norm", str, choices=NORMS),
    Field("adapter.resample", str, choices=RESAMPLES),
    Field("adapter.rank", int, low=0, high=4096, none_as=0),
    Field("adapter.cls_token", str, choices=CLS_TOKENS),
    Field("adapter.rescale", str, choices=RESCALES),
    Field("twin_seeds", str, choices=TWIN_SEEDS),
    Field("simplicity_adapter", bool),
    Field("simplicity_report", bool),
], spec=SweepSpec)  # fmt: skip
