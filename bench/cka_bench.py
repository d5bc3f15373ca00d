"""Benchmark: minibatch debiased linear CKA over every block-level cut pair of two ResNet-18s.

Two random-init zoo ResNet-18s (``create_arch("resnet", blocks=(2,2,2,2), width=16)``, seeds 0
and 1) see 2,048 digits upscaled to 32x32 (``Preprocess(size=(32, 32))``): the 1,797 images of
train then test, then the first 251 of them again flipped left-right to reach 2,048.  Batch
256 -> 8 batches; 10 cuts per model (stem, layer1.0 .. layer4.1, pool) -> 100 pairs.

Timed, in one process, on the same cached features (one forward pass of each model per batch):

- ``stacked_s``: :class:`MinibatchCKA` -- per batch one Gram per layer (float32, of centred features:
  ``gram_centred``), U-centring in float64, ONE [10, B*B] x [B*B, 10] product for all 100 cross HSICs.
- ``per_pair_s``: the hand-written per-pair loop: for every (A cut, B cut) pair, every
  batch, float64 Gram of each side then the three debiased HSICs by Song et al.'s formula
  (``hsic_unbiased``), pair by pair -- what calling a per-pair ``minibatch_cka(X, Y)`` 100 times
  costs.  It is also the float64 ``reference`` every other path is checked against.
- ``per_pair_cached_grams_s``: the same loop with each layer's Gram computed once per batch.
- breakdown: ``grams_s`` (every Gram once, as ``stacked_s`` computes them; ``grams_float64_s`` the
  same in float64), then from those Grams ``pairs_stacked_s`` (U-centring + one product) against
  ``pairs_loop_s`` (the direct cross HSIC pair by pair).
- ``end_to_end_s``: ``similarity_matrix`` including the forward passes (what a user waits for);
  ``forward_s`` is larger because it also keeps all 2x8 batches of features (1.3 GB) in memory;
  ``plain_forward_s``: the two models' forward passes alone, no hooks (the floor of any tool).

Times are the fastest of 3 runs (per_pair_s: 1 run).  Prints one JSON object; asserts every path
gives the same matrix as the float64 reference within 1e-5.

``peer``: the PyPI package a user would pick instead, side by side in this process on the 8 block cuts
(layer1.0 .. layer4.1) and the same batches: ``cka-pytorch``
(``CKACalculator(...).calculate_cka_matrix(batches, num_epochs=1)``, forward passes included: its
hooks Gram each block's output during the pass) against our ``similarity_matrix`` (``ours_blocks_s``),
and the CKA part alone on the same cached features (``cka_only_s``: its ``gram`` and batched HSIC
update; ``ours_cka_only_s``: :class:`MinibatchCKA`), all against the float64 ``reference``.
Install it for the bench only: ``pip install cka-pytorch==1.1.3`` (not a dependency; without it
``peer`` says so).
Run: ``python bench/cka_bench.py``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.models.archs import create_arch
from stitchcore.data.images import load_dataset
from stitchcore.models.preprocess import Preprocess
from stitchcore.measures.similarity import (
    MinibatchCKA,
    features_at,
    flatten,
    gram_centred,
    gram_linear,
    hsic_unbiased,
    similarity_matrix,
    u_centre,
)

N, BATCH = 2048, 256
CUTS = ["stem"] + [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)] + ["pool"]
BLOCKS = CUTS[1:-1]  # the 8 residual blocks: module names both tools can hook


def images() -> torch.Tensor:
    """2,048 digits [N, 1, 32, 32]: train, test, then the first 251 again flipped left-right."""
    ds = load_dataset("digits")
    x = torch.cat([ds.images("train"), ds.images("test")])  # [1797, 1, 8, 8]
    x = torch.cat([x, x[: N - len(x)].flip(-1)])  # [2048, 1, 8, 8]
    return Preprocess(size=(32, 32))(x)


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return create_arch("resnet", blocks=(2, 2, 2, 2), width=16, in_chans=1, num_classes=10).eval()


Feats = list[list[torch.Tensor]]  # [batch][layer] -> [B, D]


def per_pair(feats_a: Feats, feats_b: Feats, cache: bool) -> torch.Tensor:
    """Hand-written baseline: debiased minibatch CKA pair by pair (feats_*[batch][layer] = [B, D])."""
    n_a, n_b = len(feats_a[0]), len(feats_b[0])
    out = torch.empty(n_a, n_b, dtype=torch.float64)
    grams_a = [[gram_linear(f) for f in fb] for fb in feats_a] if cache else None
    grams_b = [[gram_linear(f) for f in fb] for fb in feats_b] if cache else None
    for i in range(n_a):
        for j in range(n_b):
            kl = kk = ll = 0.0
            for t in range(len(feats_a)):
                k = grams_a[t][i] if cache else gram_linear(feats_a[t][i])
                l = grams_b[t][j] if cache else gram_linear(feats_b[t][j])
                kl = kl + hsic_unbiased(k, l)
                kk = kk + hsic_unbiased(k, k)
                ll = ll + hsic_unbiased(l, l)
            out[i, j] = kl / torch.sqrt(kk * ll)
    return out


def best_of(fn, repeats: int = 3):
    """(result, fastest wall time in s) over ``repeats`` calls: the least disturbed run on a shared host."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _peer_calculator(a: torch.nn.Module, b: torch.nn.Module):
    from cka_pytorch.cka import CKACalculator

    return CKACalculator(a, b, model1_layers=list(BLOCKS), model2_layers=list(BLOCKS), verbose=False)


def peer_cka_pytorch(a: torch.nn.Module, b: torch.nn.Module, batches: list[torch.Tensor],
                     feats_a: Feats, feats_b: Feats, reference: torch.Tensor) -> dict:
    """cka-pytorch's CKA matrix over BLOCKS: end to end (its hooks Gram each block's output during the
    forward pass; best of 3), and its CKA part alone on our cached features (its ``gram`` of every
    feature, then its batched HSIC update, as its hooks and ``_process_batch`` do); both against
    ``reference``."""
    try:
        from importlib.metadata import version

        from cka_pytorch.utils import gram
    except ImportError:
        return {"name": "cka-pytorch", "version": None, "note": "not installed: pip install cka-pytorch==1.1.3"}
    loader = [(xb, torch.zeros(len(xb))) for xb in batches]  # it iterates (x, y) pairs

    def run() -> torch.Tensor:
        calc = _peer_calculator(a, b)
        try:
            return calc.calculate_cka_matrix(loader, num_epochs=1).double()
        finally:  # its hooks off the models again: the next run (and ours) sees plain models
            calc.hook_manager1.clear_hooks()
            calc.hook_manager2.clear_hooks()

    def cka_only() -> torch.Tensor:
        calc = _peer_calculator(a, b)
        calc.hook_manager1.clear_hooks()  # fed our features directly: no forward pass
        calc.hook_manager2.clear_hooks()
        for fa, fb in zip(feats_a, feats_b):
            calc._update_hsic_matrices([gram(f) for f in fa], [gram(f) for f in fb])
        return calc._compute_final_cka(1e-4).double()

    values, seconds = best_of(run)
    only, only_s = best_of(cka_only)
    return {"name": "cka-pytorch", "version": version("cka-pytorch"), "seconds": round(seconds, 3),
            "max_abs_diff_vs_reference": float((values - reference).abs().max()),
            "cka_only_s": round(only_s, 3), "cka_only_max_abs_diff_vs_reference": float((only - reference).abs().max())}


def main() -> None:
    torch.set_num_threads(2)
    x = images()
    a, b = model(0), model(1)
    batches = list(x.split(BATCH))

    features_at(a, CUTS, batches[0]), features_at(b, CUTS, batches[0])  # warm-up (oneDNN kernels)
    t0 = time.perf_counter()
    feats_a, feats_b = [], []
    for xb in batches:  # one forward pass of each model per batch, every cut
        fa, fb = features_at(a, CUTS, xb), features_at(b, CUTS, xb)
        feats_a.append([flatten(fa[c]) for c in CUTS])
        feats_b.append([flatten(fb[c]) for c in CUTS])
    forward_s = time.perf_counter() - t0

    def stacked_cka() -> torch.Tensor:
        m = MinibatchCKA(len(CUTS), len(CUTS))
        for fa, fb in zip(feats_a, feats_b):
            m.update(fa, fb)
        return m.compute()

    def all_grams() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        ga = [torch.stack([gram_centred(f) for f in fb]) for fb in feats_a]  # [L, B, B] per batch
        return ga, [torch.stack([gram_centred(f) for f in fb]) for fb in feats_b]

    def all_grams_float64() -> None:
        [[gram_linear(f) for f in fb] for fb in (*feats_a, *feats_b)]

    def pairs_stacked() -> torch.Tensor:
        return sum(u_centre(ga).flatten(1) @ u_centre(gb).flatten(1).T for ga, gb in zip(grams_a, grams_b))

    def pairs_loop() -> torch.Tensor:
        out = torch.zeros(len(CUTS), len(CUTS), dtype=torch.float64)
        for ga, gb in zip(grams_a, grams_b):
            for i in range(len(CUTS)):
                for j in range(len(CUTS)):
                    out[i, j] += hsic_unbiased(ga[i], gb[j])
        return out

    stacked, stacked_s = best_of(stacked_cka)
    (grams_a, grams_b), grams_s = best_of(all_grams)
    _, grams_float64_s = best_of(all_grams_float64)
    cross, pairs_stacked_s = best_of(pairs_stacked)
    cross_loop, pairs_loop_s = best_of(pairs_loop)
    n = BATCH * (BATCH - 3)
    assert float((cross / n - cross_loop).abs().max() / cross_loop.abs().max()) < 1e-10
    cached, cached_s = best_of(lambda: per_pair(feats_a, feats_b, cache=True))
    loop, loop_s = best_of(lambda: per_pair(feats_a, feats_b, cache=False), repeats=1)  # ~15 s
    e2e, e2e_s = best_of(lambda: similarity_matrix(a, b, CUTS, CUTS, batches, batches), repeats=2)

    idx = [CUTS.index(c) for c in BLOCKS]
    reference = loop[idx][:, idx]  # float64, pair by pair, on the same features
    ours_blocks, ours_blocks_s = best_of(lambda: similarity_matrix(a, b, BLOCKS, BLOCKS, batches, batches))
    ours_blocks = torch.tensor(ours_blocks["values"], dtype=torch.float64)
    # the same work as the peer's (no half-sample interval): what a like-for-like end-to-end comparison times
    _, ours_bare_s = best_of(lambda: similarity_matrix(a, b, BLOCKS, BLOCKS, batches, batches, intervals=False))
    blocks_a = [[fb[i] for i in idx] for fb in feats_a]  # [batch][block] -> [B, D]
    blocks_b = [[fb[i] for i in idx] for fb in feats_b]

    def ours_cka_only() -> torch.Tensor:
        m = MinibatchCKA(len(BLOCKS), len(BLOCKS))
        for fa, fb in zip(blocks_a, blocks_b):
            m.update(fa, fb)
        return m.compute()

    ours_only, ours_only_s = best_of(ours_cka_only)

    def plain_forward() -> None:
        with torch.no_grad():
            for xb in batches:
                a(xb), b(xb)

    _, plain_forward_s = best_of(plain_forward)
    peer = peer_cka_pytorch(a, b, batches, blocks_a, blocks_b, reference)
    if peer.get("seconds"):
        peer["speedup_vs_peer"] = round(peer["seconds"] / ours_blocks_s, 2)
        peer["speedup_vs_peer_without_interval"] = round(peer["seconds"] / ours_bare_s, 2)
        peer["cka_only_speedup_vs_peer"] = round(peer["cka_only_s"] / ours_only_s, 2)

    diff = float((stacked - loop).abs().max())
    diff_cached = float((stacked - cached).abs().max())
    diff_e2e = float((stacked - torch.tensor(e2e["values"], dtype=torch.float64)).abs().max())
    assert max(diff, diff_cached, diff_e2e) < 1e-5, (diff, diff_cached, diff_e2e)  # the float32 Grams' bound
    print(json.dumps({
        "bench": "cka_minibatch_all_pairs",
        "models": "2x random-init zoo resnet blocks=(2,2,2,2) width=16, seeds 0/1",
        "inputs": f"{N} digits -> 32x32 (1797 + 251 flipped), batch {BATCH}",
        "cuts_per_model": len(CUTS),
        "pairs": len(CUTS) ** 2,
        "forward_s": round(forward_s, 3),
        "stacked_s": round(stacked_s, 3),
        "per_pair_s": round(loop_s, 3),
        "per_pair_cached_grams_s": round(cached_s, 3),
        "speedup_vs_per_pair": round(loop_s / stacked_s, 1),
        "speedup_vs_per_pair_cached_grams": round(cached_s / stacked_s, 2),
        "speedup_incl_forward_vs_per_pair": round((forward_s + loop_s) / (forward_s + stacked_s), 1),
        "grams_s": round(grams_s, 3),
        "pairs_stacked_s": round(pairs_stacked_s, 4),
        "pairs_loop_s": round(pairs_loop_s, 4),
        "pairs_speedup": round(pairs_loop_s / pairs_stacked_s, 1),
        "end_to_end_s": round(e2e_s, 3),
        "max_abs_diff_vs_per_pair": diff,
        "max_abs_diff_vs_cached": diff_cached,
        "max_abs_diff_end_to_end": diff_e2e,
        "diag_mean": round(float(stacked.diagonal().mean()), 4),
        "blocks": BLOCKS,
        "ours_blocks_s": round(ours_blocks_s, 3), "ours_blocks_without_interval_s": round(ours_bare_s, 3),
        "ours_max_abs_diff_vs_reference": float((ours_blocks - reference).abs().max()),
        "ours_cka_only_s": round(ours_only_s, 3),
        "ours_cka_only_max_abs_diff_vs_reference": float((ours_only - reference).abs().max()),
        "plain_forward_s": round(plain_forward_s, 3),
        "grams_float64_s": round(grams_float64_s, 3),
        "peer": peer,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }))


if __name__ == "__main__":
    main()
