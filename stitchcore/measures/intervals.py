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

import torch

__all__ = ["LEVEL", "RESAMPLES", "mean_ci", "paired_difference_ci", "resample_indices", "unpaired_difference_ci"]

LEVEL = 0.95
RESAMPLES = 1000


def resample_indices(n: int, resamples: int = RESAMPLES, seed: int = 0) -> torch.Tensor:
    """int64 [resamples, n]: each row ``n`` example indices drawn with replacement (seeded)."""
    if n < 1:
        raise ValueError("a bootstrap needs at least one example")
    return torch.randint(0, n, (resamples, n), generator=torch.Generator().manual_seed(seed))


def _percentiles(stats: torch.Tensor, level: float) -> tuple[float, float]:
    """The (1 - level)/2 and (1 + level)/2 quantiles of ``stats`` [R], rounded to 6 places."""
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(stats.double(), q).tolist()
    return round(lo, 6), round(hi, 6)


def mean_ci(values: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
            level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of the mean of ``values`` [N] (per-example correctness, losses ...)."""
    v = values.reshape(-1).double()
    return _percentiles(v[resample_indices(len(v), resamples, seed)].mean(dim=1), level)


def paired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                         level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y), ``x`` and ``y`` [N] measured on the same N examples (one resample for both)."""
    if x.shape != y.shape:
        raise ValueError(f"paired values need one value per example on both sides, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")  # fmt: skip
    d = (x.reshape(-1).double() - y.reshape(-1).double())
    return _percentiles(d[resample_indices(len(d), resamples, seed)].mean(dim=1), level)


def unpaired_difference_ci(x: torch.Tensor, y: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                           level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of mean(x) - mean(y) resampling each side on its own (what two separate intervals assume)."""
    xs, ys = x.reshape(-1).double(), y.reshape(-1).double()
    mx = xs[resample_indices(len(xs), resamples, seed)].mean(dim=1)
    my = ys[resample_indices(len(ys), resamples, seed + 1)].mean(dim=1)
    return _percentiles(mx - my, level)
