"""Datasets: labelled images (:mod:`.images`, files read by :mod:`.files`), two-cue images (:mod:`.twocue`),
text corpora (:mod:`.text`).

Importing anything under ``stitchcore.data`` runs this file first, and it imports every
child, so each one has registered its built-in datasets before any name is looked up:
``list_datasets()`` always lists the two-cue sets too, whichever module it came from.

>>> from stitchcore.data import list_datasets, load_dataset
>>> [n for n in list_datasets() if n.startswith("twocue-digits")][:2]
['twocue-digits', 'twocue-digits-blackleft']
>>> load_dataset("digts")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
stitchcore.errors.DataError: unknown dataset 'digts'; did you mean 'digits'? ...
"""

from __future__ import annotations

from stitchcore.data.images import (
    SPLITS,
    ImageDataset,
    clear_cache,
    data_root,
    dataset_loader,
    drop_class,
    list_datasets,
    load_dataset,
    register_dataset,
    relabel,
)
from stitchcore.data import files  # noqa: F401  (registers mnist, fashion-mnist, cifar10/100)
from stitchcore.data.text import CharVocab, char_splits, list_texts, lm_batches, load_text
from stitchcore.data.twocue import is_twocue, make_twocue, twocue_variant

__all__ = [
    "SPLITS",
    "CharVocab",
    "ImageDataset",
    "char_splits",
    "clear_cache",
    "data_root",
    "dataset_loader",
    "drop_class",
    "is_twocue",
    "list_datasets",
    "list_texts",
    "lm_batches",
    "load_dataset",
    "load_text",
    "make_twocue",
    "register_dataset",
    "relabel",
    "twocue_variant",
]
