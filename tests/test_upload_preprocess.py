"""Uploaded checkpoints (``file:`` refs) carry their inputs (dataset, mean, std, size); heads read off the file.

A digit CNN trained by the zoo, saved as a plain state dict and loaded as ``file:...?arch=zoo:cnn``, is
the zoo model again: same preprocessing, same dataset, same accuracy (it used to score ~54% with
mean 0 / std 1 and no dataset).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import save_file

from stitchcore.data import load_dataset
from stitchcore.errors import DataError, RefError, StitchError
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.models.archs import create_arch
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import parse_ref, upload_ref
from stitchcore.models.sources import load_model, save_checkpoint
from stitchcore.models.sources.file import ZOO_DATASET
from stitchcore.stitching.evaluate import evaluate_batches


def accuracy(lm: LoadedModel, dataset: str = "digits") -> float:
    ds = load_dataset(dataset)
    score = evaluate_batches(
        lambda x: lm.model(lm.preprocess(x)), ds.batches("test", 512), ds.num_classes, torch.device("cpu")
    )
    return score["accuracy"]


@pytest.fixture(scope="module")
def zoo_and_file(trained_store, tmp_path_factory):
    """(the zoo model zoo:cnn-digits-s0, the path of its weights saved as a plain .pt state dict)."""
    store, refs = trained_store
    zoo = load_model(refs[0], store=store)
    path = tmp_path_factory.mktemp("upload") / "digit-cnn.pt"
    torch.save(zoo.model.state_dict(), path)
    return zoo, path


def test_zoo_default_is_the_zoo_recipes_preprocessing_and_dataset(zoo_and_file, trained_store):
    zoo, path = zoo_and_file
    lm = load_model(f"file:{path}?arch=zoo:cnn")
    assert lm.preprocess == zoo.preprocess and zoo.preprocess.mean != (0.0,)
    assert lm.dataset == zoo.dataset == "digits"
    assert lm.num_classes == 10 and lm.input_shape == zoo.input_shape
    assert "digits" in lm.meta["defaults"] and "zoo recipe" in lm.meta["defaults"]
    stored = trained_store[0].lookup(zoo.meta["run_id"]).summary["accuracy"]
    assert abs(accuracy(lm) - accuracy(zoo)) < 1e-6 and abs(accuracy(lm) - stored) < 1e-6
    assert accuracy(lm) > 0.9


def test_the_zoo_default_dataset_is_the_recipes():
    assert ZooRecipe().dataset == ZOO_DATASET


def test_upload_ref_with_the_shown_defaults_scores_the_same(zoo_and_file):
    zoo, path = zoo_and_file
    pre = zoo.preprocess
    ref = upload_ref(path, "zoo:cnn", dataset="digits", mean=pre.mean, std=pre.std, size=8)
    assert ref == f"file:{path}?arch=zoo:cnn&dataset=digits&mean=0.30527535&size=8&std=0.37584367"
    lm = load_model(ref)
    assert lm.dataset == "digits" and lm.meta["defaults"] == ""
    assert accuracy(lm) == accuracy(zoo)  # float32-exact mean/std: the same logits


def test_explicit_options_override(zoo_and_file):
    zoo, path = zoo_and_file
    lm = load_model(f"file:{path}?arch=zoo:cnn&mean=0.5&std=0.25")
    assert lm.preprocess.mean == (0.5,) and lm.preprocess.std == (0.25,) and lm.dataset == "digits"
    lm = load_model(f"file:{path}?arch=zoo:cnn&dataset=mnist&mean=0.1307&std=0.3081&size=8")
    assert lm.dataset == "mnist" and lm.preprocess.mean == (0.1307,) and lm.preprocess.std == (0.3081,)
    assert lm.preprocess.size == (8, 8)
    one = load_model(f"file:{path}?arch=zoo:cnn&std=0.5")  # the other half stays the dataset's
    assert one.preprocess.mean == zoo.preprocess.mean and one.preprocess.std == (0.5,)


def test_head_size_is_read_off_the_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = create_arch("cnn", channels=[8, 16], num_classes=3)
    torch.save(model.state_dict(), tmp_path / "m.pt")
    lm = load_model(f"file:{tmp_path}/m.pt?arch=zoo:cnn&channels=8,16")
    assert lm.num_classes == 3 and lm.meta["arch_kwargs"]["num_classes"] == 3
    x = lm.example_input()
    torch.testing.assert_close(lm.model(x), model.eval()(x), rtol=0, atol=0)
    # three classes are not digits': no default dataset, mean 0 / std 1 as before, and the note says so
    assert lm.dataset is None
    assert lm.preprocess == Preprocess(size=(8, 8), channels=1, mean=(0.0,), std=(1.0,))
    assert "no dataset" in lm.meta["defaults"] and "dataset=" in lm.meta["defaults"]
    # a dataset given: its mean/std, as the zoo trainer normalises it
    lm = load_model(f"file:{tmp_path}/m.pt?arch=zoo:cnn&channels=8,16&dataset=digits")
    assert lm.preprocess.mean == load_dataset("digits").mean and lm.dataset == "digits"


def test_timm_arch_head_read_off_the_checkpoint(tmp_path):
    torch.manual_seed(0)
    src = load_model("timm:resnet18?pretrained=false&num_classes=10&in_chans=1").model
    torch.save(src.state_dict(), tmp_path / "t.pt")
    lm = load_model(f"file:{tmp_path}/t.pt?arch=timm:resnet18&in_chans=1")
    assert lm.num_classes == 10 and lm.input_shape == (1, 224, 224) and lm.dataset is None
    x = lm.example_input(1)
    torch.testing.assert_close(lm.model(x), src.eval()(x), rtol=0, atol=0)
    options = "in_chans=1&dataset=digits&size=32&mean=0.3&std=0.4"
    lm = load_model(f"file:{tmp_path}/t.pt?arch=timm:resnet18&{options}")
    assert lm.dataset == "digits" and lm.input_shape == (1, 32, 32)
    assert (lm.preprocess.size, lm.preprocess.mean, lm.preprocess.std) == ((32, 32), (0.3,), (0.4,))
    assert lm.preprocess(torch.rand(2, 1, 8, 8)).shape == (2, 1, 32, 32)


def test_torchvision_arch_head_read_off_the_checkpoint(tmp_path):
    src = load_model("torchvision:resnet18?weights=none&num_classes=7").model
    save_file(src.state_dict(), str(tmp_path / "v.safetensors"))
    lm = load_model(f"file:{tmp_path}/v.safetensors?arch=torchvision:resnet18")
    assert lm.num_classes == 7 and lm.meta["arch_kwargs"]["num_classes"] == 7


def test_recorded_preprocessing_wins_over_the_zoo_defaults(tmp_path):
    model = create_arch("cnn")
    pre = Preprocess(size=None, channels=1, mean=(0.2,), std=(0.3,))
    meta = {"preprocess": pre.to_dict(), "dataset": "digits"}
    path = save_checkpoint(model, tmp_path / "c.safetensors", meta=meta)
    lm = load_model(f"file:{path}")
    # recorded, with the model's input size filled in (data at another size, a streamed folder, is brought to it)
    assert lm.preprocess == dataclasses.replace(pre, size=(8, 8)) and lm.dataset == "digits"
    assert lm.meta["defaults"] == "mean/std recorded in the checkpoint"
    lm = load_model(f"file:{path}?dataset=mnist&std=0.5")
    assert lm.dataset == "mnist" and lm.preprocess.mean == (0.2,) and lm.preprocess.std == (0.5,)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ("mean=abc", RefError, "mean=abc must be numbers joined by ','"),
        ("std=0", RefError, "std=0 must be positive numbers"),
        ("mean=0.1,0.2,0.3", RefError, "mean=0.1,0.2,0.3 has 3 values but the model takes 1-channel input"),
        ("std=0.2,0.3", RefError, "has 2 values but the model takes 1-channel input; give 1 value"),
        ("size=16", RefError, "size=16 does not fit zoo:cnn, built for 8x8 input"),
        ("size=0", RefError, "size=0 must be a side or H,W"),
        ("dataset=digts", DataError, "did you mean 'digits'"),
        ("dataset=", RefError, "dataset= is empty"),
        ("dataset=fashion-mnist", DataError, "give mean= and std="),  # its files are not here
    ],
)
def test_bad_input_options_are_one_line_errors(zoo_and_file, monkeypatch, tmp_path, options, error, match):
    monkeypatch.setenv("STITCHLAB_DATA", str(tmp_path / "no-data"))  # fashion-mnist is never found
    _, path = zoo_and_file
    with pytest.raises(error, match=match) as err:
        load_model(f"file:{path}?arch=zoo:cnn&{options}")
    assert isinstance(err.value, StitchError) and "\n" not in str(err.value)


def test_upload_ref_checks_its_input_options():
    for kwargs, match in [
        ({"mean": "0.1,x"}, "mean=0.1,x must be numbers"),
        ({"std": [0.2, -1.0]}, "std=0.2,-1.0 must be positive"),
        ({"size": "big"}, "size=big must be a side"),
    ]:
        with pytest.raises(RefError, match=match):
            upload_ref("/u/m.pt", "zoo:cnn", **kwargs)
    # blank values are left out, and without the keywords the ref is spelled as before
    assert upload_ref("/u/m.pt", "zoo:cnn", dataset="", mean=" ", size=None) == "file:/u/m.pt?arch=zoo:cnn"
    assert upload_ref("/u/m.pt", "timm:resnet18", size=(24, 32)).endswith("?arch=timm:resnet18&size=24,32")


def test_existing_refs_keep_their_spelling():
    for text in ("file:/m.pt?arch=zoo:cnn", "file:/m.pt?arch=zoo:cnn&num_classes=10", "file:/m.safetensors"):
        assert str(parse_ref(text)) == text


def test_language_models_take_no_image_options(tmp_path):
    gpt = create_arch("gpt", vocab_size=33, n_layer=1, block_size=16)
    path = save_checkpoint(gpt, tmp_path / "g.safetensors")
    assert load_model(f"file:{path}?dataset=pydoc").dataset == "pydoc"
    with pytest.raises(RefError, match="token ids"):
        load_model(f"file:{path}?mean=0.5")
