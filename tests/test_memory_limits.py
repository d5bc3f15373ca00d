"""Sizes that cannot fit are refused before anything is allocated: counted on the meta device, against the free
memory, in one line naming the size (a recipe's image size or widths, a checkpoint header's arch_kwargs)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from stitchcore.errors import StitchError
from stitchcore.experiments.zoo import ZooRecipe, check_zoo, untrained_model
from stitchcore.models.archs import create_arch
from stitchcore.models.memory import FREE_SHARE, available_bytes, training_bytes
from stitchcore.models.sources import load_model


def test_the_meta_count_is_the_real_model_s():
    real = untrained_model(ZooRecipe()).model
    counted = training_bytes(lambda: create_arch("cnn", in_chans=1, num_classes=10, image_size=8), (1, 8, 8), 64)
    assert counted.params == sum(p.numel() for p in real.parameters()) > 0
    assert counted.activation_bytes > 0  # the forward ran on meta tensors: every module's output counted
    big = training_bytes(lambda: create_arch("cnn", in_chans=1, num_classes=10, image_size=64), (1, 64, 64), 64)
    assert big.activation_bytes > 32 * counted.activation_bytes  # 64x the pixels: far more activations


def test_a_recipe_beyond_the_machine_is_refused_before_any_allocation(monkeypatch):
    allocated = []
    real_empty = torch.empty

    def watch(*size, **kw):  # a real (non-meta) allocation of more than 1 GB would be the bug
        t = real_empty(*size, **kw)
        if t.device.type != "meta" and t.numel() * t.element_size() > 1e9:
            allocated.append(t.shape)
        return t

    monkeypatch.setattr(torch, "empty", watch)
    with pytest.raises(StitchError, match=r"needs about [\d.]+ TB of memory and this machine has [\d.]+ [GMT]B free"):
        check_zoo(ZooRecipe(image_size=8192))  # the largest side a recipe takes
    assert allocated == []
    check_zoo(ZooRecipe())  # the default fits


def test_a_checkpoint_header_asking_for_a_huge_layer_is_refused_in_one_line(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"fc1.weight": torch.zeros(2, 2)}, str(path),
              metadata={"arch": "mlp", "arch_kwargs": json.dumps({"width": 400_000, "depth": 3}), "meta": "{}"})
    with pytest.raises(StitchError, match=r"needs about 1\.\d TB of memory .*arch_kwargs") as err:
        load_model(f"file:{path}")
    assert "\n" not in str(err.value)
    assert FREE_SHARE * available_bytes() > 1e8  # the machine running this has room for what the tests build
