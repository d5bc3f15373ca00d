"""Model packages (how models travel to cluster workers): every source's model comes back computing
exactly what it computed, with its non-persistent buffers and tied weights, and the package pickles."""

from __future__ import annotations

import pickle

import pytest
import torch

from stitchcore.models.loaded import LoadedModel, freeze
from stitchcore.models.package import pack_model
from stitchcore.models.sources import load_model
from tests.lm_helpers import save_tiny_gpt2


def _roundtrip(m: LoadedModel) -> LoadedModel:
    package = pickle.loads(pickle.dumps(pack_model(m)))  # what ray.put / a worker does
    assert all(not t.is_meta for t in package.tensors.values())
    assert all(t.is_meta for t in package.skeleton.model.parameters())  # the structure carries no weights
    return package.unpack()


def test_zoo_and_timm_models_come_back_exact(family_store):
    store, refs, _ = family_store
    for ref in (refs["cnn"], refs["vit"], "timm:resnet18?pretrained=false&num_classes=10"):
        m = load_model(ref, store=store)
        back = _roundtrip(m)
        x = m.example_input(3)
        assert torch.equal(back.model(x), m.model(x)), ref
        assert not back.model.training and not any(p.requires_grad for p in back.model.parameters())
        assert back.ref == m.ref and back.meta == m.meta and back.input_shape == m.input_shape


def test_a_transformers_gpt2_keeps_its_tied_embeddings_and_buffers(tmp_path):
    pytest.importorskip("transformers")
    m = load_model(f"hf:{save_tiny_gpt2(tmp_path / 'g', seed=0)}")
    back = _roundtrip(m)
    ids = m.example_input(2)
    assert torch.equal(back.model(ids), m.model(ids))
    names = {n for n, _ in m.model.named_buffers()} - set(m.model.state_dict())  # not in a state dict
    assert {n for n, _ in back.model.named_buffers()} >= names


class WithMask(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("mask", torch.tensor([1.0, 0.0, 1.0, 0.0]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 4] -> [B, 4]
        return self.lin(x) * self.mask


def test_a_buffer_left_out_of_the_state_dict_travels_too():
    m = LoadedModel("file:demo", freeze(WithMask()), "image", (4,), None, 4)
    back = _roundtrip(m)
    x = torch.ones(1, 4)
    assert torch.equal(back.model.mask, m.model.mask) and torch.equal(back.model(x), m.model(x))
    assert m.model.mask.device.type == "cpu"  # packing never touched the model it was given
