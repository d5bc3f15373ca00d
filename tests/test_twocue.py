"""Two-cue images: layout, variants, and recipes that make a model rely on one cue."""

from __future__ import annotations

import pytest
import torch

from stitchcore.data.images import load_dataset
from stitchcore.errors import DataError
from stitchcore.data.twocue import is_twocue, twocue_variant


def test_halves_are_digits_and_labels_correlated():
    digits = load_dataset("digits")
    ds = load_dataset("twocue-digits")
    assert ds.image_shape == (1, 8, 16) and ds.num_classes == 10
    assert torch.equal(ds.x_test[:, :, :, :8], digits.x_test)  # left half: the digits, in order
    assert torch.equal(ds.y_test, digits.y_test)
    # every right half is a digit of the same class (correlated cues)
    flat = digits.x_test.flatten(1)
    for i in range(0, 450, 45):
        match = (flat == ds.x_test[i, :, :, 8:].flatten()).all(1).nonzero().flatten()
        assert len(match) and (digits.y_test[match] == ds.y_test[i]).all()
    assert torch.equal(load_dataset("twocue-digits").x_train, ds.x_train)  # fixed seeds: same pairs


def test_variants_black_out_or_decorrelate_one_half():
    ds, left, right = (load_dataset(n) for n in ("twocue-digits", "twocue-digits-blackleft",
                                                    "twocue-digits-blackright"))  # fmt: skip
    assert int(left.x_test[:, :, :, :8].max()) == 0 and torch.equal(left.x_test[:, :, :, 8:], ds.x_test[:, :, :, 8:])
    assert int(right.x_test[:, :, :, 8:].max()) == 0 and torch.equal(right.x_test[:, :, :, :8], ds.x_test[:, :, :, :8])
    digits = load_dataset("digits")
    decor = load_dataset("twocue-digits-decorright")
    assert torch.equal(decor.y_test, digits.y_test)  # label follows the left digit
    flat = digits.x_test.flatten(1)
    agree = [bool((digits.y_test[(flat == decor.x_test[i, :, :, 8:].flatten()).all(1)] == decor.y_test[i]).any())
             for i in range(0, 450, 5)]  # fmt: skip
    assert sum(agree) / len(agree) < 0.3  # right class random: agrees ~1 time in 10


def test_names_and_errors():
    assert is_twocue("twocue-digits-blackleft|drop3") and not is_twocue("digits")
    assert twocue_variant("twocue-mnist-fashion-decorleft", "") == "twocue-mnist-fashion"
    with pytest.raises(DataError, match="not a two-cue"):
        twocue_variant("mnist", "blackleft")


def test_a_model_trained_with_the_right_cue_decorrelated_relies_on_the_left(tmp_path):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.sweep import SweepSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(tmp_path)
    left = run_experiment("zoo", ZooRecipe(arch="mlp", dataset="twocue-digits-decorright", epochs=10), store)
    both = run_experiment("zoo", ZooRecipe(arch="mlp", dataset="twocue-digits", epochs=10), store)
    metrics = ("accuracy", "blackout:left", "blackout:right", "decor:right")
    spec = SweepSpec(left.record.summary["ref"], both.record.summary["ref"], metrics=metrics, dataset="twocue-digits",
                     positions=("fc3",), epochs=0, control=False, simplicity=False)  # fmt: skip
    ref = run_experiment("sweep", spec, store).record.summary["reference"]
    a, b = ref["a"]["metrics"], ref["b"]["metrics"]
    # Measured: A (left cue) 0.93 with the right half black, ~0.1 with the left black; B uses both.
    assert a["blackout:right"] > 0.8 and a["blackout:left"] < 0.3 and a["decor:right"] > 0.8
    assert b["accuracy"] > 0.9 and min(b["blackout:left"], b["blackout:right"]) > 0.3
