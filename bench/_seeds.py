"""Summaries over seeds shared by the findings scripts (bench/findings_*.py).

>>> stat([0.5, None, 0.7])
{'mean': 0.6, 'min': 0.5, 'max': 0.7, 'n': 2}
>>> per_position([[0.1, 0.9], [0.3, 0.7]])[1]["mean"]
0.8
"""

from __future__ import annotations

import statistics


def stat(values: list[float | None]) -> dict:
    """Mean, min, max and count of ``values`` over seeds (None = not measured, left out), rounded to 4 places."""
    vals = [float(v) for v in values if v is not None]
    return {"mean": round(statistics.fmean(vals), 4), "min": round(min(vals), 4), "max": round(max(vals), 4),
            "n": len(vals)}  # fmt: skip


def per_position(rows: list[list[float]]) -> list[dict]:
    """[seed][position] -> one :func:`stat` per position."""
    return [stat([r[i] for r in rows]) for i in range(len(rows[0]))]
