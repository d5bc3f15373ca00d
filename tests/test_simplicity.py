"""Simplicity measures on cases computable by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.errors import StitchError
from stitchcore.measures.simplicity import gradient_norm, gzip_bits, select_params, sharpness, simplicity


def _linear_case(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    model = nn.Linear(3, 4)
    with torch.no_grad():
        model.weight.copy_(torch.randn(4, 3, generator=g))
        model.bias.copy_(torch.randn(4, generator=g))
    x = torch.randn(10, 3, generator=g)
    y = torch.randint(0, 4, (10,), generator=g)
    return model, x, y


def test_linear_gradient_norm_matches_the_analytic_value():
    model, x, y = _linear_case()
    # dL/dW = (softmax(xW^T+b) - onehot(y))^T x / N, dL/db = mean(softmax - onehot)
    with torch.no_grad():
        r = F.softmax(x @ model.weight.T + model.bias, dim=1) - F.one_hot(y, 4).float()  # [N, 4]
    gw, gb = r.T @ x / len(y), r.mean(0)
    expected = math.sqrt(float(gw.pow(2).sum() + gb.pow(2).sum()))
    # batches of different sizes give the full-batch gradient of the mean loss
    got = gradient_norm(model, [(x[:3], y[:3]), (x[3:], y[3:])])
    assert got["grad_norm"] == pytest.approx(expected, rel=1e-5)
    assert got["n"] == 10 and got["n_params"] == 16
    no_bias = gradient_norm(model, [(x, y)], include_bias=False)
    assert no_bias["grad_norm"] == pytest.approx(float(gw.norm()), rel=1e-5)
    assert model.weight.grad is None and model.weight.requires_grad  # flags restored, no grads left


def test_sharpness_zero_eps_is_zero_and_weights_are_restored():
    model, x, y = _linear_case(1)
    before = [p.detach().clone() for p in model.parameters()]
    assert sharpness(model, [(x, y)], eps=0.0, draws=3)["sharpness"] == 0.0
    s = sharpness(model, [(x, y)], eps=0.5, draws=8, seed=3)
    assert s["sharpness"] != 0.0 and "sigma_t" in s["definition"]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert s == sharpness(model, [(x, y)], eps=0.5, draws=8, seed=3)  # seeded draws


def test_sharpness_grows_with_eps_at_a_minimum():
    # a wide-margin linear classifier sits in a flat valley: bigger perturbations cost more
    x = torch.tensor([[2.0, 0.0], [0.0, 2.0]]).repeat(5, 1)
    y = torch.tensor([0, 1]).repeat(5)
    model = nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2) * 3)
        model.bias.zero_()
    small = sharpness(model, [(x, y)], eps=0.1, draws=20)["sharpness"]
    large = sharpness(model, [(x, y)], eps=1.0, draws=20)["sharpness"]
    assert 0 < small < large


def test_gzip_of_zero_weights_is_smaller_than_random():
    zeros, rand = nn.Linear(64, 64), nn.Linear(64, 64)
    with torch.no_grad():
        for p in zeros.parameters():
            p.zero_()
    z, r = gzip_bits(zeros), gzip_bits(rand)
    assert z["raw_bits"] == r["raw_bits"] == (64 * 64 + 64) * 32
    assert z["gzip_bits"] < r["gzip_bits"] / 20
    assert r["gzip_bits"] > 0.8 * r["raw_bits"]  # random float32 barely compresses
    assert gzip_bits(rand) == r  # deterministic (mtime 0)


def test_norm_layers_and_biases_are_optional():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    assert len(select_params(model)) == 4  # two weights, two biases
    assert len(select_params(model, include_norm=True)) == 6
    assert len(select_params(model, include_bias=False)) == 2
    x, y = torch.randn(6, 2), torch.tensor([0, 1, 0, 1, 0, 1])
    model.train()
    out = simplicity(model, lambda: [(x, y)], eps=0.1, draws=2)
    assert model.training  # left as found
    assert {"grad_norm", "sharpness", "gzip_bits", "definition"} <= set(out)
    with pytest.raises(StitchError, match="non-empty"):
        gradient_norm(model, [])
