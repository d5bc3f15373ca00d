"""Four more representation-similarity measures on the registry of :mod:`~stitchcore.measures.similarity`.

Each compares X [n, p] and Y [n, q], rows the same n examples, and returns a 0-dim float64 tensor;
higher is more similar for all four.  They are registered when :mod:`stitchcore.measures` is imported
(its ``__init__`` imports this module), so ``list_measures()`` lists them wherever it is called.

- ``rsa`` (Kriegeskorte et al. 2008), in [-1, 1], symmetric: each side's representational dissimilarity
  matrix (RDM) holds the correlation distance ``1 − Pearson r`` of every pair of rows; the measure is the
  Spearman correlation of the two RDMs' upper triangles (tied distances get their average rank).
- ``svcca`` (Raghu et al. 2017), in [0, 1], symmetric: each side column-centred and cut to its top
  singular directions that explain ``SVCCA_VARIANCE`` (99 %) of the variance; the measure is the mean
  canonical correlation of the two reduced sides, over min(kx, ky) directions.
- ``ridge-r2``, in (−inf, 1], not symmetric: held-out R² of a ridge regression predicting Y from X, fitted
  by :class:`~stitchcore.stitching.fits.LstsqAccumulator` (the stitch fit's moments and its default ridge).
- ``knn-jaccard``, in [0, 1], symmetric: mean over rows of the Jaccard overlap of a row's ``KNN_K`` (10)
  nearest other rows by cosine similarity in X and in Y.

Degenerate inputs: too few rows for a measure to mean anything is a :class:`StitchError` naming the
minimum; a representation with nothing to compare (rows that are constant for ``rsa`` or all zero for
``knn-jaccard``, no variance for ``svcca``, a constant held-out Y for ``ridge-r2``) gives NaN: a blank
cell in the heat map, as CKA of a constant layer gives.

>>> from stitchcore.measures.similarity import get_measure
>>> x = torch.randn(60, 8, dtype=torch.float64)
>>> [round(float(fn(x, 3 * x)), 6) for fn in (rsa, svcca, knn_jaccard)]
[1.0, 1.0, 1.0]
>>> float(ridge_r2(x, 3 * x)) > 0.999999
True
>>> get_measure("ridge-r2").bounds, get_measure("ridge-r2").symmetric
((-inf, 1.0), False)
"""

from __future__ import annotations

import logging
import math

import torch

from stitchcore.errors import StitchError
from stitchcore.measures.similarity import _check_pair, register_measure
from stitchcore.stitching.fits import LstsqAccumulator

__all__ = ["KNN_K", "RIDGE_HOLDOUT_EVERY", "RIDGE_MAX_FEATURES", "RSA_MAX_ROWS", "SVCCA_VARIANCE"]
__all__ += ["knn_jaccard", "rdm", "ridge_r2", "rsa", "svcca"]

log = logging.getLogger(__name__)

RSA_MAX_ROWS = 8192  # n(n-1)/2 pairs: at 8192, a few float64 copies of 33.5M distances (~2 GB at the peak)
SVCCA_VARIANCE = 0.99  # kept share of each side's variance (Raghu et al. 2017 keep 99 %)
RIDGE_HOLDOUT_EVERY = 5  # row i is held out when i % 5 == 4: a deterministic 80/20 split over any row order
RIDGE_MAX_FEATURES = 8192  # the fit solves a p x p system (float64 covariance of 0.5 GB at 8192 columns)
KNN_K = 10  # neighbours per row (fewer when there are fewer other rows)
_KNN_CHUNK = 1024  # query rows per [chunk, n] similarity block


def _too_few(name: str, n: int, least: int, why: str) -> None:
    if n < least:
        raise StitchError(f"{name} needs at least {least} examples ({why}), got {n}; use more samples")


# ---------------------------------------------------------------------------- RSA


def rdm(x: torch.Tensor) -> torch.Tensor:
    """Correlation-distance RDM of rows: X [n, p] -> [n, n] float64 with ``1 − Pearson r(x_i, x_j)``.

    A constant row has no correlation with anything: its row and column are NaN.

    >>> rdm(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 4.0, 6.0]])).round(decimals=9).tolist()
    [[0.0, 2.0, 0.0], [2.0, 0.0, 2.0], [0.0, 2.0, 0.0]]
    """
    z = x.reshape(x.shape[0], -1).double()
    z = z - z.mean(1, keepdim=True)
    z = z / z.norm(dim=1, keepdim=True)  # a constant row: 0/0 = NaN
    return (1.0 - z @ z.T).fill_diagonal_(0.0)


def _average_ranks(v: torch.Tensor) -> torch.Tensor:
    """Ranks 1..m of ``v`` [m], ties sharing their average rank (``scipy.stats.rankdata``'s default)."""
    values, order = torch.sort(v, stable=True)
    starts_group = torch.ones_like(values, dtype=torch.bool)
    starts_group[1:] = values[1:] != values[:-1]
    group = starts_group.cumsum(0) - 1  # [m] group of each sorted position
    counts = torch.bincount(group)
    first = counts.cumsum(0) - counts  # 0-based position where each group starts
    ranks = torch.empty_like(v, dtype=torch.float64)
    ranks[order] = (first + (counts + 1) / 2.0).double()[group]
    return ranks


def _pearson(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a - a.mean(), b - b.mean()
    return ((a * b).sum() / torch.sqrt(a.square().sum() * b.square().sum())).clamp(-1.0, 1.0)


def rsa(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """RSA of X [n, p], Y [n, q]: Spearman correlation of the correlation-distance RDMs -> scalar in [-1, 1].

    Equal distances share their average rank (exact float ties; distances that differ only by rounding are
    ranked as computed).  Invariant to any per-row affine map ``x_i -> a_i x_i + b_i`` (a_i > 0) of either
    side, not to rotations of the columns.  Rows constant in X or in Y are left out (their distances are
    undefined); NaN when fewer than 3 rows remain or an RDM is constant.  Needs 3 to ``RSA_MAX_ROWS``
    examples (StitchError otherwise).
    """
    x, y = _check_pair(x, y)
    n = x.shape[0]
    _too_few("rsa", n, 3, "an RDM of 2 rows has one distance, nothing to rank")
    if n > RSA_MAX_ROWS:
        raise StitchError(f"rsa compares all n(n-1)/2 pairs and {n} rows exceed {RSA_MAX_ROWS}; use fewer "
                          "samples (or token_mode='mean' for token layers)")
    varies = (x.amax(1) > x.amin(1)) & (y.amax(1) > y.amin(1))  # [n]
    if not bool(varies.all()):
        log.info("rsa: %d of %d rows are constant in X or Y and are left out", int((~varies).sum()), n)
        x, y, n = x[varies], y[varies], int(varies.sum())
        if n < 3:
            return x.new_tensor(math.nan)
    upper = torch.ones(n, n, dtype=torch.bool).triu_(1)  # [n, n]: pairs i < j
    ranks_x = _average_ranks(rdm(x)[upper])  # [n(n-1)/2]
    ranks_y = _average_ranks(rdm(y)[upper])
    return _pearson(ranks_x, ranks_y)


# ---------------------------------------------------------------------------- SVCCA


def _top_directions(x: torch.Tensor, share: float) -> torch.Tensor | None:
    """Orthonormal basis [n, k] of the centred X's top singular directions holding ``share`` of its
    variance (the smallest such k); None when X has no variance."""
    x = x - x.mean(0)
    u, s, _ = torch.linalg.svd(x, full_matrices=False)  # u [n, r], s [r] descending
    var = s.square()
    total = var.sum()
    if not total > 0:
        return None
    k = int(torch.searchsorted(var.cumsum(0) / total, var.new_tensor([share]))[0]) + 1
    return u[:, : min(k, len(s))]


def svcca(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """SVCCA of X [n, p] and Y [n, q] (Raghu et al. 2017): mean canonical correlation -> scalar in [0, 1].

    Each side is column-centred and reduced to its top singular directions holding ``SVCCA_VARIANCE`` of
    the variance (kx and ky of them).  The reduced data ``U_k S_k`` spans the same space as ``U_k``, whose
    columns are orthonormal, so the canonical correlations are the singular values of ``U_kxᵀ U_ky``
    (no covariance inverse); the measure is their mean over min(kx, ky).

    Invariant to invertible linear maps of either side as long as the same directions pass the 99 % cut
    (always, for maps that keep the column space and a clear gap in the spectrum), and to translations.
    The kept directions never exceed the centred rank (at most n − 1); but when kx + ky > n − 1 the two
    subspaces must share kx + ky − (n − 1) directions, whose correlations are 1 whatever the data: the
    value is then inflated (logged; use more samples than kept directions on both sides together).
    NaN when a side has no variance.  Needs at least 2 examples.
    """
    x, y = _check_pair(x, y)
    n = x.shape[0]
    _too_few("svcca", n, 2, "one example has no variance")
    basis_x, basis_y = _top_directions(x, SVCCA_VARIANCE), _top_directions(y, SVCCA_VARIANCE)
    if basis_x is None or basis_y is None:
        return x.new_tensor(math.nan)
    kx, ky = basis_x.shape[1], basis_y.shape[1]
    if kx + ky > n - 1:
        log.warning("svcca: %d + %d kept directions exceed the %d dimensions of %d centred examples; "
                    "at least %d canonical correlations are 1 by construction (use more samples)",
                    kx, ky, n - 1, n, kx + ky - (n - 1))
    rho = torch.linalg.svdvals(basis_x.T @ basis_y)  # [min(kx, ky)]
    return rho.clamp(0.0, 1.0).mean()


# ---------------------------------------------------------------------------- ridge R²


def ridge_r2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Held-out R² of a ridge regression predicting Y [n, q] from X [n, p] -> scalar in (−inf, 1].

    Rows ``i % RIDGE_HOLDOUT_EVERY == 4`` (every 5th: 20 %) are held out; ``Y ≈ X Wᵀ + b`` is fitted on the
    others by :class:`~stitchcore.stitching.fits.LstsqAccumulator` (float64 moments, its default ridge
    ``lambda = 1e-4 · tr(cov_xx) / p`` on population covariances, bias not penalised: sklearn's ``Ridge``
    with ``alpha = lambda · n_fit``).  On the held-out rows

        R² = 1 − Σ‖y_i − ŷ_i‖² / Σ‖y_i − ȳ‖²,   ȳ the held-out rows' mean,

    summed over all of Y's columns (sklearn's ``r2_score(multioutput="variance_weighted")``).  1 = Y is a
    linear function of X; 0 = no better than the held-out mean; negative = worse.  Invariant to invertible
    linear maps and translations of X up to the small ridge; not symmetric.  With token rows an image's
    tokens fall on both sides of the split.  NaN when the held-out Y is constant.  Needs at least 10
    examples and at most ``RIDGE_MAX_FEATURES`` columns of X (StitchError otherwise).
    """
    x, y = _check_pair(x, y)
    n, p = x.shape
    _too_few("ridge-r2", n, 2 * RIDGE_HOLDOUT_EVERY, "two held-out rows and eight to fit on")
    if p > RIDGE_MAX_FEATURES:
        raise StitchError(f"ridge-r2 solves a {p} x {p} system and X has more than {RIDGE_MAX_FEATURES} "
                          "columns; pick a narrower cut (a later or pooled layer) or another measure")
    held = torch.arange(n, device=x.device) % RIDGE_HOLDOUT_EVERY == RIDGE_HOLDOUT_EVERY - 1  # [n]
    fit = LstsqAccumulator(p, y.shape[1])
    fit.update(x[~held], y[~held])
    w, b, _ = fit.solve()  # [q, p], [q] float64 on the CPU
    x_out, y_out = x[held].cpu(), y[held].cpu()
    residual = (y_out - (x_out @ w.T + b)).square().sum()
    spread = (y_out - y_out.mean(0)).square().sum()
    return 1.0 - residual / spread if spread > 0 else x.new_tensor(math.nan)


# ---------------------------------------------------------------------------- k-NN Jaccard


def _neighbours(x: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [n, k] of every row's k most cosine-similar other rows (rows non-zero), the most similar
    first; ties go to the lower row index (a stable sort)."""
    z = x / x.norm(dim=1, keepdim=True)
    out = []
    for rows in torch.arange(len(z), device=z.device).split(_KNN_CHUNK):
        sim = z[rows] @ z.T  # [chunk, n]
        sim[torch.arange(len(rows)), rows] = -math.inf  # never its own neighbour
        out.append(torch.sort(sim, dim=1, descending=True, stable=True).indices[:, :k])
    return torch.cat(out)


def knn_jaccard(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean k-NN Jaccard overlap of X [n, p] and Y [n, q] -> scalar in [0, 1].

    For each row i, N_X(i) is the set of its k = min(``KNN_K``, n − 1) nearest other rows by cosine
    similarity in X (ties to the lower index), N_Y(i) the same in Y; the measure is the mean over rows of
    ``|N_X ∩ N_Y| / |N_X ∪ N_Y|``.  Invariant to rotations and to positive per-row scaling of either side.
    Rows that are all zero in X or in Y (no direction, so no cosine) are left out before neighbours are
    found; NaN when fewer than 2 rows remain.  Needs at least 2 examples.
    """
    x, y = _check_pair(x, y)
    n = x.shape[0]
    _too_few("knn-jaccard", n, 2, "a row needs another row to be its neighbour")
    nonzero = (x != 0).any(1) & (y != 0).any(1)  # [n]
    if not bool(nonzero.all()):
        log.info("knn-jaccard: %d of %d rows are zero in X or Y and are left out", int((~nonzero).sum()), n)
        x, y, n = x[nonzero], y[nonzero], int(nonzero.sum())
        if n < 2:
            return x.new_tensor(math.nan)
    k = min(KNN_K, n - 1)
    near_x, near_y = _neighbours(x, k), _neighbours(y, k)  # [n, k] each
    shared = (near_x[:, :, None] == near_y[:, None, :]).sum((1, 2)).double()  # [n] |N_X ∩ N_Y|
    return (shared / (2 * k - shared)).mean()


register_measure("rsa", bounds=(-1.0, 1.0))(rsa)
register_measure("svcca")(svcca)
register_measure("ridge-r2", bounds=(-math.inf, 1.0), symmetric=False)(ridge_r2)
register_measure("knn-jaccard")(knn_jaccard)
