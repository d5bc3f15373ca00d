"""Closed-form adapter fits (Csiszárik et al. 2021, "direct matching").

A linear adapter fitted by least squares on cached activations is a strong
start and often close to a task-trained one.  Every pixel of a map and every
token counts as one sample; the normal equations are accumulated in float64
batch by batch (:class:`LstsqAccumulator`), with a small ridge, and solved as a
C x C system: never a pseudo-inverse of the (N*H*W) x C data matrix.

The linear maps such fits set (:class:`ChannelLinear`, :class:`LowRankLinear`) live in
:mod:`stitchcore.stitching.layers`, below both this module and the adapter kinds.

>>> acc = LstsqAccumulator(2, 1, ridge=0.0)
>>> x = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, 3.0]])
>>> acc.update(x, x @ torch.tensor([[2.0], [-1.0]]) + 0.5)
>>> w, b, residual = acc.solve()
>>> [round(v, 6) for v in w.flatten().tolist()], round(b.item(), 6), residual < 1e-12
([2.0, -1.0], 0.5, True)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from stitchcore.errors import AdapterError
from stitchcore.stitching.layers import to_rows

if TYPE_CHECKING:
    from stitchcore.stitching.adapters import Adapter

__all__ = [
    "Moments", "LstsqAccumulator", "reduced_rank", "procrustes",
    "AdapterFit", "fit_adapter", "FIT_METHODS", "fit_lin", "lin_rows", "moments_from_sums", "residual", "ridge_solve",
    "squared_error", "write_fit",
]  # fmt: skip

logger = logging.getLogger(__name__)

FIT_METHODS = ("lstsq", "procrustes")


@dataclass(frozen=True)
class Moments:
    """First and second moments of the fit data (float64, CPU)."""

    n: int  # samples seen (pixels, tokens or examples)
    mean_x: torch.Tensor  # [C_in]
    mean_y: torch.Tensor  # [C_out]
    cov_xx: torch.Tensor  # [C_in, C_in] population covariance of x
    cov_xy: torch.Tensor  # [C_in, C_out] cross-covariance E[(x - mean_x)(y - mean_y)^T]
    var_y: float  # total variance of y (trace of its covariance)
    sq_y: float  # E|y|^2, the residual's normaliser


class LstsqAccumulator:
    """Least squares ``y ~ W x + b`` from batches of samples, through float64 moments.

    Every batch is shifted by the first batch's means before its products are
    summed, so activations with large means keep their precision.
    """

    def __init__(self, c_in: int, c_out: int, ridge: float = 1e-4) -> None:
        for name, v in (("c_in", c_in), ("c_out", c_out)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise AdapterError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not 0 <= ridge < math.inf:
            raise AdapterError(f"ridge must be a finite number >= 0 (1e-4 is a good default), got {ridge!r}")
        self.c_in, self.c_out = c_in, c_out
        self.ridge = float(ridge)  # lambda = ridge * trace(cov_xx) / c_in; the bias is not penalised
        self.n = 0  # samples seen
        self._shift: tuple[torch.Tensor, torch.Tensor] | None = None  # first batch's (x, y) means
        self._sums: dict[str, torch.Tensor] = {}  # xtx [C_in,C_in], xty [C_in,C_out], sx, sy, syy (shifted)

    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add samples: ``x`` [n, C_in] inputs and ``y`` [n, C_out] targets, any float dtype or device."""
        widths = (x.shape[-1], y.shape[-1]) if x.dim() == y.dim() == 2 else None
        if widths != (self.c_in, self.c_out) or len(x) != len(y):
            raise AdapterError(
                f"lstsq update needs x [n, {self.c_in}] and y [n, {self.c_out}] with the same n, got "
                f"{list(x.shape)} and {list(y.shape)}; flatten pixels/tokens into rows first"
            )
        if len(x) == 0:
            return
        if self._shift is None:  # MPS has no float64: accumulate on the CPU there
            device = torch.device("cpu") if x.device.type == "mps" else x.device
        else:
            device = self._sums["xtx"].device
        x, y = x.detach().to(device, torch.float64), y.detach().to(device, torch.float64)
        if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
            raise AdapterError("non-finite activations (NaN/inf) to fit on; check the models and inputs")
        if self._shift is None:
            self._shift = (x.mean(0), y.mean(0))
            self._sums = {
                "xtx": x.new_zeros(self.c_in, self.c_in), "xty": x.new_zeros(self.c_in, self.c_out),
                "sx": x.new_zeros(self.c_in), "sy": x.new_zeros(self.c_out), "syy": x.new_zeros(()),
            }  # fmt: skip
        x, y = x - self._shift[0], y - self._shift[1]
        s = self._sums
        s["xtx"] += x.T @ x  # [C_in, C_in]
        s["xty"] += x.T @ y  # [C_in, C_out]
        s["sx"] += x.sum(0)
        s["sy"] += y.sum(0)
        s["syy"] += (y * y).sum()
        self.n += len(x)

    def moments(self) -> Moments:
        """Means and covariances of everything seen so far."""
        if self.n == 0 or self._shift is None:
            raise AdapterError("no samples to fit on; pass at least one non-empty (sender, receiver) batch")
        s = {k: v.cpu() for k, v in self._sums.items()}
        return moments_from_sums(self.n, s["sx"], s["sy"], s["xtx"], s["xty"], float(s["syy"]),
                                 *(t.cpu() for t in self._shift))  # fmt: skip

    def solve(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(W [C_out, C_in], b [C_out], normalised residual) of the ridge least squares; float64, CPU."""
        m = self.moments()
        w = ridge_solve(m.cov_xx, m.cov_xy, self.ridge)
        b = m.mean_y - w @ m.mean_x
        return w, b, self.residual(w, b, m)

    def residual(self, w: torch.Tensor, b: torch.Tensor, moments: Moments | None = None) -> float:
        """|X W^T + b - Y|^2 / |Y|^2 over the samples seen, from the moments alone."""
        return residual(moments if moments is not None else self.moments(), w, b)


def moments_from_sums(n: int, sx: torch.Tensor, sy: torch.Tensor, xtx: torch.Tensor, xty: torch.Tensor,
                      syy: float, shift_x: torch.Tensor, shift_y: torch.Tensor) -> Moments:  # fmt: skip
    """The moments of ``n`` samples from their sums after subtracting ``shift_x`` [C_in] and ``shift_y`` [C_out]
    (float64, CPU): sums ``sx`` [C_in], ``sy`` [C_out], ``xtx`` [C_in, C_in], ``xty`` [C_in, C_out], ``syy`` (of |y|²)."""
    mx, my = sx / n, sy / n  # shifted means
    cov_xx = xtx / n - torch.outer(mx, mx)
    cov_xy = xty / n - torch.outer(mx, my)
    var_y = max(syy / n - float(my @ my), 0.0)
    mean_x, mean_y = mx + shift_x, my + shift_y
    return Moments(n, mean_x, mean_y, (cov_xx + cov_xx.T) / 2, cov_xy, var_y, var_y + float(mean_y @ mean_y))


def squared_error(m: Moments, w: torch.Tensor, b: torch.Tensor) -> float:
    """E|y - W x - b|^2 over the samples ``m`` describes, from the moments alone (``w`` [C_out, C_in])."""
    w, b = w.detach().cpu().double(), b.detach().cpu().double()
    d = m.mean_y - w @ m.mean_x - b
    # E|y - Wx - b|^2 = tr cov_yy - 2 tr(W cov_xy) + tr(W cov_xx W^T) + |d|^2
    quad = float(((w @ m.cov_xx) * w).sum())  # tr(W cov_xx W^T)
    return m.var_y - 2 * float((w.T * m.cov_xy).sum()) + quad + float(d @ d)


def residual(m: Moments, w: torch.Tensor, b: torch.Tensor) -> float:
    """|X W^T + b - Y|^2 / |Y|^2 over the samples ``m`` describes (the normalised residual of a fit)."""
    err = squared_error(m, w, b)
    if m.sq_y <= 0:
        return 0.0 if err <= 0 else math.inf
    return max(err, 0.0) / m.sq_y


def ridge_solve(cov_xx: torch.Tensor, cov_xy: torch.Tensor, ridge: float) -> torch.Tensor:
    """W [C_out, C_in] solving (cov_xx + lambda I) W^T = cov_xy, lambda = ridge * trace(cov_xx) / C_in."""
    c = cov_xx.shape[0]
    trace = float(torch.trace(cov_xx))
    a = cov_xx + (ridge * trace / c if trace > 0 else ridge) * torch.eye(c, dtype=cov_xx.dtype)
    chol, info = torch.linalg.cholesky_ex(a)
    if ridge > 0 and int(info) == 0:
        return torch.cholesky_solve(cov_xy, chol).T.contiguous()
    # no ridge (or a singular system): the minimum-norm solution of the small C_in x C_in system
    return torch.linalg.lstsq(a, cov_xy, driver="gelsd").solution.T.contiguous()


def reduced_rank(w: torch.Tensor, cov_xx: torch.Tensor, rank: int) -> torch.Tensor:
    """The best rank-``rank`` map given the least-squares solution ``w`` [C_out, C_in] (reduced-rank
    regression): ``w`` projected onto the top principal directions of its fitted values."""
    if rank >= min(w.shape):
        return w
    _, vecs = torch.linalg.eigh(w @ cov_xx @ w.T)  # ascending eigenvalues
    v = vecs[:, -rank:]  # [C_out, rank]
    return v @ (v.T @ w)


def procrustes(m: Moments) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled orthogonal map ``y ~ s Q x + b``: Q = U V^T from the SVD of the cross-covariance.

    Q [C_out, C_in] is orthogonal when C_in == C_out, else semi-orthogonal
    (orthonormal rows or columns); s is the least-squares scale given Q.
    """
    u, _, vh = torch.linalg.svd(m.cov_xy.T, full_matrices=False)  # cov_yx [C_out, C_in] = U S V^T
    q = u @ vh  # [C_out, C_in]
    denom = float(torch.trace(q @ m.cov_xx @ q.T))
    w = (float(torch.trace(q @ m.cov_xy)) / denom if denom > 0 else 0.0) * q
    return w, m.mean_y - w @ m.mean_x


def _is_bn(m: nn.Module) -> bool:
    return isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))


@torch.no_grad()
def _set_bn(bn: nn.Module, mean: torch.Tensor, var: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    for buf, value in ((bn.running_mean, mean), (bn.running_var, var), (bn.weight, weight), (bn.bias, bias)):
        buf.copy_(value)


class AdapterFit:
    """One adapter's closed-form fit fed batch by batch: :meth:`update` with each (sender, receiver)
    batch of the same inputs, then :meth:`finish` writes the solution into the adapter.

    :func:`fit_adapter` reads an iterable of pairs through it; a caller that streams one forward pass
    into many adapters keeps one ``AdapterFit`` per adapter.
    """

    def __init__(self, adapter: Adapter, method: str = "lstsq", ridge: float = 1e-4) -> None:
        lin = fit_lin(adapter, method)
        self.adapter, self.lin, self.method = adapter, lin, method
        self.acc = LstsqAccumulator(lin.in_features, adapter.plan.c_out, ridge)
        self._cls_sum: torch.Tensor | None = None  # receiver class tokens' sum [D] and count
        self._cls_n = 0

    @torch.no_grad()
    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add a sender batch ``x`` [B, *sender] and the receiver batch ``y`` [B, *receiver] of the same inputs."""
        if len(x) != len(y):
            raise AdapterError(f"sender and receiver batches differ ({len(x)} vs {len(y)}); pair them up")
        adapter = self.adapter
        was_training = adapter.training
        adapter.eval()
        try:
            xr = lin_rows(adapter, x, self.method)  # [n, in_features], what the linear map sees before bn_before
            yr = to_rows(adapter.targets(y))  # [n, C_out], what the core must produce
            self.acc.update(xr, yr)
            if adapter.cls_offset is not None:  # receiver class token [B, D]
                cls = y[:, 0].detach().cpu().double().sum(0)
                self._cls_sum = cls if self._cls_sum is None else self._cls_sum + cls
                self._cls_n += len(y)
        finally:
            adapter.train(was_training)

    def finish(self) -> float:
        """Solve, write W, b and the BatchNorms into the adapter; the normalised residual of the linear part."""
        m = self.acc.moments()
        w = ridge_solve(m.cov_xx, m.cov_xy, self.acc.ridge) if self.method == "lstsq" else None
        cls_mean = self._cls_sum / self._cls_n if self._cls_sum is not None else None
        return write_fit(self.adapter, self.method, m, w, cls_mean)


def fit_lin(adapter: Adapter, method: str) -> nn.Module:
    """The linear map a closed-form ``method`` fit sets in ``adapter``; AdapterError when it has none."""
    if method not in FIT_METHODS:
        raise AdapterError(f"unknown fit method {method!r}; valid: {', '.join(FIT_METHODS)}")
    lin = getattr(adapter.core, "linear", None)
    if not getattr(adapter.core, "fittable", False) or lin is None:
        raise AdapterError(
            f"{method} init needs a linear adapter (kind linear or lowrank), got kind {adapter.spec.kind!r}; "
            "use kind='linear' or init='random'"
        )
    return lin


def lin_rows(adapter: Adapter, x: torch.Tensor, method: str = "lstsq") -> torch.Tensor:
    """The rows ``[n, in_features]`` the adapter's fitted linear map sees for sender activations ``x`` [B, *sender]
    (resampled by ``adapter.prepare``, before bn_before; half precision read as float32)."""
    x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    prepared = adapter.prepare(x)
    if hasattr(adapter.core, "resized"):  # a chained rescale: its first core's input, the later ones at identity
        prepared = adapter.core.resized(prepared)
    return fit_lin(adapter, method).rows(prepared)


def write_fit(adapter: Adapter, method: str, m: Moments, w: torch.Tensor | None,
              cls_mean: torch.Tensor | None) -> float:  # fmt: skip
    """Write the fit of ``m`` into the adapter (BN before, linear, BN after, class token offset) and return the
    normalised residual of its linear part.  ``w`` [C_out, C_in]: the ridge solution of ``m`` (lstsq; a
    caller that solved many fits at once passes its rows), None for procrustes."""
    lin = fit_lin(adapter, method)
    w, b = (w, m.mean_y - w @ m.mean_x) if method == "lstsq" else procrustes(m)
    if getattr(lin, "rank", None) is not None:
        w = reduced_rank(w, m.cov_xx, lin.rank)
        b = m.mean_y - w @ m.mean_x
    res = residual(m, w, b)
    _load(adapter, lin, m, w, b, cls_mean)
    if hasattr(adapter.core, "fit_through"):  # a chained rescale: the later cores and norms at identity
        adapter.core.fit_through()
    logger.info("%s fit, %s adapter on %d samples: residual %.4g", method, adapter.spec.kind, m.n, res)
    return res


def fit_adapter(
    adapter: Adapter,
    pairs: Iterable[tuple[torch.Tensor, torch.Tensor]],
    method: str = "lstsq",
    ridge: float = 1e-4,
) -> float:
    """Fit the adapter's linear core in closed form so that ``adapter(x) ~ y`` in eval mode.

    ``pairs`` yields (sender batch in the sender layout, receiver batch in the
    receiver layout) from the same inputs; it is read once.  The inputs go through
    ``adapter.prepare`` (the layout conversion and resampling of forward) and the
    targets through ``adapter.targets``.  W and b are solved on the prepared
    features; then bn_before gets their per-channel statistics (weight 1, bias 0)
    and the solution is rewritten for the normalised inputs, and bn_after is set
    to the identity at eval (running stats of the prediction with weight
    sqrt(var + eps) and bias mean, so train-mode batch statistics stay close to
    the identity too).  In eval mode the adapter then computes exactly the
    least-squares prediction.  ``lowrank`` uses reduced-rank regression;
    ``linear_relu`` fits its linear part only (the ReLU is applied after);
    ``procrustes`` fits a scaled orthogonal map plus bias.  A receiver class token
    gets ``cls_offset`` = mean(y_cls) - mean(patch prediction).

    Returns the normalised residual |pred - y|^2 / |y|^2 of the linear part (class
    token excluded).  The adapter's train/eval mode is restored.
    """
    fit = AdapterFit(adapter, method, ridge)
    for x, y in pairs:
        fit.update(x, y)
    return fit.finish()


@torch.no_grad()
def _load(
    adapter: Adapter,
    lin: nn.Module,
    m: Moments,
    w: torch.Tensor,
    b: torch.Tensor,
    cls_mean: torch.Tensor | None,
) -> None:
    """Write the raw-feature solution (w, b) into bn_before / linear / bn_after / cls_offset."""
    w_z, b_z = w, b
    if _is_bn(adapter.bn_before):
        bn, c_in = adapter.bn_before, adapter.plan.c_in
        kk = lin.in_features // c_in  # columns per channel (kh * kw of a strided core)
        mean_col, ex2_col = m.mean_x, torch.diagonal(m.cov_xx) + m.mean_x**2
        mean_c = mean_col.view(c_in, kk).mean(1)  # [C_in]
        var_c = (ex2_col.view(c_in, kk).mean(1) - mean_c**2).clamp_min(0)
        _set_bn(bn, mean_c, var_c, torch.ones_like(mean_c), torch.zeros_like(mean_c))
        w_z = w * (var_c + bn.eps).sqrt().repeat_interleave(kk)  # x = sd * z + mean
        b_z = b + w @ mean_c.repeat_interleave(kk)
    lin.load_(w_z, b_z)
    pred_mean = w @ m.mean_x + b  # [C_out]
    if _is_bn(adapter.bn_after):
        bn = adapter.bn_after
        var = ((w @ m.cov_xx) * w).sum(1)  # diag(W cov_xx W^T), the prediction's variance
        _set_bn(bn, pred_mean, var, (var + bn.eps).sqrt(), pred_mean)
    if adapter.cls_offset is not None and cls_mean is not None:
        adapter.cls_offset.copy_(cls_mean - pred_mean)
