"""Shared-moment matrices: the same cells as the per-cell path, the proxy (held-out R², CKA) from the same pass,
a proxy-only matrix, and the recommender that ranks cells without training."""

from __future__ import annotations

import json

import pytest

import stitchcore.experiments.matrix.units as mx_units
from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec, matrix_state
from stitchcore.experiments.matrix.recommend import (
    agreement,
    proxy_run,
    proxy_spec,
    ranking_choices,
    recommend,
    spearman,
)
from tests.test_cli import cli

CUTS = ("block1", "block2", "flatten", "fc1", "fc2")


def _cells(grid):
    return [v for row in grid for v in row if v is not None]


def test_shared_moments_give_the_per_cell_matrix(trained_store, monkeypatch):
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], seed=11, max_train=500, max_test=200)
    shared = run_experiment("matrix", spec, store).record.summary
    monkeypatch.setattr(mx_units, "SHARED_MOMENTS", False)
    one_by_one = run_experiment("matrix", spec, store, rerun=True).record.summary
    for field in ("values", "penalty", "residual"):
        got, want = shared[field], one_by_one[field]
        assert [[v is None for v in row] for row in got] == [[v is None for v in row] for row in want]
        assert max(abs(a - b) for a, b in zip(_cells(got), _cells(want))) <= 1e-5, field
    assert one_by_one["proxy"] is None  # the per-cell path keeps no held-out moments
    r2, cka = _cells(shared["proxy"]["r2"]), _cells(shared["proxy"]["cka"])
    assert len(r2) == len(cka) == len(_cells(shared["values"])) == 19
    assert all(-1 < v <= 1 for v in r2) and all(0 <= v <= 1 for v in cka)


def test_a_proxy_matrix_scores_nothing_and_has_the_closed_form_proxy(trained_store):
    store, refs = trained_store
    closed = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=12, max_train=500, max_test=200),
                            store).record.summary  # fmt: skip
    out = run_experiment("matrix", MatrixSpec(refs[0], refs[1], mode="proxy", max_train=500), store)
    s = out.record.summary
    assert out.record.status == "done" and s["mode"] == "proxy" and s["base"] is None
    assert _cells(s["values"]) == [] and _cells(s["penalty"]) == []
    assert s["proxy"] == closed["proxy"]  # the same moments: the proxy does not depend on the scoring
    state = matrix_state(store, out.record.id, s, MatrixSpec(refs[0], refs[1], mode="proxy", max_train=500),
                         status="done", final=True)  # fmt: skip
    assert state.metrics == ["r2", "cka"] and state.grid("r2") == s["proxy"]["r2"] and state.intervals("r2") is None
    closed_state = matrix_state(store, "x", closed, MatrixSpec(refs[0], refs[1]), status="done", final=True)
    assert closed_state.metrics == ["accuracy", "penalty", "r2", "cka"]
    with pytest.raises(StitchError, match="accuracy or penalty or r2 or cka"):
        closed_state.grid("loss")


def test_proxy_mode_refuses_what_it_cannot_do():
    with pytest.raises(StitchError, match="no controls"):
        MatrixSpec("zoo:a", "zoo:b", mode="proxy", controls=True)
    with pytest.raises(StitchError, match="proxy mode fits"):
        MatrixSpec("zoo:a", "zoo:b", mode="proxy", adapter={"kind": "linear", "init": "random"})
    with pytest.raises(StitchError, match="proxy mode only fits"):
        MatrixSpec("zoo:a", "zoo:b", mode="proxy", objective="match")


def test_a_streamed_matrix_has_the_cached_proxy(trained_store, monkeypatch):
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], mode="proxy", max_train=300, senders=("block1", "fc1"))
    cached = run_experiment("matrix", spec, store).record.summary["proxy"]
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.05")  # a few images at a time, nothing cached
    streamed = run_experiment("matrix", spec, store, rerun=True).record.summary["proxy"]
    for what in ("r2", "cka"):
        assert max(abs(a - b) for a, b in zip(_cells(cached[what]), _cells(streamed[what]))) < 1e-5


def test_recommend_ranks_and_agreement_measures():
    summary = {"senders": ["s1", "s2"], "receivers": ["r1", "r2"], "mode": "closed-form",
               "values": [[0.5, 0.9], [0.7, None]], "proxy": {"r2": [[0.2, 0.8], [0.5, None]],
                                                              "cka": [[0.9, 0.1], [0.3, None]]}}  # fmt: skip
    assert ranking_choices(summary) == ["r2", "cka", "accuracy"]
    ranked = recommend(summary, by="r2")
    assert [(c["sender"], c["receiver"]) for c in ranked] == [("s1", "r2"), ("s2", "r1"), ("s1", "r1")]
    assert ranked[0] == {"sender": "s1", "receiver": "r2", "score": 0.8, "r2": 0.8, "cka": 0.1, "accuracy": 0.9,
                         "probe_kl": None}  # a matrix stored before the probes has none
    trained = [[0.6, 0.95], [0.8, None]]
    assert agreement(ranked, trained, ["s1", "s2"], ["r1", "r2"], top=1) == {"spearman": 1.0, "best_in_top": True,
                                                                             "cells": 3}  # fmt: skip
    by_cka = agreement(recommend(summary, by="cka"), trained, ["s1", "s2"], ["r1", "r2"], top=1)
    assert by_cka["spearman"] == -1.0 and by_cka["best_in_top"] is False
    with pytest.raises(StitchError, match="rank by one of"):
        recommend(summary, by="loss")
    with pytest.raises(StitchError, match="no held-out R"):
        recommend({**summary, "proxy": None}, by="r2")
    assert spearman([1, 1, 2], [3, 3, 4]) == 1.0 and spearman([1, 2], [2, 1]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # a constant side has no ranks to correlate


def test_a_new_matrix_ranks_by_its_probes_first_and_by_relative_depth_last(trained_store):
    """Issue 42: a closed-form or proxy matrix keeps each cut's depth and the probe KL of every cut pair; the probes
    rank first (the ranking chosen on held-out pairs in bench/matrix_scaling.py), relative depth is the baseline."""
    store, refs = trained_store
    s = run_experiment("matrix", MatrixSpec(refs[0], refs[1], senders=("block1", "block2", "fc1"),
                                            receivers=("block1", "block2", "fc1"), mode="proxy"), store).record.summary
    assert ranking_choices(s) == ["probe_kl", "r2", "cka", "depth"]
    kl = s["probe_kl"]
    assert len(kl) == 3 and all(v >= 0 for row in kl for v in row)
    assert min(range(3), key=lambda j: kl[2][j]) == 2  # A's fc1 predicts most like B's fc1
    top = recommend(s, by="probe_kl", top=2)
    assert top[0]["probe_kl"] == min(v for row in kl for v in row) and top[0]["score"] == -top[0]["probe_kl"]
    by_depth = recommend(s, by="depth")
    assert [(c["sender"], c["receiver"]) for c in by_depth[:3]] == [("block1", "block1"), ("block2", "block2"),
                                                                    ("fc1", "fc1")]  # fmt: skip
    trained = run_experiment("matrix", MatrixSpec(refs[0], refs[1], senders=("fc1",), receivers=("fc1",),
                                                  mode="trained", epochs=1), store).record.summary  # fmt: skip
    assert trained["probe_kl"] is None  # a trained matrix ranks nothing


def test_proxy_run_finds_the_pairs_ranking(trained_store):
    store, refs = trained_store
    assert proxy_run(store, refs[1], refs[0]) is None
    rec = run_experiment("matrix", proxy_spec(refs[1], refs[0]), store).record
    assert proxy_run(store, refs[1], refs[0]).id == rec.id
    top = recommend(rec.summary, top=5)  # the probes first (a matrix since issue 42 has them)
    assert len(top) == 5 and top[0]["score"] == -min(_cells(rec.summary["probe_kl"]))
    assert recommend(rec.summary, by="r2", top=1)[0]["score"] == max(_cells(rec.summary["proxy"]["r2"]))


def test_cli_proxy_prints_the_ranking(trained_store):
    store, refs = trained_store
    args = ("matrix", "--a", refs[0], "--b", refs[1], "--mode", "proxy", "--max-train", "400", "--senders", "block2,fc1")
    done = cli(*args, store=store)
    assert done.returncode == 0, done.stderr
    assert "held-out R² of each cell's linear fit" in done.stdout and "train these first" in done.stdout
    assert "  1. " in done.stdout and "nothing scored" in done.stdout
    data = json.loads(cli(*args, "--json", store=store).stdout)
    assert data["proxy"]["r2"] and data["mode"] == "proxy"
    ranked = cli("matrix", "--a", refs[0], "--b", refs[1], "--max-train", "400", "--senders", "block2,fc1",
                 "--recommend", "accuracy", store=store)  # fmt: skip
    assert ranked.returncode == 0 and "ranked by closed-form accuracy" in ranked.stdout


def test_the_report_draws_the_proxy_beside_the_matrix(trained_store):
    from stitchcore.report.figures import run_figures

    store, refs = trained_store
    closed = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=12, max_train=500, max_test=200), store)
    assert [f.name for f in run_figures(closed.record, store)] == ["accuracy", "penalty", "proxy-r2", "proxy-cka"]
    proxy = run_experiment("matrix", MatrixSpec(refs[0], refs[1], mode="proxy", max_train=500), store)
    figs = run_figures(proxy.record, store)
    assert [f.name for f in figs] == ["proxy-r2", "proxy-cka"] and "Held-out R²" in figs[0].title
