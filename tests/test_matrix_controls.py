"""Matrix controls that can break a claim (issue 39): a noise sender beside every matrix with controls, and
debiased maps only like with like (closed-form cells minus closed-form controls, trained minus trained).
Small on purpose: two digit CNNs, 2 x 2 joinable cells, a few hundred images, one epoch where anything trains."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import stitchcore.experiments.matrix as mx
from stitchcore.backends.local import LocalBackend
from stitchcore.cuts import get_cut
from stitchcore.data.images import load_dataset
from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.estimate import estimate_seconds
from stitchcore.experiments.matrix import MatrixSpec, control_tables, debiased, debiased_refusal, made_alike
from stitchcore.experiments.matrix import units as mx_units
from stitchcore.experiments.matrix.run import check_matrix
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import collect_cuts
from stitchcore.store.results import run_id_for

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
PICK = {"senders": ("block2", "fc1"), "receivers": ("fc1", "fc2"), "max_train": 300, "max_test": 150, "epochs": 1}
STORED = {  # a closed-form matrix with controls as stored before issue 25 (controls made as the cells)
    "a": A, "b": B, "senders": ["fc1"], "receivers": ["fc2"],
    "adapter": {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "lstsq", "rank": None},
    "mode": "closed-form", "epochs": 3, "optimizer": "adamw", "lr": 0.01, "weight_decay": 0.05, "batch_size": 64,
    "seed": 0, "dataset": None, "max_train": None, "max_test": None, "controls": True, "precision": "fp32",
}  # fmt: skip
ISSUE_25 = {**STORED, "control_training": "task", "twin_seeds": "distinct"}  # its controls all task-trained


# -- the spec: new runs get the noise sender, stored ones read as they were ----------------------------------------


def test_new_specs_with_controls_add_the_noise_sender_and_stored_ones_keep_their_ids():
    new = MatrixSpec(A, B, controls=True)
    assert new.variants == ("trained", "random_sender", "random_receiver", "random_both", "noise_sender")
    assert new.to_dict()["noise_sender"] is True and new.to_dict()["control_training"] == "matched"
    for old in (STORED, ISSUE_25):  # same dict, same id, and the controls they computed (no noise sender)
        spec = MatrixSpec.from_dict(old)
        assert spec.to_dict() == old and run_id_for("matrix", spec.to_dict()) == run_id_for("matrix", old)
        assert spec.variants == mx.VARIANTS[:4]
    assert MatrixSpec.from_dict(ISSUE_25).control_training == "task"
    # without controls nothing moves (no key, the old id), whatever is asked
    assert "noise_sender" not in MatrixSpec(A, B, noise_sender=True).to_dict()
    assert MatrixSpec(A, B).variants == ("trained",)
    # a matrix whose cells train on a task term: every control made as the cells, whichever rule is asked
    for objective in ("task", "task+0.5*match"):
        assert MatrixSpec(A, B, mode="trained", objective=objective, controls=True).control_training == "as-matrix"
    with pytest.raises(StitchError, match="noise_sender is true or false"):
        MatrixSpec(A, B, controls=True, noise_sender="yes")
    assert MatrixSpec(A, B, controls=True, noise_sender=False).variants == mx.VARIANTS[:4]


def test_controls_are_made_like_the_cells_except_into_a_random_receiver_where_that_is_chance():
    def alike(spec: MatrixSpec) -> list[str]:
        return [c for c in spec.variants[1:] if made_alike(spec.mode, spec.objective, spec.control_training, c)]

    closed = MatrixSpec(A, B, controls=True)
    assert alike(closed) == ["random_sender", "noise_sender"]  # both fitted in closed form, as the cells
    assert mx.cell_objective(closed, "random_receiver") == {"task": 1.0} and closed.controls_at_chance == ()
    copy = MatrixSpec(A, B, mode="trained", objective="match", controls=True)  # the copy task as the cells
    assert alike(copy) == ["random_sender", "noise_sender"]
    assert mx.cell_objective(copy, "noise_sender") == {"match": 1.0}
    assert alike(MatrixSpec(A, B, mode="trained", controls=True)) == list(mx.CONTROLS)  # trained beside trained
    # the issue-25 rule (every control task-trained beside closed-form cells): nothing alike, so no debiased map
    assert alike(MatrixSpec.from_dict(ISSUE_25)) == []


def test_an_issue_25_summary_keeps_its_controls_but_no_debiased_map():
    """Stored closed-form matrices with task-trained controls: their maps subtracted trained controls from
    closed-form cells (4 of 19 cells negative on the digit CNNs); read back, each control is drawn alone and
    says why it has no debiased map."""
    s = {"senders": ["fc1"], "receivers": ["fc2"], "values": [[0.9]], "values_ci": [[[0.85, 0.95]]],
         "controls": {c: [[0.92]] for c in mx.CONTROLS[:3]},
         "controls_ci": {c: [[[0.88, 0.96]]] for c in mx.CONTROLS[:3]},
         "debiased": [[-0.02]], "debiased_control": "random_sender",
         "debiased_by_control": {c: [[-0.02]] for c in mx.CONTROLS[:3]},
         "mode": "closed-form", "objective": "task", "control_training": "task"}  # fmt: skip
    for control in mx.CONTROLS[:3]:
        assert debiased(s, control) is None
        why = debiased_refusal(s, control)
        assert "closed-form least-squares fits and this control's adapters are task-trained" in why
    for spec in (None, MatrixSpec.from_dict(ISSUE_25)):  # a report (summary alone) and the page (with the spec)
        tables = control_tables(s, [], ["fc1"], ["fc2"], spec=spec)
        assert [t.control for t in tables] == list(mx.CONTROLS[:3])
        assert all(t.values == [[0.92]] and t.debiased is None and t.overlap is None for t in tables)
        assert all("No debiased map" in t.note for t in tables)
    # the same summary as a pre-issue-25 run stored it (controls made as the cells): its maps stand
    older = {k: v for k, v in s.items() if k != "control_training"}
    assert debiased(older, "random_sender") == [[-0.02]] and debiased_refusal(older, "random_sender") is None


# -- runs ----------------------------------------------------------------------------------------------------------


def test_a_closed_form_matrix_debiases_against_closed_form_controls(trained_store):
    """The random sender and the noise sender of a closed-form matrix are fitted in closed form, as its cells
    (the very fits a run whose every control is made as its cells gives), and only those are subtracted; the
    task-trained controls into the random receiver are drawn beside it, and say why they have no map."""
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], controls=True, **PICK)
    s = run_experiment("matrix", spec, store).record.summary
    fitted = run_experiment("matrix", replace(spec, control_training="as-matrix"), store).record.summary
    assert s["values"] == fitted["values"]
    for control in ("random_sender", "noise_sender"):
        assert s["controls"][control] == fitted["controls"][control]  # closed-form fits, not trained stitches
        assert debiased(s, control) == mx.difference(s["values"], s["controls"][control])
    assert set(s["debiased_by_control"]) == {"random_sender", "noise_sender"}
    assert s["debiased"] == s["debiased_by_control"]["random_sender"]
    for control in mx.INTO_RANDOM:  # task-trained: they leave chance (a fit into random B would not) ...
        assert s["controls"][control] != fitted["controls"][control]
        assert debiased(s, control) is None  # ... but are never subtracted from closed-form cells
        assert "task-trained and drawn beside the matrix" in debiased_refusal(s, control)
    state = mx.matrix_state(store, run_id_for("matrix", spec.to_dict()), s, spec, status="done", final=True)
    assert [(t.control, t.debiased is not None) for t in state.controls] == [
        ("random_sender", True), ("random_receiver", False), ("random_both", False), ("noise_sender", True)]
    assert all("No debiased map" in t.note for t in state.controls if t.debiased is None)


def test_the_noise_sender_is_class_clustered_noise_scaled_like_each_sender_cut(trained_store, monkeypatch):
    store, refs = trained_store
    calls = []
    real = mx_units.clustered_noise

    def spy(labels, shape, **kw):
        calls.append((kw["split"], len(labels), shape, float(kw["like"].mean()), float(kw["like"].std()), kw["seed"]))
        return real(labels, shape, **kw)

    monkeypatch.setattr(mx_units, "clustered_noise", spy)
    spec = MatrixSpec(refs[0], refs[1], controls=True, seed=4, **PICK)
    s = run_experiment("matrix", spec, store).record.summary
    m = load_model(refs[0], store=store)
    cuts = [get_cut(m, name) for name in PICK["senders"]]
    acts = collect_cuts(m, cuts, load_dataset("digits"), "train", device=torch.device("cpu"), limit=300)
    want = {(split, n, c.shape, round(float(acts[c.name].mean()), 4), round(float(acts[c.name].std()), 4), 4)
            for c in cuts for split, n in (("train", 300), ("test", 150))}  # fmt: skip
    assert {(sp, n, sh, round(mu, 4), round(sd, 4), seed) for sp, n, sh, mu, sd, seed in calls} == want
    noise = s["controls"]["noise_sender"]
    assert all(0.0 <= v <= 1.0 for row in noise for v in row) and noise != s["values"]
    # noise clustered by class stitches into B's late layers far above chance (0.1): the baseline a claim about
    # A's representation has to beat ("Functional Alignment Can Mislead")
    assert noise[1][1] > 0.5, noise
    again = run_experiment("matrix", spec, store, rerun=True).record.summary
    assert again["controls"]["noise_sender"] == noise  # seeded


def test_units_elsewhere_make_the_same_noise_from_shipped_activations(trained_store, monkeypatch):
    """A backend whose units run elsewhere gets A's activations shipped and makes the noise sender's there:
    the same cells as the run's own workspace."""
    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], controls=True, seed=2, **{**PICK, "receivers": ("fc2",)})
    here = run_experiment("matrix", spec, store).record.summary

    class Elsewhere(LocalBackend):  # units take what a cluster's would: packages, shipped activations
        name = "elsewhere"

        def describe(self) -> dict:
            return {"name": self.name}

    monkeypatch.setattr(RunContext, "backend", lambda self: Elsewhere(self.device))
    there = run_experiment("matrix", spec, store, rerun=True).record.summary
    assert there["backend"] == {"name": "elsewhere"}
    for control in spec.variants[1:]:
        for got, want in zip(there["controls"][control], here["controls"][control], strict=True):
            assert got == pytest.approx(want, abs=1e-4), control


def test_a_streamed_matrix_refuses_the_noise_sender_with_the_fix(trained_store, monkeypatch):
    store, refs = trained_store
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.05")  # every matrix here would stream
    with pytest.raises(StitchError, match=r"noise-sender control needs the activations in memory .*noise_sender=Fal"):
        check_matrix(MatrixSpec(refs[0], refs[1], controls=True, **PICK), store)
    with pytest.raises(StitchError, match="noise-sender control needs the activations in memory"):
        run_experiment("matrix", MatrixSpec(refs[0], refs[1], controls=True, seed=7, **PICK), store)
    check_matrix(MatrixSpec(refs[0], refs[1], controls=True, noise_sender=False, **PICK), store)  # it may


def test_the_estimate_counts_the_noise_sender_and_trains_only_what_trains(trained_store):
    store, refs = trained_store
    pick = {"senders": ("block2",), "receivers": ("fc1", "fc2"), "controls": True}
    with_noise, without = (estimate_seconds("matrix", MatrixSpec(refs[0], refs[1], noise_sender=n, **pick), store)
                           for n in (True, False))  # fmt: skip
    # 2 cells x (the matrix + 4 controls); only the two controls into a random receiver train
    assert "10 cells, 4 of them trained" in with_noise.basis and "8 cells, 4 of them trained" in without.basis
    assert with_noise.seconds > without.seconds
