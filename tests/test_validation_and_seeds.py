"""A validation split held out of train (the live curve and "keep best" read it, never the test images) and
n adapter seeds with their spread: on real digit CNNs, with old stitch specs still opening as they were."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from scipy import stats

from stitchcore.data.images import load_dataset, validation_split
from stitchcore.errors import DataError, StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec, matrix_state, partial_cells
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.measures.intervals import across_seeds, grouped_mean_ci
from stitchcore.store.results import run_id_for


def _rows(x: torch.Tensor) -> set[str]:
    return {hashlib.sha1(r.numpy().tobytes() + bytes([i % 1])).hexdigest() for i, r in enumerate(x)}


def test_the_validation_split_is_held_out_of_train_and_never_overlaps_test():
    ds = load_dataset("digits")
    v = ds.with_validation(0.1, seed=3)
    n_train, n_val = len(v.labels("train")), len(v.labels("val"))
    assert n_val == round(0.1 * len(ds.labels("train"))) and n_train + n_val == len(ds.labels("train"))
    assert torch.equal(v.images("test"), ds.images("test"))  # test untouched
    train, val, test = (_rows(v._split(s)[0]) for s in ("train", "val", "test"))
    assert not (val & train) and not (val & test)
    assert (train | val) == _rows(ds.x_train)
    counts = v.class_counts("val")
    assert counts.max() - counts.min() <= 1  # even over classes
    assert torch.equal(v.labels("val"), ds.with_validation(0.1, seed=3).labels("val"))  # fixed by its seed
    assert not torch.equal(v.x_val, ds.with_validation(0.1, seed=4).x_val)
    with pytest.raises(DataError, match="no validation split"):
        ds.labels("val")
    with pytest.raises(DataError, match="e.g. 0.1"):
        ds.with_validation(0.0)
    # the named transform (a validation split as the test split, for the zoo) holds out the same images
    named = validation_split(ds, n_val, seed=3)
    assert torch.equal(named.x_test, v.x_val) and torch.equal(named.x_train, v.x_train)


def test_across_seeds_is_scipy_s_t_interval_and_per_class_intervals_hold_their_classes():
    values = [0.912, 0.931, 0.925, 0.904, 0.940]
    mean, lo, hi = across_seeds(values)
    t_lo, t_hi = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values)) and (lo, hi) == pytest.approx((t_lo, t_hi), abs=1e-6)
    with pytest.raises(ValueError, match="at least two"):
        across_seeds([0.9])
    correct, labels = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), torch.tensor([0, 0, 0, 1, 1, 2])
    cis = grouped_mean_ci(correct, labels, 4)  # exact (Clopper-Pearson) intervals: class 2 is 0 of 1
    assert cis[2] == [0.0, 0.975] and cis[3] is None and cis[0][0] <= 2 / 3 <= cis[0][1]


def test_a_stitch_watches_validation_keeps_its_best_epoch_and_reports_test(trained_store):
    store, refs = trained_store
    spec = StitchSpec(refs[0], refs[1], "block1", "block1", epochs=4, keep="best",
                      adapter={"kind": "linear", "norm": "both", "resample": "bilinear", "init": "random"})
    s = run_experiment("stitch", spec, store).record.summary
    assert s["n_val"] == 135 and s["n_train"] == 1347 - 135 and s["n_test"] == 450 and s["watched"] == "val"
    curve = store.series(run_experiment("stitch", spec, store).record.id)
    assert "val_accuracy" in curve and "test_accuracy" not in curve  # the test images are not watched
    watched = [(0, curve["val_accuracy"][0][1])] + [(r["epoch"], r["val_accuracy"]) for r in s["history"]]
    best = max(watched, key=lambda e: e[1])[1]
    assert dict(watched)[s["kept_epoch"]] == best and s["kept_epoch"] == min(e for e, v in watched if v == best)
    lo, hi = s["accuracy_ci"]
    assert lo <= s["accuracy"] <= hi
    for k, ci in enumerate(s["per_class_ci"]):  # ~45 images a class: wider than the overall interval
        assert ci[0] <= s["per_class"][k] <= ci[1]
    assert np.mean([c[1] - c[0] for c in s["per_class_ci"]]) > 2 * (hi - lo)
    assert all(c[0] <= v <= c[1] for c, v in zip(s["per_class_base_ci"]["b"], s["per_class_base"]["b"]))


def test_seeds_train_several_adapters_and_give_their_spread(trained_store):
    store, refs = trained_store
    one = StitchSpec(refs[0], refs[1], "block2", "block2", epochs=2, seed=5,
                     adapter={"kind": "linear", "norm": "both", "resample": "bilinear", "init": "random"})
    three = StitchSpec(**{**one.to_dict(), "seeds": 3})
    s1 = run_experiment("stitch", one, store).record.summary
    s3 = run_experiment("stitch", three, store).record.summary
    sd = s3["seeds"]
    assert sd["seed"] == [5, 6, 7] and len(set(sd["accuracy"])) > 1  # seeds train differently
    assert s3["accuracy"] == sd["accuracy"][0] == s1["accuracy"]  # the run's own numbers are its first seed's
    assert sd["accuracy_ci"][0] <= sd["accuracy_mean"] <= sd["accuracy_ci"][1]
    assert sd["penalty"] == pytest.approx([s3["base"]["b"] - a for a in sd["accuracy"]], abs=1e-6)
    assert "seeds" not in s1


def test_a_matrix_trains_every_cell_from_several_seeds_and_gives_their_spread(trained_store):
    store, refs = trained_store
    kw = {"senders": ("block2", "fc1"), "receivers": ("fc1", "fc2"), "mode": "trained", "epochs": 1,
          "max_train": 400, "adapter": {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "random"}}
    assert "seeds" not in MatrixSpec(refs[0], refs[1], **kw).to_dict()  # one seed: the run id of before
    with pytest.raises(StitchError, match="closed-form fit is the same"):
        MatrixSpec(refs[0], refs[1], seeds=2)
    three = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=4, seeds=3, **kw), store).record.summary
    second = run_experiment("matrix", MatrixSpec(refs[0], refs[1], seed=5, **kw), store).record.summary
    cells = {(c["sender"], c["receiver"]): c for c in partial_cells(store, run_id_for(
        "matrix", MatrixSpec(refs[0], refs[1], seed=4, seeds=3, **kw).to_dict()))}  # fmt: skip
    grids = three["across_seeds"]
    assert grids["n"] == 3
    for i, sender in enumerate(three["senders"]):
        for j, receiver in enumerate(three["receivers"]):
            seeds = cells[sender, receiver]["seeds"]["accuracy"]
            assert seeds[0] == three["values"][i][j]  # the cell's own number is its first seed's
            assert seeds[1] == second["values"][i][j]  # seed k is the matrix of seed + k, cell for cell
            mean, lo, hi = across_seeds(seeds)
            assert grids["accuracy"][i][j] == mean and grids["accuracy_ci"][i][j] == [lo, hi] and lo <= mean <= hi
    assert len({v for c in cells.values() for v in c["seeds"]["accuracy"]}) > 3  # the seeds train differently
    state = matrix_state(store, "none", three, MatrixSpec(refs[0], refs[1], seed=4, seeds=3, **kw), status="done",
                         final=True)  # fmt: skip
    assert state.grid("penalty", across=True) == grids["penalty"] and state.intervals("accuracy", across=True)
    assert state.grid("accuracy") == three["values"]  # off: the first seed's cells


def test_old_stitch_specs_keep_their_ids_and_behaviour():
    old = {"a": "zoo:x", "b": "zoo:y", "cut_a": "block1", "cut_b": "block1"}
    spec = StitchSpec.from_dict(old)
    assert (spec.val_fraction, spec.keep, spec.seeds) == (0.0, "last", 1)  # stored before: no validation split
    assert "val_fraction" not in spec.to_dict()  # so its run id is what it was
    assert StitchSpec(**old).to_dict()["val_fraction"] == 0.1  # new runs hold 10% out
    with pytest.raises(StitchError, match="validation split"):
        StitchSpec(**old, val_fraction=0.0, keep="best")
    with pytest.raises(StitchError, match="val_fraction"):
        StitchSpec(**old, val_fraction=0.6)
    with pytest.raises(StitchError, match="seeds"):
        StitchSpec(**old, seeds=0)


def test_the_cli_trains_seeds_and_prints_their_spread(trained_store, capsys):
    from stitchcore.cli.main import main

    store, refs = trained_store
    args = ["stitch", "--a", refs[0], "--b", refs[1], "--cut-a", "fc1", "--cut-b", "fc1", "--epochs", "1",
            "--seeds", "2", "--keep", "best", "--store", str(store.root)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "across 2 seeds: stitched" in out and "no interval: an interval across seeds needs 3 or more" in out
    assert main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)  # the summary, with the run id beside it
    assert len(s["seeds"]["accuracy"]) == 2 and "kept_epoch" in s and len(s["per_class_ci"]) == 10
    assert s["seeds"]["accuracy_ci"] is None and s["seeds"]["penalty_ci"] is None  # two seeds: no interval


def test_presets_whose_effects_are_near_the_noise_say_so():
    from stitchcore.experiments.trait_presets import get_preset, list_presets

    near = {p.name for p in list_presets() if p.noise}
    assert {"connectivity", "kernel-size", "label-noise"} <= near
    assert "interval" in get_preset("connectivity").noise and "±" in get_preset("connectivity").noise
    assert get_preset("two-cue").noise is None  # a 0.96 -> 0.11 swing needs no such warning
