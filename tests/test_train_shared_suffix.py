"""Adapters trained together through one suffix pass equal adapters trained one by one."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from stitchcore.stitching.activations import collect_cuts
from stitchcore.stitching.adapters import AdapterSpec, build_adapter
from stitchcore.cuts import get_cut, split
from stitchcore.data.images import load_dataset
from stitchcore.models.sources import load_model
from stitchcore.stitching.train import AdapterTargets, TrainKnobs, train_adapter
from stitchcore.stitching.shared_suffix import train_adapters_shared_suffix

pytestmark = pytest.mark.usefixtures("no_background_calibration")  # seeds below read torch's global RNG
CPU = torch.device("cpu")
SENDERS = ("block1", "block2", "fc1")  # map (16,4,4), map (32,2,2), vector (64,): three adapter shapes
RECEIVER = "fc1"
TRAIN = dict(knobs=TrainKnobs("adamw", 1e-2, 0.05, epochs=2, batch_size=64, seed=5), device=CPU)


@pytest.fixture(scope="module")
def setting(trained_store):
    store, refs = trained_store
    a, b = load_model(refs[0], store=store), load_model(refs[1], store=store)
    ds = load_dataset("digits")
    senders = [get_cut(a, n) for n in SENDERS]
    receiver = get_cut(b, RECEIVER)
    acts = collect_cuts(a, senders, ds, "train", device=CPU, limit=400)
    suffix = split(b, receiver)[1]
    return senders, receiver, [acts[n] for n in SENDERS], ds.labels("train")[:400], suffix


def _fresh(senders, receiver) -> list[torch.nn.Module]:
    adapters = []
    for s in senders:
        torch.manual_seed(11)
        adapters.append(build_adapter(AdapterSpec(kind="linear", norm="both", init="random"), s, receiver))
    return adapters


def test_joint_training_equals_training_each_adapter_alone(setting):
    senders, receiver, acts, labels, suffix = setting
    alone = _fresh(senders, receiver)
    for adapter, h in zip(alone, acts, strict=True):
        train_adapter(adapter, suffix, h, AdapterTargets(labels=labels), objective={"task": 1.0}, **TRAIN)
    together = _fresh(senders, receiver)
    before = [p.clone() for p in together[0].parameters()]
    losses = train_adapters_shared_suffix(together, suffix, acts, labels, **TRAIN)
    assert len(losses) == 3 and all(0 < v < 3 for v in losses)
    assert any(not torch.equal(p, q) for p, q in zip(before, together[0].parameters(), strict=True))
    for one, joint in zip(alone, together, strict=True):
        for (name, p), q in zip(one.state_dict().items(), joint.state_dict().values(), strict=True):
            assert torch.allclose(p.float(), q.float(), atol=2e-4, rtol=1e-3), name
    assert not any(p.requires_grad for p in suffix.parameters())  # the suffix stayed frozen


def test_a_suffix_in_train_mode_is_put_back_in_eval(setting):
    senders, receiver, acts, labels, suffix = setting
    suffix.train()
    train_adapters_shared_suffix(_fresh(senders, receiver)[:1], suffix, acts[:1], labels, **{**TRAIN, "knobs": replace(TRAIN["knobs"], epochs=1)})
    assert not suffix.training


def test_mismatched_inputs_are_refused(setting):
    senders, receiver, acts, labels, suffix = setting
    with pytest.raises(ValueError, match="one cached activation tensor per adapter"):
        train_adapters_shared_suffix(_fresh(senders, receiver), suffix, acts[:2], labels, **TRAIN)
    with pytest.raises(ValueError, match="one row per label"):
        train_adapters_shared_suffix(_fresh(senders, receiver)[:1], suffix, [acts[0][:10]], labels, **TRAIN)


def test_frozen_for_training_folds_batchnorm_without_touching_the_suffix():
    from stitchcore.models.archs import create_arch
    from stitchcore.stitching.shared_suffix import frozen_for_training

    torch.manual_seed(0)
    model = create_arch("resnet", blocks=[1, 1, 1, 1], width=8, in_chans=1, num_classes=10).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):  # non-trivial statistics, so folding has work to do
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    example = torch.zeros(2, 1, 16, 16)
    cut = get_cut(model, "layer1.0", example)
    suffix = split(model, cut, example)[1]
    before = {k: v.clone() for k, v in suffix.state_dict().items()}
    fast = frozen_for_training(suffix)
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in suffix.modules())
    assert n_bn > 0 and sum(isinstance(m, torch.nn.BatchNorm2d) for m in fast.modules()) < n_bn
    h = torch.randn(8, *cut.shape)
    with torch.no_grad():
        assert torch.allclose(fast(h), suffix(h), atol=1e-4)
    assert all(torch.equal(v, suffix.state_dict()[k]) for k, v in before.items())
    assert not fast.training and not any(p.requires_grad for p in fast.parameters())


def test_frozen_for_training_takes_a_suffix_with_a_five_dimensional_buffer():
    """Module.to(memory_format=channels_last) refuses a 5-d tensor: a trained matrix into the zoo ViT failed so."""
    from stitchcore.stitching.shared_suffix import frozen_for_training

    class WithTable(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 1)
            self.register_buffer("table", torch.zeros(1, 2, 2, 2, 2))  # [1, 2, 2, 2, 2]: 5-d

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x).mean(dim=(2, 3)) + self.table.sum()

    fast = frozen_for_training(WithTable())
    assert fast.conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert tuple(fast(torch.ones(2, 3, 4, 4)).shape) == (2, 4)


def test_bf16_precision_trains_close_to_fp32(setting):
    senders, receiver, acts, labels, suffix = setting
    fp32 = train_adapters_shared_suffix(_fresh(senders, receiver), suffix, acts, labels, **TRAIN)
    bf16 = train_adapters_shared_suffix(_fresh(senders, receiver), suffix, acts, labels, **TRAIN, precision="bf16")
    assert all(abs(x - y) < 0.1 for x, y in zip(fp32, bf16, strict=True)), (fp32, bf16)
    with pytest.raises(ValueError, match="precision"):
        train_adapters_shared_suffix(_fresh(senders, receiver), suffix, acts, labels, **TRAIN, precision="fp8")
