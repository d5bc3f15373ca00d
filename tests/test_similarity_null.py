"""Similarity cells with their uncertainty: a calibrated permutation null and 95% intervals, checked against
plain loops and against the truth on synthetic data."""

from __future__ import annotations

import numpy as np
import torch

from stitchcore.measures.similarity import MinibatchCKA, _derangement, cka_linear, procrustes_distance


def _pair(n: int, gen: torch.Generator, w1: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.randn(n, 8, generator=gen)
    return z @ w1 + 1.5 * torch.randn(n, 20, generator=gen), (z @ w2).tanh() + 1.5 * torch.randn(n, 16, generator=gen)


def test_the_null_of_debiased_cka_on_independent_features_is_centred_at_zero():
    gen = torch.Generator().manual_seed(0)
    m = MinibatchCKA(1, 1)
    null_gen = torch.Generator().manual_seed(1)
    for _ in range(4):
        x, y = torch.randn(128, 12, generator=gen), torch.randn(128, 9, generator=gen)
        m.update([x], [y], [_derangement(128, null_gen) for _ in range(30)])
    null = m.null()[:, 0, 0]
    assert abs(float(null.mean())) < 3 * float(null.std()) / np.sqrt(30) + 1e-3  # E[debiased CKA] = 0
    assert float(null.std()) < 0.05


def test_the_gram_permutation_null_equals_recomputing_cka_on_permuted_features():
    """The null permutes B's Gram rows and columns instead of running B again: the plain loop permutes the
    features and recomputes, batch by batch; the two agree to float rounding."""
    gen = torch.Generator().manual_seed(2)
    w1, w2 = torch.randn(8, 20, generator=gen), torch.randn(8, 16, generator=gen)
    ours = MinibatchCKA(1, 1)
    plain = [MinibatchCKA(1, 1) for _ in range(5)]
    for _ in range(3):
        x, y = _pair(64, gen, w1, w2)
        perms = [_derangement(64, gen) for _ in range(5)]
        ours.update([x], [y], perms)
        for k, p in enumerate(perms):
            plain[k].update([x], [y[p]])
    expected = torch.tensor([float(m.compute()[0, 0]) for m in plain])
    assert torch.allclose(ours.null()[:, 0, 0], expected.double(), atol=1e-9)


def test_a_full_batch_null_matches_a_numpy_loop_over_the_same_permutations():
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(60, 6, generator=gen), torch.randn(60, 5, generator=gen)
    perms = [_derangement(60, torch.Generator().manual_seed(k)) for k in range(4)]
    ours = [float(procrustes_distance(x, y[p])) for p in perms]
    xn, yn = x.double().numpy(), y.double().numpy()
    for p, value in zip(perms, ours):
        a, b = xn - xn.mean(0), yn[p.numpy()] - yn[p.numpy()].mean(0)
        a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
        nuclear = np.linalg.svd(a.T @ b, compute_uv=False).sum()
        assert abs(value - (2 - 2 * nuclear)) < 1e-6
    assert float(cka_linear(x, x)) > 0.99


def test_the_half_sample_interval_of_minibatch_cka_covers_the_truth_about_95_percent_of_the_time():
    gen = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(8, 20, generator=gen), torch.randn(8, 16, generator=gen)
    big = MinibatchCKA(1, 1)
    for _ in range(60):
        big.update(*(([t] for t in _pair(128, gen, w1, w2))))
    truth = float(big.compute()[0, 0])
    covered, trials = 0, 40
    for t in range(trials):
        m, halves = MinibatchCKA(1, 1), torch.Generator().manual_seed(100 + t)
        for _ in range(3):
            x, y = _pair(64, gen, w1, w2)
            m.update([x], [y], halves=halves)
        lo, hi = m.interval()[:, 0, 0].tolist()
        covered += lo <= truth <= hi
    assert covered >= 0.85 * trials, covered  # nominal 95%: 38 of 40; binomial slack
