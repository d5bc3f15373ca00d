"""The ``assemble`` kind's fields, declared once (:mod:`stitchcore.params`): the CLI's ``assemble`` flags and a
lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`).  Cuts, adapter kinds, norms and resamplings are lists, written
comma-separated in a link and on the command line (``--adapters linear,bottleneck``); the last three offer fixed
values (``items``: a page's multiselects; a link's item outside them is left out with a note).

>>> [f.flag for f in ASSEMBLE_FIELDS][4:7]
['--adapters', '--norm', '--resample']
>>> "identity" in ASSEMBLE_FIELDS[4].items, ASSEMBLE_FIELDS[6].items[-1]
(False, 'no_downsample')
"""

from __future__ import annotations

from dataclasses import replace

from stitchcore.experiments.assemble.spec import AssembleSpec
from stitchcore.experiments.common_fields import (
    ADAPTER_CLS_TOKEN,
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
    RECEIVERS,
    SEED,
    SENDERS,
    WEIGHT_DECAY,
)
from stitchcore.params import Field, declare, names_text
from stitchcore.stitching.adapter_kinds import list_adapters
from stitchcore.stitching.adapters import NO_DOWNSAMPLE, NORMS, RESAMPLES

__all__ = ["ASSEMBLE_FIELDS", "KINDS"]

KINDS = tuple(k for k in list_adapters() if k != "identity")  # a merge adds no adapter: not a recipe here

ASSEMBLE_FIELDS = declare("assemble", [
    MODEL_A,
    MODEL_B,
    SENDERS,
    RECEIVERS,
    Field("kinds", tuple, parse=names_text, key="adapters", flag="--adapters", items=KINDS),
    Field("norms", tuple, parse=names_text, key="norm", flag="--norm", items=NORMS),
    Field("resamples", tuple, parse=names_text, key="resample", flag="--resample",
          items=(*RESAMPLES, NO_DOWNSAMPLE)),
    replace(ADAPTER_RESCALE, name="rescale"),  # one for every network of the run (not nested: no adapter dict)
    replace(ADAPTER_CLS_TOKEN, name="cls_token"),
    Field("finetune_baseline", bool),
    EPOCHS.narrowed(low=1),  # the spec's own bound: every adapter is trained from random weights
    LR,
    DATASET,
    MAX_TRAIN,
    MAX_TEST,
    SEED,
    OPTIMIZER,
    WEIGHT_DECAY,
    BATCH_SIZE,
    Field("finetune_epochs", int, low=1, high=500),
    Field("finetune_lr", float, low=1e-6, high=1.0, step=1e-5),
], spec=AssembleSpec)  # fmt: skip
