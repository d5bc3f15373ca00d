"""Checks shared by the experiments' specs and runners (private to :mod:`stitchcore.experiments`)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from stitchcore.backends import Backend, cells_per_node
from stitchcore.errors import StitchError
from stitchcore.experiments.dataset_check import check_head_classes, resolve_dataset
from stitchcore.store.canonical_json import write_atomic

__all__ = [
    "CellBook",
    "check_at_least",
    "check_choice",
    "check_head_classes",
    "check_positive",
    "check_sample_caps",
    "field_label",
    "read_resume",
    "resolve_dataset",
    "spec_from_dict",
]

log = logging.getLogger(__name__)

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


def read_resume(path: Path, run_id: str, *, key: Callable[[dict], str]) -> dict[str, dict]:
    """The cells a run of ``run_id`` finished before it stopped, by ``key(cell)``; {} when there is no
    resume file, or one of another run, or an unreadable one (logged): the cells are then computed again."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable resume file %s (%s)", path, exc)
        return {}
    if not isinstance(data, dict) or data.get("run_id") != run_id or not isinstance(data.get("cells"), list):
        return {}
    return {key(c): c for c in data["cells"]}


class CellBook:
    """The cells of a run whose units send them back in any order (matrix, assemble): the ones a stopped run
    of the same id finished (failed ones are tried again), each cell kept as it arrives with its metric point,
    and written -- in plan order -- to the resume file and the run's cells artifact.

    ``key(cell)`` names a cell; ``plan``: every key in plan order; ``metric(cell)``: the metric point's name.
    """

    def __init__(self, ctx: Any, artifact: str, key: Callable[[dict], str], plan: list[str],
                 metric: Callable[[dict], str]) -> None:  # fmt: skip
        self.ctx, self.artifact, self.key, self.metric = ctx, artifact, key, metric
        self.order = {k: i for i, k in enumerate(plan)}
        self.resume = ctx.store.partial_path(ctx.run_id)
        done = read_resume(self.resume, ctx.run_id, key=key)
        self.done = {k: c for k, c in done.items() if not c.get("failed_reason")}
        self.kept: dict[str, dict] = {}

    def __len__(self) -> int:
        return len(self.kept)

    def __contains__(self, key: str) -> bool:
        return key in self.kept

    def keep(self, cell: dict) -> None:
        """Keep ``cell`` (replacing an earlier one of its key) and log its accuracy as a metric point."""
        self.kept[self.key(cell)] = cell
        if cell.get("accuracy") is not None:
            self.ctx.log(len(self.kept) - 1, {self.metric(cell): cell["accuracy"]})

    def cells(self) -> list[dict]:
        """The kept cells in plan order."""
        return sorted(self.kept.values(), key=lambda c: self.order[self.key(c)])

    def save(self) -> None:
        """Write the kept cells: the resume file (a re-run picks them up) and the artifact (views read it)."""
        cells = self.cells()
        write_atomic(self.resume, json.dumps({"run_id": self.ctx.run_id, "cells": cells}))
        self.ctx.store.put_artifact(self.ctx.run_id, self.artifact, json.dumps(cells, indent=1).encode())

    def finish(self, summary: dict[str, Any], backend: Backend,
               label: Callable[[dict], str] | None = None) -> dict[str, Any]:  # fmt: skip
        """``summary`` with ``failed`` (``label(cell)``, default its key, -> reason) when a cluster task failed for good -- the resume
        file then stays, so a re-run computes only those -- else the resume file removed; and where a cluster
        computed the cells (``backend``, ``nodes``)."""
        cells = self.cells()
        failed = {(label or self.key)(c): c["failed_reason"] for c in cells if c.get("failed_reason")}
        if failed:
            summary["failed"] = failed
        else:
            self.resume.unlink(missing_ok=True)  # the run is about to be stored as done; the artifact stays
        if backend.name != "local":
            summary["backend"] = backend.describe()
            summary["nodes"] = cells_per_node(cells)
        return summary
