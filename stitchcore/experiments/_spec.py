"""What every spec shares: the :class:`Spec` base (``to_dict`` / ``from_dict``), and the checks that name
the field (and its CLI flag) in their message.  Private to :mod:`stitchcore.experiments`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar, Self, TypeVar

from stitchcore.errors import StitchError, shown
from stitchcore.models.refs import MAX_SEED  # one bound for seeds in refs and in specs

__all__ = ["MAX_SEED", "Spec", "check_at_least", "check_at_most", "check_choice", "check_positive", "check_sample_caps",
           "check_seed", "field_label", "spec_from_dict"]

S = TypeVar("S")


def check_choice(what: str, value: Any, choices: tuple) -> None:
    """StitchError naming the choices when ``value`` is not one of them."""
    if value not in choices:
        raise StitchError(f"unknown {what} {value!r}; use one of: {', '.join(map(str, choices))}")


def field_label(name: str) -> str:
    """A spec field as people typed it: the field, and the CLI flag when its spelling differs.

    The app and the CLI share spec messages, so both names are given.

    >>> field_label("lr"), field_label("max_train")
    ('lr', 'max_train (--max-train)')
    """
    return name if "_" not in name else f"{name} (--{name.replace('_', '-')})"


def _number(name: str, value: Any) -> float:
    """``value`` as a finite number; StitchError naming the field otherwise (NaN, inf, text, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StitchError(f"{field_label(name)} must be a finite number (got {value!r})")
    return value


def check_positive(name: str, value: Any, hint: str = "") -> None:
    """StitchError unless ``value`` is a finite number > 0 (a learning rate, a temperature ...).

    >>> check_positive("lr", -1.0, "typical values 1e-3 .. 1e-1")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: lr must be > 0 (got -1.0); typical values 1e-3 .. 1e-1
    """
    if not _number(name, value) > 0:
        raise StitchError(f"{field_label(name)} must be > 0 (got {value!r})" + (f"; {hint}" if hint else ""))


def check_at_least(name: str, value: Any, least: float, hint: str = "") -> None:
    """StitchError unless ``value`` is a finite number >= ``least`` (epochs, batch size, penalties ...).

    >>> check_at_least("batch_size", 0, 1, "e.g. 64")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: batch_size (--batch-size) must be at least 1 (got 0); e.g. 64
    """
    if not _number(name, value) >= least:
        why = f"{field_label(name)} must be at least {least} (got {value!r})"
        raise StitchError(why + (f"; {hint}" if hint else ""))


def check_at_most(name: str, value: Any, most: float, hint: str = "") -> None:
    """StitchError unless ``value`` is a finite number <= ``most``: every count and size has a stated upper
    bound, checked before anything runs (a billion seeds would allocate before failing).

    >>> check_at_most("seeds", 10**9, 10, "each seed trains the adapter again")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: seeds must be at most 10 (got 1000000000); each seed trains the adapter again
    """
    if not _number(name, value) <= most:
        why = f"{field_label(name)} must be at most {most} (got {value!r})"
        raise StitchError(why + (f"; {hint}" if hint else ""))


def check_seed(name: str, value: Any) -> None:
    """StitchError unless ``value`` is a whole number 0 .. :data:`MAX_SEED` (not a bool, not a float).

    >>> check_seed("seed", 2**63)
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: seed must be a whole number 0 .. 2147483647 (got 9223372036854775808)
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise StitchError(f"{field_label(name)} must be a whole number 0 .. {MAX_SEED} (got {shown(value)})")


def check_sample_caps(spec: Any, names: tuple[str, ...] = ("max_train", "max_test")) -> None:
    """A spec's image caps (``max_train`` / ``max_test``, or ``names``) are None (all images) or at least 2.

    >>> from types import SimpleNamespace as NS
    >>> check_sample_caps(NS(max_train=0, max_test=None))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: max_train (--max-train) must be at least 2 images (got 0); leave it out ...
    """
    for name in names:
        value = getattr(spec, name)
        if value is not None and not _number(name, value) >= 2:
            why = f"{field_label(name)} must be at least 2 images (got {value!r})"
            raise StitchError(f"{why}; leave it out to use all")


def spec_from_dict(cls: type[S], d: dict[str, Any]) -> S:
    """Build a spec dataclass from a dict, naming unknown keys in the error."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise StitchError(f"unknown {cls.__name__} field(s) {unknown}; known: {sorted(names)}")
    return cls(**d)


def _plain(value: Any) -> Any:
    """A spec field as the JSON the store hashes: nested specs through their ``to_dict``, tuples as lists."""
    if callable(getattr(value, "to_dict", None)):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Spec:
    """The base of every experiment spec (a frozen dataclass of plain values, commented per field).

    ``to_dict()`` is the dict the store hashes into the run id and keeps: every field, tuples as lists,
    nested specs (an ``AdapterSpec``) through their own ``to_dict``.  ``from_dict`` rebuilds the spec and
    names unknown keys.  A kind that leaves a field out of the dict unless it is used (so the run ids of
    older specs stay the same) overrides ``to_dict`` and edits ``super().to_dict()``.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo(Spec):
    ...     a: str = "zoo:cnn-digits-s0"
    ...     cuts: tuple[str, ...] | None = ("conv1", "conv2")
    >>> Demo().to_dict(), Demo.from_dict({"a": "x", "cuts": None})
    ({'a': 'zoo:cnn-digits-s0', 'cuts': ['conv1', 'conv2']}, Demo(a='x', cuts=None))
    """

    # Fields added after runs were stored, each with its LEGACY value: the behaviour of a dict written before the
    # field existed.  ``to_dict`` leaves a field out while it holds that value (so old run ids resolve to what they
    # computed) and ``from_dict`` of a dict without the key gives it back; new specs default to the new behaviour.
    LEGACY: ClassVar[Mapping[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        d = self.all_fields()
        for name, old in self.LEGACY.items():
            if d.get(name) == _plain(old):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return spec_from_dict(cls, {**cls.LEGACY, **d})

    @classmethod
    def new(cls, d: Mapping[str, Any]) -> Self:
        """A new spec from the fields given, every other at today's default: ``from_dict`` reads a *stored* dict,
        where a missing field takes its LEGACY value; a person writing a spec by hand means today's."""
        today = {f.name: _plain(f.default if f.default is not MISSING else f.default_factory())  # type: ignore[misc]
                 for f in fields(cls) if f.name in cls.LEGACY}  # type: ignore[arg-type]
        return cls.from_dict({**today, **d})

    def all_fields(self) -> dict[str, Any]:
        """Every field written out, LEGACY values included: a dict that means this very spec whether it is read
        as a stored dict (``from_dict``) or as a new one (``experiments.new_spec``); what a lesson keeps.

        >>> from dataclasses import dataclass
        >>> from typing import ClassVar
        >>> @dataclass(frozen=True)
        ... class Demo(Spec):
        ...     mode: str = "new"
        ...     LEGACY: ClassVar[dict] = {"mode": "old"}
        >>> Demo("old").to_dict(), Demo("old").all_fields()
        ({}, {'mode': 'old'})
        """
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]
