"""Matrices faithful to Hernandez, Dangovski & Lu (issue 25): controls that can differ from chance, the paper's
stitch (strided conv down, nearest + 1x1 up, random init) and its copy objective, reachable by name; stored runs
keep their ids.  Small on purpose: two digit CNNs, one or two cuts a side, a few hundred images, 1-2 epochs."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest
import torch
from torch import nn

import stitchcore.experiments.matrix as mx
from stitchcore.cli.main import main
from stitchcore.cli.matrix import _PRESETS, _RANKINGS, matrix_fields
from stitchcore.experiments.matrix.recommend import RANKINGS
from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec, control_note, control_tables, preset_fields
from stitchcore.report.figures import control_panels
from stitchcore.stitching.shared_suffix import train_adapters_shared_suffix
from stitchcore.stitching.train import AdapterTargets, TrainKnobs, train_adapter
from stitchcore.store.results import run_id_for
from tests.conftest import copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"
SMALL = {"max_train": 400, "max_test": 200}  # enough images for the patterns, a second or two a matrix
LEGACY_CONTROLS = {  # a closed-form matrix with controls as stored before control_training existed
    "a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "senders": ["fc1"], "receivers": ["fc2"],
    "adapter": {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "lstsq", "rank": None},
    "mode": "closed-form", "epochs": 3, "optimizer": "adamw", "lr": 0.01, "weight_decay": 0.05, "batch_size": 64,
    "seed": 0, "dataset": None, "max_train": None, "max_test": None, "controls": True, "precision": "fp32",
}  # fmt: skip


# -- stored runs keep their ids -----------------------------------------------------------------------------------


def test_store_v1_matrix_and_older_dicts_keep_their_ids(tmp_path):
    copy_store(FIXTURE, tmp_path / "store")
    with sqlite3.connect(tmp_path / "store" / "stitchlab.sqlite") as db:
        (rid, text), = db.execute("select id, spec from runs where kind = 'matrix'").fetchall()
    old = json.loads(text)
    spec = MatrixSpec.from_dict(old)
    assert spec.to_dict() == old and run_id_for("matrix", spec.to_dict()) == rid
    assert spec.objective == "task" and spec.control_training == "as-matrix"
    # a closed-form matrix with controls stored before: same id, and it computes what it computed
    legacy = MatrixSpec.from_dict(LEGACY_CONTROLS)
    assert legacy.to_dict() == LEGACY_CONTROLS and legacy.control_training == "as-matrix"
    # new specs whose computation did not change write no new key: their ids are the old ones
    assert MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1").to_dict().keys() == old.keys()
    trained = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", mode="trained", controls=True)
    assert "control_training" not in trained.to_dict() and "objective" not in trained.to_dict()
    # what changed does: closed-form controls are now task-trained (a new id), the copy objective is written
    new = MatrixSpec.from_dict({k: v for k, v in LEGACY_CONTROLS.items() if k != "controls"} | {"controls": True,
                                                                                                "control_training": "task"})
    assert new.to_dict()["control_training"] == "task" and run_id_for("matrix", new.to_dict()) != run_id_for(
        "matrix", LEGACY_CONTROLS)
    copy = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", mode="trained", objective="match")
    assert copy.to_dict()["objective"] == "match" and MatrixSpec.from_dict(copy.to_dict()) == copy


# -- controls that cannot differ from chance are labelled; new ones are task-trained ---------------------------------


def test_closed_form_controls_into_a_random_receiver_are_labelled_at_chance():
    legacy = MatrixSpec.from_dict(LEGACY_CONTROLS)
    assert legacy.controls_at_chance == ("random_receiver", "random_both")
    can, note = control_note(legacy, "random_receiver")
    assert not can and "Cannot differ from chance" in note and "least-squares copy" in note
    assert control_note(legacy, "random_sender")[0]  # a random bottom fitted to trained B's activation: it can
    summary = {"values": [[0.95]], "controls": {"random_sender": [[0.6]], "random_receiver": [[0.1]],
                                                 "random_both": [[0.1]]}}  # fmt: skip
    tables = control_tables(summary, [], ["fc1"], ["fc2"], spec=legacy)
    assert [t.can_differ for t in tables] == [True, False, False]
    assert all(t.note for t in tables)
    titles = [p.title for t in tables for p in control_panels(t, ["fc1"], ["fc2"])]
    assert sum("chance by construction" in t for t in titles) == 2  # the two accuracy panels at chance
    # the copy objective into a random receiver only copies a random net: labelled too
    copy = MatrixSpec("zoo:a", "zoo:b", mode="trained", objective="match", controls=True,
                      control_training="as-matrix")  # fmt: skip
    assert copy.controls_at_chance == ("random_receiver", "random_both")
    assert "never trained on the task" in control_note(copy, "random_both")[1]
    # new specs: the controls into a random receiver task-trained, none pinned (the others made as the cells)
    for spec in (MatrixSpec("zoo:a", "zoo:b", controls=True), copy.__class__("zoo:a", "zoo:b", mode="trained",
                                                                              objective="match", controls=True)):
        assert spec.controls_at_chance == () and spec.control_training == "matched"
        assert all(control_note(spec, c)[0] for c in mx.CONTROLS)
    with pytest.raises(StitchError, match="task-trained controls need epochs >= 1"):
        MatrixSpec("zoo:a", "zoo:b", controls=True, epochs=0)


def test_closed_form_controls_are_task_trained_and_leave_chance(trained_store):
    store, refs = trained_store
    torch.manual_seed(0)
    pick = {"senders": ("fc1",), "receivers": ("fc2",), "controls": True, "epochs": 2, **SMALL}
    new = run_experiment("matrix", MatrixSpec(refs[0], refs[1], **pick), store).record.summary
    old = run_experiment("matrix", MatrixSpec(refs[0], refs[1], control_training="as-matrix", **pick),
                         store).record.summary  # fmt: skip
    assert old["controls"]["random_receiver"] == [[pytest.approx(old["base_random"]["b"], abs=0.02)]]  # chance
    assert old["controls_at_chance"] == ["random_receiver", "random_both"]
    # task-trained: a late trained sender into a random receiver's last layer is far above chance (the paper's)
    assert new["controls"]["random_receiver"][0][0] > 0.5 > old["controls"]["random_receiver"][0][0]
    assert new["controls"]["random_both"][0][0] > 0.2
    assert new["control_training"] == "matched" and new["controls_at_chance"] is None
    assert new["values"] == old["values"]  # the matrix itself is the same closed-form fit


# -- the paper's stitch, training and copy objective ---------------------------------------------------------------


def test_copy_objective_in_the_shared_loop_equals_train_adapter():
    torch.manual_seed(0)
    h = [torch.randn(40, 6), torch.randn(40, 4)]  # two senders [N, C_s]
    target = torch.randn(40, 5)  # B's activation at the receiver [N, 5]
    labels = torch.randint(0, 3, (40,))
    suffix = nn.Linear(5, 3).eval()
    knobs = TrainKnobs("adamw", 1e-2, 0.0, 2, 16, 0)
    objective = {"task": 1.0, "match": 0.5}
    shared = [nn.Linear(6, 5), nn.Linear(4, 5)]
    alone = [nn.Linear(6, 5), nn.Linear(4, 5)]
    for s, a in zip(shared, alone, strict=True):
        a.load_state_dict(s.state_dict())
    train_adapters_shared_suffix(shared, suffix, h, labels, knobs=knobs, device=torch.device("cpu"),
                                 objective=objective, receiver_acts=target)  # fmt: skip
    for adapter, acts in zip(alone, h, strict=True):
        train_adapter(adapter, suffix, acts, AdapterTargets(labels, receiver=target), objective=objective,
                      knobs=knobs, device=torch.device("cpu"))  # fmt: skip
    for s, a in zip(shared, alone, strict=True):
        torch.testing.assert_close(s.weight, a.weight, rtol=1e-5, atol=1e-6)
    # the copy task alone never runs the suffix
    only = [nn.Linear(6, 5)]
    train_adapters_shared_suffix(only, None, h[:1], labels, knobs=knobs, device=torch.device("cpu"),
                                 objective={"match": 1.0}, receiver_acts=target)  # fmt: skip
    with pytest.raises(ValueError, match="receiver_acts"):
        train_adapters_shared_suffix(only, None, h[:1], labels, knobs=knobs, device=torch.device("cpu"),
                                     objective={"match": 1.0})  # fmt: skip


def test_hernandez_preset_runs_strided_random_init_and_the_copy_task(trained_store):
    store, refs = trained_store
    fields = preset_fields("hernandez")
    assert fields["mode"] == "trained" and fields["adapter"].resample == "strided"
    assert fields["adapter"].init == "random" and fields["objective"] == "task"
    cuts = {"senders": ("block1", "block2"), "receivers": ("block1", "block2"), "epochs": 1, **SMALL}
    s = run_experiment("matrix", MatrixSpec(refs[0], refs[1], **fields, **cuts), store).record.summary
    assert s["skipped"] == {} and all(v is not None for row in s["values"] for v in row)  # down and up both join
    assert s["values"][0][1] > 0.3  # block1 [16,4,4] -> block2 [32,2,2] through a stride-2 conv, from scratch
    copy = run_experiment("matrix", MatrixSpec(refs[0], refs[1], **{**fields, "objective": "match"}, **cuts),
                          store).record.summary  # fmt: skip
    assert copy["objective"] == "match" and copy["values"] != s["values"]
    with pytest.raises(StitchError, match="closed-form mode only fits"):
        MatrixSpec(refs[0], refs[1], objective="match")
    with pytest.raises(StitchError, match="task | match"):
        MatrixSpec(refs[0], refs[1], mode="trained", objective="kd")
    with pytest.raises(StitchError, match="unknown matrix preset 'bansal'"):
        preset_fields("bansal")


def test_cli_names_the_adapter_and_the_preset(trained_store, capsys):
    store, refs = trained_store
    assert _PRESETS == tuple(mx.MATRIX_PRESETS)
    assert _RANKINGS == RANKINGS
    given = argparse.Namespace(preset="hernandez", mode=None, adapter=None, norm=None, resample="nearest",
                               init=None, rank=None, objective="match", epochs=None)  # fmt: skip
    f = matrix_fields(given)  # a flag given wins over the preset
    assert (f["mode"], f["adapter"]["resample"], f["adapter"]["init"], f["objective"]) == ("trained", "nearest",
                                                                                           "random", "match")
    argv = ["matrix", "--a", refs[0], "--b", refs[1], "--senders", "fc1", "--receivers", "fc2", "--preset",
            "hernandez", "--epochs", "1", "--max-train", "300", "--max-test", "100", "--store", str(store.root),
            "--quiet", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    spec = store.lookup(out["run_id"]).spec
    assert spec["mode"] == "trained" and spec["adapter"]["resample"] == "strided" and spec["adapter"]["init"] == "random"
    assert main([*argv[:-1], "--adapter", "conv3x3_relu", "--mode", "closed-form"]) == 2  # no fit for a conv3x3
    assert "init must be one of" in capsys.readouterr().err
