"""Cut discovery and splitting: for every family and every cut, suffix(prefix(x)) == model(x)."""

from __future__ import annotations

import gc
import weakref
from collections import OrderedDict

import pytest
import torch
from torch import nn

from stitchcore.cuts import Cut, alias_note, get_cut, list_cuts, resolve_cut_name, split, split_segment
from stitchcore.errors import CutError


def _output(y):
    return getattr(y, "logits", y)  # HF models return a ModelOutput; the split returns the logits


def _hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def check_all_cuts(model: nn.Module, x: torch.Tensor) -> list[Cut]:
    """Every cut: prefix shape == cut.shape, suffix(prefix(x)) == model(x); depth rises to 1."""
    flags = [m.training for m in model.modules()]
    hooks = _hooks(model)
    cuts = list_cuts(model, x)
    assert cuts, "no cuts"
    assert len({c.name for c in cuts}) == len(cuts)
    depths = [c.depth for c in cuts]
    assert depths == sorted(depths) and len(set(depths)) == len(depths) and depths[-1] == pytest.approx(1.0)
    params = {id(p) for p in model.parameters()}
    with torch.no_grad():
        model.eval()
        want = _output(model(x))
        for cut in cuts:
            assert cut.layout in ("map", "map_nhwc", "tokens", "vector")
            assert len(cut.shape) == {"map": 3, "map_nhwc": 3, "tokens": 2, "vector": 1}[cut.layout]
            prefix, suffix = split(model, cut, x)
            assert {id(p) for p in prefix.parameters()} <= params  # shared, never copied
            assert {id(p) for p in suffix.parameters()} <= params
            h = prefix(x)
            assert tuple(h.shape) == (x.shape[0], *cut.shape), cut
            got = _output(suffix(h))
            assert torch.allclose(got, want, atol=1e-5), (cut, (got - want).abs().max())
    for m, flag in zip(model.modules(), flags):
        m.training = flag
    assert _hooks(model) == hooks
    return cuts


# ----------------------------------------------------------------------------- hand-written models


def test_sequential_mlp():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    cuts = check_all_cuts(model, torch.randn(3, 8))
    assert [c.name for c in cuts] == ["0", "1", "2", "3"]  # the output "4" is not a cut
    assert {c.layout for c in cuts} == {"vector"} and cuts[0].shape == (16,)


class Residual(nn.Module):
    """inp -> [a, add1, mid] inside a skip from inp to add2 -> post -> head."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.a, self.mid = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 16)
        self.post, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        h = self.inp(x)
        t = h + self.a(h)  # add 1
        t = self.mid(t)  # between the two adds: h is still live, so not a cut
        y = self.post(h + t)  # add 2
        if scale is not None:  # optional argument: traced with its default
            y = y * scale
        return self.head(y)


def test_residual_skip_is_never_straddled():
    cuts = check_all_cuts(Residual(), torch.randn(3, 8))
    assert [c.name for c in cuts] == ["inp", "post"]


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) if x.sum() > 0 else self.fc(-x)  # data-dependent: fx cannot trace it


def test_untraceable_model_without_block_list_raises():
    with pytest.raises(CutError, match="torch.fx could not trace it .* no known block list"):
        list_cuts(Branchy(), torch.randn(2, 4))


class BranchyBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x) if x.sum() > 0 else block(-x)
        return x


def test_untraceable_block_list_lists_but_cannot_split():
    model, x = BranchyBlocks(), torch.randn(2, 4)
    assert [c.name for c in list_cuts(model, x)] == ["blocks.0", "blocks.1", "blocks.2"]
    with pytest.raises(CutError, match="cannot split BranchyBlocks at blocks.1: torch.fx could not trace"):
        split(model, "blocks.1", x)
    assert _hooks(model) == 0


def test_named_sequential_is_one_block():
    model = nn.Sequential(OrderedDict(
        fc1=nn.Sequential(OrderedDict(linear=nn.Linear(4, 8), relu=nn.ReLU())), head=nn.Linear(8, 2)))
    assert [c.name for c in check_all_cuts(model, torch.randn(2, 4))] == ["fc1"]


def test_in_place_suffix_leaves_the_activation_alone():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 2))
    x = torch.randn(2, 4)
    prefix, suffix = split(model, "0", x)
    h = prefix(x).detach()
    before = h.clone()
    suffix(h)
    assert torch.equal(h, before)


# ----------------------------------------------------------------------------- errors and side effects


@pytest.fixture(scope="module")
def resnet18():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None), torch.randn(2, 3, 64, 64)


def test_unknown_cut_names_close_ones(resnet18):
    model, x = resnet18
    with pytest.raises(CutError, match=r"no cut 'layer5' .*close: .*layer4.*Hint: list the cuts with"):
        get_cut(model, "layer5", x)
    with pytest.raises(CutError, match=r"no cut 'layer4\.1\.conv2' .*it is a module.*close: "):
        split(model, "layer4.1.conv2", x)  # inside a residual block: no cut, and no alias of one
    with pytest.raises(CutError, match=r"no cut 'fc' .*it is a module, but its output is the model output"):
        get_cut(model, "fc", x)


# ----------------------------------------------------------------------------- aliases


def test_stage_names_are_aliases_of_their_last_block(resnet18):
    model, x = resnet18
    cuts = {c.name: c for c in list_cuts(model, x)}
    assert cuts["layer2.1"].aliases[0] == "layer2" and "layer2.1.relu:1" in cuts["layer2.1"].aliases
    assert cuts["layer2.0"].aliases == ("layer2.0.relu:1",)  # the block's 2nd ReLU call, not the 1st
    assert get_cut(model, "layer2", x) == cuts["layer2.1"]
    assert get_cut(model, "layer2", x).aliases == cuts["layer2.1"].aliases
    assert resolve_cut_name(model, "layer4", x) == "layer4.1"
    assert resolve_cut_name(model, "layer4.1", x) == "layer4.1"
    assert alias_note("layer2", "layer2.1") == "layer2 = layer2.1" and alias_note("fc1", "fc1") is None
    with torch.no_grad():
        by_alias, by_name = split(model, "layer2", x), split(model, "layer2.1", x)
        h = by_alias[0](x)
        assert torch.equal(h, by_name[0](x))
        assert torch.equal(by_alias[1](h), by_name[1](h))
        segment = split_segment(model, "layer2", "layer3", x)
        assert torch.allclose(segment(h), split(model, "layer3.1", x)[0](x), atol=1e-5)
    with pytest.raises(CutError, match=r"no cut 'layer2\.1\.relu' .*close: "):
        get_cut(model, "layer2.1.relu", x)  # its first call is inside the block: only ':1' is a cut
    with pytest.raises(CutError, match=r"no cut 'layr2' .*close: .*layer2"):
        resolve_cut_name(model, "layr2", x)  # suggestions include the aliases


def test_zoo_resnet_stage_alias():
    from stitchcore.models.archs import create_arch

    torch.manual_seed(0)
    model = create_arch("resnet", blocks=(2, 1, 1, 1)).eval()
    x = torch.randn(2, *model.input_shape)
    cuts = {c.name: c for c in list_cuts(model, x)}
    assert "layer1" in cuts["layer1.1"].aliases and "layer1.1.relu2" in cuts["layer1.1"].aliases
    assert cuts["layer2.0"].aliases[0] == "layer2"
    assert "stem.relu" in cuts["stem"].aliases
    assert resolve_cut_name(model, "layer1", x) == "layer1.1"
    with torch.no_grad():
        assert torch.equal(split(model, "layer2", x)[0](x), split(model, "layer2.0", x)[0](x))
        prefix, suffix = split(model, "layer1", x)
        assert torch.equal(suffix(prefix(x)), model(x))
    with pytest.raises(CutError, match=r"no cut 'layer9' .*close: "):
        get_cut(model, "layer9", x)


def test_model_left_as_found(resnet18):
    model, x = resnet18
    model.train()
    model.layer2.eval()
    flags = [m.training for m in model.modules()]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    list_cuts(model, x)
    prefix, suffix = split(model, "layer2.1", x)
    assert [m.training for m in model.modules()] == flags
    assert _hooks(model) == 0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())  # BN stats untouched
    cut = get_cut(model, "layer2.1", x)
    assert cut == Cut("layer2.1", (128, 8, 8), "map", cut.depth)


def test_models_are_not_kept_alive():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    list_cuts(model, torch.randn(2, 4))
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None


def test_replaced_layer_is_retraced():
    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(2, 4)
    assert list_cuts(model, x)[0].shape == (4,)
    model[0], model[2] = nn.Linear(4, 6), nn.Linear(6, 2)
    assert list_cuts(model, x)[0].shape == (6,)


# ----------------------------------------------------------------------------- torchvision / timm


def test_torchvision_resnet18(resnet18):
    import time

    model, x = resnet18
    start = time.perf_counter()
    list_cuts(nn.Sequential(model), x)  # a fresh model object: no cache
    assert time.perf_counter() - start < 5.0  # ~0.1 s on an idle 2-core CPU; slack for a busy machine
    cuts = check_all_cuts(model, x)
    names = [c.name for c in cuts]
    blocks = [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    assert [n for n in names if n.startswith("layer")] == blocks
    assert names[:4] == ["conv1", "bn1", "relu", "maxpool"]
    by_name = {c.name: c for c in cuts}
    assert all(by_name[b].layout == "map" for b in blocks)
    assert by_name["layer4.1"].shape == (512, 2, 2)


timm = pytest.importorskip("timm")


@pytest.mark.parametrize("name", ["resnet50", "mobilenetv3_large_100"])
def test_timm_cnns(name):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False)
    cuts = check_all_cuts(model, torch.randn(2, 3, 64, 64))
    names = [c.name for c in cuts]
    if name == "resnet50":
        assert [n for n in names if n.startswith("layer")] == [
            f"layer{i}.{j}" for i, n in zip(range(1, 5), (3, 4, 6, 3)) for j in range(n)]
    else:
        assert "blocks.0.0" in names and "blocks.6.0" in names
    assert all(c.layout == "map" for c in cuts if len(c.shape) == 3)


def test_timm_vit():
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    cuts = {c.name: c for c in check_all_cuts(model, torch.randn(1, 3, 224, 224))}
    for i in range(12):
        assert cuts[f"blocks.{i}"].layout == "tokens" and cuts[f"blocks.{i}"].shape == (197, 192)
    assert cuts["blocks.0"].depth < cuts["blocks.11"].depth


def test_timm_swin():
    torch.manual_seed(0)
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False)
    cuts = {c.name: c for c in check_all_cuts(model, torch.randn(1, 3, 224, 224))}
    for i, (side, chans) in enumerate([(56, 96), (28, 192), (14, 384), (7, 768)]):
        assert cuts[f"layers.{i}"].layout == "map_nhwc" and cuts[f"layers.{i}"].shape == (side, side, chans)
        assert cuts[f"layers.{i}.blocks.0"].layout == "map_nhwc"
    assert "layers.2.blocks.4" in cuts  # the last block of a stage is named by the stage
    assert "layers.2.blocks.5" not in cuts


# ----------------------------------------------------------------------------- Hugging Face GPT-2


transformers = pytest.importorskip("transformers")


class Wrap(nn.Module):
    def __init__(self, hf: nn.Module) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.hf(idx).logits  # [B, T, V]


def _gpt2() -> nn.Module:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.parametrize("wrapped", [True, False])
def test_hf_gpt2(wrapped):
    model = Wrap(_gpt2()) if wrapped else _gpt2()
    x = torch.randint(0, 100, (2, 16))
    cuts = check_all_cuts(model, x)
    p = "hf.transformer" if wrapped else "transformer"
    assert [c.name for c in cuts] == [f"{p}.drop", f"{p}.h.0", f"{p}.h.1", f"{p}.ln_f"]
    assert all(c.layout == "tokens" and c.shape == (16, 32) for c in cuts)
    prefix, suffix = split(model, f"{p}.h.0", x)
    x2 = torch.randint(0, 100, (3, 9))  # another batch size and length
    model.eval()  # dropout off
    with torch.no_grad():
        assert torch.allclose(suffix(prefix(x2)), _output(model(x2)), atol=1e-5)


# ----------------------------------------------------------------------------- zoo architectures


def _zoo_input(arch: str) -> torch.Tensor:
    return torch.randint(0, 64, (2, 16)) if arch == "gpt" else torch.randn(2, 1, 8, 8)


def _zoo_archs() -> list[str]:
    try:
        from stitchcore.models.archs import list_archs
    except ImportError:
        return ["mlp", "cnn", "resnet", "gpt"]
    return list_archs()


@pytest.mark.parametrize("arch", _zoo_archs())
def test_zoo_arch(arch):
    archs = pytest.importorskip("stitchcore.models.archs")
    torch.manual_seed(0)
    cuts = check_all_cuts(archs.create_arch(arch), _zoo_input(arch))
    assert len(cuts) >= 3


def test_tracing_does_not_break_forward_passes_in_other_threads():
    """torch.fx patches nn.Module.__call__ process-wide while tracing; a job's forward in a
    worker thread must keep working (the app traces in its script thread meanwhile)."""
    import threading

    import torchvision

    from stitchcore.cuts import list_cuts

    worker_model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 32, 32)
    errors: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        with torch.no_grad():
            while not stop.is_set():
                try:
                    worker_model(x)
                except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                    errors.append(exc)
                    return

    t = threading.Thread(target=work)
    t.start()
    try:
        for _ in range(6):  # fresh models: no plan cache, every call traces
            cuts = list_cuts(torchvision.models.resnet18(weights=None), torch.randn(2, 3, 32, 32))
            assert "layer4.1" in [c.name for c in cuts]
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]


def test_coarse_cuts_spread_over_depth_and_keep_the_last():
    import doctest

    import stitchcore.cuts as cuts_mod
    from stitchcore.cuts import Cut, coarse_cuts

    assert doctest.testmod(cuts_mod).failed == 0
    cuts = [Cut(f"l{i}", (4,), "vector", (i + 1) / 11) for i in range(11)]
    picked = coarse_cuts(cuts, 6)
    assert [c.name for c in picked] == ["l0", "l2", "l4", "l6", "l8", "l10"]
    assert coarse_cuts(cuts[:3], 6) == cuts[:3] and coarse_cuts(cuts, 1) == [cuts[-1]]
    with pytest.raises(CutError):
        coarse_cuts(cuts, 0)
