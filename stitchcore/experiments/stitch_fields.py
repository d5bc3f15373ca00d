"""The ``stitch`` kind's fields, declared once (:mod:`stitchcore.params`): the Stitch page's form and its links,
the CLI's ``stitch`` flags and a lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`).  The ranges are what a form offers; :class:`StitchSpec` refuses
beyond its own bounds (:mod:`stitchcore.experiments._bounds`).

>>> [f.flag for f in STITCH_FIELDS if f.name.startswith("adapter.")][:2]
['--adapter', '--norm']
"""

from __future__ import annotations

from stitchcore.experiments.stitch import KEEPS, StitchSpec
from stitchcore.params import Field, declare
from stitchcore.stitching.adapters import CLS_TOKENS, INITS, NORMS, RESAMPLES, RESCALES, list_adapters
from stitchcore.stitching.precision import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS, parse_objective

__all__ = ["OBJECTIVES", "STITCH_FIELDS"]

OBJECTIVES = ("task", "match", "kd", "task+0.5*kd")  # offered; any sum parse_objective reads is taken

STITCH_FIELDS = declare("stitch", [
    Field("a", str, role="model"),
    Field("b", str, role="model"),
    Field("cut_a", str, role="cut"),
    Field("cut_b", str, role="cut"),
    Field("adapter.kind", str, choices=tuple(list_adapters()), key="kind", flag="--adapter"),
    Field("adapter.norm", str, choices=NORMS),
    Field("adapter.resample", str, choices=RESAMPLES),
    Field("adapter.init", str, choices=INITS),
    Field("objective", str, suggestions=OBJECTIVES, check=parse_objective),
    Field("optimizer", str, choices=tuple(OPTIMIZERS)),
    Field("lr", float, low=1e-5, high=1.0, step=1e-4),
    Field("epochs", int, low=0, high=500),
    Field("batch_size", int, low=4, high=4096),
    Field("seed", int, low=0, high=10**6),
    Field("max_train", int, low=0, high=10**7, none_as=0),
    Field("max_test", int, low=0, high=10**7, none_as=0),
    Field("head", str, choices=("b", "a")),
    Field("precision", str, choices=PRECISIONS),
    Field("val_fraction", float, low=0.0, high=0.45, step=0.05),
    Field("split_seed", int, low=0, high=10**6),
    Field("keep", str, choices=KEEPS),
    Field("seeds", int, low=1, high=20),
    Field("noise_control", bool),
    Field("weight_decay", float, low=0.0, high=1.0, step=0.01),
    Field("kd_temperature", float, low=0.1, high=20.0, step=0.1),
    Field("adapter.rank", int, low=0, high=4096, none_as=0),
    Field("adapter.cls_token", str, choices=CLS_TOKENS),
    Field("adapter.rescale", str, choices=RESCALES),
    Field("head_cut", str, role="cut"),
    Field("dataset", str, role="dataset"),
], spec=StitchSpec)  # fmt: skip
