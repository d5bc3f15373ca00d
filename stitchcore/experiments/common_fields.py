"""Fields several kinds share, declared once (:mod:`stitchcore.params`): the two models, the dataset, the
adapter's seven settings, the adapter's training and the image caps.  A kind's declaration lists them beside
its own fields (``stitch_fields.py``, ``sweep/fields.py``, ``matrix/fields.py``); one that offers less narrows
them (``EPOCHS.narrowed(low=1, high=100)``).

>>> [f.key for f in ADAPTER_FIELDS]
['kind', 'norm', 'resample', 'init', 'rank', 'cls_token', 'rescale']
"""

from __future__ import annotations

from stitchcore.models.refs import TWIN_SEEDS
from stitchcore.params import Field, names_text
from stitchcore.stitching.adapters import CLS_TOKENS, INITS, NO_DOWNSAMPLE, NORMS, RESAMPLES, RESCALES, list_adapters
from stitchcore.stitching.precision import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS, parse_objective

__all__ = ["ADAPTER_FIELDS", "ADAPTER_INIT", "ADAPTER_KIND", "ADAPTER_NORM", "ADAPTER_RANK", "ADAPTER_RESAMPLE",
           "ADAPTER_CLS_TOKEN", "ADAPTER_RESCALE", "BATCH_SIZE", "CUT_A", "CUT_B", "DATASET", "EPOCHS", "LR",
           "MAX_TEST", "MAX_TRAIN", "MODEL_A", "MODEL_B", "OPTIMIZER", "PRECISION", "RECEIVERS", "SEED", "SENDERS",
           "TWIN_SEEDS_FIELD", "WEIGHT_DECAY", "OBJECTIVE", "OBJECTIVES", "ADAPTER_RESAMPLE_ANY"]  # fmt: skip

MODEL_A = Field("a", str, role="model")
MODEL_B = Field("b", str, role="model")
CUT_A = Field("cut_a", str, role="cut")
CUT_B = Field("cut_b", str, role="cut")
SENDERS = Field("senders", tuple, role="cuts", parse=names_text)  # A's cuts, comma-separated in a link or a flag
RECEIVERS = Field("receivers", tuple, role="cuts", parse=names_text)
DATASET = Field("dataset", str, role="dataset")

ADAPTER_KIND = Field("adapter.kind", str, choices=tuple(list_adapters()), key="kind", flag="--adapter")
ADAPTER_NORM = Field("adapter.norm", str, choices=NORMS)
ADAPTER_RESAMPLE = Field("adapter.resample", str, choices=RESAMPLES)
# the image kinds whose B runs its rest on the adapter's output: Traft & Cheney's No Downsample (the sender's larger
# grid goes on into B) too, where B's rest takes it (convolutional up to a global pooling)
ADAPTER_RESAMPLE_ANY = Field("adapter.resample", str, choices=(*RESAMPLES, NO_DOWNSAMPLE))
ADAPTER_INIT = Field("adapter.init", str, choices=INITS)
ADAPTER_RANK = Field("adapter.rank", int, low=0, high=4096, none_as=0)
ADAPTER_CLS_TOKEN = Field("adapter.cls_token", str, choices=CLS_TOKENS)
ADAPTER_RESCALE = Field("adapter.rescale", str, choices=RESCALES)
ADAPTER_FIELDS = (ADAPTER_KIND, ADAPTER_NORM, ADAPTER_RESAMPLE, ADAPTER_INIT, ADAPTER_RANK, ADAPTER_CLS_TOKEN,
                  ADAPTER_RESCALE)  # fmt: skip

OPTIMIZER = Field("optimizer", str, choices=tuple(OPTIMIZERS))
OBJECTIVES = ("task", "match", "kd", "final", "task+0.5*kd")  # offered; any sum parse_objective reads is taken
OBJECTIVE = Field("objective", str, suggestions=OBJECTIVES, check=parse_objective)  # an image adapter's
LR = Field("lr", float, low=1e-5, high=1.0, step=1e-4)
WEIGHT_DECAY = Field("weight_decay", float, low=0.0, high=1.0, step=0.01)
EPOCHS = Field("epochs", int, low=0, high=500)
BATCH_SIZE = Field("batch_size", int, low=4, high=4096)
SEED = Field("seed", int, low=0, high=10**6)
MAX_TRAIN = Field("max_train", int, low=0, high=10**7, none_as=0)
MAX_TEST = Field("max_test", int, low=0, high=10**7, none_as=0)
PRECISION = Field("precision", str, choices=PRECISIONS)
TWIN_SEEDS_FIELD = Field("twin_seeds", str, choices=TWIN_SEEDS)
