"""Carrying what was learned about A's representation through a fitted stitch into B's (issue 43): a linear probe
and a steering direction.

Probes read **pooled** activations (maps averaged over space, tokens over positions: :func:`~stitchcore.measures.
probe_kl.pooled`).  A stitch's linear adapter maps A's cut to B's position by position, and averaging commutes with
a linear map, so on pooled features it is ``b ≈ M a + t`` with ``M`` [D_B, D_A] (:func:`pooled_map`; a strided patch
kernel sums its offsets).  Then

* a probe fitted on A, ``logits = ((a − μ) / σ) W + c``, is **carried** to B by reading A's features back from B's
  through the adapter (:func:`carried_probe`: its pseudo-inverse, or the least-squares read-back under the same
  adapter given A's covariance and the fit's residual): a probe on B with no fitting;
* a steering direction on A (a difference of class means) is carried forward, ``d_B = M d_A``.

>>> g = torch.Generator().manual_seed(0)
>>> y = torch.arange(200) % 2
>>> a = torch.randn(200, 3, generator=g) + y[:, None] * 2.0  # A's pooled features; class 1 sits higher
>>> m = torch.randn(4, 3, generator=g)
>>> b = a @ m.T + 1.0  # B's: a linear map of A's (what a perfect adapter would say)
>>> probe = fit_probe(a, y, 2)
>>> bool((carried_probe(probe, m, torch.ones(4)).predict(b) == probe.predict(a)).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

RIDGE = 0.1  # the read-back's ridge, relative to the adapter's output variance (fixed before measuring)

__all__ = ["RIDGE", "Probe", "add_direction", "carried_probe", "class_direction", "fit_probe", "pooled_map"]


@dataclass
class Probe:
    """A multinomial logistic probe on standardised features: logits = ((x − mean) / std) @ w + b."""

    mean: torch.Tensor  # [D]
    std: torch.Tensor  # [D]
    w: torch.Tensor  # [D, K]
    b: torch.Tensor  # [K]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """[N, D] -> [N, K]."""
        return ((x.double() - self.mean) / self.std) @ self.w + self.b

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """[N, D] -> int64 [N], the class with the highest logit."""
        return self.logits(x).argmax(1)


def fit_probe(x: torch.Tensor, y: torch.Tensor, n_classes: int, *, l2: float = 1e-3, steps: int = 100) -> Probe:
    """A logistic probe fitted on ``x`` [N, D] (standardised by its own mean and spread), labels ``y`` [N]
    (L-BFGS, ``l2`` on the weights; also the probes of :mod:`~stitchcore.measures.probe_kl`)."""
    mean, std = x.double().mean(0), x.double().std(0).clamp_min(1e-6)
    z = (x.double() - mean) / std
    w = torch.zeros(x.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        value = F.cross_entropy(z @ w + b, y.long()) + l2 * w.pow(2).sum()
        value.backward()
        return value

    with torch.enable_grad():
        opt.step(loss)
    return Probe(mean, std, w.detach(), b.detach())


def carried_probe(probe: Probe, m: torch.Tensor, t: torch.Tensor, a: torch.Tensor | None = None,
                  ridge: float = RIDGE) -> Probe:
    """A's ``probe`` as a probe on B's pooled features, through the adapter ``b = m a + t`` (``m`` [D_B, D_A],
    ``t`` [D_B]): it reads A's features back from B's; nothing is fitted on B, and nothing of B's data is used.

    Without A's features the read-back is the pseudo-inverse, ``a = m⁺ (b − t)``.  With A's pooled training
    features ``a`` [N, D_A] it is the solution closest to A's data, ``a = μ + Σ mᵀ (m Σ mᵀ + λ I)⁻¹ (b − m μ − t)``
    (Σ A's covariance, λ = ``ridge`` × the mean of m Σ mᵀ's diagonal): directions A barely uses are not blown up
    from what the adapter did not predict (the pseudo-inverse's failure where m is nearly singular)."""
    m, t = m.double(), t.double()
    if a is None:
        k, mu = torch.linalg.pinv(m), torch.zeros(m.shape[1], dtype=torch.float64)  # [D_A, D_B]
    else:
        mu = a.double().mean(0)
        cov_a = torch.cov(a.double().T).reshape(m.shape[1], m.shape[1])
        s = m @ cov_a @ m.T
        s = s + torch.eye(len(s), dtype=torch.float64) * ridge * s.diagonal().mean().clamp_min(1e-12)
        k = torch.linalg.solve(s, m @ cov_a).T  # [D_A, D_B] = Σ mᵀ s⁻¹ (s symmetric)
    scaled = probe.w / probe.std[:, None]  # [D_A, K]
    w = k.T @ scaled  # [D_B, K]
    bias = probe.b + ((mu - k @ (m @ mu + t) - probe.mean) / probe.std) @ probe.w
    zeros, ones = torch.zeros(m.shape[0], dtype=torch.float64), torch.ones(m.shape[0], dtype=torch.float64)
    return Probe(zeros, ones, w, bias)


def class_direction(x: torch.Tensor, y: torch.Tensor, c: int) -> torch.Tensor:
    """The mean of class ``c``'s features minus the mean of the rest's: [N, D] -> [D]."""
    return x[y == c].double().mean(0) - x[y != c].double().mean(0)


def pooled_map(adapter: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """A fitted linear adapter (no BatchNorm) as a map of pooled features: (``m`` [D_B, D_A], ``t`` [D_B]).

    A patch kernel (a strided adapter) sums its offsets: the mean over B's positions of W_k applied at each
    offset k is W_k applied to A's mean, for every k."""
    core = adapter.core
    linear = getattr(core, "linear", core)
    weight = linear.weight.detach().double()  # [D_B, D_A] or [D_B, D_A, kh, kw]
    m = weight.reshape(weight.shape[0], weight.shape[1], -1).sum(-1)
    bias = getattr(linear, "bias", None)
    t = bias.detach().double() if isinstance(bias, torch.Tensor) else torch.zeros(m.shape[0], dtype=torch.float64)
    return m, t


def add_direction(h: torch.Tensor, d: torch.Tensor, layout: str) -> torch.Tensor:
    """A cut's activations ``h`` [N, *shape] with the pooled-space direction ``d`` [D] added at every position."""
    d = d.to(h.dtype).to(h.device)
    if layout == "map":
        return h + d.view(1, -1, 1, 1)  # [N, C, H, W]
    return h + d  # map_nhwc [N, H, W, C], tokens [N, T, D], vector [N, D]: the last dim
