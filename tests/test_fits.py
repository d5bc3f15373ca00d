"""Closed-form fits: the accumulator against numpy, and fit_adapter through every layout path."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch

import stitchcore.stitching.fits as fits_mod
from stitchcore.stitching.adapters import AdapterSpec, build_adapter
from stitchcore.cuts import Cut
from stitchcore.errors import AdapterError
from stitchcore.stitching.fits import LstsqAccumulator, fit_adapter, procrustes
from stitchcore.stitching.layers import to_rows


def cut(layout: str, *shape: int) -> Cut:
    return Cut(name="c", shape=tuple(shape), layout=layout, depth=0.5)


def batches(x: torch.Tensor, y: torch.Tensor, size: int = 97):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def synthetic(n=4000, c_in=6, c_out=4, noise=0.01, seed=0):
    g = torch.Generator().manual_seed(seed)
    scale = torch.linspace(0.5, 2.0, c_in, dtype=torch.float64)
    x = torch.randn(n, c_in, generator=g, dtype=torch.float64) * scale
    a = torch.randn(c_in, c_out, generator=g, dtype=torch.float64)
    b = torch.randn(c_out, generator=g, dtype=torch.float64)
    e = noise * torch.randn(n, c_out, generator=g, dtype=torch.float64)
    return x, a, b, e, x @ a + b + e


def test_lstsq_recovers_the_map_and_residual_is_the_noise_level():
    x, a, b, e, y = synthetic()
    acc = LstsqAccumulator(6, 4)
    for xb, yb in batches(x.float(), y.float()):
        acc.update(xb, yb)
    w, bias, residual = acc.solve()
    assert w.shape == (4, 6) and bias.shape == (4,) and w.dtype == torch.float64
    assert (w - a.T).norm() / a.norm() < 1e-3
    assert (bias - b).norm() / b.norm() < 1e-3
    noise = float((e**2).sum() / (y**2).sum())
    assert 0.8 * noise < residual < 1.2 * noise


@pytest.mark.parametrize("ridge", [0.0, 1e-3])
def test_batched_accumulation_equals_one_shot_numpy(ridge):
    x, _, _, _, y = synthetic(n=1000, noise=0.3, seed=1)
    x = x + 1e3  # large means: the shifted accumulation keeps float64 precision
    acc = LstsqAccumulator(6, 4, ridge=ridge)
    for xb, yb in batches(x, y, size=37):
        acc.update(xb, yb)
    w, b, residual = acc.solve()
    xn, yn = x.numpy(), y.numpy()
    xc, yc = xn - xn.mean(0), yn - yn.mean(0)
    if ridge == 0:
        sol = np.linalg.lstsq(np.c_[xn, np.ones(len(xn))], yn, rcond=None)[0]
        w_np, b_np = sol[:-1].T, sol[-1]
    else:
        cov = xc.T @ xc / len(xn)
        lam = ridge * np.trace(cov) / 6
        w_np = np.linalg.solve(cov + lam * np.eye(6), xc.T @ yc / len(xn)).T
        b_np = yn.mean(0) - w_np @ xn.mean(0)
    np.testing.assert_allclose(w.numpy(), w_np, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(b.numpy(), b_np, rtol=1e-7, atol=1e-7)
    direct = ((xn @ w_np.T + b_np - yn) ** 2).sum() / (yn**2).sum()
    assert residual == pytest.approx(direct, rel=1e-6)


def test_residual_of_any_map_matches_direct_computation():
    x, _, _, _, y = synthetic(n=500, seed=2)
    acc = LstsqAccumulator(6, 4)
    acc.update(x, y)
    w, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    direct = float(((x @ w.T + b - y) ** 2).sum() / (y**2).sum())
    assert acc.residual(w, b) == pytest.approx(direct, rel=1e-9)


def test_ridge_keeps_rank_deficient_inputs_finite():
    g = torch.Generator().manual_seed(3)
    base = torch.randn(300, 3, generator=g, dtype=torch.float64)
    zero = torch.zeros(300, 1, dtype=torch.float64)
    x = torch.cat([base, base[:, :1], zero, 2 * base[:, 1:2]], dim=1)  # [300, 6] of rank 3
    y = base @ torch.randn(3, 2, generator=g, dtype=torch.float64) + 1.0
    for ridge in (1e-4, 0.0):
        acc = LstsqAccumulator(6, 2, ridge=ridge)
        acc.update(x, y)
        w, b, residual = acc.solve()
        assert torch.isfinite(w).all() and torch.isfinite(b).all()
        assert residual < 1e-6
        torch.testing.assert_close(x @ w.T + b, y, atol=1e-3, rtol=1e-3)


def test_accumulator_rejects_bad_input():
    acc = LstsqAccumulator(3, 2)
    with pytest.raises(AdapterError, match=r"x \[n, 3\] and y \[n, 2\]"):
        acc.update(torch.zeros(5, 4), torch.zeros(5, 2))
    with pytest.raises(AdapterError, match="non-finite"):
        acc.update(torch.full((2, 3), float("nan")), torch.zeros(2, 2))
    with pytest.raises(AdapterError, match="no samples"):
        acc.solve()
    with pytest.raises(AdapterError, match="ridge"):
        LstsqAccumulator(3, 2, ridge=-1.0)


def _prepared_solution(adapter, pairs, ridge=1e-4):
    """W, b of the accumulator on the adapter's own prepared rows (what fit_adapter must reproduce)."""
    lin = adapter.core.linear
    acc = LstsqAccumulator(lin.in_features, adapter.plan.c_out, ridge)
    for x, y in pairs:
        acc.update(lin.rows(adapter.prepare(x)), to_rows(adapter.targets(y)))
    return acc.solve()


@pytest.mark.parametrize(
    "sender, receiver, resample",
    [
        (cut("vector", 6), cut("vector", 4), "bilinear"),
        (cut("map", 5, 6, 6), cut("map", 7, 3, 3), "bilinear"),
        (cut("map", 5, 6, 6), cut("map", 7, 3, 3), "strided"),
        (cut("map_nhwc", 8, 8, 5), cut("tokens", 16, 7), "strided"),
        (cut("tokens", 12, 5), cut("tokens", 12, 7), "bilinear"),
    ],
    ids=["vec", "map-bilinear", "map-strided", "nhwc-to-tokens", "seq"],
)
def test_fit_adapter_in_eval_reproduces_the_lstsq_prediction(sender, receiver, resample):
    torch.manual_seed(0)
    x = torch.randn(64, *sender.shape) * 3 + 1
    y = torch.randn(64, *receiver.shape)
    # make y depend on x so the fit is non-trivial
    probe = build_adapter(AdapterSpec(norm="none", resample=resample), sender, receiver).eval()
    with torch.no_grad():
        y = y * 0.1 + probe(x)
    pairs = batches(x, y, size=16)
    ad = build_adapter(AdapterSpec(norm="both", resample=resample, init="lstsq"), sender, receiver)
    residual = fit_adapter(ad, pairs)
    assert ad.training  # mode restored
    w, b, expected = _prepared_solution(ad, pairs)
    assert residual == pytest.approx(expected, rel=1e-9)
    assert residual < 0.05
    ad.eval()
    with torch.no_grad():
        got = to_rows(ad.targets(ad(x)))
        want = (ad.core.linear.rows(ad.prepare(x)).double() @ w.T + b).float()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_fit_sets_the_receiver_class_token():
    torch.manual_seed(1)
    sender, receiver = cut("map", 5, 4, 4), cut("tokens", 17, 6)
    x = torch.randn(40, 5, 4, 4)
    y = torch.randn(40, 17, 6)
    y[:, 0] += 3.0  # class token with its own mean
    ad = build_adapter(AdapterSpec(init="lstsq"), sender, receiver)
    fit_adapter(ad, batches(x, y, 16))
    with torch.no_grad():
        out = ad.eval()(x)
    torch.testing.assert_close(out[:, 0].mean(0), y[:, 0].mean(0), atol=1e-4, rtol=1e-4)


def _random_orthogonal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    return q


@pytest.mark.parametrize("norm", ["none", "both"])
def test_procrustes_recovers_a_scaled_rotation(norm):
    q = _random_orthogonal(8, 4)
    x = torch.randn(2000, 8, generator=torch.Generator().manual_seed(5)) * torch.linspace(0.5, 2, 8)
    y = 2.5 * x @ q.T.float() + 1.0
    ad = build_adapter(AdapterSpec(norm=norm, init="procrustes"), cut("vector", 8), cut("vector", 8))
    residual = fit_adapter(ad, batches(x, y, 256), method="procrustes")
    assert residual < 1e-8
    ad.eval()
    with torch.no_grad():
        w_eff = (ad(torch.eye(8)) - ad(torch.zeros(1, 8))).T.double()  # the map adapter(x) = W x + b
    torch.testing.assert_close(w_eff / 2.5, q, atol=1e-4, rtol=1e-4)


def test_procrustes_semi_orthogonal_when_channels_differ():
    x, _, _, _, y = synthetic(n=800, c_in=6, c_out=3, seed=6)
    acc = LstsqAccumulator(6, 3)
    acc.update(x, y)
    w, b = procrustes(acc.moments())
    q = w / w.norm(dim=1, keepdim=True)
    torch.testing.assert_close(q @ q.T, torch.eye(3, dtype=torch.float64), atol=1e-10, rtol=0)
    s = w.norm(dim=1)
    torch.testing.assert_close(s, s[0].expand(3))


def test_lowrank_fit_respects_the_rank():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1500, 10, generator=g)
    a = torch.randn(10, 2, generator=g) @ torch.randn(2, 8, generator=g)  # rank 2
    y = x @ a - 0.5
    ad = build_adapter(AdapterSpec("lowrank", rank=2, init="lstsq"), cut("vector", 10), cut("vector", 8))
    residual = fit_adapter(ad, batches(x, y, 500))
    assert residual < 1e-6
    assert ad.core.linear.down.weight.shape == (2, 10)
    assert torch.linalg.matrix_rank(ad.core.linear.weight2d.detach()) == 2  # float32 tolerance
    with torch.no_grad():
        torch.testing.assert_close(ad.eval()(x), y, atol=1e-3, rtol=1e-3)
    # rank 1 on rank-2 data: worse than full rank, still the best rank-1 fit of the fitted values
    ad1 = build_adapter(AdapterSpec("lowrank", rank=1, init="lstsq"), cut("vector", 10), cut("vector", 8))
    assert fit_adapter(ad1, batches(x, y, 500)) > residual
    assert torch.linalg.matrix_rank(ad1.core.linear.weight2d.detach()) == 1


def test_linear_relu_fits_its_linear_part():
    x = torch.randn(500, 6, generator=torch.Generator().manual_seed(8))
    y = x @ torch.randn(6, 4, generator=torch.Generator().manual_seed(9))
    ad = build_adapter(AdapterSpec("linear_relu", init="lstsq"), cut("vector", 6), cut("vector", 4))
    fit_adapter(ad, batches(x, y, 100), ridge=0.0)  # no shrinkage: the linear part is exact
    with torch.no_grad():
        torch.testing.assert_close(ad.eval()(x), y.relu(), atol=1e-4, rtol=1e-4)


def test_fit_adapter_rejects_what_it_cannot_fit():
    pairs = [(torch.randn(4, 8, 4, 4), torch.randn(4, 8, 4, 4))]
    conv = build_adapter(AdapterSpec("conv3x3_relu"), cut("map", 8, 4, 4), cut("map", 8, 4, 4))
    with pytest.raises(AdapterError, match=r"lstsq init needs a linear adapter \(kind linear or lowrank\)"):
        fit_adapter(conv, pairs)
    lin = build_adapter(AdapterSpec(), cut("map", 8, 4, 4), cut("map", 8, 4, 4))
    with pytest.raises(AdapterError, match="valid: lstsq, procrustes"):
        fit_adapter(lin, pairs, method="svd")
    with pytest.raises(AdapterError, match="no samples"):
        fit_adapter(lin, [])
    with pytest.raises(AdapterError, match="batches differ"):
        fit_adapter(lin, [(torch.randn(4, 8, 4, 4), torch.randn(3, 8, 4, 4))])
    with pytest.raises(AdapterError, match=r"receiver activations \[B, 8, 4, 4\]"):
        fit_adapter(lin, [(torch.randn(4, 8, 4, 4), torch.randn(4, 4, 4, 8))])


def test_fit_accepts_half_precision_cached_activations():
    x = torch.randn(64, 6).half()
    y = (x.float() @ torch.randn(6, 3)).half()
    ad = build_adapter(AdapterSpec(init="lstsq"), cut("vector", 6), cut("vector", 3))
    assert fit_adapter(ad, batches(x, y, 32)) < 1e-3


def test_module_doctests():
    assert doctest.testmod(fits_mod).failed == 0
