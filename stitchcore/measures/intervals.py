"""Bootstrap intervals over test examples: how far a reported number could move with other test images.

Every interval here is a 95% percentile bootstrap: the examples are resampled with replacement ``RESAMPLES``
times from a generator seeded with ``seed`` (the same seed, the same interval), the statistic is recomputed on
each resample, and the 2.5th and 97.5th percentiles are the interval.  A *paired* interval (a stitching
penalty: B and the stitched model scored on the same test images) resamples the examples once for both sides,
so what the two share cancels and the interval of the difference is much tighter than two separate ones; a
statistic of several paired means (an LM's loss penalty, a ratio of two mean losses) is resampled the same way
(:func:`paired_statistic_ci`).

>>> right = torch.tensor([1.0] * 90 + [0.0] * 10)  # 90% correct on 100 examples
>>> mean_ci(right)
(0.83975, 0.96)
>>> paired_difference_ci(right, right)  # a model against itself: no difference, whatever the resample
(0.0, 0.0)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

__all__ = ["LEVEL", "RESAMPLES", "across_seeds", "grouped_mean_ci", "mean_ci", "pack_outcomes", "paired_difference_ci",
           "paired_statistic_ci", "resample_indices", "seed_spread", "unpack_outcomes", "unpaired_difference_ci"]

LEVEL = 0.95
RESAMPLES = 1000


def resample_indices(n: int, resamples: int = RESAMPLES, seed: int = 0) -> torch.Tensor:
    """int64 [resamples, n]: each row ``n`` example indices drawn with replacement (seeded)."""
    if n < 1:
        raise ValueError("a bootstrap needs at least one example")
    return torch.randint(0, n, (resamples, n), generator=torch.Generator().manual_seed(seed))


@functools.lru_cache(maxsize=8)
def _weights(n: int, resamples: int, seed: int) -> torch.Tensor:
    """float64 [resamples, n]: how often each example is drawn in each resample, over n (a resample's mean of
    ``v`` is ``weights @ v``); kept for the next interval over as many examples (a matrix's cells)."""
    idx = resample_indices(n, resamples, seed)
    counts = torch.zeros(resamples, n, dtype=torch.float64).scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float64))
    return counts / n


def _means(values: torch.Tensor, resamples: int, seed: int) -> torch.Tensor:
    """[resamples]: the mean of ``values`` [N] on each resample (as ``values[resample_indices(...)].mean(1)``)."""
    v = values.reshape(-1).double()
    if resamples * len(v) <= _CACHED_CELLS:
        return _weights(len(v), resamples, seed) @ v
    return v[resample_indices(len(v), resamples, seed)].mean(dim=1)  # many examples: the draws, uncached


_CACHED_CELLS = 2**23  # resamples x examples of a cached weight table (64 MB of float64)


def _percentiles(stats: torch.Tensor, level: float) -> tuple[float, float]:
    """The (1 - level)/2 and (1 + level)/2 quantiles of ``stats`` [R], rounded to 6 places."""
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(stats.double(), q).tolist()
    return round(lo, 6), round(hi, 6)


def mean_ci(values: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
            level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of the mean of ``values`` [N] (per-example correctness, losses ...)."""
    return _percentiles(_means(values, resamples, seed), level)


def grouped_mean_ci(values: torch.Tensor, groups: torch.Tensor, n_groups: int, *, seed: int = 0,
                    level: float = LEVEL) -> list[list[float] | None]:  # fmt: skip
    """Each group's interval [lo, hi] of the mean of its ``values`` [N] (``groups`` int64 [N] in
    0..n_groups-1; None for a group with no example): per-class accuracy, each class on its own ~N/K examples.

    >>> grouped_mean_ci(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 1, 1]), 3)
    [[1.0, 1.0], [0.0, 1.0], None]
    """
    return [list(mean_ci(values[groups == k], seed=seed, level=level)) if bool((groups == k).any()) else None
            for k in range(n_groups)]


def paired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                         level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y), ``x`` and ``y`` [N] measured on the same N examples (one resample for both)."""
    if x.shape != y.shape:
        raise ValueError(f"paired values need one value per example on both sides, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")  # fmt: skip
    return _percentiles(_means(x.reshape(-1).double() - y.reshape(-1).double(), resamples, seed), level)


def paired_statistic_ci(statistic: Callable[..., torch.Tensor], *values: torch.Tensor, resamples: int = RESAMPLES,
                        seed: int = 0, level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of ``statistic(mean(v1), mean(v2), ...)``, each ``v`` [N] measured on the same N examples.

    One resample of the examples serves every side (paired), and ``statistic`` gets each side's resampled means
    as float64 tensors [resamples], so it is written with elementwise operations.  An LM's loss penalty
    (L_base − L) / L_base over the same validation windows:

    >>> base = torch.tensor([2.0, 2.4, 1.6, 2.2, 1.8, 2.0])  # the base model's mean loss on six windows
    >>> paired_statistic_ci(lambda b, x: (b - x) / b, base, 1.25 * base)  # 25% worse on every window
    (-0.25, -0.25)
    >>> lo, hi = paired_statistic_ci(lambda b, x: (b - x) / b, base, base + torch.tensor([0.5, 0, 0, 0.5, 0, 0]))
    >>> lo < -1 / 12 < hi  # the point estimate: (2.0 - 2.1667) / 2.0
    True
    """
    if not values:
        raise ValueError("a paired statistic needs at least one side of per-example values")
    shapes = {tuple(v.reshape(-1).shape) for v in values}
    if len(shapes) != 1:
        raise ValueError(f"paired values need one value per example on every side, got {sorted(shapes)}")
    return _percentiles(statistic(*(_means(v, resamples, seed) for v in values)), level)


def unpaired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                           level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y) resampling each side on its own (what two separate intervals assume)."""
    return _percentiles(_means(x, resamples, seed) - _means(y, resamples, seed + 1), level)


def seed_spread(values: list[float | None], level: float = LEVEL) -> tuple[float | None, list[float] | None]:
    """(mean, [lo, hi]) of one number over the seeds that have it (None: a seed not run, or no value there):
    :func:`across_seeds` over two or more; one gives its value and no interval; none gives (None, None).

    >>> seed_spread([0.90, None, 0.94]), seed_spread([0.9, None]), seed_spread([None])
    ((0.92, [0.665876, 1.174124]), (0.9, None), (None, None))
    """
    got = [v for v in values if v is not None]
    if len(got) < 2:
        return (round(got[0], 6) if got else None), None
    mean, lo, hi = across_seeds(got, level)
    return mean, [lo, hi]


def across_seeds(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, lo, hi) of one number over n independent trainings (seeds): a Student t interval of the mean,
    the spread that training noise adds on top of the test images' (n >= 2; a handful of seeds is too few
    for a bootstrap).

    >>> across_seeds([0.90, 0.92, 0.94])
    (0.92, 0.870317, 0.969683)
    """
    if len(values) < 2:
        raise ValueError(f"an interval across seeds needs at least two of them, got {len(values)}")
    from scipy import stats  # scikit-learn's dependency; imported on use (a second of import time)

    x = torch.tensor(values, dtype=torch.float64)
    mean, half = x.mean().item(), stats.t.ppf((1 + level) / 2, len(x) - 1) * x.std().item() / len(x) ** 0.5
    return round(mean, 6), round(float(mean - half), 6), round(float(mean + half), 6)


def pack_outcomes(correct: torch.Tensor) -> dict[str, int | str]:
    """Per-example right/wrong [N] (bool or 0/1) as ``{"n": N, "hex": ...}``, 8 examples a byte: what a run
    keeps so that a paired interval can be taken later against another model scored on the same examples
    (450 digit test images: 114 characters).

    >>> pack_outcomes(torch.tensor([1, 0, 1, 1, 0, 0, 0, 0, 1]))
    {'n': 9, 'hex': 'b080'}
    >>> unpack_outcomes(pack_outcomes(torch.tensor([True, False, True]))).tolist()
    [1.0, 0.0, 1.0]
    """
    bits = correct.reshape(-1).to(torch.bool).tolist()
    packed = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            packed[i // 8] |= 0x80 >> (i % 8)
    return {"n": len(bits), "hex": packed.hex()}


def unpack_outcomes(packed: object) -> torch.Tensor | None:
    """float64 [N] of 0/1 from :func:`pack_outcomes`; None for anything else (a run stored before it kept them)."""
    if not isinstance(packed, dict) or not isinstance(packed.get("n"), int) or not isinstance(packed.get("hex"), str):
        return None
    try:
        raw = bytes.fromhex(packed["hex"])
    except ValueError:
        return None
    n = packed["n"]
    if n < 0 or len(raw) != (n + 7) // 8:
        return None
    return torch.tensor([float(raw[i // 8] >> (7 - i % 8) & 1) for i in range(n)], dtype=torch.float64)
