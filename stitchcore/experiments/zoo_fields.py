"""The ``zoo`` kind's fields (a :class:`ZooRecipe`), declared once (:mod:`stitchcore.params`): the CLI's
``zoo train`` flags are generated from this list (labels and help: :mod:`stitchcore.experiments.field_words`).
An architecture's own training defaults (:func:`stitchcore.models.archs.arch_recipe_defaults`: AdamW and 40
epochs for a ViT) apply before what a person gives.

>>> [f.flag for f in ZOO_FIELDS][:3]
['--arch', '--dataset', '--seed']
"""

from __future__ import annotations

from stitchcore.data.augment import AUGMENTS
from stitchcore.data.tokenize import parse_tokenizer
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.params import (
    Field, declare, json_object_text, json_words, pair_text, pair_words, wholes_text, wholes_words,
)  # fmt: skip
from stitchcore.stitching.train import OPTIMIZERS

__all__ = ["ZOO_FIELDS"]

ZOO_FIELDS = declare("zoo", [
    Field("arch", str),  # a zoo architecture (list_archs), or timm:NAME with a hub start
    Field("dataset", str, role="dataset"),
    Field("seed", int, low=0, high=10**6),
    Field("optimizer", str, choices=OPTIMIZERS),
    Field("epochs", int, low=1, high=1000),
    Field("lr", float),
    Field("batch_size", int, low=1, high=4096),
    Field("momentum", float, low=0.0, high=0.999),
    Field("weight_decay", float),
    Field("image_size", int, low=4, high=1024),
    Field("arch_kwargs", dict, parse=json_object_text, write=json_words),
    Field("relabel", tuple, parse=pair_text, write=pair_words),
    Field("drop_class", int, low=0),
    Field("l1", float, low=0.0),
    Field("l2", float, low=0.0),
    Field("prune_every", int, low=0),
    Field("prune_fraction", float, low=0.0, high=0.99),
    Field("augment", str, choices=AUGMENTS),
    Field("tokenizer", str, suggestions=("char", "bpe:512", "bpe:1024"), check=parse_tokenizer),
    Field("start", str, role="model"),
    Field("keep_epochs", tuple, parse=wholes_text, write=wholes_words),
    Field("finetune_layer", str),
    Field("finetune_epochs", int, low=0, high=1000),
    Field("finetune_data", str, role="dataset"),
    Field("finetune_lr", float),
], spec=ZooRecipe)  # fmt: skip
