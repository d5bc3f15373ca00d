"""Intervals on LM losses (the windows resampled; the loss penalty paired with its base) and on a sweep's trait
metrics (exact binomial intervals over the test examples each metric reads): checked against scipy's paired
bootstrap, on real tiny runs, and old results without them still read and draw."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.lm.evaluate import loss_penalty_ci
from stitchcore.measures.intervals import paired_statistic_ci, unpaired_difference_ci
from stitchcore.store.results import Store
from tests.lm_helpers import train_tiny

QUICK = {"eval_windows": 8, "sample_tokens": 0}


def _inside(value: float, ci: list[float]) -> bool:
    return ci[0] <= value <= ci[1]


def _width(ci: list[float]) -> float:
    return ci[1] - ci[0]


# -- the paired ratio ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, worse", [(128, 1.1), (32, 1.02)])
def test_the_paired_loss_penalty_interval_matches_scipy_s_paired_bootstrap(n, worse):
    rng = np.random.default_rng(0)
    base = rng.gamma(20.0, 0.1, n)  # per-window mean losses ~2 nats
    joined = base * worse + rng.normal(0.0, 0.05, n)  # worse on every window, plus noise of its own

    def penalty(b, j, axis=-1):  # (L_base - L) / L_base of the (resampled) means
        return (b.mean(axis=axis) - j.mean(axis=axis)) / b.mean(axis=axis)

    ours = paired_statistic_ci(lambda b, j: (b - j) / b, torch.from_numpy(base), torch.from_numpy(joined),
                               resamples=4000, seed=1)  # fmt: skip
    theirs = stats.bootstrap((base, joined), penalty, paired=True, n_resamples=4000, method="percentile",
                             random_state=np.random.default_rng(2)).confidence_interval  # fmt: skip
    half = _width(ours) / 2
    assert abs(ours[0] - theirs.low) < 0.15 * half and abs(ours[1] - theirs.high) < 0.15 * half
    assert _inside(float(penalty(base, joined)), list(ours))
    # the LM helper is this interval, and pairing is what makes it tight: the windows' own spread cancels
    assert loss_penalty_ci(torch.from_numpy(base), torch.from_numpy(joined), seed=1) == list(
        paired_statistic_ci(lambda b, j: (b - j) / b, torch.from_numpy(base), torch.from_numpy(joined), seed=1))
    unpaired = unpaired_difference_ci(torch.from_numpy(base), torch.from_numpy(joined))
    assert _width(ours) * base.mean() < 0.5 * _width(unpaired)


def test_a_paired_statistic_needs_one_value_per_example_on_every_side():
    with pytest.raises(ValueError, match="one value per example"):
        paired_statistic_ci(lambda a, b: a - b, torch.zeros(3), torch.zeros(4))


# -- LM runs -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lm_pair(tmp_path_factory):
    """Two tiny char-GPTs (seeds 0 and 1), as tests/test_lm.py trains them (~1 s each)."""
    store = Store(tmp_path_factory.mktemp("lmstore"))
    return store, train_tiny(store, 0), train_tiny(store, 1)


def _check_lm(s: dict) -> None:
    for role in ("a", "b"):
        assert _inside(s["base"][role]["loss"], s["base"][role]["loss_ci"])
    assert _inside(s["loss"], s["loss_ci"]) and _inside(s["loss_penalty"], s["loss_penalty_ci"])


def test_merge_and_lm_stitch_store_loss_and_paired_penalty_intervals(lm_pair, capsys):
    from stitchcore.cli.main import main

    store, a, b = lm_pair
    merge = run_experiment("merge", MergeSpec(a=a, b=b, start=1, head="b", **QUICK), store).record.summary
    _check_lm(merge)
    assert merge["loss_penalty_ci"][1] < 0  # B's blocks 1.. on A's start: worse than B on every resample
    same = run_experiment("merge", MergeSpec(a=a, b=b, start=1, end=1, head="a", **QUICK), store).record.summary
    assert same["loss_penalty_ci"] == [0.0, 0.0] and same["loss_ci"] == same["base"]["a"]["loss_ci"]  # A itself
    stitch = run_experiment("lmstitch", LMStitchSpec(a=a, b=b, cut_a=1, steps=3, **QUICK), store).record.summary
    _check_lm(stitch)
    # a stitch close to B, paired over the same windows: far tighter than either loss's own interval
    assert _width(stitch["loss_penalty_ci"]) * stitch["base"]["b"]["loss"] < 0.2 * _width(stitch["loss_ci"])
    argv = ["merge", "--a", a, "--b", b, "--split", "1", "--head", "b", "--eval-windows", "8", "--sample-tokens", "0",
            "--store", str(store.root), "--quiet"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["loss_ci"] == merge["loss_ci"] and out["loss_penalty_ci"] == merge["loss_penalty_ci"]
    assert main(argv) == 0
    lo, hi = merge["loss_penalty_ci"]
    assert f"loss_penalty {merge['loss_penalty']:+.4f} [{lo:+.4f}, {hi:+.4f}]" in capsys.readouterr().out


def test_every_depth_point_and_heat_map_cell_carries_its_interval(lm_pair):
    from stitchcore.cli.lm import _text
    from stitchcore.plots import lm as plots_lm

    store, a, b = lm_pair
    spec = DepthSpec(a=a, b=b, steps=2, splits=(0, 2), heads=("b",), heatmap=True, **QUICK)
    s = run_experiment("lmdepth", spec, store).record.summary
    assert len(s["points"]) == 4
    for p in s["points"]:
        assert _inside(p["loss"], p["loss_ci"]) and _inside(p["loss_penalty"], p["loss_penalty_ci"]), p
    for row, spans in zip(s["heatmap"]["values"], s["heatmap"]["values_ci"]):
        assert all(_inside(v, ci) for v, ci in zip(row, spans))
    fig = plots_lm.penalty_by_depth(s["points"])
    for trace in fig.data:  # shown in % of the base loss, higher = worse: the stored interval's ends swap
        assert trace.error_y.array is not None and all(e is not None and e >= 0 for e in trace.error_y.array)
        assert "95% interval" in trace.text[0]
    assert "±" in _text("lmdepth", s, False, 1.0)
    bars = plots_lm.loss_bars(run_experiment("merge", MergeSpec(a=a, b=b, start=1, **QUICK), store).record.summary)
    assert len(bars.data[0].error_y.array) == 3 and "95% interval" in bars.data[0].customdata[2]


def test_lm_results_stored_before_intervals_still_read_and_draw():
    from stitchcore.cli.lm import _text
    from stitchcore.plots import lm as plots_lm
    from stitchcore.report.summary import _lm_pair_numbers

    old = {"mode": "merge", "layout": ["A.wte"], "loss": 2.0, "perplexity": 7.39, "loss_penalty": -0.25,
           "penalty_base": "a", "base": {"a": {"loss": 1.6}, "b": {"loss": 1.7}}}  # fmt: skip
    bars = plots_lm.loss_bars(old)
    assert bars.data[0].error_y.array is None and bars.data[0].textposition == "outside"
    points = [{"label": "merge, head A", "split": k, "loss_penalty": -0.1 * k, "cut": f"h.{k}"} for k in range(3)]
    assert plots_lm.penalty_by_depth(points).data[0].error_y.array is None
    assert "[" not in _text("merge", old, False, 1.0)
    assert dict(_lm_pair_numbers("merged")(old))["Loss merged"] == "2.000"
    new = {**old, "loss_ci": [1.9, 2.1], "loss_penalty_ci": [-0.3, -0.2]}
    assert dict(_lm_pair_numbers("merged")(new))["Loss penalty (base A)"] == "+25.0 % [+20.0 to +30.0 %]"


# -- sweeps --------------------------------------------------------------------------------------------------


def test_a_sweep_s_trait_metrics_carry_intervals_and_a_class_s_is_wider(trained_store):
    from stitchcore.plots import traits as plots_traits

    store, (ref0, ref1) = trained_store
    spec = SweepSpec(ref0, ref1, positions=("block1", "fc2"), metrics=("accuracy", "class_acc:3", "confusion:3->8"),
                     epochs=1, control_seeds=1, simplicity=False)  # fmt: skip
    s = run_experiment("sweep", spec, store).record.summary
    records = [*s["rows"], *(c for r in s["rows"] for c in r["control"]), s["reference"]["a"], s["reference"]["b"]]
    certain = 0
    for rec in records:
        for key in spec.metrics:
            assert _inside(rec["metrics"][key], rec["metrics_ci"][key]), (key, rec["metrics"])
        for acc, ci in zip(rec["per_class"], rec["per_class_ci"]):
            assert _inside(acc, ci)
        for value, ci in [*((rec["metrics"][k], rec["metrics_ci"][k]) for k in spec.metrics),
                          *zip(rec["per_class"], rec["per_class_ci"])]:  # fmt: skip
            if value in (0.0, 1.0):  # a class all right, a confusion never made: exact, so never [1, 1] or [0, 0]
                assert 0 < _width(ci) < 0.2, (value, ci)
                certain += 1
    assert certain >= 1
    wider = 0
    for row in s["rows"]:  # a class has ~46 of the 450 test images: its interval is wider wherever it is not 0 or 1
        overall = _width(row["metrics_ci"]["accuracy"])
        for acc, ci in zip([row["metrics"]["class_acc:3"], *row["per_class"]],
                           [row["metrics_ci"]["class_acc:3"], *row["per_class_ci"]]):  # fmt: skip
            if 0 < acc < 1:
                assert _width(ci) > overall, (acc, ci, overall)
                wider += 1
    assert wider >= 2
    assert s["stitched_ci"]["accuracy"] == [r["metrics_ci"]["accuracy"] for r in s["rows"]]
    fig = plots_traits.trait_curves(s, s["reference"], spec.metrics)
    line = next(t for t in fig.data if t.name == "accuracy")
    assert list(line.error_y.array) == pytest.approx([ci[1] - v for v, ci in zip(s["stitched"]["accuracy"],
                                                                                 s["stitched_ci"]["accuracy"])])
    assert "95% interval" in next(t for t in fig.data if t.name == "B alone").hovertemplate
    heat = plots_traits.per_class_heatmap(s, s["classes"])
    assert "95% interval" in heat.data[0].customdata[3][0][2]


def test_sweeps_stored_before_intervals_still_draw():
    from stitchcore.experiments.sweep import curves
    from stitchcore.plots import traits as plots_traits

    rows = [{"position": "fc1", "depth": 0.5, "metrics": {"accuracy": 0.9}, "per_class": [0.8, 1.0]}]
    c = curves(rows, ["accuracy"])
    assert c["stitched_ci"] == {"accuracy": [None]} and c["per_class_ci"] == [[None], [None]]
    ref = {"a": {"metrics": {"accuracy": 0.95}}, "b": {"metrics": {"accuracy": 0.97}}}
    for data in (c, {k: v for k, v in c.items() if not k.endswith("_ci")}):  # read now, or as stored then
        fig = plots_traits.trait_curves(data, ref, ["accuracy"])
        assert all(t.error_y.array is None for t in fig.data)
        heat = plots_traits.per_class_heatmap(data, ["0", "1"])
        assert "interval" not in str(heat.data[0].hovertemplate)
