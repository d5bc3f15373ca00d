"""The ``local`` backend: every unit in this process, one after another (how runs always executed).

>>> def count(n, unit):
...     yield "progress", (0.0, "counting")
...     yield "cells", [{"i": i} for i in range(n)]
>>> backend = LocalBackend(torch.device("cpu"))
>>> [(e.kind, e.payload) for e in backend.run_units([Unit("u", count, (2,))], threading.Event())]
[('progress', (0.0, 'counting')), ('cells', [{'i': 0}, {'i': 1}]), ('done', None)]
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from stitchcore.backends import Unit, UnitContext, UnitEvent

__all__ = ["LocalBackend"]


class LocalBackend:
    """Units run in order in the calling thread; an exception (Cancelled included) ends the run."""

    name = "local"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def share(self, value: Any) -> Any:
        return value

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args, UnitContext(self.device))

    def run_units(self, units: Sequence[Unit], cancel: threading.Event,
                  on_progress: Callable[[Unit, float, str], None] | None = None,
                  on_metrics: Callable[[Unit, int, dict[str, float]], None] | None = None) -> Iterator[UnitEvent]:
        for unit in units:
            report = None if on_progress is None else functools.partial(on_progress, unit)
            points = None if on_metrics is None else functools.partial(on_metrics, unit)
            context = UnitContext(self.device, cancel, report, points)
            context.check_cancel()
            for kind, payload in unit.fn(*unit.args, context):
                yield UnitEvent(unit, kind, payload)
            yield UnitEvent(unit, "done", None)

    def describe(self) -> dict[str, Any]:
        return {"name": "local"}
