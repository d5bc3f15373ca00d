"""stitchcore.cuts.record: the one recorder of activations at named cuts (hooks and train flags undone)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from stitchcore.cuts.record import record
from stitchcore.errors import CutError


class _Net(nn.Module):
    """conv -> drop -> block (called twice) -> pair (returns a tuple) -> head; counts head calls."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.drop = nn.Dropout(0.5)
        self.block = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 6))
        self.shared = nn.Linear(6, 6)
        self.pair = _Pair()
        self.head = nn.Linear(6, 2)
        self.head_calls = 0

    def forward(self, x):  # x [B, 1, 4, 4]
        h = self.block(self.drop(self.conv(x)))  # [B, 6]
        h = self.shared(torch.relu(self.shared(h)))  # shared: "shared", then "shared:1"
        h, _ = self.pair(h)
        self.head_calls += 1
        return self.head(h)  # [B, 2]


class _Pair(nn.Module):
    def forward(self, h):
        return h * 2, h.sum()


def _hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) for m in model.modules())


def _flags(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


def test_records_each_name_and_removes_hooks_on_normal_exit():
    net = _Net()
    x = torch.randn(5, 1, 4, 4)
    with record(net, ["conv", "block", "shared", "shared:1", "pair"]) as acts:
        assert _hooks(net) == 4  # one per module path ("shared" hooked once for both calls)
        net.eval()(x)
    assert _hooks(net) == 0
    assert acts["conv"].shape == (5, 3, 4, 4) and acts["block"].shape == (5, 6)
    assert list(acts) == ["conv", "block", "shared", "shared:1", "pair"]  # in the order calls returned
    assert not torch.equal(acts["shared"], acts["shared:1"]) and acts.calls["shared"] == 2
    assert torch.equal(acts["pair"], acts["shared:1"] * 2)  # a tuple output: its first item


def test_hooks_removed_and_flags_restored_when_the_block_raises():
    net = _Net().train()
    net.head.eval()
    before = _flags(net)
    with pytest.raises(RuntimeError), record(net, ["conv", "head"], eval_mode=True):
        assert not net.training and not net.conv.training  # eval_mode: the whole model
        net(torch.randn(2, 1, 5, 5))  # wrong spatial size for the Linear
    assert _hooks(net) == 0
    assert _flags(net) == before and net.training and not net.head.training


@pytest.mark.parametrize("eval_mode", [False, True])
def test_train_and_eval_flags_come_back_as_they_were(eval_mode):
    net = _Net().train()
    net.block.eval()  # a mixed state must come back exactly
    before = _flags(net)
    with record(net, ["block"], eval_mode=eval_mode):
        net.conv.eval()  # whatever the block does to the flags is undone
        net.head.train()
        net(torch.randn(2, 1, 4, 4))
    assert _flags(net) == before
    assert net.training and net.conv.training and not net.block.training and not net.block[1].training


def test_stop_at_ends_the_forward_after_the_cut():
    net = _Net().eval()
    x = torch.randn(3, 1, 4, 4)
    after = []
    with record(net, ["conv", "block"], stop_at="block") as acts:
        net(x)
        after.append("block ran on")  # never reached: the forward raised out of the block
    assert after == [] and net.head_calls == 0  # nothing after the cut ran
    assert set(acts) == {"conv", "block"} and acts["block"].shape == (3, 6)
    assert _hooks(net) == 0
    with record(net, ["shared:1"], stop_at="shared:1") as acts:  # stop at a later call of a shared module
        net(x)
    assert net.head_calls == 0 and acts.calls["shared"] == 2


def test_stop_of_an_inner_recording_does_not_leak_into_an_outer_one():
    net = _Net().eval()
    with record(net, ["conv"]) as outer:
        with record(net, ["block"], stop_at="block") as inner:
            net(torch.randn(2, 1, 4, 4))
        assert "block" in inner and "conv" in outer
        assert _hooks(net) == 1  # only the outer hook is left
    assert _hooks(net) == 0


def test_recorded_tensor_is_the_models_own_and_keeps_its_graph():
    net = _Net().eval()
    x = torch.randn(2, 1, 4, 4)
    with record(net, ["block"]) as acts:
        y = net(x)
    assert acts["block"].requires_grad  # no detach: a prefix can train through it
    with torch.no_grad(), record(net, ["head"]) as acts:
        y = net(x)
    assert acts["head"] is y


def test_unknown_name_suggests_close_ones_and_adds_no_hook():
    net = _Net()
    with pytest.raises(CutError, match="no module 'blok' in _Net; close: block"):
        with record(net, ["conv", "blok"]):
            pass
    assert _hooks(net) == 0
    with pytest.raises(CutError, match="stop_at"):
        with record(net, ["conv"], stop_at="head"):
            pass


def test_require_says_why_a_name_is_missing():
    net = _Net().eval()
    with record(net, ["shared:2", "drop"]) as acts:
        net(torch.randn(2, 1, 4, 4))
    with pytest.raises(CutError, match=r"ran 2 time\(s\).*'shared:2' does not exist, use 'shared'"):
        acts.require("shared:2")
    assert acts.require("drop").shape == (2, 3, 4, 4)
    with pytest.raises(CutError, match="was not recorded"):
        acts.require("conv")
    other = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with record(other, ["1"], stop_at="1") as acts:
        other[0](torch.randn(1, 2))  # module "1" never runs
    with pytest.raises(CutError, match="did not run"):
        acts.require("1")
