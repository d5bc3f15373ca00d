"""The ``similarity`` kind's fields, declared once (:mod:`stitchcore.params`): the CLI's ``similarity`` flags
and a lesson's open controls are generated from this list (labels and help:
:mod:`stitchcore.experiments.field_words`); the measures offered are the registry's at import.

>>> [f.flag for f in SIMILARITY_FIELDS][5:7]
['--measure', '--token-mode']
"""

from __future__ import annotations

from stitchcore.data.dataset import SPLITS
from stitchcore.experiments.common_fields import DATASET, MODEL_A, MODEL_B, RECEIVERS, SEED, SENDERS
from stitchcore.experiments.similarity import MAX_TWINS, SimilaritySpec
from stitchcore.measures.similarity import TOKEN_MODES, list_measures
from stitchcore.params import Field, declare

__all__ = ["SIMILARITY_FIELDS"]

SIMILARITY_FIELDS = declare("similarity", [
    MODEL_A, MODEL_B, SENDERS, RECEIVERS, DATASET,
    Field("measure", str, suggestions=tuple(list_measures())),  # any registered one (the spec checks)
    Field("token_mode", str, choices=TOKEN_MODES),
    Field("split", str, choices=SPLITS),
    Field("max_samples", int, low=0, high=10**7, none_as=0),
    Field("batch_size", int, low=4, high=4096),
    Field("baseline", bool),
    SEED,
    Field("null_permutations", int, low=0, high=1000),
    Field("random_null", bool),
    Field("random_null_seeds", int, low=1, high=MAX_TWINS),
], spec=SimilaritySpec)  # fmt: skip
