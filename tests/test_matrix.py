"""Similarity matrices (Hernandez, Dangovski & Lu) of the two digit CNNs: real fits, real store."""

from __future__ import annotations

import json
import threading

import pytest
import torch

import stitchcore.experiments.matrix as mx  # registers the "matrix" experiment
from stitchcore.cuts import list_cuts, split
from stitchcore.data.images import load_dataset
from stitchcore.errors import Cancelled, CutError, StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec, cell_axes, cell_grid, partial_path
from stitchcore.experiments.matrix import units as mx_units  # what a worker runs: the fits happen there
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import collect, collect_cuts
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store

CUTS = ["block1", "block2", "flatten", "fc1", "fc2"]
MAPS = {"block1", "block2"}


def _cells(store, run_id):
    return mx.partial_cells(store, run_id)  # the reader the Similarity page uses


def _count_fits(monkeypatch):
    """One entry per adapter the cached path fits (shared moments), or fits one by one."""
    calls = []
    real_one, real_shared = mx_units.fit_adapter, mx_units.shared_fits

    def counting(*args, **kw):
        calls.append(1)
        return real_one(*args, **kw)

    def shared(adapters, *args, **kw):
        calls.extend([1] * len(adapters))
        return real_shared(adapters, *args, **kw)

    monkeypatch.setattr(mx_units, "fit_adapter", counting)
    monkeypatch.setattr(mx_units, "shared_fits", shared)
    return calls


def test_spec_round_trip_and_validation():
    spec = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=["block1", "fc1"], mode="trained")
    assert spec.senders == ("block1", "fc1")
    d = spec.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert MatrixSpec.from_dict(d) == spec
    assert spec.adapter == AdapterSpec(init="lstsq", rescale="chained")  # today's default: a gap over 2x chained
    assert "trained" in spec.label() and "2 x all cuts" in spec.label()
    with pytest.raises(StitchError, match="unknown MatrixSpec field"):
        MatrixSpec.from_dict({**d, "cut_a": "x"})
    with pytest.raises(StitchError, match="mode"):
        MatrixSpec("zoo:a", "zoo:b", mode="fast")
    with pytest.raises(StitchError, match="closed-form mode .* init"):
        MatrixSpec("zoo:a", "zoo:b", adapter=AdapterSpec(init="random"))
    with pytest.raises(StitchError, match="each once"):
        MatrixSpec("zoo:a", "zoo:b", senders=("fc1", "fc1"))


def test_collect_cuts_matches_split_prefixes(trained_store):
    store, refs = trained_store
    m = load_model(refs[0], store=store)
    ds = load_dataset("digits")
    cuts = list_cuts(m)
    got = collect_cuts(m, cuts, ds, "test", device=torch.device("cpu"), limit=300)
    for cut in cuts:
        prefix, _ = split(m, cut)
        want = collect(prefix, ds, m.preprocess, "test", device=torch.device("cpu"), limit=300)
        assert got[cut.name].shape == want.shape == (300, *cut.shape)
        torch.testing.assert_close(got[cut.name], want, rtol=0, atol=0)


def test_collect_cuts_falls_back_to_prefixes_when_a_hook_disagrees(trained_store, monkeypatch):
    store, refs = trained_store
    m = load_model(refs[0], store=store)
    ds = load_dataset("digits")
    cuts = list_cuts(m)
    wrong = m.model.get_submodule("block1")
    monkeypatch.setattr(m.model, "get_submodule", lambda name: wrong)  # every hook records block1's output
    got = collect_cuts(m, cuts, ds, "test", device=torch.device("cpu"), limit=50)
    for cut in cuts:
        prefix, _ = split(m, cut)
        want = collect(prefix, ds, m.preprocess, "test", device=torch.device("cpu"), limit=50)
        torch.testing.assert_close(got[cut.name], want, rtol=0, atol=0)


def test_closed_form_matrix_of_two_digit_cnns(trained_store):
    store, refs = trained_store
    out = run_experiment("matrix", MatrixSpec(refs[0], refs[1]), store)
    s = out.record.summary
    assert out.record.status == "done" and not out.cached
    assert s["senders"] == CUTS and s["receivers"] == CUTS
    assert s["metric"] == "accuracy" and s["mode"] == "closed-form" and s["n_cells"] == 25
    assert s["controls"] is None
    values = s["values"]
    assert len(values) == 5 and all(len(row) == 5 for row in values)
    print("\n5x5 closed-form matrix (rows: senders of A, columns: receivers of B):", s["base"])
    for name, row in zip(CUTS, values):
        print(f"  {name:8s}", ["  --  " if v is None else f"{v:.3f}" for v in row])
    for i, sender in enumerate(CUTS):
        for j, receiver in enumerate(CUTS):
            key = f"{sender}->{receiver}"
            if sender not in MAPS and receiver in MAPS:  # vector -> spatial map: no adapter joins them
                assert values[i][j] is None and s["penalty"][i][j] is None
                assert "vector" in s["skipped"][key]
            else:
                assert key not in s["skipped"]
                assert 0.0 <= values[i][j] <= 1.0
                assert 0.0 <= s["residual"][i][j] < 1.0
                assert s["penalty"][i][j] == pytest.approx(s["base"]["b"] - values[i][j], abs=1e-5)
        assert values[i][i] > 0.8, (sender, values[i][i])  # same-depth cuts of seeds 0 and 1 stitch well
    assert len(s["skipped"]) == 6
    cells = _cells(store, out.record.id)
    assert len(cells) == 25 and {c["sender"] for c in cells} == set(CUTS)
    assert cell_axes(cells) == (CUTS, CUTS) and cell_grid(cells, CUTS, CUTS) == values  # the page's partial grid
    assert cell_grid(cells, CUTS, CUTS, field="penalty") == s["penalty"]
    assert mx.partial_cells(store, "no-such-run") == []
    assert len(store.series(out.record.id)["cell_acc"]) == 19
    assert not partial_path(store, out.record.id).exists()  # the resume file goes on success
    assert run_experiment("matrix", MatrixSpec(refs[0], refs[1]), store).cached


def test_similarity_beside_finds_the_measure_launched_with_the_matrix(trained_store, tmp_path):
    src, refs = trained_store
    copy_store(src.root, tmp_path / "store")
    store = Store(tmp_path / "store")
    spec = MatrixSpec(refs[0], refs[1], senders=("fc1",), receivers=("fc1", "fc2"), max_test=100)
    assert mx.similarity_beside(store, spec) is None  # none launched yet
    matrix = run_experiment("matrix", spec, store).record

    def beside(measure: str, **kw):  # what the Similarity page launches with the matrix
        sim = SimilaritySpec(refs[0], refs[1], senders=spec.senders, receivers=spec.receivers, measure=measure, **kw)
        return run_experiment("similarity", sim, store).record

    procrustes = beside("procrustes")
    found = mx.similarity_beside(store, spec, matrix.created)
    assert found is not None and found.id == procrustes.id and found.spec["measure"] == "procrustes"
    beside("rsa", max_samples=50)  # other settings: not what the page launches beside this matrix
    assert mx.similarity_beside(store, spec, matrix.created).id == procrustes.id
    later = beside("cka-linear")  # the same cuts under another measure, launched later
    assert mx.similarity_beside(store, spec, matrix.created).id == procrustes.id  # nearest the matrix
    assert mx.similarity_beside(store, spec).id == later.id  # no time given: the newest
    other_cuts = MatrixSpec(refs[0], refs[1], senders=("fc2",), receivers=("fc1", "fc2"), max_test=100)
    assert mx.similarity_beside(store, other_cuts) is None
    store.close()


def test_model_with_itself_has_identity_diagonal(trained_store):
    store, refs = trained_store
    s = run_experiment("matrix", MatrixSpec(refs[0], refs[0]), store).record.summary
    assert s["base"]["a"] == s["base"]["b"]
    for i in range(len(CUTS)):  # lstsq of a layer onto itself is the identity
        assert abs(s["values"][i][i] - s["base"]["a"]) <= 0.01, (CUTS[i], s["values"][i][i])
        assert s["residual"][i][i] < 1e-3


def test_trained_mode_on_a_subset(trained_store):
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], senders=("block2", "fc1"), receivers=("fc1", "fc2"), mode="trained",
                      epochs=1, max_train=400)  # fmt: skip
    out = run_experiment("matrix", spec, store)
    s = out.record.summary
    assert s["mode"] == "trained" and s["senders"] == ["block2", "fc1"] and s["receivers"] == ["fc1", "fc2"]
    assert s["n_train"] == 400
    assert all(0.5 < v <= 1.0 for row in s["values"] for v in row), s["values"]
    assert len(_cells(store, out.record.id)) == 4
    assert run_experiment("matrix", spec, store).cached


def test_cancel_keeps_cells_and_rerun_resumes(trained_store, monkeypatch):
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], seed=3, max_test=300)
    cancel = threading.Event()
    logged = []

    def progress(fraction, message, metrics):
        if "cell_acc" in metrics:
            logged.append(metrics["cell_acc"])
            if len(logged) == 3:
                cancel.set()

    fits = _count_fits(monkeypatch)
    with pytest.raises(Cancelled):
        run_experiment("matrix", spec, store, progress=progress, cancel=cancel)
    rec = store.lookup(run_id_for("matrix", spec.to_dict()))
    assert rec.status == "cancelled"
    kept = json.loads(partial_path(store, rec.id).read_text())["cells"]
    scored = sum(c["accuracy"] is not None for c in kept)
    assert 3 <= scored < 19 and len(fits) < 19  # cancelled before the last grid's cells were fitted
    assert len(_cells(store, rec.id)) == len(kept)  # the partial matrix is viewable

    fits.clear()
    out = run_experiment("matrix", spec, store)
    s = out.record.summary
    assert out.record.status == "done" and not out.cached
    assert len(fits) == 19 - scored, "finished cells are not fitted again"
    assert sum(v is not None for row in s["values"] for v in row) == 19
    assert all(v in [v for row in s["values"] for v in row] for v in logged[:3])  # the cells it kept
    assert not partial_path(store, out.record.id).exists()


def test_controls_random_sender_is_worse_at_late_cuts(trained_store):
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], senders=("block2", "fc2"), receivers=("fc1", "fc2"), controls=True)
    s = run_experiment("matrix", spec, store).record.summary
    c = s["controls"]
    assert set(c) == {"random_sender", "random_receiver", "random_both", "noise_sender"} == set(mx.CONTROLS)
    assert s["debiased_control"] == "random_sender"
    for i in range(2):
        for j in range(2):
            assert s["debiased"][i][j] == pytest.approx(
                s["values"][i][j] - c["random_sender"][i][j], abs=1e-5
            )
    assert c["random_sender"][1][1] < s["values"][1][1] - 0.1  # fc2 of a random CNN carries little
    assert 0 <= s["base_random"]["b"] < 0.3  # a random B alone is near chance ...
    # ... but its controls into the random receiver are task-trained (a closed-form fit would copy the random net:
    # chance in every cell), so a late trained sender into its last layer classifies (Hernandez et al.'s pattern)
    assert s["control_training"] == "matched" and c["random_receiver"][1][1] > 0.5

    # the debiased matrices of the controls made as the (closed-form) cells: trained - that control, stored and read
    # back; the task-trained ones are drawn beside the matrix, never subtracted from it (like with like)
    assert set(s["debiased_by_control"]) == {"random_sender", "noise_sender"}
    for control in ("random_sender", "noise_sender"):
        for i in range(2):
            for j in range(2):
                want = s["values"][i][j] - c[control][i][j]
                assert s["debiased_by_control"][control][i][j] == pytest.approx(want, abs=1e-5)
        assert mx.debiased(s, control) == s["debiased_by_control"][control]
    for control in ("random_receiver", "random_both"):
        assert mx.debiased(s, control) is None and "task-trained" in mx.debiased_refusal(s, control)
    assert s["debiased"] == s["debiased_by_control"]["random_sender"]
    tables = mx.control_tables(s, [], s["senders"], s["receivers"])
    assert [(t.control, t.name) for t in tables] == [
        ("random_sender", "random sender"), ("random_receiver", "random receiver"), ("random_both", "both random"),
        ("noise_sender", "noise sender")]
    assert all(t.values == c[t.control] and t.debiased == s["debiased_by_control"].get(t.control) for t in tables)
    assert [t.overlap is None for t in tables] == [False, True, True, False]  # no rings without a debiased map
    # a running matrix: the same tables from its cells (its spec says how each control was made)
    live = mx.control_tables(None, _cells(store, run_experiment("matrix", spec, store).record.id), s["senders"],
                             s["receivers"], spec=spec)  # fmt: skip
    assert [(t.values, t.debiased) for t in live] == [(t.values, t.debiased) for t in tables]


OLD_SUMMARY = {  # a matrix with controls as stored before the three debiased matrices: only the random sender's
    "senders": ["block2", "fc2"], "receivers": ["block2", "fc2"],
    "values": [[0.9, 0.8], [None, 0.95]],
    "controls": {"random_sender": [[0.2, 0.3], [None, 0.1]], "random_receiver": [[0.1, 0.1], [None, 0.12]],
                 "random_both": [[0.1, 0.09], [None, 0.1]]},
    "debiased": [[0.7, 0.5], [None, 0.85]], "debiased_control": "random_sender",
    "skipped": {"fc2->block2": "a vector sender cannot feed a spatial receiver"},
}  # fmt: skip


def test_old_summaries_with_one_debiased_matrix_still_give_every_panel():
    s = OLD_SUMMARY
    assert "debiased_by_control" not in s
    tables = mx.control_tables(s, [], s["senders"], s["receivers"])
    assert [t.control for t in tables] == list(mx.CONTROLS[:3])  # no noise sender then
    assert tables[0].debiased == s["debiased"]  # the stored one, as it was
    assert tables[1].debiased == [[0.8, 0.7], [None, 0.83]]  # computed: values - random receiver
    assert tables[2].debiased == mx.difference(s["values"], s["controls"]["random_both"])
    only = {k: v for k, v in s.items() if k not in ("controls", "debiased_control")}  # just `debiased`
    (alone,) = mx.control_tables(only, [], s["senders"], s["receivers"])
    assert alone.control == "random_sender" and alone.values is None and alone.debiased == s["debiased"]
    assert mx.debiased(only, "random_receiver") is None
    assert mx.control_tables({"values": [[0.5]], "controls": None, "debiased": None}, [], ["a"], ["b"]) == []
    with pytest.raises(StitchError, match="unknown matrix control"):
        mx.debiased(s, "random")


def test_skipped_pairs_from_summary_and_cells():
    cells = [{"variant": "random_sender", "sender": "fc1", "receiver": "block1", "accuracy": None,
              "skipped_reason": "vector into a map"},
             {"variant": "trained", "sender": "fc1", "receiver": "fc2", "accuracy": 0.9, "skipped_reason": None}]
    assert mx.skipped_pairs(OLD_SUMMARY, cells) == {
        ("fc2", "block2"): "a vector sender cannot feed a spatial receiver", ("fc1", "block1"): "vector into a map"}
    assert mx.skipped_pairs(None, []) == {}
    # a live matrix whose spec asks for controls: every control has a (still empty) table from the start
    tables = mx.control_tables(None, cells[1:], ["fc1"], ["fc2"], controls=True)
    assert [t.values for t in tables] == [[[None]]] * 4 and [t.debiased for t in tables] == [[[None]]] * 4


def test_controls_need_zoo_models(trained_store):
    store, _ = trained_store
    spec = MatrixSpec("timm:resnet18", "timm:resnet18", controls=True)
    with pytest.raises(StitchError, match="controls need trained zoo models"):
        run_experiment("matrix", spec, store)


def test_unknown_cut_names_the_close_ones(trained_store):
    store, refs = trained_store
    with pytest.raises(CutError, match="close"):
        run_experiment("matrix", MatrixSpec(refs[0], refs[1], senders=("fc9",)), store)


def test_a_trained_matrix_over_the_budget_streams_and_learns_what_the_cached_one_does(trained_store, monkeypatch):
    """Over the budget the trained cells are no longer refused: fitted from streamed passes, then trained on A's
    activations computed per drawn batch (one pass of A for every sender), nothing cached; same data order and
    starts, so the matrix is the cached one up to float rounding."""
    store, refs = trained_store
    spec = dict(senders=("block1", "fc1"), receivers=("fc1", "fc2"), mode="trained", epochs=1, max_train=256,
                max_test=128)  # fmt: skip
    cached = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=9, **spec), store).record.summary
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.05")
    fits = _count_fits(monkeypatch)
    out = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=9, **spec), store, rerun=True)
    s = out.record.summary
    assert out.record.status == "done" and fits == []  # nothing fitted from a cache
    assert s["skipped"] == cached["skipped"] and s["base"] == cached["base"]
    diffs = [abs(g - w) for rg, rw in zip(s["values"], cached["values"]) for g, w in zip(rg, rw) if g is not None]
    assert diffs and max(diffs) <= 3 / s["n_test"], diffs
    assert sum(diffs) / len(diffs) <= 1.5 / s["n_test"], diffs


def test_closed_form_over_the_budget_streams_and_gives_the_cached_numbers(trained_store, monkeypatch):
    """Activations over the budget: one streamed pass fits every cell, one scores them, a few images at a
    time; the matrix is the one the cached path computes (same fits up to float rounding)."""
    store, refs = trained_store
    cached = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=5, max_train=500), store).record.summary
    streamed_calls = []
    real = mx_units.fit_streamed
    monkeypatch.setattr(mx_units, "fit_streamed", lambda *a, **kw: streamed_calls.append(len(a[0])) or real(*a, **kw))
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.05")  # a few images of activations at a time
    fits = _count_fits(monkeypatch)
    progress = []
    out = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=6, max_train=500), store,
                         progress=lambda f, m, _metrics: progress.append((f, m)))  # fmt: skip
    s = out.record.summary
    assert out.record.status == "done" and fits == [] and streamed_calls == [19]  # the 19 joinable cells at once
    assert s["skipped"] == cached["skipped"] and s["base"] == cached["base"]
    for got, want in ((s["values"], cached["values"]), (s["penalty"], cached["penalty"])):
        for row_got, row_want in zip(got, want):
            for g, w in zip(row_got, row_want):
                assert (g is None) == (w is None) and (g is None or abs(g - w) <= 1 / s["n_test"] + 1e-9)
    for row_got, row_want in zip(s["residual"], cached["residual"]):
        assert all(g is None and w is None or abs(g - w) < 1e-4 for g, w in zip(row_got, row_want))
    assert any("fitting 19 adapters: batch" in m for _, m in progress)
    assert any("scoring 19 adapters: batch" in m for _, m in progress)
    assert [f for f, _ in progress] == sorted(f for f, _ in progress)  # progress only moves forward
