"""Shared-moment fits: the same adapters as fit_adapter one by one, and the proxy's R² and CKA against numpy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from stitchcore.cuts import Cut
from stitchcore.errors import AdapterError
from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility
from stitchcore.stitching.fits import fit_adapter
from stitchcore.stitching.shared_fits import SharedFits

SENDERS = {"s_map": Cut("s_map", (5, 8, 8), "map", 0.3), "s_tok": Cut("s_tok", (17, 6), "tokens", 0.4),
           "s_vec": Cut("s_vec", (7,), "vector", 0.9)}  # fmt: skip
RECEIVERS = {"r8": Cut("r8", (4, 8, 8), "map", 0.2), "r4": Cut("r4", (6, 4, 4), "map", 0.5),
             "r4b": Cut("r4b", (3, 4, 4), "map", 0.6), "r_tok": Cut("r_tok", (5, 3), "tokens", 0.7),
             "r_vec": Cut("r_vec", (9,), "vector", 1.0)}  # fmt: skip


def activations(n: int, seed: int = 0) -> tuple[dict, dict]:
    """Senders and receivers that depend on one latent, so fits have something to find."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 8, 8, 8, generator=g) + 2.0  # a shared latent, off zero
    mix = lambda c: torch.randn(c, 8, generator=g) / 3  # noqa: E731
    def chan(c, grid):
        m = torch.einsum("oc,bchw->bohw", mix(c), z)
        return torch.nn.functional.adaptive_avg_pool2d(m, grid) + 0.1 * torch.randn(n, c, grid, grid, generator=g)
    send = {"s_map": chan(5, 8), "s_tok": chan(6, 4).flatten(2).transpose(1, 2), "s_vec": chan(7, 1).flatten(1)}
    send["s_tok"] = torch.cat([torch.randn(n, 1, 6, generator=g), send["s_tok"]], dim=1)  # a class token first
    recv = {"r8": chan(4, 8), "r4": chan(6, 4).relu(), "r4b": chan(3, 4), "r_vec": chan(9, 1).flatten(1),
            "r_tok": torch.cat([torch.randn(n, 1, 3, generator=g) + 1, chan(3, 2).flatten(2).transpose(1, 2)], 1)}
    return send, recv


def adapters(spec: AdapterSpec, sender: str) -> list:
    """Every adapter ``spec`` can build from ``sender`` into the receivers."""
    torch.manual_seed(0)
    s = SENDERS[sender]
    return [build_adapter(spec, s, r) for r in RECEIVERS.values() if compatibility(s, r, spec) is None]


@pytest.mark.parametrize("sender", list(SENDERS))
@pytest.mark.parametrize("spec", [
    AdapterSpec(init="lstsq"), AdapterSpec(init="lstsq", resample="strided"), AdapterSpec(init="procrustes"),
    AdapterSpec(kind="lowrank", init="lstsq", rank=2), AdapterSpec(init="lstsq", resample="nearest", norm="none"),
], ids=["bilinear", "strided", "procrustes", "lowrank", "nearest"])  # fmt: skip
@pytest.mark.parametrize("hold_every", [0, 5])
def test_shared_fits_write_what_fit_adapter_writes(sender, spec, hold_every):
    send, recv = activations(60)
    mine = adapters(spec, sender)
    assert mine
    theirs = [copy.deepcopy(a) for a in mine]
    fits = SharedFits(mine, spec.init, hold_every=hold_every, budget=2**20)  # a small budget: slices of images
    for start in range(0, 60, 23):
        fits.update({k: v[start : start + 23] for k, v in send.items()},
                    {k: v[start : start + 23] for k, v in recv.items()}, first=start)  # fmt: skip
    residuals = fits.finish()
    assert fits.n_groups < len(mine) or sender == "s_vec" or len(mine) == 1
    for a, b, res in zip(mine, theirs, residuals):
        r = b.receiver.name
        expected = fit_adapter(b, [(send[sender][i : i + 17], recv[r][i : i + 17]) for i in range(0, 60, 17)],
                               method=spec.init)  # fmt: skip
        assert res == pytest.approx(expected, abs=1e-9)
        if spec.kind != "lowrank":  # (a low-rank map's two factors are each defined up to sign)
            for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
                assert torch.allclose(p.double(), q.double(), atol=1e-5, rtol=1e-5), name
        a.eval(), b.eval()
        h = send[sender][:8]
        assert torch.allclose(a(h), b(h), atol=1e-5)


def test_every_sender_into_every_receiver_at_once_equals_one_by_one():
    send, recv = activations(45)
    spec = AdapterSpec(init="lstsq")
    mine = [a for sender in SENDERS for a in adapters(spec, sender)]
    theirs = [copy.deepcopy(a) for a in mine]
    fits = SharedFits(mine, "lstsq", hold_every=3)
    assert fits.n_buckets == 4 and len(mine) == 11  # receiver grids 8x8, 4x4, 2x2 (r_tok as a map), vectors
    fits.update(send, recv, first=0)
    records = fits.records()
    for a, b, rec in zip(mine, theirs, records):
        pairs = [(send[b.sender.name], recv[b.receiver.name])]
        assert rec["residual"] == pytest.approx(fit_adapter(b, pairs), abs=1e-9)
        a.eval(), b.eval()
        assert torch.allclose(a(send[a.sender.name][:5]), b(send[b.sender.name][:5]), atol=1e-5)
        assert -1 < rec["r2"] <= 1 and 0 <= rec["cka"] <= 1


def test_the_sender_is_shared_by_every_receiver_on_its_grid():
    fits = SharedFits(adapters(AdapterSpec(init="lstsq"), "s_map"), "lstsq")
    # grids 8x8 (r8), 4x4 (r4, r4b), 2x2 (r_tok's map), and the vector receiver: four factors for five fits
    assert fits.n_groups == 4


def test_proxies_match_numpy():
    send, recv = activations(200, seed=3)
    spec = AdapterSpec(init="lstsq", norm="none")
    a = build_adapter(spec, SENDERS["s_map"], RECEIVERS["r4"])
    fits = SharedFits([a], "lstsq", hold_every=4, ridge=0.0)
    fits.update(send, recv, first=0)
    fits.finish()
    proxy = fits.proxies()[0]
    x = torch.nn.functional.interpolate(send["s_map"], size=(4, 4), mode="bilinear", align_corners=False)
    rows = lambda t: t.movedim(1, -1).reshape(-1, t.shape[1]).double().numpy()  # noqa: E731
    held = (torch.arange(200) % 4 == 3)
    xf, yf, xh, yh = rows(x[~held]), rows(recv["r4"][~held]), rows(x[held]), rows(recv["r4"][held])
    coef, *_ = np.linalg.lstsq(np.c_[xf, np.ones(len(xf))], yf, rcond=None)
    err = ((np.c_[xh, np.ones(len(xh))] @ coef - yh) ** 2).sum(1).mean()
    r2 = 1 - err / yh.var(0).sum()
    assert proxy["r2"] == pytest.approx(r2, abs=1e-6)
    xa, ya = rows(x), rows(recv["r4"])
    xa, ya = xa - xa.mean(0), ya - ya.mean(0)
    cka = np.linalg.norm(xa.T @ ya) ** 2 / (np.linalg.norm(xa.T @ xa) * np.linalg.norm(ya.T @ ya))
    assert proxy["cka"] == pytest.approx(cka, abs=1e-9)


def test_a_receiver_unrelated_to_the_sender_has_low_held_out_r2():
    send, _ = activations(200)
    noise = {"r4": torch.randn(200, 6, 4, 4, generator=torch.Generator().manual_seed(9))}
    fits = SharedFits([build_adapter(AdapterSpec(init="lstsq"), SENDERS["s_map"], RECEIVERS["r4"])], "lstsq",
                      hold_every=5)  # fmt: skip
    fits.update(send, noise)
    r2 = fits.proxies()[0]["r2"]
    assert r2 < 0.05  # no better than the mean, held out


def test_proxies_need_held_out_images():
    send, recv = activations(10)
    fits = SharedFits(adapters(AdapterSpec(init="lstsq"), "s_map"), "lstsq")
    fits.update(send, recv)
    with pytest.raises(AdapterError, match="hold_every"):
        fits.proxies()
    with pytest.raises(AdapterError, match="hold_every"):
        SharedFits([], "lstsq", hold_every=1)
    with pytest.raises(AdapterError, match="linear adapter"):
        SharedFits([build_adapter(AdapterSpec(kind="bottleneck"), SENDERS["s_map"], RECEIVERS["r4"])], "lstsq")
