"""Bootstrap intervals: checked against scipy's bootstrap on the same per-example data, and on a real stitch;
intervals across seeds: Student t, three seeds at least, clipped to the metric's range, paired over model seeds
for a claim against its baseline (the proportions' exact intervals: tests/test_proportion_intervals.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from stitchcore.measures.intervals import (
    across_seeds,
    bootstrap_mean_ci,
    mean_ci,
    paired_difference_ci,
    paired_seed_effect,
    seed_note,
    seed_spread,
    unpaired_difference_ci,
)


@pytest.mark.parametrize("p, n", [(0.97, 450), (0.5, 200), (0.8, 46)])
def test_the_interval_of_a_mean_accuracy_matches_scipy_s_bootstrap(p, n):
    rng = np.random.default_rng(0)
    correct = (rng.random(n) < p).astype(float)
    ours = bootstrap_mean_ci(torch.from_numpy(correct), resamples=4000, seed=1)
    theirs = stats.bootstrap((correct,), np.mean, n_resamples=4000, method="percentile",
                             random_state=np.random.default_rng(2)).confidence_interval
    half = (ours[1] - ours[0]) / 2
    assert abs(ours[0] - theirs.low) < 0.15 * half + 1 / n and abs(ours[1] - theirs.high) < 0.15 * half + 1 / n
    assert ours[0] <= correct.mean() <= ours[1]


def test_a_paired_difference_is_tighter_than_two_separate_resamples_when_the_models_agree():
    rng = np.random.default_rng(0)
    base = torch.from_numpy((rng.random(450) < 0.97).astype(float))
    stitched = base.clone()
    flip = torch.from_numpy(rng.choice(450, 8, replace=False))
    stitched[flip] = 1 - stitched[flip]  # the stitched model differs from B on 8 of 450 images
    paired, unpaired = paired_difference_ci(base, stitched), unpaired_difference_ci(base, stitched)
    point = float(base.mean() - stitched.mean())
    assert paired[0] <= point <= paired[1] and unpaired[0] <= point <= unpaired[1]
    assert (paired[1] - paired[0]) < 0.6 * (unpaired[1] - unpaired[0])


def test_the_same_seed_gives_the_same_interval_and_bad_input_is_refused():
    x = torch.rand(100)
    assert mean_ci(x, seed=3) == mean_ci(x, seed=3) != mean_ci(x, seed=4)
    right = (x > 0.3).double()
    assert mean_ci(right, seed=3) == mean_ci(right, seed=4)  # a proportion's interval is exact: no draws
    with pytest.raises(ValueError, match="one value per example"):
        paired_difference_ci(torch.zeros(3), torch.zeros(4))


# -- across seeds ---------------------------------------------------------------------------------------------


def test_two_seeds_give_a_mean_and_no_interval_and_say_so():
    assert across_seeds([0.90, 0.94]) == (0.92, None, None)  # a t-interval on 1 degree of freedom says nothing
    assert seed_spread([0.90, None, 0.94]) == (0.92, None) and seed_spread([0.9]) == (0.9, None)
    mean, lo, hi = across_seeds([0.90, 0.94, 0.92])
    t_lo, t_hi = stats.t.interval(0.95, 2, loc=0.92, scale=stats.sem([0.90, 0.94, 0.92]))
    assert (mean, lo, hi) == pytest.approx((0.92, t_lo, t_hi), abs=1e-6)
    assert seed_note(2) == "mean of 2 seeds, no interval: an interval across seeds needs 3 or more"
    assert seed_note(3) is None
    with pytest.raises(ValueError, match="at least two"):
        across_seeds([0.9])


def test_a_seed_interval_stops_at_the_metric_s_range():
    accuracies = [0.96, 0.99, 1.0]
    _, lo, hi = across_seeds(accuracies)
    assert hi > 1  # the t-interval alone runs past 100%
    assert across_seeds(accuracies, bounds=(0, 1)) == (0.983333, lo, 1.0)
    assert seed_spread([0.0, 0.01, 0.04], bounds=(0.0, 1.0))[1][0] == 0.0
    penalties = [-0.01, 0.02, -0.02]
    assert across_seeds(penalties, bounds=(-1, 1)) == across_seeds(penalties)  # inside: unchanged
    with pytest.raises(ValueError, match="lower < upper"):
        across_seeds(accuracies, bounds=(1, 0))


def test_a_claim_s_effect_is_paired_over_model_seeds():
    """Each model seed moves the claim and its baseline together (a better-trained seed is better at both):
    pairing cancels that, so the interval of the differences is far tighter than the two spreads."""
    seed_effect = np.array([0.00, 0.04, -0.03, 0.02, -0.01])
    claim = (0.89 + seed_effect + [0.011, 0.009, 0.010, 0.012, 0.008]).tolist()
    baseline = (0.89 + seed_effect).tolist()
    effect = paired_seed_effect(claim, baseline)
    diffs = np.subtract(claim, baseline)
    t_lo, t_hi = stats.t.interval(0.95, 4, loc=diffs.mean(), scale=stats.sem(diffs))
    assert effect["n_seeds"] == 5 and effect["mean"] == pytest.approx(0.01, abs=1e-6)
    assert effect["ci"] == pytest.approx([t_lo, t_hi], abs=1e-6) and effect["ci"][0] > 0
    c_lo, b_hi = across_seeds(claim)[1], across_seeds(baseline)[2]
    assert c_lo < b_hi  # the two intervals side by side overlap: unpaired, no difference could be seen
    assert paired_seed_effect(claim[:2], baseline[:2]) == {"mean": 0.01, "ci": None, "n_seeds": 2}
    with pytest.raises(ValueError, match="one baseline value per seed"):
        paired_seed_effect(claim, baseline[:3])


def test_a_stitch_stores_its_intervals_and_the_penalty_s_is_paired(trained_store):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec

    store, refs = trained_store
    s = run_experiment("stitch", StitchSpec(refs[0], refs[1], "block1", "block1", epochs=1), store).record.summary
    lo, hi = s["accuracy_ci"]
    assert lo <= s["accuracy"] <= hi and 0 < hi - lo < 0.1
    plo, phi = s["penalty_ci"]
    assert plo <= s["penalty"] <= phi
    for role in ("a", "b"):
        assert s["base_ci"][role][0] <= s["base"][role] <= s["base_ci"][role][1]
    separate = (s["base_ci"]["b"][1] - s["base_ci"]["b"][0]) + (hi - lo)  # what two intervals side by side span
    assert phi - plo < separate


def test_pages_plots_and_reports_show_a_stitch_s_intervals_and_old_runs_show_none():
    from stitchcore.plots.runs import accuracy_bars
    from stitchcore.report.summary import _stitch_numbers

    s = {"accuracy": 0.96, "accuracy_ci": [0.94, 0.975556], "penalty": 0.02, "penalty_ci": [0.004444, 0.037778],
         "base": {"a": 0.971111, "b": 0.98}, "base_ci": {"a": [0.955556, 0.9845], "b": [0.966667, 0.991111]},
         "cut_a": {"name": "block2"}, "cut_b": {"name": "block2"}, "params": 10}  # fmt: skip
    bars = {t.name: t for t in accuracy_bars(s).data if t.type == "bar"}
    stitched = next(t for name, t in bars.items() if "stitch" in name.lower())
    assert stitched.error_y.array[0] == pytest.approx(0.975556 - 0.96)
    assert stitched.error_y.arrayminus[0] == pytest.approx(0.96 - 0.94)
    numbers = dict(_stitch_numbers(s))
    assert numbers["Stitched accuracy"] == "96.0% [94.0–97.6%]"
    assert numbers["Penalty (B − stitched)"] == "+2.0 pts [+0.4 to +3.8 pts]"
    old = {k: v for k, v in s.items() if not k.endswith("_ci")}
    assert all(t.error_y.array is None for t in accuracy_bars(old).data if t.type == "bar")
    assert dict(_stitch_numbers(old))["Stitched accuracy"] == "96.0%"


@pytest.mark.parametrize("budget", [None, "0.05"])  # cached, and streamed over the activation budget
def test_every_matrix_cell_carries_its_intervals(trained_store, monkeypatch, budget):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix.spec import MatrixSpec

    store, refs = trained_store
    if budget:
        monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", budget)
    spec = MatrixSpec(refs[0], refs[1], senders=("block1", "fc1"), receivers=("fc1", "fc2"), seed=31 + bool(budget))
    s = run_experiment("matrix", spec, store).record.summary
    seen = 0
    for row, ci_row, pen_row, pci_row in zip(s["values"], s["values_ci"], s["penalty"], s["penalty_ci"]):
        for v, ci, p, pci in zip(row, ci_row, pen_row, pci_row):
            if v is None:
                assert ci is None and pci is None
                continue
            seen += 1
            assert ci[0] <= v <= ci[1] and pci[0] <= p <= pci[1]
            assert ci[1] - ci[0] < 0.2
    assert seen >= 3


def test_a_matrix_heat_map_shows_each_cell_s_interval_on_hover_in_the_panel_s_units():
    from stitchcore.report.figures import panel_figure, stitching_panel

    grid = [[0.02, None]]
    cis = [[[0.004444, 0.037778], None]]
    fig = panel_figure(stitching_panel(grid, ["fc1"], ["fc1", "fc2"], "penalty", cis))
    markers = next(t for t in fig.data if t.name == "cells")
    first = markers.customdata[0]
    assert list(first[:2]) == ["fc1", "fc1"] and first[3] == "<br>95% interval over the test images: +0.4 – +3.8 pts"
    assert "%{customdata[3]}" in markers.hovertemplate
    plain = panel_figure(stitching_panel(grid, ["fc1"], ["fc1", "fc2"], "penalty"))  # a run from before intervals
    assert all("interval" not in str(t.hovertemplate) for t in plain.data)


def test_a_matrix_rings_the_cells_whose_interval_overlaps_a_control_s(trained_store):
    """Trained controls on two digit CNNs: a random sender's late cuts land near the trained cells at early
    receivers or not; whatever they do, a ring goes exactly where the two 95% intervals overlap."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec, matrix_state
    from stitchcore.report.figures import control_panels, panel_figure

    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], senders=("block1", "fc2"), receivers=("block1", "fc2"), controls=True,
                      max_test=200)  # fmt: skip
    rec = run_experiment("matrix", spec, store).record
    s = rec.summary
    state = matrix_state(store, rec.id, s, spec, status="done", final=True)
    assert set(s["controls_ci"]) == {t.control for t in state.controls}
    for table in state.controls:
        if table.control not in s.get("debiased_by_control", {}):  # made unlike the cells: shown alone, no rings
            assert table.overlap is None
            continue
        ci = s["controls_ci"][table.control]
        expected = {(a, b) for i, a in enumerate(s["senders"]) for j, b in enumerate(s["receivers"])
                    if ci[i][j] and s["values_ci"][i][j] and ci[i][j][0] <= s["values_ci"][i][j][1]
                    and s["values_ci"][i][j][0] <= ci[i][j][1]}  # fmt: skip
        assert set(table.overlap or {}) == expected
        debiased = control_panels(table, s["senders"], s["receivers"])[-1]
        rings = [t for t in panel_figure(debiased).data if t.name == "marked"]
        assert len(rings) == (1 if expected else 0)
        if expected:
            assert len(rings[0].x) == len(expected) and "overlap the control's" in rings[0].customdata[0][2]
    # the random-sender control at the late cut cannot carry A's digits: fc2 -> fc2 stands clear of it
    rs = next(t for t in state.controls if t.control == "random_sender")
    assert ("fc2", "fc2") not in (rs.overlap or {})
