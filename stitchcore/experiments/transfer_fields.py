"""The ``transfer`` kind's fields, declared once (:mod:`stitchcore.params`): the CLI's ``transfer`` flags, the
Transfer page's form and a lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`).

>>> [f.flag for f in TRANSFER_FIELDS][:4]
['--a', '--b', '--cut-a', '--cut-b']
"""

from __future__ import annotations

from stitchcore.experiments.common_fields import CUT_A, CUT_B, DATASET, MODEL_A, MODEL_B, SEED
from stitchcore.experiments.transfer import TransferSpec
from stitchcore.params import Field, declare

__all__ = ["TRANSFER_FIELDS"]

TRANSFER_FIELDS = declare("transfer", [
    MODEL_A, MODEL_B, CUT_A, CUT_B, DATASET,
    Field("max_train", int, low=20, high=10**7),
    Field("max_test", int, low=10, high=10**7),
    SEED,
], spec=TransferSpec)  # fmt: skip
