"""Settings and verdict thresholds chosen on validation data, by a rule in code rather than a comment.

Two rules cover what the presets and findings choose:

* :func:`plateau`: the smallest training budget whose validation curve lies within a tolerance of the
  largest budget's at every point (e.g. the Traits presets' adapter epochs: more epochs would not change the
  trait curve the preset reports).
* :func:`noise_margin`: an equivalence margin from effects that are zero by construction (the same stitch at
  two adapter seeds, scored on validation images): the ``coverage`` quantile of their sizes, rounded up.  An
  effect inside it is one the data cannot tell from a reseeding.

Both return a :class:`Choice` that keeps the numbers it was chosen from, so a script can print and commit them
(``bench/settings_chosen.py`` writes ``bench/settings_chosen.json``; ``tests/test_selection.py`` checks that the
constants in the code are what these rules pick from it).

>>> plateau({5: [0.40, 0.90], 10: [0.50, 0.97], 30: [0.51, 0.98]}, tolerance=0.02).value
10
>>> noise_margin([0.004, -0.011, 0.007, 0.0, -0.016, 0.009], coverage=0.95, step=0.005).value
0.02
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Choice", "noise_margin", "plateau"]


@dataclass(frozen=True)
class Choice:
    """A setting chosen on validation data: the value, the rule in words, and the numbers it read."""

    value: Any
    rule: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "rule": self.rule, "evidence": self.evidence}


def plateau(curves: Mapping[int, Sequence[float]], tolerance: float) -> Choice:
    """The smallest budget whose curve stays within ``tolerance`` of the largest budget's at every point.

    ``curves``: budget (e.g. epochs) -> one validation number per point (e.g. per cut), all of one length.  The
    largest budget is the reference, so it is always a candidate: where nothing smaller levels off, it is chosen.

    >>> c = plateau({10: [0.2, 0.8], 30: [0.21, 0.83], 20: [0.2, 0.82]}, tolerance=0.02)
    >>> c.value, c.evidence["gaps"]
    (20, {'10': 0.03, '20': 0.01, '30': 0.0})
    """
    if not curves:
        raise ValueError("plateau needs at least one budget's curve")
    lengths = {len(v) for v in curves.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"every curve needs the same number of points (> 0), got lengths {sorted(lengths)}")
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    longest = max(curves)
    gaps = {b: max(abs(x - y) for x, y in zip(curves[b], curves[longest], strict=True)) for b in sorted(curves)}
    chosen = min(b for b, gap in gaps.items() if gap <= tolerance + 1e-12)
    return Choice(chosen, f"the smallest budget within {tolerance:g} of the {longest}-budget curve at every point",
                  {"gaps": {str(b): round(g, 4) for b, g in gaps.items()}, "tolerance": tolerance,
                   "reference": longest})  # fmt: skip


def noise_margin(null_effects: Sequence[float], coverage: float = 0.95, step: float = 0.005) -> Choice:
    """An equivalence margin: the ``coverage`` quantile of ``|effect|`` over effects that are zero by construction,
    rounded up to a multiple of ``step``.

    The quantile is the order statistic ``ceil(coverage * n)`` of the sorted sizes (no interpolation: with few
    nulls the largest one is taken, never less).

    >>> noise_margin([0.001, 0.002, 0.003], coverage=0.5, step=0.001).value
    0.002
    """
    sizes = sorted(abs(float(e)) for e in null_effects)
    if not sizes:
        raise ValueError("noise_margin needs at least one null effect")
    if not 0 < coverage <= 1 or not step > 0:
        raise ValueError(f"coverage must be in (0, 1] and step > 0, got {coverage}, {step}")
    k = max(1, math.ceil(coverage * len(sizes)))
    quantile = sizes[k - 1]
    margin = round(math.ceil(quantile / step - 1e-9) * step, 10)
    return Choice(margin, f"the {coverage:.0%} quantile of |effect| over {len(sizes)} null effects, rounded up to "
                          f"{step:g}", {"quantile": round(quantile, 5), "n": len(sizes), "largest": round(sizes[-1], 5)})
