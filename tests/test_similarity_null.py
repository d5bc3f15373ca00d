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


def test_a_similarity_run_measures_a_against_an_untrained_twin_of_b(trained_store):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec

    store, refs = trained_store
    spec = SimilaritySpec(refs[0], refs[1], senders=("block1", "fc2"), receivers=("block1", "fc2"), max_samples=256)
    s = run_experiment("similarity", spec, store).record.summary
    twin = s["random_null"]
    assert twin["ref"] == f"{refs[1]}?init=random&seed=0"
    assert np.array(twin["values"]).shape == (2, 2)
    trained, untrained = np.array(s["values"]), np.array(twin["values"])
    # what B learned shows at its last layer (fc2): far more alike to A's fc2 than an untrained fc2 is
    assert trained[1, 1] > untrained[1, 1] + 0.2
    # and an untrained B is not nothing: its early features still follow the input (the architecture's share)
    assert untrained[0, 0] > 0.2
    legacy = SimilaritySpec.from_dict({"a": refs[0], "b": refs[1]})
    assert not legacy.random_null and "random_null" not in legacy.to_dict()  # stored before: none, same id


def test_a_matrix_finds_the_similarity_run_of_each_release_beside_it(trained_store, tmp_path):
    from dataclasses import replace

    from stitchcore.experiments import run_experiment
    from stitchcore.experiments import matrix as mx
    from stitchcore.experiments.matrix import MatrixSpec
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.store.results import Store
    from tests.conftest import copy_store

    src, refs = trained_store
    copy_store(src.root, tmp_path / "store")
    store = Store(tmp_path / "store")
    spec = MatrixSpec(refs[0], refs[1], senders=("fc1",), receivers=("fc2",))
    for era in reversed(SimilaritySpec.ERAS):  # oldest first: each release's default spec, launched beside it
        sim = replace(SimilaritySpec(refs[0], refs[1], senders=("fc1",), receivers=("fc2",)), **era)
        rec = run_experiment("similarity", sim, store).record
        assert mx.similarity_beside(store, spec).id == rec.id
    store.close()
