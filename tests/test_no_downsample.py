"""Issue 42: Traft & Cheney's No Downsample (the sender's larger grid goes on into B) is choosable for a stitch and
a matrix where the architecture allows it: B's rest must take the larger map (a ResNet's global pooling does; a
CNN that flattens into a fixed Linear does not, and is refused with the fix, or its cells skipped with the reason).
Before, a hand-written spec with it crashed inside B with a matrix-shape error."""

from __future__ import annotations

import pytest

from stitchcore.errors import AdapterError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.params import declared

NO_DOWNSAMPLE = {"kind": "linear", "resample": "no_downsample", "init": "random", "rescale": "oneshot"}


@pytest.fixture(scope="module")
def resnets(trained_store):
    store, _ = trained_store
    refs = [run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=s, epochs=3), store)
            .record.summary["ref"] for s in (0, 1)]  # fmt: skip
    return store, refs


def test_the_stitch_and_matrix_forms_offer_it():
    for kind in ("stitch", "matrix"):
        field = next(f for f in declared(kind) if f.name == "adapter.resample")
        assert "no_downsample" in field.choices


def test_a_resnet_takes_the_senders_larger_map(resnets):
    store, refs = resnets
    spec = StitchSpec(refs[0], refs[1], "layer1.0", "layer3.0", epochs=3, adapter=NO_DOWNSAMPLE, noise_control=False)
    s = run_experiment("stitch", spec, store).record.summary
    assert s["accuracy"] > 0.5  # B's layer4 and pooling ran on an 8x8 map where its own layer3 gives 2x2
    flops_down = run_experiment("stitch", StitchSpec(**{**spec.to_dict(), "adapter": {**NO_DOWNSAMPLE,
                                "resample": "bilinear"}}), store).record.summary["flops"]  # fmt: skip
    assert s["flops"] == 16 * flops_down  # the adapter's 1x1 conv on the sender's 8x8 grid, not B's 2x2


def test_a_cnn_that_flattens_is_refused_with_the_fix(trained_store):
    store, refs = trained_store
    spec = StitchSpec(refs[0], refs[1], "block1", "block2", epochs=1, adapter=NO_DOWNSAMPLE)
    with pytest.raises(AdapterError, match="do not take the sender's 4x4 map") as exc:
        run_experiment("stitch", spec, store)
    assert exc.value.fix == {"adapter.resample": "bilinear"}


def test_a_matrix_trains_each_output_grid_apart_and_skips_what_b_cannot_take(resnets, trained_store):
    store, refs = resnets
    spec = MatrixSpec(refs[0], refs[1], senders=("layer1.0", "layer2.0"), receivers=("layer3.0",), mode="trained",
                      epochs=2, adapter=NO_DOWNSAMPLE)  # fmt: skip
    s = run_experiment("matrix", spec, store).record.summary
    assert all(v is not None and v > 0.3 for v in (s["values"][0][0], s["values"][1][0]))  # an 8x8 and a 4x4 map
    cnn_store, cnns = trained_store
    cnn = run_experiment("matrix", MatrixSpec(cnns[0], cnns[1], senders=("block1",), receivers=("block2",),
                                              mode="trained", epochs=1, adapter=NO_DOWNSAMPLE), cnn_store)
    assert cnn.record.summary["values"] == [[None]]
    assert "do not take the sender's 4x4 map" in next(iter(cnn.record.summary["skipped"].values()))


def test_cells_into_one_receiver_scored_together_give_what_each_scored_alone_gives(trained_store, monkeypatch):
    """Issue 42's scoring floor: a closed-form matrix scores the cells into one receiver in one pass of its suffix
    per test batch; each cell's accuracy, penalty and intervals are those of scoring it alone."""
    import stitchcore.experiments.matrix.units as units

    store, refs = trained_store
    spec = MatrixSpec(refs[0], refs[1], senders=("block1", "block2", "fc1"), receivers=("block2", "fc1", "fc2"))
    monkeypatch.setattr(units, "SHARED_SCORING", True)  # the default on a GPU; a CPU scores cell by cell
    together = run_experiment("matrix", spec, store, rerun=True).record.summary
    monkeypatch.setattr(units, "SHARED_SCORING", False)
    alone = run_experiment("matrix", spec, store, rerun=True).record.summary
    for key in ("values", "penalty", "values_ci", "penalty_ci"):
        assert together[key] == alone[key], key
    assert sum(v is not None for row in together["values"] for v in row) >= 6
