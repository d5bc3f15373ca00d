"""Bootstrap intervals over test examples: how far a reported number could move with other test images.

Every interval here is a 95% percentile bootstrap: the examples are resampled with replacement ``RESAMPLES``
times from a generator seeded with ``seed`` (the same seed, the same interval), the statistic is recomputed on
each resample, and the 2.5th and 97.5th percentiles are the interval.  A *paired* interval (a stitching
penalty: B and the stitched model scored on the same test images) resamples the examples once for both sides,
so what the two share cancels and the interval of the difference is much tighter than two separate ones.

>>> right = torch.tensor([1.0] * 90 + [0.0] * 10)  # 90% correct on 100 examples
>>> mean_ci(right)
(0.83975, 0.96)
>>> paired_difference_ci(right, right)  # a model against itself: no difference, whatever the resample
(0.0, 0.0)
"""

from __future__ import annotations

import functools

import torch

__all__ = ["LEVEL", "RESAMPLES", "mean_ci", "paired_difference_ci", "resample_indices", "unpaired_difference_ci"]

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


def paired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                         level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y), ``x`` and ``y`` [N] measured on the same N examples (one resample for both)."""
    if x.shape != y.shape:
        raise ValueError(f"paired values need one value per example on both sides, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")  # fmt: skip
    return _percentiles(_means(x.reshape(-1).double() - y.reshape(-1).double(), resamples, seed), level)


def unpaired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                           level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y) resampling each side on its own (what two separate intervals assume)."""
    return _percentiles(_means(x, resamples, seed) - _means(y, resamples, seed + 1), level)
