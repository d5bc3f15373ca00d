"""Issue 42, part 2: the timm foundation-model families (DINOv2 with registers at patch 14, CLIP's and SigLIP's
image towers) load with random init offline, cut cleanly and join through the token adapters: class and register
tokens are told from the patch grid by what the model declares (timm's ``num_prefix_tokens``), grids of different
sizes are resampled, and a stitch between two families trains and scores end to end."""

from __future__ import annotations

import pytest
import torch

from stitchcore.cuts import Cut, get_cut, list_cuts
from stitchcore.errors import RefError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.models.sources import load_model
from stitchcore.stitching.adapters import AdapterSpec, build_adapter
from stitchcore.store.opened import open_store

# random init, small inputs: a 4x4 grid of 14-pixel patches for DINOv2, 4x4 of 16 for CLIP and SigLIP
DINO = "timm:vit_small_patch14_reg4_dinov2?pretrained=false&num_classes=10&img_size=56"
CLIP = "timm:vit_base_patch16_clip_224?pretrained=false&num_classes=10&img_size=64"
SIGLIP = "timm:vit_base_patch16_siglip_224?pretrained=false&num_classes=10&img_size=80"  # a 5x5 grid, no class token


@pytest.fixture(scope="module")
def towers():
    return {name: load_model(ref) for name, ref in (("dino", DINO), ("clip", CLIP), ("siglip", SIGLIP))}


def test_each_family_loads_offline_at_its_size_and_its_token_cuts_declare_their_leading_tokens(towers):
    want = {"dino": (56, 21, 5), "clip": (64, 17, 1), "siglip": (80, 25, None)}  # side, tokens, class + registers
    for name, (side, tokens, lead) in want.items():
        m = towers[name]
        assert m.preprocess.size == (side, side) and m.meta["arch_kwargs"]["img_size"] == side
        block = get_cut(m, "blocks.3")
        assert block.layout == "tokens" and block.shape[0] == tokens and block.prefix_tokens == lead
        assert list_cuts(m)[0].prefix_tokens is None  # the patch embedding: the grid alone


def test_img_size_is_refused_for_a_model_without_a_patch_grid():
    with pytest.raises(RefError, match="takes no img_size"):
        load_model("timm:resnet18?pretrained=false&img_size=64")
    with pytest.raises(RefError, match="8 to"):
        load_model("timm:vit_small_patch14_reg4_dinov2?pretrained=false&img_size=2")


@pytest.mark.parametrize("pair", [("dino", "clip"), ("clip", "dino"), ("siglip", "dino"), ("dino", "siglip")])
def test_a_token_adapter_drops_the_senders_leading_tokens_and_makes_the_receivers(towers, pair):
    a, b = (get_cut(towers[name], "blocks.3") for name in pair)
    for cls_token in ("adapter", "receiver"):
        adapter = build_adapter(AdapterSpec(cls_token=cls_token), a, b).eval()
        lead_a, lead_b = a.prefix_tokens or 0, b.prefix_tokens or 0
        assert (adapter.plan.sender_cls, adapter.plan.receiver_cls) == (lead_a, lead_b)
        h = torch.randn(3, *a.shape)
        out = adapter(h)
        assert tuple(out.shape) == (3, *b.shape)
        if lead_a:
            changed = h.clone()
            changed[:, :lead_a] += 100.0  # the class and register tokens: none of them is read as a patch
            assert torch.allclose(adapter(changed), out, atol=1e-5)
            patch = h.clone()
            patch[:, lead_a] += 100.0  # the first patch token is read
            assert not torch.allclose(adapter(patch), out, atol=1e-3)


def test_a_receivers_own_leading_tokens_are_set_whole():
    receiver = Cut("blocks.1", (21, 6), "tokens", 0.5, prefix_tokens=5)
    sender = Cut("layer1", (8, 4, 4), "map", 0.5)
    adapter = build_adapter(AdapterSpec(cls_token="receiver"), sender, receiver).eval()
    lead = torch.arange(30.0).view(5, 6)  # B's mean class and register tokens at the cut
    adapter.set_receiver_cls(lead)
    out = adapter(torch.randn(2, 8, 4, 4))
    assert torch.equal(out[:, :5], lead.expand(2, 5, 6))
    learned = build_adapter(AdapterSpec(), sender, receiver)
    assert tuple(learned.cls_offset.shape) == (5, 6)
    one = build_adapter(AdapterSpec(), sender, Cut("blocks.1", (17, 6), "tokens", 0.5))
    assert tuple(one.cls_offset.shape) == (6,)  # a class token alone: the [D] that stored adapters hold
    assert Cut.from_dict(receiver.to_dict()).prefix_tokens == 5


def test_a_stitch_from_dinov2_with_registers_into_clip_trains_and_scores(tmp_path):
    spec = StitchSpec(DINO, CLIP, "blocks.3", "blocks.3", dataset="digits", epochs=1, max_train=96, max_test=48,
                      noise_control=False, val_fraction=0.0)  # fmt: skip
    summary = run_experiment("stitch", spec, open_store(tmp_path / "store")).record.summary
    assert summary["cut_a"]["prefix_tokens"] == 5 and summary["cut_b"]["prefix_tokens"] == 1
    assert 0.0 <= summary["accuracy"] <= 1.0 and summary["lstsq_residual"] is not None
    assert len(summary["history"]) == 1
