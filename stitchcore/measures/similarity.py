"""Representation similarity between layers of two models: CKA (linear, RBF, minibatch), Procrustes.

The measure registry lives here; RSA, SVCCA, held-out ridge R² and k-NN Jaccard are defined in
:mod:`~stitchcore.measures.representational` and registered when the package is imported.

Every measure compares two representations of the *same* n inputs, ``X`` [n, p] and
``Y`` [n, q] (rows are examples; p and q may differ).  Activations are flattened to
rows by :func:`flatten`: a map [B, C, H, W] (or [B, H, W, C]) becomes [B, C*H*W],
tokens [B, N, D] are mean-pooled to [B, D] (``token_mode="mean"``) or become B*N rows
(``"tokens"``), a vector [B, D] stays.

>>> import torch
>>> x = torch.randn(64, 10, dtype=torch.float64)
>>> round(float(cka_linear(x, 3 * x)), 6)
1.0
>>> list_measures()
['cka-linear', 'cka-rbf', 'knn-jaccard', 'procrustes', 'ridge-r2', 'rsa', 'svcca']
>>> list_measures("cka-*"), get_measure("procrustes").higher_is_similar
(['cka-linear', 'cka-rbf'], False)

The CKA machinery (Grams, U-centring, HSIC, linear CKA, :class:`MinibatchCKA`) is :mod:`.cka`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.cuts import Cut
from stitchcore.cuts.record import record
from stitchcore.device import module_device
from stitchcore.errors import StitchError
from stitchcore.measures.cka import (  # noqa: F401  (re-exported: the public names and representational's)
    _MIN_DEBIASED_BATCH,
    MinibatchCKA,
    _check_batch,
    _check_pair,
    _cka_from_grams,
    cka_linear,
    gram_centred,
    gram_linear,
    hsic_unbiased,
    u_centre,
)
from stitchcore.measures.intervals import LEVEL
from stitchcore.registry import Registry
from stitchcore.stitching.activations import memory_budget_bytes

__all__ = ["Measure", "MinibatchCKA", "cka_linear", "cka_rbf", "features_at", "flatten", "get_measure"]
__all__ += ["gram_centred", "gram_linear", "hsic_unbiased", "list_measures", "procrustes_distance", "register_measure"]
__all__ += ["similarity_matrix", "u_centre"]

log = logging.getLogger(__name__)

TOKEN_MODES = ("mean", "tokens")


# ---------------------------------------------------------------------------- features


def features_at(model: nn.Module, cut_names: Sequence[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Activations at every named cut from ONE eval-mode forward pass of ``model`` on ``x`` [B, ...].

    Returns ``{name: Tensor [B, ...]}`` as laid out by the module (e.g. [B, C, H, W]; the first
    item of a tuple output, as HF blocks return).  Names are module paths (``"layer2.1"``;
    ``"name:1"`` is a shared module's second call); an unknown one is a :class:`CutError` naming
    the close ones.  Hooks are removed and every module's training flag restored, also when the
    forward pass fails (:func:`stitchcore.cuts.record.record`).

    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> {k: tuple(v.shape) for k, v in features_at(net, ["0", "2"], torch.randn(5, 4)).items()}
    {'0': (5, 8), '2': (5, 2)}
    """
    with record(model, cut_names, eval_mode=True) as seen, torch.no_grad():
        model(x)
    return {name: seen.require(name) for name in cut_names}


def flatten(act: torch.Tensor, layout: str | None = None, token_mode: str = "mean") -> torch.Tensor:
    """Rows of examples: map [B,C,H,W] / map_nhwc [B,H,W,C] -> [B, C*H*W]; vector [B,D] stays;
    tokens [B,N,D] -> [B,D] (``token_mode="mean"``) or [B*N, D] (``"tokens"``).

    ``layout`` None infers it from the rank (2 vector, 3 tokens, 4 map).
    """
    if token_mode not in TOKEN_MODES:
        raise StitchError(f"unknown token_mode {token_mode!r}; use one of {', '.join(TOKEN_MODES)}")
    layout = layout or {2: "vector", 3: "tokens", 4: "map"}.get(act.dim())
    if layout == "tokens" and act.dim() == 3:
        return act.mean(dim=1) if token_mode == "mean" else act.reshape(-1, act.shape[-1])
    if layout in ("map", "map_nhwc", "vector") and act.dim() >= 2:
        return act.reshape(act.shape[0], -1)
    raise StitchError(f"cannot flatten an activation of shape {tuple(act.shape)} with layout {layout!r}; "
                      "use a cut whose output is [B, D], [B, N, D] or [B, C, H, W]")


# ---------------------------------------------------------------------------- HSIC and CKA




def _gram_rbf(x: torch.Tensor, sigma_frac: float) -> torch.Tensor:
    sq = torch.cdist(x, x).square()  # [n, n]
    median = sq[~torch.eye(len(x), dtype=torch.bool)].median() if len(x) > 1 else sq.new_tensor(1.0)
    return torch.exp(-sq / (2.0 * sigma_frac**2 * median.clamp_min(1e-12)))


def cka_rbf(x: torch.Tensor, y: torch.Tensor, sigma_frac: float | None = None) -> torch.Tensor:
    """Full-batch RBF-kernel CKA of X [n, p], Y [n, q] -> symmetric scalar in [0, 1] (biased HSIC,
    Kornblith et al. 2019).

    The bandwidth is ``sigma = sigma_frac * median pairwise distance`` per representation
    (``sigma_frac`` None -> 1.0), i.e. ``K = exp(-d² / (2 sigma_frac² median(d²)))``.
    """
    x, y = _check_pair(x, y)
    frac = 1.0 if sigma_frac is None else float(sigma_frac)
    if not frac > 0:
        raise StitchError(f"sigma_frac must be > 0 (a fraction of the median distance), got {sigma_frac}")
    return _cka_from_grams(_gram_rbf(x, frac), _gram_rbf(y, frac), False)


def procrustes_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Orthogonal Procrustes distance of X [n, p], Y [n, q] -> scalar in [0, 2] (0 = same up to rotation).

    X and Y are column-centred and scaled to unit Frobenius norm; then
    ``d = min_R ‖X − Y R‖²_F = 2 − 2‖XᵀY‖_*`` (nuclear norm), as in Ding, Denain & Steinhardt 2021.
    It is symmetric and invariant to rotations, translations and isotropic scaling.
    """
    x, y = _check_pair(x, y)
    x, y = x - x.mean(0), y - y.mean(0)
    x, y = x / x.norm().clamp_min(1e-300), y / y.norm().clamp_min(1e-300)
    small, big = (x, y) if x.shape[1] <= y.shape[1] else (y, x)
    nuclear = torch.linalg.svdvals(small.T @ big).sum()
    return (2.0 - 2.0 * nuclear).clamp_min(0.0)




# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Measure:
    """A registered representation-similarity measure."""

    name: str  # canonical name used in specs, CLI and UI: "cka-linear"
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (X [n, p], Y [n, q]) -> scalar tensor
    higher_is_similar: bool  # True for CKA (1 = same), False for distances (0 = same)
    minibatch: bool  # True: similarity_matrix streams batches in constant memory (else full batch)
    bounds: tuple[float, float] = (0.0, 1.0)  # every value of fn lies in [low, high] (low may be -inf); same
    # inputs give high when higher_is_similar, else low (ridge-r2: just under 1, the ridge shrinks the fit)
    symmetric: bool = True  # fn(X, Y) == fn(Y, X)


_MEASURES: Registry[Measure] = Registry("measure", hint="list them with list_measures()")


def register_measure(
    name: str,
    *,
    higher_is_similar: bool = True,
    minibatch: bool = False,
    bounds: tuple[float, float] = (0.0, 1.0),
    symmetric: bool = True,
) -> Callable:
    """Decorator adding ``fn(X, Y) -> scalar`` to the measure table under ``name``; a name registers once.

    ``bounds`` and ``symmetric`` document what ``fn`` guarantees (the contract tests check them).
    """

    def deco(fn: Callable) -> Callable:
        _MEASURES.register(name)(Measure(name, fn, higher_is_similar, minibatch, bounds, symmetric))
        return fn

    return deco


def list_measures(pattern: str = "*") -> list[str]:
    """Names of the registered measures matching the glob ``pattern``, sorted: ``list_measures("cka-*")``."""
    return sorted(_MEASURES.list(pattern))


def get_measure(name: str) -> Measure:
    """The measure called ``name``; :class:`StitchError` naming the close and the known ones otherwise.

    >>> get_measure("cka-linera")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: unknown measure 'cka-linera'; did you mean 'cka-linear'? ...
    """
    return _MEASURES.get(name)


register_measure("cka-linear", minibatch=True)(cka_linear)
register_measure("cka-rbf")(cka_rbf)
register_measure("procrustes", higher_is_similar=False, bounds=(0.0, 2.0))(procrustes_distance)


# ---------------------------------------------------------------------------- matrix over cuts


def _derangement(n: int, gen: torch.Generator) -> torch.Tensor:
    """A random permutation of range(n) with no fixed point (n >= 2): row i is paired with another row."""
    p = torch.randperm(n, generator=gen)
    perm = torch.empty_like(p)
    perm[p] = p.roll(1)
    return perm


def _names_layouts(cuts: Sequence[Cut | str]) -> tuple[list[str], list[str | None]]:
    if not cuts:
        raise StitchError("no cuts given; pick at least one cut per model (`python -m stitchcore cuts REF`)")
    names = [c.name if isinstance(c, Cut) else c for c in cuts]
    layouts = [c.layout if isinstance(c, Cut) else None for c in cuts]
    return names, layouts


def _first(batch: object) -> torch.Tensor:
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def similarity_matrix(
    model_a: nn.Module,
    model_b: nn.Module,
    cuts_a: Sequence[Cut | str],
    cuts_b: Sequence[Cut | str],
    batches_a: Iterable,
    batches_b: Iterable,
    *,
    measure: str = "cka-linear",
    token_mode: str = "mean",
    shuffle_baseline: bool = False,
    check_cancel: Callable[[], None] | None = None,
    progress: Callable[[float, str], None] | None = None,
    seed: int = 0,
    null_permutations: int = 0,
    intervals: bool = True,
) -> dict:
    """Similarity of every (A cut, B cut) pair over the same images.

    ``batches_a`` / ``batches_b`` yield the SAME images preprocessed for each model, as
    tensors [B, ...] or (images, labels) tuples.  Each batch runs one forward pass of A and
    one of B collecting every cut.  ``cka-linear`` streams minibatch debiased CKA (constant
    memory; a final batch under 4 examples is skipped); other measures keep the flattened
    features in memory under ``STITCHLAB_ACT_BUDGET_MB`` and compute full batch.
    ``shuffle_baseline`` repeats the computation with B's rows deranged (image i of A against
    another image of B): what the estimator reports for unrelated pairs.

    ``intervals``: ``values_ci``, each cell's 95% bootstrap interval [lo, hi] (the examples resampled; for the
    minibatch CKA, in the batches they entered the Grams in).  ``null_permutations`` K > 0: ``null``, the
    measure with B's examples permuted K times (image i of A against another image of B: no shared structure),
    as ``{"mean": grid, "std": grid, "k": K}``, and ``calibrated``: (value - null mean) / null std per cell.

    Returns ``{"senders": [A cut names], "receivers": [B cut names], "values": [[n_a x n_b]],
    "baseline": [[...]] | None, "measure": name, "token_mode": mode, "n": examples used}`` and the above.
    """
    meas = get_measure(measure)
    if token_mode not in TOKEN_MODES:
        raise StitchError(f"unknown token_mode {token_mode!r}; use one of {', '.join(TOKEN_MODES)}")
    names_a, layouts_a = _names_layouts(cuts_a)
    names_b, layouts_b = _names_layouts(cuts_b)
    dev_a, dev_b = module_device(model_a), module_device(model_b)
    gen = torch.Generator().manual_seed(seed)
    null_gen = torch.Generator().manual_seed(seed + 7919)  # the null's own draws: the baseline's stay as stored
    half_gen = torch.Generator().manual_seed(seed + 104729)  # the interval's half-samples
    total = len(batches_a) if hasattr(batches_a, "__len__") else None  # for progress fractions
    mb = MinibatchCKA(len(names_a), len(names_b)) if meas.minibatch else None
    mb_base = MinibatchCKA(len(names_a), len(names_b)) if meas.minibatch and shuffle_baseline else None
    kept_a: list[list[torch.Tensor]] = [[] for _ in names_a]
    kept_b: list[list[torch.Tensor]] = [[] for _ in names_b]
    budget, used_bytes, n, i = memory_budget_bytes(), 0, 0, -1
    sentinel = object()
    it_a, it_b = iter(batches_a), iter(batches_b)
    while True:
        xa, xb = next(it_a, sentinel), next(it_b, sentinel)
        if xa is sentinel or xb is sentinel:
            if xa is not xb:
                raise StitchError("batches_a and batches_b yield different numbers of batches; "
                                  "feed the same images to both models")
            break
        i += 1
        if check_cancel is not None:
            check_cancel()
        xa, xb = _first(xa), _first(xb)
        if len(xa) != len(xb):
            raise StitchError(f"batch {i}: A got {len(xa)} images and B {len(xb)}; feed the same images")
        if meas.minibatch and len(xa) < _MIN_DEBIASED_BATCH:
            if n == 0:
                _check_batch(len(xa))
            log.info("skipping a final batch of %d examples (debiased CKA needs >= 4)", len(xa))
            continue
        fa = features_at(model_a, names_a, xa.to(dev_a))
        fb = features_at(model_b, names_b, xb.to(dev_b))
        rows_a = [flatten(fa[k], lay, token_mode) for k, lay in zip(names_a, layouts_a)]
        rows_b = [flatten(fb[k], lay, token_mode) for k, lay in zip(names_b, layouts_b)]
        perm = _derangement(len(xb), gen) if shuffle_baseline else None
        if mb is not None:
            mb.update(rows_a, rows_b, [_derangement(len(xb), null_gen) for _ in range(null_permutations)],
                      halves=half_gen if intervals else None)
            if mb_base is not None:
                mb_base.update(rows_a, [flatten(fb[k][perm.to(fb[k].device)], lay, token_mode)
                                        for k, lay in zip(names_b, layouts_b)])
        else:
            used_bytes += 4 * sum(r.numel() for r in (*rows_a, *rows_b))
            if used_bytes > budget:
                raise StitchError(
                    f"{measure} keeps every feature in memory and {n + len(xa)} examples over "
                    f"{len(names_a) + len(names_b)} cuts exceed the {budget / 2**20:.0f} MB budget "
                    "(STITCHLAB_ACT_BUDGET_MB); use fewer samples or cuts, or measure='cka-linear'")
            for keep, r in zip(kept_a, rows_a):
                keep.append(r.float().cpu())
            for keep, r in zip(kept_b, rows_b):
                keep.append(r.float().cpu())
        n += len(xa)
        if progress is not None:
            progress(min(0.99, (i + 1) / total) if total else 0.0, f"batch {i + 1}: {n} examples")
    if n == 0:
        raise StitchError("no batch to measure; give at least one batch of images")
    null = lo_hi = None  # null: [K, n_a, n_b]; lo_hi: [2, n_a, n_b] the cells' intervals
    q = torch.tensor([(1 - LEVEL) / 2, (1 + LEVEL) / 2], dtype=torch.float64)
    if mb is not None:
        values = mb.compute()
        baseline = mb_base.compute() if mb_base is not None else None
        null = mb.null()
        lo_hi = mb.interval()
    else:
        xs_a, xs_b = [torch.cat(k) for k in kept_a], [torch.cat(k) for k in kept_b]
        values = torch.tensor([[float(meas.fn(x, y)) for y in xs_b] for x in xs_a])
        baseline = None
        if shuffle_baseline:
            perm = _derangement(n, gen)
            baseline = torch.tensor([[float(meas.fn(x, _permute(y, perm, n))) for y in xs_b] for x in xs_a])
        if null_permutations:
            perms = [_derangement(n, null_gen) for _ in range(null_permutations)]
            null = torch.tensor([[[float(meas.fn(x, _permute(y, p, n))) for y in xs_b] for x in xs_a] for p in perms])
        if intervals:  # half-samples of the examples (as the minibatch CKA's): every cell on each half
            halves = [torch.randperm(n, generator=half_gen)[: n // 2] for _ in range(FULL_BATCH_HALVES)]
            draws = torch.tensor([[[float(meas.fn(_permute(x, h, n, len(h)), _permute(y, h, n, len(h)))) for y in xs_b]
                                   for x in xs_a] for h in halves])  # fmt: skip
            lo_hi = torch.nanquantile(draws.double(), q, dim=0)
    if progress is not None:
        progress(1.0, "done")
    out = {
        "senders": names_a,
        "receivers": names_b,
        "values": values.tolist(),
        "baseline": baseline.tolist() if baseline is not None else None,
        "measure": measure,
        "token_mode": token_mode,
        "n": n,
    }
    if lo_hi is not None:
        out["values_ci"] = [[[round(float(lo_hi[0, i, j]), 6), round(float(lo_hi[1, i, j]), 6)]
                             for j in range(len(names_b))] for i in range(len(names_a))]  # fmt: skip
    if null is not None:
        mean, std = null.double().mean(0), null.double().std(0)
        out["null"] = {"mean": _rounded(mean), "std": _rounded(std), "k": int(null.shape[0])}
        out["calibrated"] = _rounded((values.double() - mean) / std)
    return out


def _rounded(grid: torch.Tensor) -> list[list[float | None]]:
    """A [n_a, n_b] grid as JSON: 6 places, None where not finite."""
    return [[round(float(v), 6) if math.isfinite(float(v)) else None for v in row] for row in grid]


FULL_BATCH_HALVES = 40  # a full-batch measure's interval: half-samples, each recomputing every cell


def _permute(rows: torch.Tensor, perm: torch.Tensor, n: int, keep: int | None = None) -> torch.Tensor:
    """Examples ``perm`` of ``rows`` [n, D] or [n*N, D] (tokens as rows, grouped per example): a permutation,
    or ``keep`` of them (a half-sample: [keep, D] or [keep*N, D])."""
    picked = rows.reshape(n, -1, rows.shape[-1])[perm]
    return picked.reshape(-1, rows.shape[-1]) if keep is not None else picked.reshape(rows.shape)
