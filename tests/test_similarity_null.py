"""Similarity cells with their uncertainty: the dependence test (a permutation null), 95% intervals, and the
random-init-B null with its calibrated map, checked against plain loops, against the truth on synthetic data, and
on digit CNNs trained and untrained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stitchcore.errors import StitchError
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
        big.update(*([t] for t in _pair(128, gen, w1, w2)))
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
    assert twin["ref"] == f"{refs[1]}?init=random&seed=0" and twin["refs"][-1] == f"{refs[1]}?init=random&seed=4"
    assert np.array(twin["values"]).shape == (2, 2) and np.array(twin["per_seed"]).shape == (5, 2, 2)
    assert np.allclose(np.mean(twin["per_seed"], 0), twin["values"], atol=1e-6)  # "values": the twins' mean
    trained, untrained = np.array(s["values"]), np.array(twin["values"])
    # what B learned shows at its last layer (fc2): far more alike to A's fc2 than an untrained fc2 is
    assert trained[1, 1] > untrained[1, 1] + 0.2
    # and an untrained B is not nothing: its early features still follow the input (the architecture's share)
    assert untrained[0, 0] > 0.2
    legacy = SimilaritySpec.from_dict({"a": refs[0], "b": refs[1]})
    assert not legacy.random_null and "random_null" not in legacy.to_dict()  # stored before: none, same id


def test_a_matrix_finds_the_similarity_run_of_each_release_beside_it(trained_store, tmp_path):
    from dataclasses import replace

    from stitchcore.experiments import matrix as mx
    from stitchcore.experiments import run_experiment
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


# ---------------------------------------------------------------------------- the random-init-B null (issue 39)


def test_random_null_cells_are_a_t_prediction_interval_signed_towards_more_similar():
    from scipy import stats

    from stitchcore.measures.random_null import beyond, random_null_cells

    gen = torch.Generator().manual_seed(5)
    draws = torch.rand(5, 2, 3, generator=gen, dtype=torch.float64)  # [k, n_a, n_b]
    values = torch.rand(2, 3, generator=gen, dtype=torch.float64)
    d, v = draws.numpy(), values.numpy()
    mean, sd = d.mean(0), d.std(0, ddof=1)
    half = stats.t.ppf(0.975, 4) * sd * np.sqrt(1 + 1 / 5)  # where one more random B falls 95% of the time
    for higher, sign in ((True, 1.0), (False, -1.0)):  # a distance (Procrustes): lower = more similar
        cells = random_null_cells(values, draws, higher_is_similar=higher)
        assert np.allclose(cells["values"], mean, atol=1e-6) and np.allclose(cells["sd"], sd, atol=1e-6)
        assert np.allclose(np.array(cells["ci"])[..., 0], mean - half, atol=1e-6)
        assert np.allclose(np.array(cells["ci"])[..., 1], mean + half, atol=1e-6)
        assert np.allclose(cells["calibrated"], sign * (v - mean) / sd, atol=1e-5)
        assert cells["threshold"] == pytest.approx(stats.t.ppf(0.975, 4) * np.sqrt(1.2), abs=1e-3)
        expected = sign * (v - mean) > half  # beyond the interval on the similar side
        assert beyond(cells) == expected.tolist()
    one = random_null_cells(values, draws[:1], higher_is_similar=True)  # one twin: a mean, no spread
    assert "calibrated" not in one and beyond(one) is None


def test_a_random_init_null_keeps_the_interval_it_claims():
    """k twins and one more network from the same distribution: the new one lands beyond the interval's top
    2.5% of the time (one-sided end of a 95% prediction interval), not 0% or 20%."""
    from stitchcore.measures.random_null import random_null_cells

    gen = torch.Generator().manual_seed(11)
    draws = torch.randn(4000, 6, 1, 1, generator=gen, dtype=torch.float64)  # 4000 trials of 5 twins + 1 new
    above = [random_null_cells(t[5], t[:5], higher_is_similar=True)["calibrated"][0][0] for t in draws]
    threshold = random_null_cells(draws[0, 5], draws[0, :5], higher_is_similar=True)["threshold"]
    rate = float(np.mean(np.array(above) > threshold))
    assert 0.015 < rate < 0.035, rate


@pytest.fixture(scope="module")
def null_runs(trained_store):
    """Trained A vs trained B, and random-init A vs random-init B, each against 5 random-init Bs (all cuts, the
    450 test digits)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.models.refs import random_twin

    store, refs = trained_store
    trained = run_experiment("similarity", SimilaritySpec(refs[0], refs[1]), store).record.summary
    untrained = SimilaritySpec(random_twin(refs[0], 100), random_twin(refs[1], 101))
    return trained, run_experiment("similarity", untrained, store).record.summary


def test_trained_b_is_beyond_the_random_init_null_at_late_layers(null_runs):
    from stitchcore.experiments.similarity import random_null_map

    s, _ = null_runs
    null = s["random_null"]
    assert null["seeds"] == 5 and len(null["refs"]) == 5 and null["threshold"] == pytest.approx(3.041, abs=1e-3)
    cells = random_null_map(s)
    z = np.array(cells["grid"], dtype=float)
    late = [s["senders"].index(c) for c in ("fc1", "fc2")], [s["receivers"].index(c) for c in ("fc1", "fc2")]
    assert (z[np.ix_(*late)] > cells["threshold"]).all(), z  # measured 4.9 .. 7.4 sds
    # the first block is mostly architecture and inputs: an untrained B is about as similar there (0.6 sds)
    assert z[0, 0] < cells["threshold"] and ("block1", "block1") in cells["within"]
    lo_hi = np.array(null["ci"], dtype=float)
    assert (lo_hi[..., 0] < np.array(null["values"])).all() and (np.array(null["values"]) < lo_hi[..., 1]).all()


def test_untrained_a_and_b_pass_the_dependence_test_but_not_the_random_init_null(null_runs):
    """The shuffled-image test is passed by two untrained networks by a hundred sds: it tests dependence.  The
    random-init null is not beaten by them: an untrained B is one more draw of it."""
    from stitchcore.experiments.similarity import random_null_map

    _, s = null_runs
    shuffled = np.array(s["calibrated"], dtype=float)
    assert (shuffled > 20).all(), shuffled  # every cell, untrained as both are (measured 70 .. 200)
    cells = random_null_map(s)
    z = np.array(cells["grid"], dtype=float)
    assert (z <= cells["threshold"]).all(), z  # measured at most 2.6 sds
    assert len(cells["within"]) == z.size
    ci = np.array(s["random_null"]["ci"], dtype=float)  # where one more untrained B falls, within CKA's 0 .. 1
    assert (ci >= 0).all() and (ci <= 1).all() and ci[0, 0, 1] == 1.0  # block1 x block1: 0.94 ± 0.06, clipped


def test_the_maps_say_which_is_which_calibrated_first_and_an_old_run_draws_its_raw_maps(trained_store):
    """The calibrated map is the values in random-B sds with the cells inside the null ringed, its colour bar
    naming the untrained Bs; the raw maps keep the values, the baseline, the untrained Bs' mean with their 95%
    range and the dependence test under that name; a report gives the calibrated map first, with its reading."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.report.figures import cka_panels, panel_figure, run_figures

    store, refs = trained_store
    rec = run_experiment("similarity", SimilaritySpec(refs[0], refs[1]), store).record  # null_runs' run: cached
    s, null = rec.summary, rec.summary["random_null"]
    (cal,) = cka_panels(s, "calibrated")
    assert cal.title == "Linear CKA, beyond random-init B (sds above the mean of 5 untrained Bs)"
    assert cal.values == null["calibrated"] and cal.diverging and cal.meaning is None
    within = {(a, b) for a, row in zip(s["senders"], null["calibrated"]) for b, z in zip(s["receivers"], row)
              if z <= null["threshold"]}
    assert set(cal.marked) == within and ("block1", "block1") in within and ("fc2", "fc2") not in within
    fig = panel_figure(cal)
    bar = next(t for t in fig.data if t.name == "values").colorbar.title.text
    assert bar.startswith("sds vs random-init B<br>") and "within 95% of 5 untrained Bs, below 3.04" in bar
    assert len(next(t for t in fig.data if t.name == "marked").x) == len(within)

    raw = cka_panels(s, "raw")
    assert [p.title for p in raw] == ["Linear CKA", "Linear CKA, shuffled inputs (baseline)",
                                      "Linear CKA, A against an untrained B (random-init null, mean of 5 seeds)",
                                      "Linear CKA, dependence test (shuffled images)"]  # fmt: skip
    assert raw[2].values == null["values"] and raw[2].intervals == null["ci"]  # the null's 95% range on hover
    assert raw[3].values == s["calibrated"] and raw[3].csv_name == "cka-linear-dependence-test"
    assert [p.title for p in cka_panels(s)] == [cal.title, *(p.title for p in raw)]  # a report: both, calibrated first
    old = {k: v for k, v in s.items() if k != "random_null"}  # a run stored before the null
    assert [p.title for p in cka_panels(old, "calibrated")] == [p.title for p in raw if "untrained" not in p.title]
    with pytest.raises(ValueError, match="unknown similarity view 'sideways'"):
        cka_panels(s, "sideways")
    figs = run_figures(rec, store)
    assert [f.title for f in figs] == [cal.title, *(p.title for p in raw)]
    assert figs[0].caption.startswith("Calibrated map: each cell is trained B's value in standard deviations")
    assert figs[1].caption.startswith("Raw maps:")
    assert "Dependence test (shuffled images; 20 permutations" in figs[1].caption


def test_a_twin_with_a_or_bs_own_weights_is_passed_over(trained_store):
    """A random-init A of seed 0 and B's twin of seed 0 are one network (one architecture, one seed): the null
    would hold A itself (CKA 1 at every matching cut).  The run draws seeds 1 .. 5 instead."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.models.refs import random_twin

    store, refs = trained_store
    spec = SimilaritySpec(random_twin(refs[0], 0), refs[1], senders=("fc2",), receivers=("fc2",),
                          null_permutations=0, baseline=False, max_samples=128)  # fmt: skip
    null = run_experiment("similarity", spec, store).record.summary["random_null"]
    assert null["refs"] == [random_twin(refs[1], s) for s in range(1, 6)]
    assert max(g[0][0] for g in null["per_seed"]) < 0.99


def test_stored_specs_keep_their_twins_and_their_run_ids():
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.store.results import run_id_for

    a, b = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
    # the dict the release before stored for today's default spec: every field but the seeds, one twin
    one_twin = {k: v for k, v in SimilaritySpec(a, b).to_dict().items() if k != "random_null_seeds"}
    assert one_twin["random_null"] is True and one_twin["null_permutations"] == 20
    old = SimilaritySpec.from_dict(one_twin)
    assert old.random_null_seeds == 1 and old.to_dict() == one_twin  # read back as stored: the same run id
    assert run_id_for("similarity", SimilaritySpec(a, b, random_null_seeds=1).to_dict()) == run_id_for(
        "similarity", one_twin)
    assert SimilaritySpec.from_dict({"a": a, "b": b}).random_null is False  # older still: no twin
    new = SimilaritySpec(a, b)
    assert new.random_null_seeds == 5 and new.to_dict()["random_null_seeds"] == 5
    # without a twin the count is moot: one run id whatever it says
    assert SimilaritySpec(a, b, random_null=False, random_null_seeds=9) == SimilaritySpec(a, b, random_null=False)
    with pytest.raises(StitchError, match=r"random_null_seeds \(--random-null-seeds\) must be at least 1"):
        SimilaritySpec(a, b, random_null_seeds=0)
    # a null with an interval takes 5 untrained Bs at least (with 3 the interval is ±5 sds); 1 is the old reading
    with pytest.raises(StitchError, match=r"random_null_seeds \(--random-null-seeds\) must be at least 5 \(got 3\)"):
        SimilaritySpec(a, b, random_null_seeds=3)
    assert SimilaritySpec(a, b, random_null=False, random_null_seeds=3).random_null_seeds == 1  # no twin: moot


def test_the_estimate_counts_one_pass_per_twin(trained_store):
    from stitchcore.experiments.estimate import estimate_seconds
    from stitchcore.experiments.similarity import SimilaritySpec

    store, refs = trained_store
    base = {"a": refs[0], "b": refs[1], "max_samples": 123}  # a spec the store has no run of
    none, one, five = (estimate_seconds("similarity", SimilaritySpec(**base, **k), store).seconds
                       for k in ({"random_null": False}, {"random_null_seeds": 1}, {"random_null_seeds": 5}))
    assert none < one < five
    assert five - none == pytest.approx(5 * (one - none), rel=1e-6)
