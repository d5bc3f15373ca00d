"""Checks shared by the experiments' specs and runners (private to :mod:`stitchcore.experiments`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from stitchcore.errors import StitchError
from stitchcore.experiments.dataset_check import check_head_classes, resolve_dataset

__all__ = ["check_choice", "check_head_classes", "check_sample_caps", "resolve_dataset", "spec_from_dict"]

S = TypeVar("S")


def check_choice(what: str, value: Any, choices: tuple) -> None:
    """StitchError naming the choices when ``value`` is not one of them."""
    if value not in choices:
        raise StitchError(f"unknown {what} {value!r}; use one of: {', '.join(map(str, choices))}")


def check_sample_caps(spec: Any) -> None:
    """A spec's ``max_train`` / ``max_test`` image caps are None (all images) or at least 2."""
    for name in ("max_train", "max_test"):
        value = getattr(spec, name)
        if value is not None and value < 2:
            raise StitchError(f"{name} must be at least 2 (or None for all images), got {value}")


def spec_from_dict(cls: type[S], d: dict[str, Any]) -> S:
    """Build a spec dataclass from a dict, naming unknown keys in the error."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise StitchError(f"unknown {cls.__name__} field(s) {unknown}; known: {sorted(names)}")
    return cls(**d)
