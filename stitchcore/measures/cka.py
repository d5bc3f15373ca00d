"""The linear-kernel machinery of CKA: Grams, U-centring, the unbiased HSIC, linear CKA and its minibatch
estimator (with the half-sample interval and the permutation null that :func:`~.similarity.similarity_matrix`
reports).

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

import math
from collections.abc import Sequence

import torch

from stitchcore.errors import StitchError
from stitchcore.measures.intervals import LEVEL

__all__ = ["HALF_SAMPLES", "MinibatchCKA", "cka_linear", "gram_centred", "gram_linear", "hsic_unbiased", "u_centre"]

_MIN_DEBIASED_BATCH = 4  # the unbiased HSIC divides by n(n-3) and (n-1)(n-2)
HALF_SAMPLES = 200  # minibatch CKA's interval: draws of a random half of every batch
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
            parts.append(self._half_hsics(grams_a, grams_b, chunk))
        stacked = tuple(torch.cat(t).to(self.cross.device) for t in zip(*parts))  # [R, ...] each
        self.half = stacked if self.half is None else tuple(h + s for h, s in zip(self.half, stacked))

    def _half_hsics(self, grams_a: torch.Tensor, grams_b: torch.Tensor, keep: torch.Tensor,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """HSICs of the half-samples ``keep`` [r, m]: cross [r, n_a, n_b], A's own [r, n_a], B's own [r, n_b].

        Debiased: Song et al.'s formula from sums of the diagonal-free Grams (traces as one product of
        flattened Grams, row sums as another), the same numbers as U-centring each half-Gram, at a third
        of the passes over them.
        """
        r, m = keep.shape
        sub_a = grams_a[:, keep[:, :, None], keep[:, None, :]].transpose(0, 1)  # [r, n_a, m, m]
        sub_b = grams_b[:, keep[:, :, None], keep[:, None, :]].transpose(0, 1)  # [r, n_b, m, m]
        if not self.debiased:
            ua, ub = (_centre_gram(g).reshape(r, g.shape[1], -1) / (m - 1) for g in (sub_a, sub_b))
            return ua @ ub.transpose(1, 2), ua.square().sum(2), ub.square().sum(2)
        eye = torch.eye(m, dtype=torch.bool, device=sub_a.device)
        ka, kb = sub_a.masked_fill_(eye, 0.0), sub_b.masked_fill_(eye, 0.0)  # K̃: zero diagonals (copies)
        fa, fb = ka.reshape(r, ka.shape[1], -1), kb.reshape(r, kb.shape[1], -1)  # [r, L, m*m]
        ra, rb = ka.sum(-1), kb.sum(-1)  # row sums [r, L, m]
        sa, sb = ra.sum(-1), rb.sum(-1)  # totals [r, L]
        c1, c2, c3 = 1.0 / ((m - 1) * (m - 2)), 2.0 / (m - 2), 1.0 / (m * (m - 3))

        def hsic(trace: torch.Tensor, totals: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            return (trace + c1 * totals - c2 * rows) * c3

        cross = hsic(fa @ fb.transpose(1, 2), sa[:, :, None] * sb[:, None, :], ra @ rb.transpose(1, 2))
        own_a = hsic(fa.square().sum(2), sa.square(), ra.square().sum(2))
        own_b = hsic(fb.square().sum(2), sb.square(), rb.square().sum(2))
        return cross, own_a, own_b

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
