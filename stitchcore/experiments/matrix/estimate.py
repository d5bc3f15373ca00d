"""How long a matrix run will take, before it runs: :func:`estimate_matrix` (registered by :mod:`.run`).

Times a few cells on this machine (a joinable pair into each receiver, a few of those spread over them;
:func:`~stitchcore.experiments.estimate.calibrated` caches the timings per spec shape, models and device)
and scales them by the cells, variants and images of the spec.
"""

from __future__ import annotations

import statistics
import time

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
)
from stitchcore.experiments.matrix.spec import MatrixSpec, cell_objective
from stitchcore.experiments.matrix.units import grid_of, resolve_cuts
from stitchcore.stitching.adapters import compatibility

__all__ = ["estimate_matrix"]


def _matrix_units(spec: MatrixSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    ds = pair_dataset(spec, a, b)
    senders, receivers = resolve_cuts(a, spec.senders), resolve_cuts(b, spec.receivers)
    setup = time.perf_counter() - t0
    pairs = [(s, r) for s in senders for r in receivers if compatibility(s, r, spec.adapter) is None]
    if not pairs:
        return {"setup": setup, "cells": 0, "full_a": 0.0, "full_b": 0.0, "fit": 0.0, "step": 0.0, "eval": 0.0,
                "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip
    by_receiver = {}
    for s, r in pairs:
        by_receiver.setdefault(r.name, (s, r))
    sampled = spread(list(by_receiver.values()))
    per = [pair_units(a, b, ds, s, r, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for s, r in sampled]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in ("fit", "step", "eval")}
    groups = len({(s.name, grid_of(r)) for s, r in pairs})  # the shared-moment fits' factors (closed form)
    return {**mean, "setup": setup, "cells": len(pairs), "groups": groups, "full_a": full_forward(a, ds, device),
            "full_b": full_forward(b, ds, device), "n_train": len(ds.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_matrix(spec: MatrixSpec, ectx: EstimateContext) -> Estimate:
    """Both models over the data once per variant, then every cell's fit or training and its scoring (the noise
    sender's cells too: no model pass of their own, but fitted, trained and scored as any control's)."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "controls", "mode", "precision",
             "objective", "control_training", "seeds", "noise_sender")  # fmt: skip
    key = ectx.pair_key("matrix", spec, scale)
    u = calibrated(key, lambda: _matrix_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    variants = spec.variants
    trained = sum(cell_objective(spec, v) is not None for v in variants)  # variants whose adapters train
    models = 2 if spec.controls else 1  # each sending / receiving model runs once over the data
    steps = spec.epochs * -(-n_train // spec.batch_size) if trained else 0
    fits = spec.adapter.init in ("lstsq", "procrustes")
    proxy = not spec.scores  # moments only: no test pass of A, no base scores, nothing scored
    # closed form and proxy fit every cell from shared moments (units.grid_unit): the per-cell fit's cost is about
    # half the sender's resampling and XᵀX, shared by its receivers on one grid, and half the cell's own XᵀY
    shared = (u.get("groups", u["cells"]) + u["cells"]) / (2 * max(1, u["cells"])) if not spec.trains else 1.0
    cell = n_train * u["fit"] * fits * shared + (0.0 if proxy else n_test * u["eval"])
    cells = int(u["cells"]) * len(variants)
    again = spec.seeds - 1  # the matrix's own cells fitted, trained and scored again from each further seed
    seconds = (u["setup"] + models * ((n_train + n_test * (not proxy)) * u["full_a"] + n_train * u["full_b"])
               + 2 * models * n_test * (u["full_a"] + u["full_b"]) / 2 * (not proxy)
               + (cells + again * int(u["cells"])) * cell
               + int(u["cells"]) * (trained + again) * steps * u["step"])  # fmt: skip
    cell += steps * u["step"] * trained / len(variants)  # the mean cell, as the note says
    cells += again * int(u["cells"])
    what = f"{cells} least-squares cells" + (" (moments only, nothing scored)" if proxy else "")
    if steps:
        what = (f"{cells} cells of {steps:,} adapter steps" if trained == len(variants) else
                f"{cells} cells, {int(u['cells']) * (trained + again)} of them trained {steps:,} adapter steps")  # fmt: skip
    return estimate_from(seconds, f"calibrated: 1 cell = {ms(cell)}; {what}")
