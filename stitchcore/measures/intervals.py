"""Intervals: how far a reported number could move with other test images, or with other trainings.

*A proportion* (a mean of 0/1 values: accuracy, a class's accuracy, a confusion rate) gets the exact
Clopper-Pearson interval (:func:`proportion_ci`; :func:`mean_ci` and :func:`grouped_mean_ci` take it whenever
every value is 0 or 1): at least 95% coverage whatever the true rate, where the percentile bootstrap of 46/46
right is [1, 1] and covers a true 0.98 in ~60% of draws (n=46).  *Any other mean* (per-window losses) gets a 95%
percentile bootstrap (:func:`bootstrap_mean_ci`): the examples are resampled with replacement ``RESAMPLES``
times from a generator seeded with ``seed`` (the same seed, the same interval), the statistic is recomputed on
each resample, and the 2.5th and 97.5th percentiles are the interval.  A *paired* interval (a stitching
penalty: B and the stitched model scored on the same test images) resamples the examples once for both sides,
so what the two share cancels and the interval of the difference is much tighter than two separate ones; a
statistic of several paired means (an LM's loss penalty, a ratio of two mean losses) is resampled the same way
(:func:`paired_statistic_ci`).  *Across model or adapter seeds* a number gets a Student-t interval
(:func:`across_seeds`, :func:`seed_spread`; three seeds at least, clipped to the metric's range), and a claim
against its baseline the t-interval of their per-seed differences (:func:`paired_seed_effect`).

>>> right = torch.tensor([1.0] * 90 + [0.0] * 10)  # 90% correct on 100 examples
>>> mean_ci(right)  # a proportion: exact
(0.823777, 0.950995)
>>> bootstrap_mean_ci(right)
(0.83975, 0.96)
>>> paired_difference_ci(right, right)  # a model against itself: no difference, whatever the resample
(0.0, 0.0)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["LEVEL", "MIN_SEEDS", "RESAMPLES", "across_seeds", "bootstrap_mean_ci", "grouped_mean_ci", "is_binary",
           "mean_ci", "pack_outcomes", "paired_difference_ci", "paired_seed_effect", "paired_statistic_ci",
           "proportion_ci", "resample_indices", "seed_note", "seed_spread", "unpack_outcomes",
           "unpaired_difference_ci"]  # fmt: skip

LEVEL = 0.95
RESAMPLES = 1000
MIN_SEEDS = 3  # an interval across seeds needs this many: two seeds' t-interval (±12.7 standard errors) says nothing


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


def proportion_ci(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a proportion: ``successes`` of ``n`` 0/1 trials.

    Clopper-Pearson rather than Wilson: its coverage is at least ``level`` for every true rate, where
    Wilson's is ``level`` on average but dips near 0 and 1 (85% at n=46 for a true rate of 0.0035, 93.6% at
    0.98), exactly where accuracies and confusion rates live; the price is ~9% more width at a rate of 0.5.
    46 of 46 right is not [1, 1]:

    >>> proportion_ci(46, 46)
    (0.922938, 1.0)
    >>> proportion_ci(0, 46)[0], proportion_ci(23, 46)
    (0.0, (0.349038, 0.650962))
    """
    if isinstance(successes, bool) or isinstance(n, bool) or not 0 <= int(successes) <= int(n) or int(n) < 1:
        raise ValueError(f"a proportion needs 0 <= successes <= n and n >= 1, got {successes} of {n}")
    return _clopper_pearson(int(successes), int(n), float(level))


@functools.lru_cache(maxsize=4096)
def _clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """:func:`proportion_ci` of checked arguments, kept (a matrix's cells and a sweep's classes repeat them)."""
    from scipy import stats  # scikit-learn's dependency; imported on use (a second of import time)

    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - tail, k + 1, n - k))
    return round(lo, 6), round(hi, 6)


def is_binary(values: torch.Tensor) -> bool:
    """Whether every value of ``values`` [N] is 0 or 1 (its mean is a proportion); False when empty."""
    v = values.reshape(-1)
    return v.numel() > 0 and bool(((v == 0) | (v == 1)).all())


def mean_ci(values: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
            level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Interval of the mean of ``values`` [N]: :func:`proportion_ci` when every value is 0 or 1 (per-example
    correctness: ``resamples`` and ``seed`` unused), else :func:`bootstrap_mean_ci` (losses ...)."""
    if is_binary(values):
        return proportion_ci(int(values.reshape(-1).sum().item()), values.numel(), level)
    return bootstrap_mean_ci(values, resamples=resamples, seed=seed, level=level)


def bootstrap_mean_ci(values: torch.Tensor, *, resamples: int = RESAMPLES, seed: int = 0,
                      level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """Percentile-bootstrap interval of the mean of ``values`` [N] (on 0/1 values it is too short near 0 and 1:
    46/46 gives [1, 1]; :func:`mean_ci` takes :func:`proportion_ci` there)."""
    return _percentiles(_means(values, resamples, seed), level)


def grouped_mean_ci(values: torch.Tensor, groups: torch.Tensor, n_groups: int, *, seed: int = 0,
                    level: float = LEVEL) -> list[list[float] | None]:  # fmt: skip
    """Each group's interval [lo, hi] of the mean of its ``values`` [N] (``groups`` int64 [N] in
    0..n_groups-1; None for a group with no example; :func:`mean_ci` per group, so exact for 0/1 values):
    per-class accuracy, each class on its own ~N/K examples.

    >>> grouped_mean_ci(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 1, 1]), 3)
    [[0.025, 1.0], [0.012579, 0.987421], None]
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


def seed_spread(values: list[float | None], level: float = LEVEL, *,
                bounds: tuple[float, float] | None = None) -> tuple[float | None, list[float] | None]:  # fmt: skip
    """(mean, [lo, hi]) of one number over the seeds that have it (None: a seed not run, or no value there):
    :func:`across_seeds` over :data:`MIN_SEEDS` or more (clipped to ``bounds``); fewer give their mean and no
    interval (:func:`seed_note` says so in words); none gives (None, None).

    >>> seed_spread([0.90, None, 0.94, 0.92]), seed_spread([0.9, None, 0.94]), seed_spread([None])
    ((0.92, [0.870317, 0.969683]), (0.92, None), (None, None))
    >>> seed_spread([0.97, 0.99, 1.0], bounds=(0, 1))  # an accuracy's interval stops at 100%
    (0.986667, [0.948721, 1.0])
    """
    got = [v for v in values if v is not None]
    if len(got) < 2:
        return (round(got[0], 6) if got else None), None
    mean, lo, hi = across_seeds(got, level, bounds=bounds)
    return mean, None if lo is None or hi is None else [lo, hi]


def across_seeds(values: list[float], level: float = LEVEL, *,
                 bounds: tuple[float, float] | None = None) -> tuple[float, float | None, float | None]:  # fmt: skip
    """(mean, lo, hi) of one number over n independent trainings (seeds): a Student t interval of the mean,
    the spread that training noise adds on top of the test images' (a handful of seeds is too few for a
    bootstrap).  ``bounds`` (lower, upper): the metric's range, the interval clipped to it ((0, 1) for an
    accuracy, (-1, 1) for an accuracy penalty).  Two seeds give (mean, None, None): their interval is
    ±12.7 standard errors and rests on one estimate of the spread, so it takes :data:`MIN_SEEDS`.

    >>> across_seeds([0.90, 0.92, 0.94])
    (0.92, 0.870317, 0.969683)
    >>> across_seeds([0.90, 0.94])
    (0.92, None, None)
    """
    if len(values) < 2:
        raise ValueError(f"a mean across seeds needs at least two of them (an interval {MIN_SEEDS}), got "
                         f"{len(values)}")  # fmt: skip
    if bounds is not None and not bounds[0] < bounds[1]:
        raise ValueError(f"bounds must be (lower, upper) with lower < upper, got {bounds}")
    x = torch.tensor(values, dtype=torch.float64)
    mean = x.mean().item()
    if len(x) < MIN_SEEDS:
        return round(mean, 6), None, None
    from scipy import stats  # scikit-learn's dependency; imported on use (a second of import time)

    half = stats.t.ppf((1 + level) / 2, len(x) - 1) * x.std().item() / len(x) ** 0.5
    lo, hi = float(mean - half), float(mean + half)
    if bounds is not None:
        low, high = float(bounds[0]), float(bounds[1])
        lo, hi = min(max(lo, low), high), max(min(hi, high), low)
    return round(mean, 6), round(lo, 6), round(hi, 6)


def seed_note(n: int) -> str | None:
    """Words for a number shown over ``n`` seeds without an interval (None from :data:`MIN_SEEDS` on).

    >>> seed_note(2)
    'mean of 2 seeds, no interval: an interval across seeds needs 3 or more'
    >>> seed_note(3) is None
    True
    """
    if n >= MIN_SEEDS:
        return None
    return f"mean of {n} seed{'s' if n != 1 else ''}, no interval: an interval across seeds needs {MIN_SEEDS} or more"


def paired_seed_effect(claim: list[float], baseline: list[float], level: float = LEVEL, *,
                       bounds: tuple[float, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """A claim's effect over its baseline, paired over model seeds: claim[i] and baseline[i] measured with
    seed i's models.  {"mean": the mean of claim[i] - baseline[i], "ci": its Student-t interval [lo, hi] (None
    under :data:`MIN_SEEDS` seeds), "n_seeds"}; :func:`stitchcore.measures.verdicts.verdict` reads it.
    ``bounds``: the metric's range (lower, upper); a difference of two such values lies in
    [lower - upper, upper - lower], and the interval is clipped to that.

    >>> paired_seed_effect([0.91, 0.93, 0.95], [0.80, 0.81, 0.85])
    {'mean': 0.11, 'ci': [0.085159, 0.134841], 'n_seeds': 3}
    >>> paired_seed_effect([0.91, 0.93], [0.80, 0.81])
    {'mean': 0.115, 'ci': None, 'n_seeds': 2}
    >>> paired_seed_effect([1.0, 1.0, 1.0], [0.0, 0.0, 0.24], bounds=(0, 1))["ci"]  # a rate's effect stops at +1
    [0.575788, 1.0]
    """
    if len(claim) != len(baseline):
        raise ValueError(f"a paired effect needs one baseline value per seed of the claim, got {len(claim)} "
                         f"and {len(baseline)}")  # fmt: skip
    if not claim:
        raise ValueError("a paired effect needs at least one seed")
    diffs = [float(c) - float(b) for c, b in zip(claim, baseline, strict=True)]
    if len(diffs) == 1:
        return {"mean": round(diffs[0], 6), "ci": None, "n_seeds": 1}
    span = None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])
    mean, lo, hi = across_seeds(diffs, level, bounds=span)
    return {"mean": mean, "ci": None if lo is None or hi is None else [lo, hi], "n_seeds": len(diffs)}


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
