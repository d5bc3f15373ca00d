"""Built-in architectures: shapes, names, registry, determinism, traceability, a fit smoke test."""

from __future__ import annotations

import json

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from stitchcore.models.archs import arch_defaults, create_arch, list_archs, register_arch
from stitchcore.errors import RefError

pytestmark = pytest.mark.usefixtures("no_background_calibration")  # the seeds below read torch's global RNG

# name -> (kwargs, input maker, expected output shape)
CASES = {
    "mlp": ({}, lambda: torch.randn(3, 1, 8, 8), (3, 10)),
    "cnn": ({}, lambda: torch.randn(3, 1, 8, 8), (3, 10)),
    "resnet": ({}, lambda: torch.randn(3, 1, 8, 8), (3, 10)),
    "gpt": ({"vocab_size": 40}, lambda: torch.randint(0, 40, (3, 16)), (3, 16, 40)),
    "vit": ({}, lambda: torch.randn(3, 1, 8, 8), (3, 10)),
    "swin": ({}, lambda: torch.randn(3, 1, 8, 8), (3, 10)),
}


def test_registry_lists_builtins():
    assert list_archs()[:6] == ["mlp", "cnn", "resnet", "gpt", "vit", "swin"]


@pytest.mark.parametrize("name", list(CASES))
def test_builds_and_forward_shape(name):
    kwargs, make, shape = CASES[name]
    model = create_arch(name, **kwargs).eval()
    assert tuple(model(make()).shape) == shape
    assert model.arch_name == name
    assert json.loads(json.dumps(model.arch_kwargs)) == model.arch_kwargs
    assert model.input_kind == ("tokens" if name == "gpt" else "image")


@pytest.mark.parametrize("name", list(CASES))
def test_fx_traceable_and_equal(name):
    kwargs, make, _ = CASES[name]
    model = create_arch(name, **kwargs).eval()
    x = make()
    traced = torch.fx.symbolic_trace(model)
    torch.testing.assert_close(traced(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_deterministic_init_under_seed(name):
    kwargs = CASES[name][0]
    torch.manual_seed(7)
    a = create_arch(name, **kwargs).state_dict()
    torch.manual_seed(7)
    b = create_arch(name, **kwargs).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", list(CASES))
def test_rebuild_from_recorded_kwargs(name):
    kwargs = CASES[name][0]
    torch.manual_seed(1)
    model = create_arch(name, **kwargs)
    torch.manual_seed(1)
    again = create_arch(name, **json.loads(json.dumps(model.arch_kwargs)))
    assert again.arch_kwargs == model.arch_kwargs
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())


def test_module_names_are_clean_cut_points():
    assert [n for n, _ in create_arch("mlp").named_children()] == ["flatten", "fc1", "fc2", "fc3", "head"]
    assert [n for n, _ in create_arch("cnn").named_children()] == [
        "block1",
        "block2",
        "flatten",
        "fc1",
        "fc2",
        "head",
    ]
    names = {n for n, _ in create_arch("resnet", blocks=(2, 2, 2, 2)).named_modules()}
    assert {"stem", "layer1.0", "layer1.1", "layer4.1", "pool", "fc"} <= names
    gpt = dict(create_arch("gpt", n_layer=2).named_modules())
    assert {
        "wte",
        "wpe",
        "h.0",
        "h.1",
        "h.0.ln_1",
        "h.0.attn",
        "h.0.ln_2",
        "h.0.mlp",
        "ln_f",
        "lm_head",
    } <= gpt.keys()


def test_mlp_depth_and_shape():
    model = create_arch("mlp", in_shape=(3, 4, 4), width=8, depth=5, num_classes=2)
    assert [n for n, _ in model.named_children()][-2:] == ["fc5", "head"]
    assert model(torch.randn(2, 3, 4, 4)).shape == (2, 2)


def test_cnn_other_sizes_and_fc_count():
    model = create_arch("cnn", in_chans=3, image_size=32, channels=(8, 16, 32), fc_widths=(64, 32, 16))
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert len(linears) == 4
    assert model.input_shape == (3, 32, 32)


def test_resnet18_for_32x32_and_string_options():
    model = create_arch("resnet", blocks="2,2,2,2", width="8", in_chans="3", image_size="32")
    assert model.arch_kwargs["blocks"] == [2, 2, 2, 2] and model.arch_kwargs["width"] == 8
    assert len(model.layer1) == 2 and model.layer4[0].conv1.out_channels == 64
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_gpt_head_tied_and_short_sequences():
    model = create_arch("gpt", vocab_size=30, block_size=16, n_layer=1, n_head=2, n_embd=8)
    assert model.lm_head.weight is model.wte.weight
    assert model(torch.randint(0, 30, (1, 5))).shape == (1, 5, 30)
    assert model.input_shape == (16,) and model.num_outputs == 30


def test_gpt_is_causal():
    model = create_arch("gpt", vocab_size=20, n_layer=2).eval()
    x = torch.randint(0, 20, (1, 12))
    y = x.clone()
    y[0, 8:] = (y[0, 8:] + 1) % 20
    torch.testing.assert_close(model(x)[:, :8], model(y)[:, :8])


def test_arch_defaults():
    assert arch_defaults("cnn") == {
        "in_chans": 1,
        "image_size": 8,
        "channels": [16, 32],
        "fc_widths": [64, 32],
        "num_classes": 10,
    }
    assert arch_defaults("gpt")["block_size"] == 64


def test_unknown_arch_suggests():
    with pytest.raises(RefError, match="did you mean 'cnn'"):
        create_arch("cnm")


def test_unknown_option_suggests():
    with pytest.raises(RefError, match="did you mean width"):
        create_arch("mlp", widht=3)


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("mlp", {"width": "wide"}, "must be int"),
        ("resnet", {"blocks": "1,x"}, "must be a list of int"),
        ("resnet", {"blocks": (0, 1)}, "1..4 stages"),
        ("cnn", {"fc_widths": (64,)}, "2..4"),
        ("cnn", {"image_size": 2}, "too small"),
        ("gpt", {"n_embd": 10, "n_head": 4}, "not divisible"),
        ("gpt", {"dropout": 1.5}, "dropout"),
        ("mlp", {"depth": 1.5}, "must be int"),
    ],
)
def test_bad_option_values(name, kwargs, match):
    with pytest.raises(RefError, match=match):
        create_arch(name, **kwargs)


def test_register_twice_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_arch("cnn")(type(create_arch("cnn")))


def test_register_needs_config():
    with pytest.raises(TypeError, match="config_cls"):
        register_arch("nocfg-test")(nn.Linear)


def test_cnn_fits_learnable_data():
    """Top half brighter than bottom half: a CNN learns it in 150 steps."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(512, 1, 8, 8, generator=gen)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).long()
    torch.manual_seed(0)
    model = create_arch("cnn", num_classes=2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: one thread is fastest and immune to a busy machine
    try:
        for _ in range(150):
            idx = torch.randint(0, 512, (64,), generator=gen)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    assert acc > 0.9
