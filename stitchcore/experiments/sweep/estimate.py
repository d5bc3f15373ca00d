"""How long a sweep will take (:func:`estimate_sweep`): a few of its positions' stitches timed, scaled by the
spec's positions, epochs, images, controls and simplicity measures."""

from __future__ import annotations

import gzip
import statistics
import time

import torch

from stitchcore.data.images import load_dataset
from stitchcore.experiments.dataset_check import pair_dataset
from stitchcore.experiments.estimate import (
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    full_forward,
    image_counts,
    ms,
    pair_units,
    spread,
    timed,
)  # fmt: skip
from stitchcore.experiments.sweep.plan import _positions
from stitchcore.experiments.sweep.spec import SweepSpec

__all__ = ["estimate_sweep"]


def _gzip_seconds_per_byte() -> float:
    data = torch.randn(1 << 18).numpy().tobytes()  # 1 MiB of float32 weights
    return timed(lambda: gzip.compress(data, compresslevel=9, mtime=0)) / len(data)


def _sweep_units(spec: SweepSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    cuts = _positions(spec, a, b)
    ds = pair_dataset(spec, a, b)
    train = load_dataset(spec.train_data) if spec.train_data else ds
    setup = time.perf_counter() - t0
    per = [pair_units(a, b, train, ca, cb, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for ca, cb in spread(cuts)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]}
    n_bytes = 4 * sum(p.numel() for p in a.model.parameters())
    return {**mean, "setup": setup, "positions": len(cuts), "full": full_forward(a, ds, device),
            "gzip": n_bytes * _gzip_seconds_per_byte(), "n_train": len(train.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_sweep(spec: SweepSpec, ectx: EstimateContext) -> Estimate:
    """Every position's stitch, its noise sender and its controls, the reference scores and the simplicity
    measures."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "control", "control_seeds",
             "simplicity", "sharpness_eps", "sharpness_draws", "metrics", "noise_control")  # fmt: skip
    key = ectx.pair_key("sweep", spec, scale)
    u = calibrated(key, lambda: _sweep_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    evals = 1 + sum(":" in m and not m.startswith(("class_acc", "confusion")) for m in spec.metrics)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    fits = spec.adapter.init in ("lstsq", "procrustes")
    one = (n_train * (u["prefix_a"] + fits * (u["prefix_b"] + u["fit"])) + steps * u["step"]
           + evals * n_test * (u["prefix_a"] + u["eval"]))  # fmt: skip
    # the noise sender reuses the stitch's activations: its fit, its training steps and its evaluations
    noise = (n_train * fits * u["fit"] + steps * u["step"] + evals * n_test * u["eval"]) if spec.noise_control else 0.0
    controls = spec.control_seeds if spec.control and all(r.startswith("zoo:") for r in (spec.a, spec.b)) else 0
    # gradient norm (forward + backward ~ 3 forwards) and sharpness (a forward per draw) over the test set
    simple = (n_test * u["full"] * (3 + spec.sharpness_draws) + u["gzip"]) if spec.simplicity else 0.0
    positions = int(u["positions"])
    stitches = positions * (1 + controls + spec.noise_control)
    seconds = (u["setup"] + 2 * (evals * n_test * u["full"] + simple) + positions * (one * (1 + controls) + noise)
               + positions * simple)  # fmt: skip
    also = " (a noise sender's among them)" if spec.noise_control else ""
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {stitches} stitches of "
                              f"{steps:,} steps{also}")
