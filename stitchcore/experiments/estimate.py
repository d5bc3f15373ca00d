"""How long a run will take on this machine, before it is launched (placeholder; calibration follows)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["Estimate", "estimate_seconds"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Estimate:
    """A run's expected wall time on this machine."""

    seconds: float  # best guess
    low: float  # plausible range
    high: float
    basis: str  # how it was reached ("calibrated: 1 step of cnn = 3.1 ms")
    stored: bool = False  # the run is in the store already: it opens at once

    def describe(self) -> str:
        """``about 6 min on this machine (calibrated: ...)``."""
        if self.stored:
            return "in the store already: opens at once"
        return f"about {format_duration(self.seconds)} on this machine ({self.basis})"


def format_duration(seconds: float) -> str:
    """Round a duration for people: ``"4 s"``, ``"1 min 10 s"``, ``"6 min"``, ``"1 h 20 min"``.

    >>> format_duration(3.2), format_duration(70), format_duration(365), format_duration(4800)
    ('3 s', '1 min 10 s', '6 min', '1 h 20 min')
    """
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{max(1, round(s))} s"
    if s < 300:
        m, r = divmod(int(round(s / 10) * 10), 60)
        return f"{m} min" + (f" {r} s" if r else "")
    if s < 3600:
        return f"{round(s / 60)} min"
    h, m = divmod(int(round(s / 600) * 10), 60)
    return f"{h} h" + (f" {m} min" if m else "")


def estimate_seconds(kind: str, spec: Any, store: Any) -> Estimate | None:
    """The expected time of ``kind`` run on ``spec``, or None when it cannot be estimated; never raises."""
    return None
