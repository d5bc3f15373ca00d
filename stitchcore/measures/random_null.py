"""The random-init null of a similarity map: the same measure, A against k untrained networks of B's architecture.

Two networks fed the same images are never independent (a shuffled-image test rejects even an untrained B), so
the question "does B's *training* make it similar to A?" needs a null with B's architecture and inputs but no
training: k random-init twins of B (seeds), each measured against A on the same images as the trained B.  Per
cell (:func:`random_null_cells`):

- ``values``: the twins' mean;  ``sd``: their standard deviation (k - 1 degrees of freedom);
- ``ci``: the 95% *prediction* interval of one more random-init B, ``mean ± t(k-1) · sd · √(1 + 1/k)``: where a
  random B's value falls 95% of the time (not the interval of the mean, which shrinks with k);
- ``calibrated``: ``(value − mean) / sd``, signed so that positive = more similar than a random B (a distance
  such as Procrustes is flipped), in random-B standard deviations;
- ``threshold``: ``t(k-1) · √(1 + 1/k)`` sds, the interval's similar end: a cell beyond it is more similar than
  95% of random-init Bs (3.04 sds for k = 5).

>>> import torch
>>> value = torch.tensor([[0.9, 0.42]], dtype=torch.float64)
>>> draws = torch.tensor([[[0.50, 0.46]], [[0.52, 0.50]], [[0.48, 0.54]]], dtype=torch.float64)  # [k=3, 1, 2]
>>> cells = random_null_cells(value, draws, higher_is_similar=True)
>>> cells["values"], cells["calibrated"], cells["threshold"]
([[0.5, 0.5]], [[20.0, -2.0]], 4.968)
>>> beyond(cells)
[[True, False]]
"""

from __future__ import annotations

import math
from typing import Any

import torch

from stitchcore.measures.intervals import LEVEL

__all__ = ["MIN_TWINS", "beyond", "prediction_factor", "random_null_cells"]

MIN_TWINS = 2  # a spread needs two twins (its interval is then 15 sds wide: 5 seeds by default)


def prediction_factor(k: int, level: float = LEVEL) -> float:
    """``t(k-1) · √(1 + 1/k)``: the half-width, in sds of k draws, of the interval one more draw falls in.

    >>> round(prediction_factor(5), 3), round(prediction_factor(20), 3)
    (3.041, 2.145)
    """
    if k < MIN_TWINS:
        raise ValueError(f"a prediction interval needs at least {MIN_TWINS} draws, got {k}")
    from scipy import stats  # scikit-learn's dependency; imported on use (a second of import time)

    return float(stats.t.ppf((1 + level) / 2, k - 1)) * math.sqrt(1 + 1 / k)


def _grid(t: torch.Tensor) -> list[list[float | None]]:
    """[n_a, n_b] as JSON: 6 places, None where not finite."""
    return [[round(float(v), 6) if math.isfinite(float(v)) else None for v in row] for row in t]


def random_null_cells(values: torch.Tensor, draws: torch.Tensor, *, higher_is_similar: bool, level: float = LEVEL,
                      bounds: tuple[float, float] = (-math.inf, math.inf)) -> dict[str, Any]:  # fmt: skip
    """Summarise k random-B draws [k, n_a, n_b] of a map whose trained values are ``values`` [n_a, n_b].

    Returns ``{"values": mean, "per_seed": [k grids]}``, and from :data:`MIN_TWINS` draws on ``"sd"``,
    ``"ci"`` ([n_a][n_b] of [lo, hi], the prediction interval, clipped to the measure's ``bounds``: CKA's
    0 .. 1), ``"calibrated"`` and ``"threshold"`` (module docstring); grids hold None where a value is not
    finite (a constant layer) or the spread is 0.

    >>> near_one = torch.tensor([[[0.97]], [[0.99]], [[0.95]]], dtype=torch.float64)
    >>> random_null_cells(near_one[0], near_one, higher_is_similar=True, bounds=(0.0, 1.0))["ci"]
    [[[0.870634, 1.0]]]
    """
    draws, values = draws.double(), values.double()
    k = int(draws.shape[0])
    out: dict[str, Any] = {"values": _grid(draws.mean(0)), "per_seed": [_grid(d) for d in draws]}
    if k < MIN_TWINS:
        return out
    mean, sd = draws.mean(0), draws.std(0)  # [n_a, n_b]; std with k - 1 degrees of freedom
    factor = prediction_factor(k, level)
    lo, hi = (mean - factor * sd).clamp(min=bounds[0]), (mean + factor * sd).clamp(max=bounds[1])
    sign = 1.0 if higher_is_similar else -1.0
    z = sign * (values - mean) / sd.where(sd > 0, torch.tensor(math.nan, dtype=sd.dtype))
    out.update(sd=_grid(sd), ci=[[[a, b] for a, b in zip(ra, rb)] for ra, rb in zip(_grid(lo), _grid(hi))],
               calibrated=_grid(z), threshold=round(factor, 3), level=level)  # fmt: skip
    return out


def beyond(cells: dict[str, Any]) -> list[list[bool | None]] | None:
    """Per cell: is the trained value beyond the random-B interval on the similar side (None: not known)?
    None for a null without a spread (one twin, or a run stored before)."""
    grid, threshold = cells.get("calibrated"), cells.get("threshold")
    if grid is None or threshold is None:
        return None
    return [[None if z is None else z > threshold for z in row] for row in grid]
