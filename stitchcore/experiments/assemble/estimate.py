"""How long an assemble run will take (:func:`estimate_assemble`)."""

from __future__ import annotations

import statistics
import time

from stitchcore.experiments.assemble.spec import (
    AssembleSpec,
)
from stitchcore.experiments.assemble.units import (
    assemble_plan,
)
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
)  # fmt: skip

# ---------------------------------------------------------------------------- estimate


def _assemble_units(spec: AssembleSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    ds = pair_dataset(spec, a, b)
    senders, trained = assemble_plan(spec, a, b)  # the cells that train an adapter: (sender, receiver, recipe)
    setup = time.perf_counter() - t0
    per = [pair_units(a, b, ds, s, r, recipe, spec.batch_size, "task", spec.optimizer, device)
           for s, r, recipe in spread(trained)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]} if per else {"prefix_a": 0.0, "step": 0.0,
                                                                                  "eval": 0.0}  # fmt: skip
    return {**mean, "setup": setup, "senders": len(senders), "cells": len(trained),
            "full": full_forward(a, ds, device) + full_forward(b, ds, device),
            "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_assemble(spec: AssembleSpec, ectx: EstimateContext) -> Estimate:
    """Each sender's pass, then every cell's adapter training and scoring (and the fine-tune baseline)."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "finetune_baseline", "finetune_epochs",
             "finetune_lr")  # fmt: skip
    key = ectx.pair_key("assemble", spec, scale)
    u = calibrated(key, lambda: _assemble_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    # per cell: the adapter's steps, a BN recalibration pass and the test pass through B's suffix
    cell = steps * u["step"] + (n_train + n_test) * u["eval"]
    if spec.finetune_baseline:  # every part trains: forward + backward of the whole network ~ 3 forwards
        cell += spec.finetune_epochs * n_train * 3 * (u["prefix_a"] + u["eval"]) + n_test * (u["prefix_a"] + u["eval"])
    seconds = u["setup"] + n_test * u["full"] + u["senders"] * (n_train + n_test) * u["prefix_a"] + u["cells"] * cell
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {int(u['cells'])} adapters of "
                              f"{steps:,} steps")


