"""A hub model gets the input its library's own eval transform makes: the shorter side resized (aspect kept),
the centre cropped, normalised, from the original image (never squashed).  The configs are what matter, so
random weights serve.  Compared on a real photograph (scikit-learn's sample image, cut to 300 x 400)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from stitchcore.models.preprocess import Preprocess
from stitchcore.models.sources import load_model


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    from sklearn.datasets import load_sample_image

    return Image.fromarray(load_sample_image("china.jpg")[60:360, 100:500])  # 300 x 400, RGB


def _library_transform(ref: str, loaded):
    if ref.startswith("timm:"):
        import timm

        return timm.data.create_transform(**timm.data.resolve_data_config({}, model=loaded.model))
    import torchvision

    return torchvision.models.ResNet50_Weights.DEFAULT.transforms()


@pytest.mark.parametrize("ref", ["timm:resnet50?pretrained=false", "timm:vit_base_patch16_224?pretrained=false",
                                 "torchvision:resnet50?weights=none"])
def test_the_input_is_the_library_s_own_eval_transform(ref, photo):
    loaded = load_model(ref)
    theirs = _library_transform(ref, loaded)(photo).unsqueeze(0)  # [1, 3, 224, 224]
    tensor = torch.from_numpy(np.asarray(photo, dtype=np.float32) / 255.0).permute(2, 0, 1).unsqueeze(0)
    ours = loaded.preprocess(tensor)  # a [B, 3, H, W] batch in [0, 1] of any size
    assert ours.shape == theirs.shape == (1, 3, 224, 224)
    assert float((ours - theirs).abs().mean()) < 0.05  # resampling differences only (after normalisation)
    assert torch.equal(loaded.preprocess(photo), ours)  # a PIL image gives the same
    squashed = torch.nn.functional.interpolate(tensor, size=(224, 224), mode="bilinear", antialias=True)
    squashed = (squashed - torch.tensor(loaded.preprocess.mean).view(1, 3, 1, 1)) / torch.tensor(
        loaded.preprocess.std).view(1, 3, 1, 1)
    assert float((squashed - theirs).abs().mean()) > 0.2  # what the project did before: far off


def test_records_without_the_field_still_squash_as_they_did():
    old = Preprocess.from_dict({"size": [16, 16], "channels": 1, "mean": [0.5], "std": [0.5]})
    assert old.resize is None and "resize" not in old.to_dict()
    x = torch.rand(2, 1, 8, 8)
    expected = (torch.nn.functional.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False) - 0.5) / 0.5
    assert torch.equal(old(x), expected)
    hub = Preprocess(size=(224, 224), channels=3, resize=256)
    assert Preprocess.from_dict(hub.to_dict()) == hub and hub.at_size(32).resize == 36
    assert hub.with_options(size=(112, 112)).resize == 128 and hub.with_options(size=(96, 128)).resize is None
