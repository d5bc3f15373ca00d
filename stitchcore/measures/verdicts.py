"""Verdicts computed from a paired effect, never written by hand: does a claim beat the baseline that could
break it?

The effect is :func:`stitchcore.measures.intervals.paired_seed_effect`: the claim's number minus its
baseline's, seed by seed (each model seed measures both), with the Student-t interval of those differences.
Where the interval lies decides, against the side the claim names ("greater": the claim's number is higher
than the baseline's; "less": lower):

    not testable                                   no interval: fewer than three model seeds
    equivalent                                     a margin given, and the whole interval inside [-margin, margin]
    reproduced                                     the whole interval on the claimed side of 0
    not reproduced                                 the whole interval on the other side
    not separable from the baseline at this scale  0 inside (without a margin, or reaching past it)

The first that holds is the verdict: an effect too small to matter (inside the margin) is "equivalent" even
where it is reliably above 0, and an interval that touches 0 contains it.  Each verdict comes with one
sentence quoting the numbers:

>>> verdict({"mean": 0.11, "ci": [0.085159, 0.134841], "n_seeds": 3}, "greater")[0]
'reproduced'
>>> verdict({"mean": 0.004, "ci": [-0.01, 0.018], "n_seeds": 5}, "greater")[0]
'not separable from the baseline at this scale'
"""

from __future__ import annotations

from typing import Any

from stitchcore.measures.intervals import LEVEL, MIN_SEEDS

__all__ = ["EQUIVALENT", "NOT_REPRODUCED", "NOT_SEPARABLE", "NOT_TESTABLE", "REPRODUCED", "SIDES", "VERDICTS",
           "verdict"]  # fmt: skip

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
EQUIVALENT = "equivalent"
NOT_SEPARABLE = "not separable from the baseline at this scale"
NOT_TESTABLE = "not testable"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, EQUIVALENT, NOT_SEPARABLE, NOT_TESTABLE)
SIDES = ("greater", "less")  # the claim's number above the baseline's, or below it


def _num(x: float) -> str:
    """A signed number of three significant digits: '+0.0312', '-1.5', '+0'."""
    return f"{x:+.3g}"


def verdict(effect: dict[str, Any], side: str, *, margin: float | None = None) -> tuple[str, str]:
    """(verdict, why) of a paired effect {"mean", "ci": [lo, hi] | None, "n_seeds"} for a claim on ``side``
    ("greater" | "less") of its baseline; ``margin`` (> 0, the metric's units): how close to 0 counts as no
    difference, so that an interval inside [-margin, margin] reads "equivalent" (whichever side of 0 it is on).

    >>> word, why = verdict({"mean": -0.03, "ci": [-0.05, -0.01], "n_seeds": 3}, "less")
    >>> word
    'reproduced'
    >>> print(why)
    Over 3 model seeds the claim minus its baseline is -0.03 (95% interval -0.05 to -0.01), below 0 as claimed.
    >>> verdict({"mean": 0.001, "ci": [-0.004, 0.006], "n_seeds": 4}, "greater", margin=0.01)[0]
    'equivalent'
    >>> word, why = verdict({"mean": 0.02, "ci": None, "n_seeds": 2}, "greater")
    >>> word
    'not testable'
    >>> print(why)
    Over 2 model seeds the claim minus its baseline is +0.02 but has no interval: a verdict needs 3 seeds or more.
    """
    if side not in SIDES:
        raise ValueError(f"a claim's side is one of {', '.join(SIDES)}, got {side!r}")
    if margin is not None and not margin > 0:
        raise ValueError(f"an equivalence margin must be above 0, got {margin}")
    n, mean, ci = effect["n_seeds"], float(effect["mean"]), effect.get("ci")
    head = f"Over {n} model seed{'' if n == 1 else 's'} the claim minus its baseline is {_num(mean)}"
    if ci is None:
        return NOT_TESTABLE, f"{head} but has no interval: a verdict needs {MIN_SEEDS} seeds or more."
    lo, hi = float(ci[0]), float(ci[1])
    level = round(100 * float(effect.get("level", LEVEL)))
    head += f" ({level}% interval {_num(lo)} to {_num(hi)})"
    if margin is not None and -margin <= lo and hi <= margin:
        return EQUIVALENT, f"{head}, inside ±{margin:.3g}: no difference from the baseline beyond the margin."
    claimed, other = ("above", "below") if side == "greater" else ("below", "above")
    if (lo > 0 and side == "greater") or (hi < 0 and side == "less"):
        return REPRODUCED, f"{head}, {claimed} 0 as claimed."
    if lo > 0 or hi < 0:
        return NOT_REPRODUCED, f"{head}, {other} 0: against the claim."
    past = f", and reaches past ±{margin:.3g}" if margin is not None else ""
    return NOT_SEPARABLE, f"{head}, which contains 0{past}: the baseline would give this result too."
