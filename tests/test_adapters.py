"""Adapter zoo: spec validation, registry, every kind x layout pair, costs."""

from __future__ import annotations

import doctest

import pytest
import torch

import stitchcore.stitching.adapter_kinds as adapters_mod
from stitchcore.cuts import Cut
from stitchcore.errors import AdapterError
from stitchcore.stitching.adapters import (
    AdapterCore,
    AdapterSpec,
    adapter_cost,
    build_adapter,
    compatibility,
    list_adapters,
    register_adapter,
)


def cut(layout: str, *shape: int, name: str = "c") -> Cut:
    return Cut(name=name, shape=tuple(shape), layout=layout, depth=0.5)


KINDS = ("identity", "linear", "linear_relu", "conv3x3_relu", "bottleneck", "lowrank", "conv3x3_linear", "conv5x5_linear")
MAP_ONLY = {"conv3x3_relu", "bottleneck", "conv3x3_linear", "conv5x5_linear"}
RESAMPLING = ("bilinear", "nearest", "strided")

# (case id, sender, receiver, resample, internal form)
CASES = [
    ("map-same", cut("map", 8, 6, 6), cut("map", 8, 6, 6), "bilinear", "map"),
    ("map-same-channels-differ", cut("map", 8, 6, 6), cut("map", 12, 6, 6), "none", "map"),
    *[(f"map-down-{r}", cut("map", 8, 8, 8), cut("map", 12, 4, 4), r, "map") for r in RESAMPLING],
    *[(f"map-up-{r}", cut("map", 8, 4, 4), cut("map", 12, 8, 8), r, "map") for r in RESAMPLING],
    ("map-down-strided-x4", cut("map", 8, 8, 8), cut("map", 8, 2, 2), "strided", "map"),
    ("nhwc-to-map", cut("map_nhwc", 6, 6, 8), cut("map", 12, 6, 6), "bilinear", "map"),
    ("map-to-nhwc", cut("map", 8, 8, 8), cut("map_nhwc", 4, 4, 12), "strided", "map"),
    ("map-to-tokens", cut("map", 8, 8, 8), cut("tokens", 16, 12), "bilinear", "map"),
    ("map-to-tokens-cls", cut("map", 8, 4, 4), cut("tokens", 17, 12), "bilinear", "map"),
    ("tokens-cls-to-map", cut("tokens", 17, 12), cut("map", 8, 4, 4), "bilinear", "map"),
    ("tokens-to-map-up", cut("tokens", 16, 12), cut("map", 8, 8, 8), "nearest", "map"),
    ("tokens-grid-resample", cut("tokens", 16, 12), cut("tokens", 65, 20), "bilinear", "map"),
    ("tokens-to-tokens-D", cut("tokens", 17, 12), cut("tokens", 17, 20), "bilinear", "seq"),
    ("lm-tokens", cut("tokens", 12, 12), cut("tokens", 12, 20), "bilinear", "seq"),
    ("map-to-vector", cut("map", 8, 4, 4), cut("vector", 10), "bilinear", "vec"),
    ("nhwc-to-vector", cut("map_nhwc", 4, 4, 8), cut("vector", 10), "bilinear", "vec"),
    ("tokens-to-vector", cut("tokens", 10, 12), cut("vector", 10), "bilinear", "vec"),
    ("vector-to-vector", cut("vector", 10), cut("vector", 6), "bilinear", "vec"),
    ("vector-same", cut("vector", 10), cut("vector", 10), "bilinear", "vec"),
]


def _expect_ok(kind: str, sender: Cut, receiver: Cut, form: str) -> bool:
    if kind == "identity":
        return sender == receiver or (sender.layout, sender.shape) == (receiver.layout, receiver.shape)
    if kind in MAP_ONLY:
        return form == "map" or (form == "seq" and sender.shape[0] == 17)  # grid tokens go through maps
    return True


def test_registry_lists_all_kinds_in_order():
    assert list_adapters() == list(KINDS)
    assert list_adapters("linear*") == ["linear", "linear_relu"]


def test_registering_a_kind_twice_raises_and_new_kinds_work():
    with pytest.raises(ValueError, match="already registered"):
        register_adapter("linear")(adapters_mod.LinearCore)
    with pytest.raises(TypeError):
        register_adapter("not-a-core")(object)
    try:

        @register_adapter("test_scale")
        class ScaleCore(AdapterCore):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x[:, : self.plan.c_out] * 2  # [B, C_in, ...] -> [B, C_out, ...]

        ad = build_adapter(AdapterSpec("test_scale", norm="none"), cut("vector", 4), cut("vector", 4))
        assert torch.equal(ad(torch.ones(2, 4)), torch.full((2, 4), 2.0))
    finally:
        adapters_mod._ADAPTERS.unregister("test_scale")


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"kind": "mlp"}, "known: identity, linear"),
        ({"norm": "ln"}, "valid: none, bn_before, bn_after, both"),
        ({"resample": "bicubic"}, "valid: none, bilinear, nearest, strided"),
        ({"init": "xavier"}, "valid: random, identity, lstsq, procrustes"),
        ({"kind": "linear", "rank": 4}, "for kind='lowrank' only"),
        ({"kind": "lowrank", "rank": 0}, "a positive int"),
        ({"kind": "conv3x3_relu", "init": "lstsq"}, "lstsq init needs a linear adapter"),
        ({"kind": "lowrank", "init": "identity"}, "init='random'"),
    ],
)
def test_spec_validation_names_the_fix(kwargs, fragment):
    with pytest.raises(AdapterError, match=fragment.replace("(", r"\(")):
        AdapterSpec(**kwargs)


def test_spec_round_trip_and_identity_canonical():
    spec = AdapterSpec("lowrank", norm="bn_before", resample="strided", init="lstsq", rank=3)
    assert AdapterSpec.from_dict(spec.to_dict()) == spec
    assert AdapterSpec.from_dict({}) == AdapterSpec()
    with pytest.raises(AdapterError, match="unknown AdapterSpec field"):
        AdapterSpec.from_dict({"kind": "linear", "width": 3})
    merge = AdapterSpec("identity")
    assert (merge.norm, merge.resample, merge.init) == ("none", "none", "identity")
    assert AdapterSpec.from_dict(merge.to_dict()) == merge


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_kind_gives_the_exact_receiver_shape(kind, case):
    _, sender, receiver, resample, form = case
    spec = AdapterSpec(kind, resample=resample)
    reason = compatibility(sender, receiver, spec)
    if not _expect_ok(kind, sender, receiver, form):
        assert isinstance(reason, str) and "\n" not in reason and reason
        with pytest.raises(AdapterError):
            build_adapter(spec, sender, receiver)
        return
    assert reason is None
    torch.manual_seed(0)
    ad = build_adapter(spec, sender, receiver)
    x = torch.randn(3, *sender.shape, requires_grad=True)
    y = ad(x)  # train mode
    assert y.shape == (3, *receiver.shape)
    if kind != "identity":
        y.square().mean().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()
    ad.eval()
    assert ad(x.detach()).shape == (3, *receiver.shape)
    params, flops = adapter_cost(ad)
    if kind == "identity":
        assert (params, flops) == (0, 0)
    else:
        assert params > 0 and flops > 0


@pytest.mark.parametrize(
    "sender, receiver, spec, fragment",
    [
        (cut("vector", 10), cut("map", 8, 4, 4), None, "pick a vector receiver cut"),
        (cut("vector", 10), cut("tokens", 17, 8), None, "pick a vector receiver cut"),
        (cut("tokens", 12, 12), cut("tokens", 14, 12), None, "same sequence length"),
        (cut("tokens", 12, 12), cut("map", 8, 4, 4), None, "no square token grid"),
        (cut("map", 8, 4, 4), cut("tokens", 12, 12), None, "no square token grid"),
        (cut("map", 8, 6, 6), cut("map", 8, 4, 4), AdapterSpec(resample="strided"), "integer downsampling"),
        (cut("map", 8, 6, 6), cut("map", 8, 4, 4), AdapterSpec(resample="none"), "resample='bilinear'"),
        (cut("map", 8, 4, 4), cut("map", 8, 4, 2), AdapterSpec("identity"), "use kind='linear'"),
        (cut("map", 8, 4, 4), cut("vector", 8), AdapterSpec("bottleneck"), "needs spatial maps"),
        (cut("tokens", 12, 12), cut("tokens", 12, 12), AdapterSpec("conv3x3_relu"), "no square grid"),
        (cut("map", 8, 4, 4), cut("map", 16, 4, 4), AdapterSpec(init="identity"), "equal channels"),
        (cut("vector", 8), cut("vector", 4), AdapterSpec("lowrank", rank=5), "exceeds min"),
        (cut("graph", 8), cut("vector", 4), None, "layout 'graph'"),
        (cut("map", 8, 4), cut("vector", 4), None, "3 positive ints"),
    ],
)
def test_incompatible_pairs_give_a_one_line_reason(sender, receiver, spec, fragment):
    reason = compatibility(sender, receiver, spec)
    assert reason is not None and fragment in reason and "\n" not in reason
    with pytest.raises(AdapterError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        build_adapter(spec or AdapterSpec(), sender, receiver)


def test_wrong_input_shape_names_the_expected_shape():
    ad = build_adapter(AdapterSpec(), cut("map", 8, 4, 4, name="layer2"), cut("map", 8, 4, 4))
    with pytest.raises(AdapterError, match=r"\[B, 8, 4, 4\].*'layer2'"):
        ad(torch.zeros(2, 4, 8, 8))


def test_identity_kind_is_exact_identity():
    for c in (cut("map", 8, 4, 4), cut("tokens", 10, 6), cut("vector", 5)):
        ad = build_adapter(AdapterSpec("identity"), c, c)
        x = torch.randn(2, *c.shape)
        assert ad(x) is x and adapter_cost(ad) == (0, 0)


@pytest.mark.parametrize("kind", ["linear", "linear_relu", "conv3x3_relu", "bottleneck"])
def test_identity_init_is_the_identity(kind):
    c = cut("map", 8, 4, 4)
    ad = build_adapter(AdapterSpec(kind, norm="none", init="identity"), c, c).eval()
    x = torch.randn(2, 8, 4, 4).relu()  # ReLU kinds are the identity on non-negative inputs
    torch.testing.assert_close(ad(x), x)


def test_strided_identity_init_averages_patches():
    spec = AdapterSpec(norm="none", resample="strided", init="identity")
    ad = build_adapter(spec, cut("map", 3, 4, 4), cut("map", 3, 2, 2))
    x = torch.randn(2, 3, 4, 4)
    torch.testing.assert_close(ad(x), torch.nn.functional.avg_pool2d(x, 2))


def test_layout_conversions_move_the_right_values():
    # map_nhwc -> map with an identity linear is a permute
    eye = AdapterSpec(norm="none", init="identity")
    ad = build_adapter(eye, cut("map_nhwc", 4, 4, 8), cut("map", 8, 4, 4))
    x = torch.randn(2, 4, 4, 8)
    torch.testing.assert_close(ad(x), x.permute(0, 3, 1, 2))
    # map -> tokens is a row-major flatten; the class token is the mean patch token + cls_offset
    ad = build_adapter(AdapterSpec(norm="none", init="identity"), cut("map", 8, 4, 4), cut("tokens", 17, 8))
    with torch.no_grad():
        ad.cls_offset.fill_(0.5)
    x = torch.randn(2, 8, 4, 4)
    t = ad(x)
    torch.testing.assert_close(t[:, 1:], x.flatten(2).transpose(1, 2))
    torch.testing.assert_close(t[:, 0], t[:, 1:].mean(1) + 0.5)
    # tokens with a class token -> map drops the class token
    ad = build_adapter(AdapterSpec(norm="none", init="identity"), cut("tokens", 17, 8), cut("map", 8, 4, 4))
    tok = torch.randn(2, 17, 8)
    torch.testing.assert_close(ad(tok), tok[:, 1:].transpose(1, 2).reshape(2, 8, 4, 4))
    # tokens -> tokens with the same N keep every token, class token included
    ad = build_adapter(AdapterSpec(norm="none", init="identity"), cut("tokens", 17, 8), cut("tokens", 17, 8))
    torch.testing.assert_close(ad(tok), tok)
    # map -> vector is a global average pool
    ad = build_adapter(AdapterSpec(norm="none", init="identity"), cut("map", 8, 4, 4), cut("vector", 8))
    torch.testing.assert_close(ad(x), x.mean(dim=(2, 3)))


def test_bilinear_resample_is_torch_interpolate():
    ad = build_adapter(AdapterSpec(norm="none", init="identity"), cut("map", 3, 8, 8), cut("map", 3, 5, 5))
    x = torch.randn(2, 3, 8, 8)
    expected = torch.nn.functional.interpolate(x, size=(5, 5), mode="bilinear", align_corners=False)
    torch.testing.assert_close(ad(x), expected)


def test_linear_cost_matches_hand_count():
    c, h, w = 16, 4, 4
    ad = build_adapter(AdapterSpec(norm="none"), cut("map", c, h, w), cut("map", c, h, w))
    assert adapter_cost(ad) == (c * c + c, 2 * c * c * h * w)
    ad = build_adapter(AdapterSpec(norm="both"), cut("map", c, h, w), cut("map", c, h, w))
    assert adapter_cost(ad)[0] == c * c + c + 4 * c  # + BN weight/bias before and after
    ad = build_adapter(AdapterSpec(norm="none"), cut("vector", 10), cut("vector", 6))
    assert adapter_cost(ad, batch=4) == (10 * 6 + 6, 2 * 10 * 6)
    ad = build_adapter(AdapterSpec(norm="none", resample="strided"), cut("map", 8, 8, 8), cut("map", 4, 4, 4))
    assert adapter_cost(ad) == (8 * 4 * 2 * 2 + 4, 2 * 8 * 4 * 2 * 2 * 4 * 4)
    ad = build_adapter(AdapterSpec("lowrank", norm="none", rank=2), cut("vector", 10), cut("vector", 6))
    assert adapter_cost(ad) == (10 * 2 + 2 * 6 + 6, 2 * (10 * 2 + 2 * 6))
    big = cut("map", 64, 4, 4)
    lin = adapter_cost(build_adapter(AdapterSpec(norm="none"), big, big))
    low = adapter_cost(build_adapter(AdapterSpec("lowrank", norm="none"), big, big))
    assert low[0] < lin[0] and low[1] < lin[1]


def test_cost_restores_training_mode():
    ad = build_adapter(AdapterSpec(), cut("map", 8, 4, 4), cut("map", 8, 4, 4))
    assert ad.training
    adapter_cost(ad)
    assert ad.training and int(ad.bn_before.num_batches_tracked) == 0


def test_lowrank_default_rank():
    ad = build_adapter(AdapterSpec("lowrank"), cut("map", 16, 4, 4), cut("map", 32, 4, 4))
    assert ad.core.linear.rank == 4
    ad = build_adapter(AdapterSpec("lowrank"), cut("vector", 3), cut("vector", 2))
    assert ad.core.linear.rank == 1


def test_module_doctests():
    assert doctest.testmod(adapters_mod).failed == 0
