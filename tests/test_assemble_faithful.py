"""Issue 25, Traft & Cheney: chained 2x rescaling (every input position counts), No Downsample, MACs in the paper's
convention, the Hernandez label, and old assemble specs reading as before."""

from __future__ import annotations

from types import SimpleNamespace as Cut

import pytest
import torch
from torch import nn

from stitchcore.errors import AdapterError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.plots.assemble import accuracy_vs_flops, recipe_label
from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility, rescale_steps
from stitchcore.stitching.fits import fit_adapter
from stitchcore.stitching.evaluate import module_flops
from stitchcore.store.results import run_id_for

KINDS = ("linear", "linear_relu", "conv3x3_relu", "bottleneck", "lowrank")
WIDE = Cut(name="layer1.0", shape=(8, 8, 8), layout="map", depth=0.2)  # [C, 8, 8]
POINT = Cut(name="layer4.0", shape=(32, 1, 1), layout="map", depth=0.8)  # [C, 1, 1]


def _influence(spec: AdapterSpec, sender: Cut = WIDE, receiver: Cut = POINT) -> torch.Tensor:
    """[H, W] bools: which input positions move the output (BatchNorm scales away from the bottleneck's zero start,
    as after training; eval mode)."""
    torch.manual_seed(0)
    adapter = build_adapter(spec, sender, receiver).eval()
    for m in adapter.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
    x = torch.randn(8, *sender.shape, requires_grad=True)
    adapter(x).sum().backward()
    return x.grad.abs().sum(dim=(0, 1)) > 0  # [H, W]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("resample", ["bilinear", "strided"])
def test_a_chained_8x8_to_1x1_bridge_hears_every_input_position(resample, kind):
    heard = _influence(AdapterSpec(kind, resample=resample, rescale="chained"))
    assert heard.all(), f"{int(heard.sum())} of 64 positions reach the output"


@pytest.mark.parametrize("resample", ["bilinear", "strided", "nearest"])
def test_the_old_one_shot_bridge_hears_only_some_positions(resample):
    """What every spec before issue 25 computed (kept under rescale='oneshot'): bilinear 8x8 -> 1x1 reads 4 of 64,
    a stride-8 3x3 conv 4 (its padded window), nearest 1."""
    heard = _influence(AdapterSpec("conv3x3_relu", resample=resample))
    assert int(heard.sum()) <= 4


def test_nearest_cannot_downsample_in_steps_and_says_so():
    why = compatibility(WIDE, POINT, AdapterSpec("linear", resample="nearest", rescale="chained"))
    assert why is not None and "1 of 4 positions" in why and "'bilinear'" in why
    up = compatibility(POINT, WIDE, AdapterSpec("linear", resample="nearest", rescale="chained"))
    assert up is None  # upsampling by nearest repeats every position: allowed


def test_chained_steps_are_2x_each_and_handle_other_ratios():
    assert [s.grid for s in rescale_steps("bilinear", (8, 8), (1, 1))] == [(4, 4), (2, 2), (1, 1)]
    assert not any(s.antialias for s in rescale_steps("bilinear", (8, 8), (1, 1)))  # exact 2x: the 2x2 average
    odd = rescale_steps("bilinear", (7, 7), (1, 1))  # 7 -> 4 -> 2 -> 1: the first step antialiased
    assert [s.grid for s in odd] == [(4, 4), (2, 2), (1, 1)] and odd[0].antialias
    last = rescale_steps("strided", (8, 8), (3, 3))  # 8 -> 4 (stride 2), then 4 resized to 6 and strided to 3
    assert [(s.grid, s.size, s.stride) for s in last] == [((4, 4), None, (2, 2)), ((3, 3), (6, 6), (2, 2))]
    for src, dst in (((7, 7), (1, 1)), ((12, 12), (5, 5)), ((2, 2), (8, 8))):
        for resample in ("bilinear", "strided"):
            a, b = Cut(name="s", shape=(4, *src), layout="map", depth=0.1), Cut(name="r", shape=(6, *dst),
                                                                                 layout="map", depth=0.9)  # fmt: skip
            spec = AdapterSpec("conv3x3_relu", resample=resample, rescale="chained")
            assert build_adapter(spec, a, b)(torch.zeros(2, 4, *src)).shape == (2, 6, *dst)
            assert _influence(spec, a, b).all()
    # one-shot strided needs an integer ratio; the chain does not
    assert "integer downsampling ratio" in compatibility(a := Cut(name="s", shape=(4, 12, 12), layout="map", depth=0),
                                                          Cut(name="r", shape=(6, 5, 5), layout="map", depth=1),
                                                          AdapterSpec("linear", resample="strided"))  # fmt: skip
    assert a is not None


def test_a_linear_chain_is_fitted_in_closed_form_and_reads_every_position():
    """A chain of linear cores is its first core after every resize (the later ones at identity): the fit sets
    it exactly, on the antialiased 8x8 -> 1x1 chain that reads all 64 positions; a one-shot bilinear resize
    reads 4 of them, so a target that averages the whole grid is out of its reach."""
    torch.manual_seed(0)
    x = torch.randn(300, *WIDE.shape)  # [N, 8, 8, 8]
    y = torch.einsum("oc,nc->no", torch.randn(POINT.shape[0], WIDE.shape[0]), x.mean((2, 3)))[..., None, None]
    residual = {}
    for rescale in ("chained", "oneshot"):
        adapter = build_adapter(AdapterSpec("linear", init="lstsq", rescale=rescale), WIDE, POINT)
        residual[rescale] = fit_adapter(adapter, [(x, y)])
        err = float(((adapter.eval()(x) - y) ** 2).sum() / (y**2).sum())
        assert err == pytest.approx(residual[rescale], rel=1e-3, abs=1e-6)  # the adapter computes its fit
    assert residual["chained"] < 1e-3 < 0.5 < residual["oneshot"]


def test_a_chain_of_nonlinear_or_strided_cores_refuses_a_closed_form_fit_and_offers_oneshot():
    for spec in (AdapterSpec("linear_relu", init="lstsq", rescale="chained"),
                 AdapterSpec("linear", resample="strided", init="lstsq", rescale="chained")):  # fmt: skip
        with pytest.raises(AdapterError, match="closed-form fit sets one") as err:
            build_adapter(spec, WIDE, POINT)
        assert err.value.fix == {"adapter.rescale": "oneshot"}


def test_no_downsample_keeps_the_sender_grid_and_refuses_tokens():
    out = build_adapter(AdapterSpec("conv3x3_relu", resample="no_downsample"), WIDE, POINT)(torch.zeros(2, 8, 8, 8))
    assert out.shape == (2, 32, 8, 8)  # B's later stages get the larger map
    tokens = Cut(name="blocks.1", shape=(5, 32), layout="tokens", depth=0.5)
    why = compatibility(WIDE, tokens, AdapterSpec("linear", resample="no_downsample"))
    assert why is not None and "position embedding" in why


def test_old_assemble_dicts_read_as_one_shot_and_keep_their_id():
    """A spec dict written before issue 25 has no 'rescale': it reads as the one-shot rescale it computed."""
    new = AssembleSpec("zoo:resnet-digits-s0", "zoo:resnet-digits-s1", senders=("layer1.0",))
    assert new.rescale == "chained" and new.to_dict()["rescale"] == "chained"
    old = {k: v for k, v in new.to_dict().items() if k != "rescale"}
    spec = AssembleSpec.from_dict(old)
    assert spec.rescale == "oneshot" and all(r.rescale == "oneshot" for r in spec.recipes())
    assert spec.to_dict() == old and run_id_for("assemble", spec.to_dict()) == run_id_for("assemble", old)
    assert AdapterSpec().to_dict() == {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "random",
                                       "rank": None}  # every stitch and matrix dict as before  # fmt: skip
    assert AdapterSpec.from_dict(AdapterSpec().to_dict()).rescale == "oneshot"


def test_resnet50_macs_at_224_match_the_papers_table_1():
    from torchvision.models import resnet50

    torch.manual_seed(0)
    flops = module_flops(resnet50(weights=None).eval(), torch.zeros(1, 3, 224, 224))
    assert abs(flops / 2 / 4.09e9 - 1) < 0.02  # MACs (multiply-adds); FlopCounterMode counts 2 per MAC


def test_hernandez_label_beside_traft_kinds():
    assert "Hernandez" in recipe_label("linear/both/strided")
    assert "Hernandez" not in recipe_label("conv3x3_relu/both/strided") + recipe_label("linear/both/bilinear")
    cells = [{"sender": "s", "receiver": "r", "recipe": f"{k}/both/strided", "adapter": k, "resample": "strided",
              "accuracy": 0.8, "flops": 2000 + 2 * i, "macs": 1000 + i, "skipped_reason": None, "same_as": None}
             for i, k in enumerate(("linear", "conv3x3_relu"))]  # fmt: skip
    fig = accuracy_vs_flops(cells, None, [])
    assert "0.001M MACs" in fig.data[0].text[0]
    names = [t.name for t in fig.data]
    assert any("Hernandez" in n for n in names if n.startswith("linear")) and not any(
        "Hernandez" in n for n in names if n.startswith("conv3x3"))


def test_no_downsample_cells_run_into_a_resnet_and_are_refused_by_a_flattening_cnn(resnet_pair, trained_store):
    store, (r0, r1) = resnet_pair
    common = {"kinds": ("linear",), "epochs": 1, "max_train": 128, "max_test": 64}
    spec = AssembleSpec(r0, r1, senders=("layer1.0",), receivers=("layer3.0",),
                        resamples=("bilinear", "no_downsample"), **common)  # fmt: skip
    cells = {c["resample"]: c for c in run_experiment("assemble", spec, store).record.summary["cells"]}
    keep, down = cells["no_downsample"], cells["bilinear"]
    assert keep["skipped_reason"] is None and keep["accuracy"] is not None
    assert keep["flops"] > down["flops"] and keep["macs"] == keep["flops"] // 2  # B's layer3 on an 8x8 map, not 2x2
    cnn_store, (c0, c1) = trained_store
    spec = AssembleSpec(c0, c1, senders=("block1",), receivers=("block2",), resamples=("no_downsample",), **common)
    (cell,) = run_experiment("assemble", spec, cnn_store).record.summary["cells"]
    assert cell["accuracy"] is None and "No Downsample" in cell["skipped_reason"]


@pytest.fixture(scope="module")
def resnet_pair(tmp_path_factory):
    """Two zoo ResNets (blocks 1,1,1,1) on 8x8 digits trained for one epoch: layer1.0 8x8, layer3.0 2x2."""
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(tmp_path_factory.mktemp("resnets"))
    refs = [run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=s, epochs=1), store).record
            .summary["ref"] for s in (0, 1)]  # fmt: skip
    return store, refs
