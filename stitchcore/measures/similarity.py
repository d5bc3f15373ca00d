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

**Minibatch CKA** (Nguyen, Raghu & Kornblith 2021): per batch, the linear Gram
``K = X Xᵀ`` [B, B] of every layer (of column-centred X, in float32: :func:`gram_centred`), the unbiased HSIC of Song et al. 2012
summed over batches, then ``CKA = ΣHSIC(K, L) / sqrt(ΣHSIC(K, K) · ΣHSIC(L, L))``.
The unbiased HSIC is an inner product: with K̃ = K with a zero diagonal, r = K̃1 and
s = 1ᵀK̃1, the *U-centred* Gram (Székely & Rizzo 2014)

    U(K)_ij = K̃_ij − (r_i + r_j)/(n − 2) + s/((n − 1)(n − 2))   (i ≠ j),   U(K)_ii = 0

satisfies ``HSIC_u(K, L) = ⟨U(K), U(L)⟩_F / (n(n − 3))``.  So stacking the flattened
U(K) of all n_a layers of A as rows [n_a, B*B] and of B as [n_b, B*B] gives every
cross HSIC of a batch from ONE matrix product (:class:`MinibatchCKA`).  Small-batch
HSIC is biased even so for deep, low-rank layers: :func:`similarity_matrix` can also
report a shuffled-input baseline.
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
from stitchcore.measures.intervals import LEVEL
from stitchcore.registry import Registry
from stitchcore.stitching.activations import memory_budget_bytes

__all__ = ["Measure", "MinibatchCKA", "cka_linear", "cka_rbf", "features_at", "flatten", "get_measure"]
__all__ += ["gram_centred", "gram_linear", "hsic_unbiased", "list_measures", "procrustes_distance", "register_measure"]
__all__ += ["similarity_matrix", "u_centre"]

log = logging.getLogger(__name__)

TOKEN_MODES = ("mean", "tokens")
_MIN_DEBIASED_BATCH = 4  # the unbiased HSIC divides by n(n-3) and (n-1)(n-2)


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


_GRAM_CHUNK = 2048  # feature columns cast to float64 at a time: a [256, 2048] block stays in cache


def gram_linear(x: torch.Tensor) -> torch.Tensor:
    """Linear-kernel Gram ``X Xᵀ`` accumulated in float64: [n, p] -> [n, n].

    Float32 features are cast to float64 a column block at a time (products of float32
    values are exact in float64); casting the whole [n, p] at once costs more than the product.
    """
    x = x.reshape(x.shape[0], -1)
    if x.dtype == torch.float64 or x.shape[1] <= _GRAM_CHUNK:
        x = x.double()
        return x @ x.T
    g = torch.zeros(x.shape[0], x.shape[0], dtype=torch.float64, device=x.device)
    for start in range(0, x.shape[1], _GRAM_CHUNK):
        block = x[:, start : start + _GRAM_CHUNK].double()  # [n, chunk]
        g.addmm_(block, block.T)
    return g


def gram_centred(x: torch.Tensor) -> torch.Tensor:
    """Linear Gram of column-centred features, for HSIC: [n, p] -> [n, n] float64.

    Centring the columns (X − 1μᵀ) changes ``X Xᵀ`` only by row and column constants, which
    U-centring and double centring remove, so every HSIC is unchanged.  It keeps the products
    small, so the Gram is computed in float32 (twice as fast as float64; float64 inputs stay
    float64) and every CKA stays within 1e-6 of the float64 :func:`gram_linear` one.

    >>> x = torch.rand(8, 3, dtype=torch.float64)
    >>> bool(torch.allclose(u_centre(gram_centred(x)), u_centre(gram_linear(x))))
    True
    """
    x = x.reshape(x.shape[0], -1)
    x = x.double() if x.dtype == torch.float64 else x.float()
    x = x - x.mean(0)  # [n, p]: the one copy, needed for the precision
    return (x @ x.T).double()


def hsic_unbiased(k: torch.Tensor, l: torch.Tensor) -> torch.Tensor:
    """Song et al. 2012 unbiased HSIC, the direct formula: Grams [n, n] -> scalar (n >= 4)."""
    n = k.shape[0]
    k = k.clone().fill_diagonal_(0)
    l = l.clone().fill_diagonal_(0)
    kl1 = (k.sum(0) * l.sum(1)).sum()  # 1ᵀ K̃ L̃ 1
    trace = (k * l.T).sum()  # tr(K̃ L̃)
    return (trace + k.sum() * l.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * kl1) / (n * (n - 3))


def u_centre(k: torch.Tensor) -> torch.Tensor:
    """U-centring of Grams [..., n, n] (n >= 4): ⟨U(K), U(L)⟩ / (n(n-3)) is the unbiased HSIC."""
    n = k.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=k.device)
    k = k.masked_fill(eye, 0.0)
    row = k.sum(-1)  # [..., n]
    total = row.sum(-1)[..., None, None]  # [..., 1, 1]
    u = k - (row[..., :, None] + row[..., None, :]) / (n - 2) + total / ((n - 1) * (n - 2))
    return u.masked_fill_(eye, 0.0)


def _centre_gram(k: torch.Tensor) -> torch.Tensor:
    """Textbook double centring H K H of Grams [..., n, n] (H = I - 11ᵀ/n)."""
    k = k - k.mean(-1, keepdim=True)
    return k - k.mean(-2, keepdim=True)


def _cka_from_grams(k: torch.Tensor, l: torch.Tensor, debiased: bool) -> torch.Tensor:
    if debiased:
        hkl, hkk, hll = hsic_unbiased(k, l), hsic_unbiased(k, k), hsic_unbiased(l, l)
    else:
        kc, lc = _centre_gram(k), _centre_gram(l)
        hkl, hkk, hll = (kc * lc).sum(), (kc * kc).sum(), (lc * lc).sum()
    return hkl / torch.sqrt(hkk * hll)


def _check_pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = x.reshape(x.shape[0], -1).double(), y.reshape(y.shape[0], -1).double()
    if x.shape[0] != y.shape[0]:
        raise StitchError(f"X has {x.shape[0]} rows and Y {y.shape[0]}; compare representations of the "
                          "same inputs (with token_mode='tokens' both sides need the same token count)")
    return x, y


def cka_linear(x: torch.Tensor, y: torch.Tensor, *, debiased: bool = False) -> torch.Tensor:
    """Full-batch linear CKA of X [n, p] and Y [n, q] -> symmetric scalar float64 tensor in [0, 1].

    Biased HSIC with textbook centring (Kornblith et al. 2019):
    ``‖YᶜᵀXᶜ‖²_F / (‖XᶜᵀXᶜ‖_F ‖YᶜᵀYᶜ‖_F)``; ``debiased=True`` uses the unbiased HSIC (n >= 4).
    """
    x, y = _check_pair(x, y)
    if debiased:
        _check_batch(x.shape[0])
        return _cka_from_grams(gram_linear(x), gram_linear(y), True)
    x, y = x - x.mean(0), y - y.mean(0)
    num = (y.T @ x).square().sum()
    return num / ((x.T @ x).norm() * (y.T @ y).norm())


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


def _check_batch(n: int) -> None:
    if n < _MIN_DEBIASED_BATCH:
        raise StitchError(f"debiased CKA needs batches of at least {_MIN_DEBIASED_BATCH} examples; "
                          f"raise the batch size (got {n})")


class MinibatchCKA:
    """Minibatch linear CKA of every layer pair (Nguyen, Raghu & Kornblith 2021): Grams in float32 of
    centred features (:func:`gram_centred`), U-centring and HSIC sums in float64.

    >>> m = MinibatchCKA(2, 1)
    >>> a, b = torch.randn(32, 5), torch.randn(32, 3)
    >>> m.update([a, a @ torch.randn(5, 5)], [b])
    >>> m.compute().shape
    torch.Size([2, 1])
    """

    def __init__(self, n_a: int, n_b: int, debiased: bool = True) -> None:
        if n_a < 1 or n_b < 1:
            raise StitchError(f"MinibatchCKA needs at least one layer per side, got n_a={n_a}, n_b={n_b}")
        self.n_a, self.n_b, self.debiased = n_a, n_b, debiased
        self.cross = torch.zeros(n_a, n_b, dtype=torch.float64)  # Σ HSIC(K_i, L_j)
        self.self_a = torch.zeros(n_a, dtype=torch.float64)  # Σ HSIC(K_i, K_i)
        self.self_b = torch.zeros(n_b, dtype=torch.float64)  # Σ HSIC(L_j, L_j)
        self.batches = 0
        self.null_cross: torch.Tensor | None = None  # [K, n_a, n_b]: Σ HSIC(K_i, L_j) with B's rows permuted
        # half-samples (the interval): each draw keeps a random half of every batch's examples
        self.half: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # Σ cross, self_a, self_b [R, ...]

    def _centred_rows(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        """Layers' features [B, ...] each -> stacked centred Grams [n_layers, B*B] (scaled for HSIC)."""
        return self._rows(torch.stack([gram_centred(f) for f in feats]))  # Grams [L, B, B] float64

    def _rows(self, grams: torch.Tensor) -> torch.Tensor:
        """Grams [L, n, n] -> U-centred (or centred) and scaled for HSIC, flattened [L, n*n]."""
        n = grams.shape[-1]
        if self.debiased:
            return u_centre(grams).reshape(len(grams), -1) / math.sqrt(n * (n - 3))
        return _centre_gram(grams).reshape(len(grams), -1) / (n - 1)

    def update(self, feats_a: Sequence[torch.Tensor], feats_b: Sequence[torch.Tensor],
               perms: Sequence[torch.Tensor] = (), halves: torch.Generator | None = None) -> None:  # fmt: skip
        """Add one batch: ``feats_a`` n_a tensors [B, ...] of model A, ``feats_b`` n_b tensors [B, ...];
        ``perms``: the null's permutations of this batch's B rows (int64 [B] each, the same count every batch);
        ``halves``: a generator to draw this batch's half-samples from (the interval; see :meth:`interval`)."""
        if len(feats_a) != self.n_a or len(feats_b) != self.n_b:
            raise StitchError(f"expected {self.n_a} A and {self.n_b} B layers, got {len(feats_a)} and "
                              f"{len(feats_b)}; pass one tensor per layer in a fixed order")
        rows = {f.shape[0] for f in (*feats_a, *feats_b)}
        if len(rows) != 1:
            raise StitchError(f"layers have different batch sizes {sorted(rows)}; feed the same examples "
                              "to every layer (token_mode='mean' for token layers)")
        n = rows.pop()
        if self.debiased:
            _check_batch(n)
        grams_a = torch.stack([gram_centred(f) for f in feats_a])  # [n_a, B, B] float64
        grams_b = torch.stack([gram_centred(f) for f in feats_b])  # [n_b, B, B]
        ua, ub = self._rows(grams_a), self._rows(grams_b)  # [n_a, B*B], [n_b, B*B]
        dev = self.cross.device
        self.cross += (ua @ ub.T).to(dev)  # every cross HSIC in one product
        self.self_a += ua.square().sum(1).to(dev)
        self.self_b += ub.square().sum(1).to(dev)
        if halves is not None:
            self._add_halves(grams_a, grams_b, halves)
        if perms:  # B's examples permuted: its Gram's rows and columns permuted, no second forward pass
            grams_b = ub.reshape(self.n_b, n, n)
            null = torch.stack([ua @ grams_b[:, p][:, :, p].reshape(self.n_b, -1).T for p in perms]).to(dev)
            self.null_cross = null if self.null_cross is None else self.null_cross + null
        self.batches += 1

    def compute(self) -> torch.Tensor:
        """CKA [n_a, n_b] float64; NaN where a layer's HSIC with itself is not positive (constant layer)."""
        if self.batches == 0:
            raise StitchError("MinibatchCKA saw no batch; call update() with at least one batch first")
        denom = torch.sqrt(torch.outer(self.self_a, self.self_b))
        return self.cross / denom

    def null(self) -> torch.Tensor | None:
        """CKA [K, n_a, n_b] with B's examples permuted within each batch (K permutations), or None."""
        if self.null_cross is None:
            return None
        return self.null_cross / torch.sqrt(torch.outer(self.self_a, self.self_b))

    def _add_halves(self, grams_a: torch.Tensor, grams_b: torch.Tensor, gen: torch.Generator) -> None:
        """HALF_SAMPLES draws of this batch, each keeping a random half of its examples (all of a batch too
        small to halve: at least 4 either way)."""
        n = grams_a.shape[-1]
        m = n // 2 if n // 2 >= _MIN_DEBIASED_BATCH else n
        keep = torch.stack([torch.randperm(n, generator=gen)[:m] for _ in range(HALF_SAMPLES)])  # [R, m]
        parts = []
        for chunk in keep.split(max(1, 2**22 // (m * m * (self.n_a + self.n_b)))):  # [r, m]: ~32 MB of Grams
            ua = self._half_rows(grams_a, chunk)  # [r, n_a, m*m]
            ub = self._half_rows(grams_b, chunk)  # [r, n_b, m*m]
            parts.append((ua @ ub.transpose(1, 2), ua.square().sum(2), ub.square().sum(2)))
        stacked = tuple(torch.cat(t).to(self.cross.device) for t in zip(*parts))  # [R, ...] each
        self.half = stacked if self.half is None else tuple(h + s for h, s in zip(self.half, stacked))

    def _half_rows(self, grams: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Grams [L, n, n] kept at ``keep`` [r, m] rows and columns -> [r, L, m*m] scaled for HSIC."""
        r, m = keep.shape
        sub = grams[:, keep[:, :, None], keep[:, None, :]].transpose(0, 1)  # [r, L, m, m]
        scale = math.sqrt(m * (m - 3)) if self.debiased else m - 1
        centred = u_centre(sub) if self.debiased else _centre_gram(sub)
        return centred.reshape(r, len(grams), -1) / scale

    def interval(self, level: float = LEVEL) -> torch.Tensor | None:
        """[2, n_a, n_b]: each cell's interval from the half-samples (None without them).

        A half-sample's value differs from the whole stream's as much as the whole stream's differs from the
        truth (without replacement, Var(half) - Var(whole) = Var(whole) for a statistic with variance ~1/n),
        so the half-samples' percentiles are the interval; no example is drawn twice (the debiased HSIC is a
        U-statistic: a bootstrap's repeated examples would bias it).
        """
        if self.half is None:
            return None
        c, a, b = self.half
        draws = c / torch.sqrt(a[:, :, None] * b[:, None, :])  # [R, n_a, n_b]
        q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
        return torch.nanquantile(draws.double(), q, dim=0)


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
HALF_SAMPLES = 200  # minibatch CKA's interval: draws of a random half of every batch


def _permute(rows: torch.Tensor, perm: torch.Tensor, n: int, keep: int | None = None) -> torch.Tensor:
    """Examples ``perm`` of ``rows`` [n, D] or [n*N, D] (tokens as rows, grouped per example): a permutation,
    or ``keep`` of them (a half-sample: [keep, D] or [keep*N, D])."""
    picked = rows.reshape(n, -1, rows.shape[-1])[perm]
    return picked.reshape(-1, rows.shape[-1]) if keep is not None else picked.reshape(rows.shape)
