"""Training-time augmentation: standard crops and flips, the same for the same seed, and a recipe field that
leaves every stored recipe's run id alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stitchcore.data.augment import AUGMENTS, augment
from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store, run_id_for


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_crop_flip_is_a_padded_crop_of_each_image_maybe_flipped():
    x = torch.rand(16, 3, 32, 32)
    out = augment(x, "crop-flip", _gen(0))
    padded = F.pad(x, (4, 4, 4, 4))  # an eighth of 32
    flipped = 0
    for i in range(len(x)):
        crops = [padded[i, :, t: t + 32, s: s + 32] for t in range(9) for s in range(9)]
        plain = any(torch.equal(out[i], c) for c in crops)
        mirrored = any(torch.equal(out[i].flip(-1), c) for c in crops)
        assert plain or mirrored
        flipped += mirrored and not plain
    assert 0 < flipped < len(x)  # some flipped, some not
    assert not torch.equal(out, x)


@pytest.mark.parametrize("kind", [k for k in AUGMENTS if k != "none"])
def test_the_same_seed_gives_the_same_images_and_another_seed_others(kind):
    x = torch.rand(8, 1, 16, 16)
    a, b, c = augment(x, kind, _gen(3)), augment(x, kind, _gen(3)), augment(x, kind, _gen(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == x.shape and float(a.min()) >= 0.0 and float(a.max()) <= 1.0


def test_a_recipe_trains_with_augmentation_and_old_recipes_keep_their_ids(tmp_path):
    plain = ZooRecipe(epochs=10)
    assert "augment" not in plain.to_dict()  # stored recipes (no key) read "none": their run ids stand
    assert ZooRecipe.from_dict(plain.to_dict()).augment == "none"
    aug = ZooRecipe(epochs=10, augment="crop-flip")
    assert aug.to_dict()["augment"] == "crop-flip" and run_id_for("zoo", aug.to_dict()) != run_id_for(
        "zoo", plain.to_dict())
    assert "augment crop-flip" in aug.label()
    with Store(tmp_path / "s") as store:
        a = run_experiment("zoo", plain, store).record.summary
        b = run_experiment("zoo", aug, store).record.summary
    assert a["final_train_loss"] != b["final_train_loss"] and b["accuracy"] > 0.5  # it trained, on other images
    with pytest.raises(StitchError, match="unknown augment 'flip'; use one of: none, crop-flip"):
        ZooRecipe(augment="flip")


def test_the_cli_offers_every_augmentation():
    from stitchcore.cli.main import build_parser

    zoo = build_parser()._subparsers._group_actions[0].choices["zoo"]
    train = zoo._subparsers._group_actions[0].choices["train"]
    action = next(a for a in train._actions if a.dest == "augment")
    assert tuple(action.choices) == AUGMENTS
