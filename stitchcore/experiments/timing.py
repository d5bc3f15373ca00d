"""What an estimator times: the stopwatch and the real steps a calibration measures.

A kind's estimator (in its own module) builds its calibration from these: :func:`timed` (a section's
seconds), :func:`per_step` (seconds per real training step, past a warm-up step), :func:`forward_per_example`,
:func:`full_forward` (a model scored alone) and :func:`pair_units` (one adapter between two cuts: both prefixes,
the closed-form fit, a training step through B's suffix, the stitched evaluation); :func:`image_counts` and
:func:`spread` scale and sample what was timed.  Inside a quick calibration
(:func:`stitchcore.experiments.calibration.quick`) they time ``QUICK_EXAMPLES`` examples and steps at
``QUICK_BATCH``, scaled up to the spec's batch size; a model cheap enough is timed in full at once.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from stitchcore.cuts import Cut, split
from stitchcore.data.images import ImageDataset
from stitchcore.experiments.calibration import _DEFERS, _IN_FULL, _Deferred, _jobs_busy, _timed_in_full, quick
from stitchcore.models.loaded import LoadedModel

__all__ = ["CAL_EXAMPLES", "QUICK_BATCH", "QUICK_EXAMPLES", "first_images", "forward_per_example", "full_forward",
           "image_counts", "pair_units", "per_step", "spread", "timed"]

CAL_STEPS = 3  # quick steps: at least this many are timed after the warm-up step
MAX_STEPS = 40  # ... or more of them, up to this many, when a step is quick
STEADY_SECONDS = 0.15  # quick steps are timed for about this long
CAL_EXAMPLES = 256  # examples a forward pass is timed on
MAX_SAMPLED = 3  # cells / positions timed per spec; the others are assumed to cost their mean
QUICK_EXAMPLES = 16  # a quick calibration times forward passes on this many examples ...
QUICK_BATCH = 8  # ... and training steps at most this batch size, scaled up to the spec's batch size
QUICK_CHEAP_SECONDS = 0.1  # ... unless A's prefix takes less than this on those examples: then in full


def _step_time(stamps: list[float], total: float, steps: int) -> float:
    """Seconds per step from the times each step ended: the median gap after the first (warm-up) step."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return statistics.median(gaps) if gaps else total / max(steps, 1)


def per_step(run: Callable[[int, Callable[..., None]], Any]) -> float:
    """Seconds per step of ``run(steps, on_step)`` (real training steps that call ``on_step`` after each):
    one step after a warm-up step; when that was quick, about STEADY_SECONDS more of them (at most
    MAX_STEPS), whose median gap is steadier.  A slow model costs two steps, a small one ~0.2 s."""
    stamps: list[float] = []
    total = timed(lambda: run(2, lambda *_: stamps.append(time.perf_counter())))
    estimate = _step_time(stamps, total, 2)
    if estimate * CAL_STEPS < STEADY_SECONDS and not quick():
        steps = min(MAX_STEPS, max(CAL_STEPS + 1, int(STEADY_SECONDS / max(estimate, 1e-5))))
        stamps = []
        total = timed(lambda: run(steps, lambda *_: stamps.append(time.perf_counter())))
        estimate = _step_time(stamps, total, steps)
    return estimate


def timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes.  In full background timing, raises _Deferred first while a job runs."""
    if _DEFERS.get() and _jobs_busy():
        raise _Deferred
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def forward_per_example(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Seconds per example of ``module`` over ``x`` [N, ...] without gradients (after one warm-up batch)."""
    with torch.no_grad():
        module(x[: min(8, len(x))])
        return timed(lambda: module(x)) / len(x)


def first_images(ds: ImageDataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` training images [n, C, H, W] and labels [n] of ``ds``."""
    x, y = next(iter(ds.batches("train", n)))
    return x, y


# ---------------------------------------------------------------------------- one adapter between two cuts


def pair_units(a: LoadedModel, b: LoadedModel, ds: ImageDataset, cut_a: Cut, cut_b: Cut, adapter_spec: Any,
                batch_size: int, objective: str, optimizer: str, device: torch.device) -> dict[str, float]:
    """Seconds per example of A's prefix, B's prefix and the least-squares fit, per adapter training step
    through B's suffix, and per example of the stitched model's evaluation."""
    from stitchcore.stitching.activations import collect
    from stitchcore.stitching.adapters import build_adapter
    from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
    from stitchcore.stitching.train import AdapterTargets, TrainKnobs, parse_objective, train_adapter

    a.to(device), b.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    prefix_a, _ = split(a, cut_a)
    prefix_b, suffix_b = split(b, cut_b)
    available = len(ds.labels("train"))
    is_quick = quick()
    if is_quick:  # a small model is timed in full: a handful of its examples is all overhead (20x seen)
        probe = min(QUICK_EXAMPLES, available)
        with torch.no_grad():
            is_quick = timed(lambda: collect(prefix_a, ds, a.preprocess, "train", device=device, batch_size=256,
                                             limit=probe)) > QUICK_CHEAP_SECONDS
        if not is_quick:
            return _timed_in_full(lambda: pair_units(a, b, ds, cut_a, cut_b, adapter_spec, batch_size, objective,
                                                     optimizer, device))
        if (parts := _IN_FULL.get()) is not None:
            parts.append(False)  # this part is a quick one: the full timing will refine it
    timed_batch = min(batch_size, QUICK_BATCH) if is_quick else batch_size  # quick: steps scaled up after
    n = min(QUICK_EXAMPLES if is_quick else max(CAL_EXAMPLES, (CAL_STEPS + 1) * batch_size), available)
    n = max(n, min(2 * timed_batch, available))
    acts = dict(device=device, batch_size=256, limit=n)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    h = collect(prefix_a, ds, a.preprocess, "train", **acts)
    out["prefix_a"] = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    target = collect(prefix_b, ds, b.preprocess, "train", **acts)
    out["prefix_b"] = (time.perf_counter() - t0) / n
    adapter = build_adapter(adapter_spec, cut_a, cut_b)
    out["fit"] = 0.0
    if adapter_spec.init in FIT_METHODS:
        pairs = [(h[i: i + 256], target[i: i + 256]) for i in range(0, n, 256)]
        out["fit"] = timed(lambda: fit_adapter(adapter, iter(pairs), method=adapter_spec.init)) / n
    adapter.to(device)
    objective_map = parse_objective(objective)
    y = ds.labels("train")[:n]
    targets = AdapterTargets(labels=y, receiver=target)
    objective_map = {k: v for k, v in objective_map.items() if k not in ("kd", "final")} or {"task": 1.0}
    def step_at(batch: int) -> float:
        return per_step(lambda steps, on_step: train_adapter(
            adapter, suffix_b, h, targets, objective=objective_map,
            knobs=TrainKnobs(optimizer, 1e-4, 0.0, epochs=-(-steps * batch // n), batch_size=batch, seed=0),
            device=device, on_step=on_step,
        ))  # fmt: skip

    out["step"] = step_at(timed_batch)
    if timed_batch < batch_size:  # quick: a step's fixed cost plus its cost per example, from two small batches
        half = step_at(max(1, timed_batch // 2))
        per_example = max(0.0, (out["step"] - half) / (timed_batch - max(1, timed_batch // 2)))
        out["step"] = max(out["step"], out["step"] + per_example * (batch_size - timed_batch))
    adapter.eval()
    out["eval"] = forward_per_example(lambda v: suffix_b(adapter(v.to(device))), h[:n])
    return out


def full_forward(m: LoadedModel, ds: ImageDataset, device: torch.device) -> float:
    """Seconds per example of the whole model (A or B scored alone)."""
    model = m.model.to(device).eval()
    x, _ = first_images(ds, min(QUICK_EXAMPLES if quick() else CAL_EXAMPLES, len(ds.labels("train"))))
    return forward_per_example(lambda v: model(m.preprocess(v.to(device)) if m.preprocess else v.to(device)), x)


def image_counts(u: dict, spec: Any) -> tuple[int, int]:
    """Train and test images a run sees: the calibrated dataset's counts under the spec's caps."""
    n_train = int(u["n_train"] if spec.max_train is None else min(spec.max_train, u["n_train"]))
    n_test = int(u["n_test"] if spec.max_test is None else min(spec.max_test, u["n_test"]))
    return n_train, n_test


def spread(items: list, k: int = MAX_SAMPLED) -> list:
    """At most ``k`` items spread over ``items`` (first, middle, last ...)."""
    if len(items) <= k:
        return list(items)
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]

