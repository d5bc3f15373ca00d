"""Bansal et al.'s coarse-labels, kernel-size and early-convergence presets, the report's two-cue preset, and
what they stand on (a coarse-head A in a sweep, k x k linear stitching layers, checkpoints of one zoo run).

The presets' models are trained once per module; each sweep runs at two or three of its cuts (the first, the
last and what the finding is about).  Thresholds from bench/findings_bansal.py at seeds 0, 2, 4 (every preset
whole; figures in docs/DESIGN.md), each with margin beyond the worst seed.  The label-noise preset's tests are
in tests/test_sweep.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from stitchcore.errors import RefError, StitchError
from stitchcore.experiments._registry import run_experiment
from stitchcore.experiments.sweep import SweepSpec, penalty_along
from stitchcore.experiments.trait_presets import get_preset, list_presets, zoo_ref
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store, run_id_for


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    torch.set_num_threads(1)
    return Store(tmp_path_factory.mktemp("bansal-more"))


def _train(name: str, store: Store) -> None:
    for recipe in get_preset(name).recipes:
        run_experiment("zoo", recipe, store)


def _sweep(spec: SweepSpec, store: Store, positions: tuple[str, ...]) -> dict:
    return run_experiment("sweep", replace(spec, positions=positions), store).record.summary


def test_new_presets_are_listed_and_old_ids_stay():
    names = [p.name for p in list_presets()]
    assert {"coarse-labels", "kernel-size", "early-convergence", "two-cue"} <= set(names)
    # the 50% label-noise sweep and its clean reference keep the run ids they had before 10% and 100% joined, and
    # still since the other budgets and the random-init A joined (three levels x two budgets, clean A, random A)
    ids = [run_id_for("sweep", s.to_dict()) for s in get_preset("label-noise").sweeps]
    assert ids[:2] == ["ed98adb4de4d98f2", "c6f4ea6f5fba5cdd"] and len(ids) == 8
    # keep_epochs is left out of a recipe that keeps none: old zoo ids stay; a recipe without the key loads
    assert "keep_epochs" not in ZooRecipe().to_dict() and ZooRecipe.from_dict({"seed": 3}).keep_epochs == ()
    assert ZooRecipe(epochs=5, keep_epochs=[3, 0, 3]).to_dict()["keep_epochs"] == [0, 3]
    with pytest.raises(StitchError, match="keep_epochs lists epochs 0..4"):
        ZooRecipe(epochs=5, keep_epochs=[5])


def test_coarse_label_a_stitches_early_not_late(store):
    _train("coarse-labels", store)
    preset = get_preset("coarse-labels")
    coarse = _sweep(preset.sweeps[0], store, ("block1", "fc2"))
    clean = _sweep(preset.sweeps[1], store, ("block1", "fc2"))
    assert coarse["reference"]["a"]["dataset"] == "digits|coarse2"  # A scored on its own two-class task
    assert coarse["reference"]["a"]["metrics"]["accuracy"] > 0.9
    pen, ref = penalty_along(coarse), penalty_along(clean)
    assert pen[0] <= 0.04 and pen[-1] >= 0.1, pen  # three seeds: block1 <= 0.016, fc2 0.2 .. 0.23
    assert pen[-1] - ref[-1] >= 0.08 and max(ref) <= 0.04


def test_kernel_size_hardly_matters_and_vector_cuts_refuse_it(store):
    _train("kernel-size", store)  # the coarse test's 10-class pair: already trained
    preset = get_preset("kernel-size")
    assert all(s.positions == ("block1", "block2") for s in preset.sweeps)
    pens = [penalty_along(_sweep(preset.sweeps[k], store, ("block2",)))[0] for k in preset.baselines]  # the claims
    assert max(pens) <= 0.05 and max(pens) - min(pens) <= 0.04, pens  # three seeds: 0.002 .. 0.02, means within 0.01
    with pytest.raises(StitchError, match="needs spatial maps"):
        run_experiment("sweep", replace(preset.sweeps[1], positions=("fc1",)), store)


def test_early_layers_of_a_checkpoint_stitch_first(store):
    _train("early-convergence", store)
    preset = get_preset("early-convergence")
    final = preset.sweeps[0].b
    assert load_model(f"{final}?epoch=1", store=store).meta["epoch"] == 1
    with pytest.raises(RefError, match="no checkpoint of epoch 3"):
        load_model(f"{final}?epoch=3", store=store)
    by_epoch = {s.a.rsplit("=", 1)[1]: penalty_along(_sweep(s, store, ("block1", "fc2"))) for s in preset.sweeps
                if s.a.endswith(("epoch=1", "epoch=5"))}  # fmt: skip
    one, five = by_epoch["1"], by_epoch["5"]
    assert one[0] <= 0.03 and one[-1] >= 0.06, one  # three seeds: block1 <= 0.016, fc2 0.09 .. 0.16 (epoch 5: 0.03)
    assert five[-1] <= one[-1] - 0.04 and five[-1] <= 0.06, (one, five)


def test_two_cue_stitch_switches_cue_with_the_cut(store):
    _train("two-cue", store)
    spec, bottom = get_preset("two-cue").sweeps  # A's, then the random-init A's (test_preset_baselines)
    assert bottom.b == spec.b and "init=random" in bottom.a
    s = _sweep(spec, store, ("block1", "flatten", "fc2"))
    right_cue, left_cue = s["stitched"]["decor:left"], s["stitched"]["decor:right"]
    assert right_cue[0] >= 0.85 and left_cue[0] <= 0.25, s["stitched"]  # B's cue early (three seeds: >= 0.94, <= 0.11)
    assert left_cue[-1] >= 0.85 and right_cue[-1] <= 0.25, s["stitched"]  # A's cue late (three seeds: >= 0.95, <= 0.11)
    assert min(s["stitched"]["accuracy"]) >= 0.9  # both halves agree in the plain set: C is right either way
    assert s["reference"]["a"]["metrics"]["decor:right"] >= 0.9 >= s["reference"]["a"]["metrics"]["decor:left"] + 0.5


def test_a_coarse_head_a_needs_accuracy_only(store):
    coarse = zoo_ref(get_preset("coarse-labels").recipes[0])
    b = zoo_ref(get_preset("coarse-labels").recipes[2])
    with pytest.raises(StitchError, match="A"):
        run_experiment("sweep", SweepSpec(coarse, b, metrics=("accuracy", "class_acc:3"), positions=("block1",),
                                          control=False, simplicity=False), store)  # fmt: skip
