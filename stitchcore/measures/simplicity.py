"""Simplicity measures of a classifier: gradient norm, loss sharpness, compressed size.

All three are computed on a fixed set of (input, label) batches with the mean
cross-entropy loss ``L(theta) = (1/N) sum_i CE(f_theta(x_i), y_i)``:

* **gradient norm** ``||grad_theta L||_2`` over the selected parameters, the
  full-batch gradient of the mean loss (batches are accumulated weighted by
  their size, so the answer does not depend on the batch size).
* **sharpness** ``S(eps) = (1/D) sum_d [L(theta + delta_d) - L(theta)]`` with, for
  every selected tensor ``t`` of ``n_t`` entries, ``delta_d,t ~ N(0, sigma_t^2 I)``
  and ``sigma_t = eps * ||theta_t||_F / sqrt(n_t)``, so ``E||delta_t||^2 =
  eps^2 ||theta_t||_F^2``: a perturbation of relative size ``eps`` per tensor.
  Draws come from a generator seeded with ``seed``; weights are restored exactly.
* **gzip size** of every parameter (not buffers), float32 little-endian bytes
  concatenated in ``named_parameters()`` order, ``gzip`` level 9 with mtime 0, in bits.

The Oxford report's own definitions sit beside these, each under its own name
(:func:`report_simplicity`): ``grad_norm_batch`` (mean over batches of the per-batch
gradient norm), ``sharpness_abs`` (an absolute perturbation of size ``REPORT_SIGMA``, one
draw per batch) and ``gzip_bits_all`` (every parameter), all over every parameter.

Which parameters count (gradient norm, sharpness): weights of every module;
biases when ``include_bias`` (default True); parameters of normalisation layers
(BatchNorm, LayerNorm, GroupNorm ...) when ``include_norm`` (default False: their
scale is arbitrary next to the weights they normalise).  The model is evaluated in
eval mode and left as found (training flag, ``requires_grad`` flags, weights).

>>> import torch
>>> m = torch.nn.Linear(2, 2)
>>> x, y = torch.zeros(4, 2), torch.zeros(4, dtype=torch.long)
>>> sharpness(m, [(x, y)], eps=0.0)["sharpness"]
0.0
"""

from __future__ import annotations

import contextlib
import gzip
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.device import module_device
from stitchcore.errors import StitchError

__all__ = [
    "GZIP_LEVEL",
    "REPORT_DEFINITIONS",
    "REPORT_KEYS",
    "REPORT_SIGMA",
    "SHARPNESS_DEFINITION",
    "gradient_norm",
    "gzip_bits",
    "report_simplicity",
    "select_params",
    "sharpness",
    "simplicity",
]

GZIP_LEVEL = 9  # highest zlib level: the size is a property of the weights, not of a speed trade-off
SHARPNESS_DEFINITION = (
    "S(eps) = mean over D draws of [L(theta + delta) - L(theta)], delta_t ~ N(0, sigma_t^2 I) per tensor t, "
    "sigma_t = eps * ||theta_t||_F / sqrt(n_t) (relative size eps); L = mean cross-entropy on the test set"
)

REPORT_SIGMA = 1e-3  # the report's absolute perturbation: delta ~ N(0, 1e-3^2) on every parameter entry
REPORT_KEYS = ("grad_norm_batch", "sharpness_abs", "gzip_bits_all")
REPORT_DEFINITIONS = {
    "grad_norm_batch": "mean over test batches b of ||grad L_b||_2, L_b the mean cross-entropy of batch b, over "
                       "every parameter (norm layers and the stitch included)",
    "sharpness_abs": "mean over test batches b of L_b(theta + delta_b) - L_b(theta), one draw delta_b ~ "
                     "N(0, sigma^2 I) per batch on every parameter, sigma absolute (1e-3)",
    "gzip_bits_all": f"gzip level {GZIP_LEVEL} of every parameter as float32 little-endian, in bits",
}  # fmt: skip

Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]  # (input [B, ...], label int64 [B])
_NORMS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm)


def select_params(
    model: nn.Module, *, include_bias: bool = True, include_norm: bool = False, exclude: Iterable[torch.Tensor] = ()
) -> list[nn.Parameter]:
    """Parameters the measures use, in ``named_parameters()`` order, each once (see the module docstring).

    ``exclude``: parameters left out whatever their kind (a stitched model's adapter, say).
    """
    norm_params = {id(p) for m in model.modules() if isinstance(m, _NORMS) for p in m.parameters(recurse=False)}
    out, seen = [], {id(p) for p in exclude}
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if id(p) in norm_params and not include_norm:
            continue
        if name.rsplit(".", 1)[-1] == "bias" and not include_bias:
            continue
        out.append(p)
    return out


@contextlib.contextmanager
def _measuring(model: nn.Module, params: list[nn.Parameter], grad: bool) -> Iterator[None]:
    """Eval mode and (optionally) gradients on ``params`` only; flags restored on exit."""
    training = model.training
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        model.eval()
        for p, _ in flags:
            p.requires_grad_(False)
        if grad:
            for p in params:
                p.requires_grad_(True)
        yield
    finally:
        for p, flag in flags:
            p.grad = None
            p.requires_grad_(flag)
        model.train(training)


def _materialize(batches: Batches) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = list(batches)
    if not out or sum(len(y) for _, y in out) == 0:
        raise StitchError("simplicity measures need at least one labelled example; pass a non-empty test set")
    return out


@torch.no_grad()
def _mean_loss(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    dev = module_device(model)
    total, n = 0.0, 0
    for x, y in batches:
        logits = model(x.to(dev))  # [B, K]
        total += F.cross_entropy(logits.float(), y.to(dev), reduction="sum").item()
        n += len(y)
    return total / n


def gradient_norm(
    model: nn.Module,
    batches: Batches,
    *,
    include_bias: bool = True,
    include_norm: bool = False,
    exclude: Iterable[torch.Tensor] = (),
) -> dict[str, Any]:
    """``||grad L||_2`` of the mean test cross-entropy over the selected parameters.

    Returns {"grad_norm", "loss", "n", "n_params"}.
    """
    batches = _materialize(batches)
    params = select_params(model, include_bias=include_bias, include_norm=include_norm, exclude=exclude)
    if not params:
        raise StitchError("the model has no parameters to measure; include biases or norm layers")
    n = sum(len(y) for _, y in batches)
    dev = module_device(model)
    grads = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    total = 0.0
    with _measuring(model, params, grad=True):
        for x, y in batches:
            loss = F.cross_entropy(model(x.to(dev)).float(), y.to(dev), reduction="sum")
            for g, gp in zip(grads, torch.autograd.grad(loss, params), strict=True):
                g += gp.double()
            total += loss.item()
    sq = sum(float((g / n).pow(2).sum()) for g in grads)
    return {"grad_norm": math.sqrt(sq), "loss": total / n, "n": n, "n_params": sum(p.numel() for p in params)}


def sharpness(
    model: nn.Module,
    batches: Batches,
    *,
    eps: float = 0.05,
    draws: int = 5,
    seed: int = 0,
    include_bias: bool = True,
    include_norm: bool = False,
    exclude: Iterable[torch.Tensor] = (),
) -> dict[str, Any]:
    """Mean loss increase under Gaussian weight perturbations of relative size ``eps`` (module docstring).

    Returns {"sharpness", "sharpness_std", "loss", "eps", "draws", "definition"}; weights are restored.
    """
    if eps < 0 or draws < 1:
        raise StitchError(f"sharpness needs eps >= 0 and draws >= 1, got eps={eps}, draws={draws}")
    batches = _materialize(batches)
    params = select_params(model, include_bias=include_bias, include_norm=include_norm, exclude=exclude)
    gen = torch.Generator().manual_seed(seed)
    saved = [p.detach().clone() for p in params]
    increases = []
    with _measuring(model, params, grad=False):
        base = _mean_loss(model, batches)
        try:
            for _ in range(draws):
                with torch.no_grad():
                    for p, p0 in zip(params, saved, strict=True):
                        sigma = eps * float(p0.norm()) / math.sqrt(max(p0.numel(), 1))
                        noise = torch.randn(p0.shape, generator=gen, dtype=torch.float32).to(p0.device, p0.dtype)
                        p.copy_(p0 + sigma * noise)
                increases.append(_mean_loss(model, batches) - base if eps > 0 else 0.0)
        finally:
            with torch.no_grad():
                for p, p0 in zip(params, saved, strict=True):
                    p.copy_(p0)
    arr = np.asarray(increases, dtype=np.float64)
    return {"sharpness": float(arr.mean()), "sharpness_std": float(arr.std()), "loss": base, "eps": eps,
            "draws": draws, "definition": SHARPNESS_DEFINITION}  # fmt: skip


def gzip_bits(model: nn.Module | Iterable[torch.Tensor]) -> dict[str, Any]:
    """Compressed size of the weights: float32 LE bytes of every parameter, gzip level 9, mtime 0.

    Returns {"gzip_bits", "raw_bits", "n_params", "bits_per_param"}.
    """
    tensors = list(model.parameters()) if isinstance(model, nn.Module) else list(model)
    seen, chunks = set(), []
    for t in tensors:
        if id(t) in seen:
            continue
        seen.add(id(t))
        chunks.append(t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes())
    raw = b"".join(chunks)
    n = len(raw) // 4
    bits = len(gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)) * 8
    return {"gzip_bits": bits, "raw_bits": len(raw) * 8, "n_params": n, "bits_per_param": bits / max(n, 1)}


def simplicity(
    model: nn.Module,
    batches: Batches | Callable[[], Batches],
    *,
    eps: float = 0.05,
    draws: int = 5,
    seed: int = 0,
    include_bias: bool = True,
    include_norm: bool = False,
    exclude: Iterable[torch.Tensor] = (),
) -> dict[str, Any]:
    """All three measures: {"grad_norm", "sharpness", "sharpness_std", "gzip_bits", "loss", ... "definition"}.

    ``exclude``d parameters stay out of all three (the gzip size counts every other parameter).
    """
    batches = _materialize(batches() if callable(batches) else batches)
    exclude = list(exclude)
    opts = {"include_bias": include_bias, "include_norm": include_norm, "exclude": exclude}
    out = gradient_norm(model, batches, **opts)
    out.update(sharpness(model, batches, eps=eps, draws=draws, seed=seed, **opts))
    skip = {id(p) for p in exclude}
    out.update(gzip_bits([p for p in model.parameters() if id(p) not in skip]))
    out.update(include_bias=include_bias, include_norm=include_norm)
    return out


def report_simplicity(model: nn.Module, batches: Batches, *, sigma: float = REPORT_SIGMA, seed: int = 0) -> dict[str, Any]:
    """The Oxford report's three measures over every parameter of ``model`` (:data:`REPORT_DEFINITIONS`).

    ``batches`` [(x [B, ...], y [B])] are the report's batches: the gradient norm is taken per batch and
    averaged, and each batch gets its own perturbation draw (from a generator seeded with ``seed``).
    Returns {"grad_norm_batch", "sharpness_abs", "gzip_bits_all", "report_sigma", "report_batches"}; the model
    is left as found (weights restored exactly).

    >>> m = torch.nn.Linear(2, 2)
    >>> out = report_simplicity(m, [(torch.ones(4, 2), torch.zeros(4, dtype=torch.long))])
    >>> sorted(out), out["report_batches"]
    (['grad_norm_batch', 'gzip_bits_all', 'report_batches', 'report_sigma', 'sharpness_abs'], 1)
    """
    if sigma < 0:
        raise StitchError(f"the report's perturbation size must be >= 0, got {sigma}")
    batches = _materialize(batches)
    params = list(dict.fromkeys(model.parameters()))  # every parameter, each once
    dev = module_device(model)
    norms = []
    with _measuring(model, params, grad=True):
        for x, y in batches:
            loss = F.cross_entropy(model(x.to(dev)).float(), y.to(dev))
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            norms.append(math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads if g is not None)))
    gen = torch.Generator().manual_seed(seed)
    saved = [p.detach().clone() for p in params]
    increases = []
    with _measuring(model, params, grad=False):
        try:
            for batch in batches:
                base = _mean_loss(model, [batch])
                with torch.no_grad():
                    for p, p0 in zip(params, saved, strict=True):
                        noise = torch.randn(p0.shape, generator=gen, dtype=torch.float32).to(p0.device, p0.dtype)
                        p.copy_(p0 + sigma * noise)
                increases.append(_mean_loss(model, [batch]) - base)
                with torch.no_grad():
                    for p, p0 in zip(params, saved, strict=True):
                        p.copy_(p0)
        finally:
            with torch.no_grad():
                for p, p0 in zip(params, saved, strict=True):
                    p.copy_(p0)
    return {"grad_norm_batch": float(np.mean(norms)), "sharpness_abs": float(np.mean(increases)),
            "gzip_bits_all": gzip_bits(params)["gzip_bits"], "report_sigma": sigma, "report_batches": len(batches)}
