"""stitchcore.model_info: model summaries for pages, uploads saved under the store."""

from __future__ import annotations

import io

import pytest
import torch

from stitchcore.models.archs import create_arch
from stitchcore.errors import CheckpointError, RefError
from stitchcore.models.info import describe_model, describe_preprocess
from stitchcore.models.refs import upload_ref
from stitchcore.store.uploads import save_upload
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.sources import load_model, wrap_arch_model
from stitchcore.store.results import Store


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "store") as s:
        yield s


def _pt(model: torch.nn.Module) -> bytes:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


def test_describe_zoo_model(trained_store):
    store, refs = trained_store
    info = describe_model(load_model(refs[0], store=store))
    assert info["ref"] == refs[0] and info["arch"] == "cnn"
    assert info["params"] > 1000 and info["input_shape"] == (1, 8, 8)
    assert info["dataset"] == "digits" and info["num_classes"] == 10 and len(info["class_names"]) == 10
    assert 0.8 < info["accuracy"] <= 1.0


def test_describe_model_without_accuracy():
    info = describe_model(wrap_arch_model(create_arch("mlp"), "file:/x.safetensors"))
    assert info["accuracy"] is None and info["dataset"] is None and info["arch"] == "zoo:mlp"


def test_describe_preprocess():
    p = Preprocess(size=(32, 32), channels=3, mean=(0.5,), std=(0.25,))
    assert describe_preprocess(p) == "resize to 32×32 (bilinear) · 3 channels · mean 0.5 · std 0.25"
    assert describe_preprocess(Preprocess()).startswith("native size")
    assert describe_preprocess(None).startswith("none")


def test_save_upload_is_content_addressed_and_inside_the_store(store):
    data = _pt(create_arch("cnn"))
    path = save_upload(store, "../../etc/My Model!.PT", data)
    assert path.parent == store.root / "uploads" and path.read_bytes() == data
    assert path.name.endswith("-My_Model.pt") and len(path.name.split("-")[0]) == 16
    assert save_upload(store, "other.pt", data).parent == path.parent
    assert save_upload(store, "../../etc/My Model!.PT", data) == path  # same bytes, same path
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(("name", "data"), [("notes.txt", b"x"), ("model", b"x"), ("m.pt", b"")])
def test_save_upload_refuses_non_checkpoints(store, name, data):
    with pytest.raises(CheckpointError):
        save_upload(store, name, data)
    assert not (store.root / "uploads").exists() or not list((store.root / "uploads").iterdir())


def test_upload_ref_round_trips_through_load_model(store):
    path = save_upload(store, "cnn.pt", _pt(create_arch("cnn", channels=[8, 16], num_classes=3)))
    ref = upload_ref(path, "zoo:cnn", '{"channels": [8, 16], "num_classes": 3}')
    assert ref == f"file:{path}?arch=zoo:cnn&channels=8,16&num_classes=3"
    assert load_model(ref).num_classes == 3


def test_upload_ref_mismatch_is_a_checkpoint_error(store):
    path = save_upload(store, "mlp.pt", _pt(create_arch("mlp")))
    with pytest.raises(CheckpointError, match="does not fit zoo:cnn"):
        load_model(upload_ref(path, "zoo:cnn"))


def test_upload_ref_errors():
    assert upload_ref("/u/m.safetensors") == "file:/u/m.safetensors"
    with pytest.raises(RefError, match="valid JSON"):
        upload_ref("/u/m.pt", "zoo:cnn", "{oops")
    with pytest.raises(RefError, match="JSON object"):
        upload_ref("/u/m.pt", "zoo:cnn", "[1, 2]")
    with pytest.raises(RefError, match="need an architecture"):
        upload_ref("/u/m.pt", "", {"num_classes": 3})
    with pytest.raises(RefError, match="must be a number"):
        upload_ref("/u/m.pt", "zoo:cnn", {"channels": {"a": 1}})


def test_model_accuracy_scores_through_the_models_own_preprocessing():
    """What the Models page shows as "Base accuracy" for a model with no stored accuracy."""
    from stitchcore.data.images import ImageDataset
    from stitchcore.models.loaded import LoadedModel, freeze
    from stitchcore.stitching.evaluate import model_accuracy

    class Brighter(torch.nn.Module):  # [B, 1, H, W] -> logits [B, 2]: class 1 when the mean pixel is above 0
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            m = x.mean(dim=(1, 2, 3))
            return torch.stack([-m, m], dim=1)

    grey = torch.tensor([102, 153] * 3, dtype=torch.uint8).view(6, 1, 1, 1).expand(6, 1, 2, 2).contiguous()
    labels = torch.tensor([0, 1] * 3)  # 0.4 -> class 0, 0.6 -> class 1, once 0.5 is taken off
    ds = ImageDataset("greys", ("dark", "light"), grey, labels, grey[:4], labels[:4])
    model = LoadedModel("file:/greys.pt", freeze(Brighter()), "image", (1, 2, 2), Preprocess(mean=(0.5,)), 2)
    assert model_accuracy(model, ds) == 1.0
    assert model_accuracy(model, ds, batch_size=1) == 1.0  # batches are pooled before scoring
    raw = LoadedModel("file:/greys.pt", freeze(Brighter()), "image", (1, 2, 2), Preprocess(), 2)
    assert model_accuracy(raw, ds) == 0.5  # without the mean taken off every image reads as light
    assert model_accuracy(raw, ds, split="train") == 0.5
