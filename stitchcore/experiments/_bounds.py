"""The upper bound of every count and size a spec takes, and :func:`check_count`, which checks one.

Each bound is far above any use (the app's widgets stop well below) and far below what breaks: a billion
adapter seeds allocated ~36 GB before failing, a 2**70 seed overflowed into a failed row.  A spec checks
its counts in its constructor, so the CLI, the app, lessons and the API refuse the same values in one line
before anything runs.  Private to :mod:`stitchcore.experiments`.

>>> check_count("epochs", 3, 0, MAX_EPOCHS)
>>> check_count("epochs", 10**9, 0, MAX_EPOCHS, most_hint="each epoch passes over the training images")
Traceback (most recent call last):
...
stitchcore.errors.StitchError: epochs must be at most 10000 (got 1000000000); each epoch passes over the training images
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments._spec import check_at_least, check_at_most, check_sample_caps, field_label

__all__ = ["MAX_ADAPTER_SEEDS", "MAX_BATCH", "MAX_DRAWS", "MAX_EPOCHS", "MAX_IMAGES", "MAX_IMAGE_SIZE", "MAX_LR",
           "MAX_PENALTY", "MAX_STEPS",
           "MAX_TOKENS", "MAX_WEIGHT_DECAY", "MAX_WIDTH", "check_adapter_rank", "check_count", "check_image_caps",
           "check_rate"]

MAX_EPOCHS = 10_000  # passes over the training images (the app offers up to 500)
MAX_BATCH = 65_536  # examples (images, text windows) per step
MAX_IMAGES = 1_000_000_000  # a cap on images (max_train, max_test, max_samples): above every dataset read
MAX_ADAPTER_SEEDS = 100  # adapters trained per stitch, one after another (the app offers up to 20)
MAX_STEPS = 10_000_000  # LM adapter steps (and the steps between checks)
MAX_DRAWS = 10_000  # repeats drawn: control seeds, sharpness draws, null permutations, validation windows
MAX_TOKENS = 100_000  # tokens generated per model for the samples
MAX_WIDTH = 65_536  # an adapter's rank or hidden width
MAX_LR = 10.0  # a learning rate above this diverges at the first step
MAX_WEIGHT_DECAY = 10.0  # AdamW multiplies it by the lr; far above it the weights are zeroed every step
MAX_IMAGE_SIZE = 8192  # a zoo model's input side in pixels (the memory check counts what fits below it)
MAX_PENALTY = 100.0  # an L1/L2 weight penalty's coefficient (typical 1e-5 .. 1e-2)


def check_count(name: str, value: Any, least: int, most: int, hint: str = "", most_hint: str = "") -> None:
    """StitchError unless ``value`` is a whole number from ``least`` to ``most`` (not a bool, not 2.5): a
    count or a size, named with its flag.  The messages are :func:`check_at_least`'s (with ``hint``) and
    :func:`check_at_most`'s (with ``most_hint``), so a refusal reads the same from every spec.

    >>> check_count("batch_size", 2.5, 1, MAX_BATCH)
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: batch_size (--batch-size) must be a whole number (got 2.5)
    """
    check_at_least(name, value, least, hint)  # a finite number first (NaN, inf, text, bools)
    if not isinstance(value, Integral):
        raise StitchError(f"{field_label(name)} must be a whole number (got {value!r})")
    check_at_most(name, value, most, most_hint)


def check_rate(name: str, value: Any, most: float, hint: str = "") -> None:
    """StitchError unless ``value`` (a learning rate, a weight decay already checked from below) is at most
    ``most``.

    >>> check_rate("lr", 1e30, MAX_LR, "typical values 1e-3 .. 1e-1")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: lr must be at most 10.0 (got 1e+30); typical values 1e-3 .. 1e-1
    """
    check_at_most(name, value, most, hint)


def check_image_caps(spec: Any, names: tuple[str, ...] = ("max_train", "max_test"), least: int = 2) -> None:
    """A spec's image caps (``names``) are None (every image) or whole numbers from ``least`` to
    :data:`MAX_IMAGES` (:func:`~stitchcore.experiments._spec.check_sample_caps`' message below 2).

    >>> from types import SimpleNamespace as NS
    >>> check_image_caps(NS(max_train=10**30, max_test=None))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: max_train (--max-train) must be at most 1000000000 (got 1000...); leave it out ...
    """
    if least == 2:
        check_sample_caps(spec, names)
    for name in names:
        value = getattr(spec, name)
        if value is not None:
            check_count(name, value, least, MAX_IMAGES, most_hint="leave it out to use every image")


def check_adapter_rank(adapter: Any) -> None:
    """An adapter's ``rank`` (lowrank) is None or a whole number up to :data:`MAX_WIDTH` (AdapterSpec checks
    that it is positive)."""
    if getattr(adapter, "rank", None) is not None:
        check_count("rank", adapter.rank, 1, MAX_WIDTH, "rank must be a positive int, e.g. 8")
