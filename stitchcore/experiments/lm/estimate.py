"""The LM kinds' time estimators (each kind registers its own): calibrated on the models themselves, one
validation window scored, one token sampled, and (stitch, depth sweep) one adapter step at the middle split."""

from __future__ import annotations

import time

from stitchcore.experiments.estimate import (
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    ms,
    per_step,
    timed,
    where,
)  # fmt: skip
from stitchcore.experiments.lm._pair import FIT_BATCHES, receiver_block, stopped_steps, whole_model
from stitchcore.experiments.lm.specs import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.data.text import load_text
from stitchcore.errors import StitchError
from stitchcore.experiments.lm.cross import is_cross
from stitchcore.lm.cross import bits_per_byte, build_cross_stitch, cross_batches, cross_windows
from stitchcore.lm.evaluate import eval_windows, lm_data, lm_loss, sample_text
from stitchcore.lm.parts import LMParts, build_stitch, lm_parts, make_token_adapter
from stitchcore.models.refs import random_twin
from stitchcore.lm.train import TUNE_WINDOWS, train_lm_adapter
from stitchcore.stitching.train import parse_objective
from stitchcore.store.results import Store

__all__ = ["estimate_depth", "estimate_lm", "estimate_lm_stitch", "estimate_merge", "expected_steps"]

STOP_PRIOR_CHECKS = 2  # no stored converged stitch to learn from: expect the stop after 2 x patience checks
LEARN_FROM = 20  # the newest stored runs of each LM stitching kind an estimate learns its stop from


def _lm_units(spec: MergeSpec | LMStitchSpec | DepthSpec, ectx: EstimateContext) -> dict[str, float]:
    """Loading, scoring one validation window, sampling one token, and one adapter step at the middle split."""
    device = ectx.device

    t0 = time.perf_counter()
    la, lb = ectx.load(spec.a), ectx.load(spec.b)
    a, b = lm_parts(la), lm_parts(lb)
    for p in (a, b):
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(device)
    if isinstance(spec, (LMStitchSpec, DepthSpec)) and is_cross(a.codec, b.codec):
        return _cross_units(spec, ectx, a, b, la.dataset or lb.dataset, t0)
    data = lm_data(spec.text or la.dataset or lb.dataset or "pydoc", a.codec)
    block = min(la.input_shape[0], lb.input_shape[0], a.context, b.context)
    setup = time.perf_counter() - t0
    windows = eval_windows(data.val, block, 8)
    whole = whole_model(a, "A")
    window = (timed(lambda: lm_loss(whole, windows, device)) + timed(lambda: lm_loss(whole_model(b, "B"), windows,
                                                                                         device))) / 2 / len(windows)
    token = timed(lambda: sample_text(whole, a.codec, data.prompt, 8, block, device)) / 8
    out = {"setup": setup, "window": window, "token": token, "n_a": a.n_layer, "n_b": b.n_layer,
           "same_width": float(a.width == b.width), "step": 0.0}  # fmt: skip
    if isinstance(spec, (LMStitchSpec, DepthSpec)):
        i = a.n_layer // 2 if isinstance(spec, DepthSpec) else spec.cut_a
        j = receiver_block(i, a.n_layer, b.n_layer) if isinstance(spec, DepthSpec) else (
            spec.cut_a if spec.cut_b is None else spec.cut_b)
        adapter = make_token_adapter(spec.adapter, a, i, b, j, spec.mlp_hidden)
        model = build_stitch(a, b, i, j, adapter, "b")
        objective = {k: v for k, v in parse_objective(spec.objective).items() if k != "kd"} or {"task": 1.0}
        step = per_step(lambda steps, on_step: train_lm_adapter(
            model, i, adapter, data.train, block_size=block, objective=objective, steps=steps,
            batch_size=spec.batch_size, lr=1e-4, weight_decay=0.0, seed=0, device=device,
            receiver=lambda x: b.residual(x, j), on_step=on_step,
        ))  # fmt: skip
        out["step"] = step * (1.3 if "kd" in spec.objective else 1.0)
    return out


def _cross_units(spec: LMStitchSpec | DepthSpec, ectx: EstimateContext, a: LMParts, b: LMParts, dataset: str | None,
                 t0: float) -> dict[str, float]:
    """A cross-tokenizer stitch's units: one held-out window scored, one adapter step (both sides tokenized)."""
    device = ectx.device
    text = load_text(spec.text or dataset or "pydoc")
    contexts = (a.context, b.context)
    windows = cross_windows(text, a.codec, b.codec, 8, min(contexts), contexts)
    setup = time.perf_counter() - t0
    if isinstance(spec, DepthSpec):  # the middle split, as for a sweep of one vocabulary
        i = a.n_layer // 2
        j = receiver_block(i, a.n_layer, b.n_layer)
    else:
        i, j = spec.cut_a, spec.cut_a if spec.cut_b is None else spec.cut_b
    adapter = make_token_adapter(spec.adapter, a, i, b, j, spec.mlp_hidden)
    model = build_cross_stitch(a, b, i, j, adapter, spec.alignment)
    window = timed(lambda: bits_per_byte(model, windows, device)) / len(windows)

    def run(steps: int, on_step) -> None:
        batches = cross_batches(text, a.codec, b.codec, spec.batch_size, min(contexts), contexts, 0, steps)
        train_lm_adapter(model, 0, adapter, None, block_size=0, objective={"task": 1.0}, steps=steps,
                         batch_size=spec.batch_size, lr=1e-4, weight_decay=0.0, seed=0, device=device,
                         on_step=on_step, batches=batches)  # fmt: skip

    sides = 2 + float(_has_twin(spec.a))  # the stitch, the shuffled alignment, a random-init A where there is one
    return {"setup": setup, "window": window, "token": 0.0, "n_a": a.n_layer, "n_b": b.n_layer,
            "same_width": float(a.width == b.width), "step": per_step(run), "sides": sides}  # fmt: skip


def _has_twin(ref: str) -> bool:
    try:
        random_twin(ref, 0)
    except StitchError:
        return False
    return True


def estimate_lm(kind: str, spec: MergeSpec | LMStitchSpec | DepthSpec, ectx: EstimateContext) -> Estimate:
    train = {k: getattr(spec, k) for k in ("adapter", "batch_size", "mlp_hidden", "objective") if hasattr(spec, k)}
    cuts = (spec.cut_a, spec.cut_b) if isinstance(spec, LMStitchSpec) else None
    key = ("lm", kind, spec.a, spec.b, spec.text, repr(train), cuts, ectx.model_key(spec.a),
           ectx.model_key(spec.b), where(ectx.device))  # fmt: skip
    u = calibrated(key, lambda: _lm_units(spec, ectx))
    score = spec.eval_windows * u["window"]
    sample = spec.sample_tokens * u["token"]  # none across tokenizers (their unit is 0)
    setup = u["setup"] + 2 * (score + sample)  # A and B scored and sampled
    if isinstance(spec, MergeSpec):
        return estimate_from(setup + score + sample, f"calibrated: 1 validation window = {ms(u['window'])}; "
                                                 f"{3 * spec.eval_windows} windows")
    fit = FIT_BATCHES * spec.batch_size * u["window"] if spec.adapter.init in ("lstsq", "procrustes") else 0.0
    held_out = TUNE_WINDOWS * u["window"]  # one held-out check (start choice, convergence)
    n_steps, steps = expected_steps(spec, ectx.store)
    checks = (2 if spec.start == "best" else 0) + (n_steps // spec.check_every + 1 if spec.converges else 0)
    stitch = fit + 2 * score + n_steps * u["step"] + checks * held_out
    if isinstance(spec, LMStitchSpec):
        sides = u.get("sides", 1.0)  # across tokenizers: the stitch and its controls, each on the same budget
        what = f"; the stitch and {int(sides) - 1} controls" if sides > 1 else ""
        return estimate_from(setup + sides * stitch + sample, f"calibrated: 1 adapter step = {ms(u['step'])}; "
                                                              f"{steps}{what}")
    n_a, n_b = int(u["n_a"]), int(u["n_b"])
    splits = len(spec.splits) if spec.splits is not None else n_a + 1
    if "sides" in u:  # across tokenizers: each split's stitch and its controls, then the heat map's stitches
        curve = "stitch" in spec.modes and "b" in spec.heads
        n = (u["sides"] * splits if curve else 0) + ((n_a + 1) * (n_b + 1) if spec.heatmap else 0)
        return estimate_from(setup + n * stitch, f"calibrated: 1 adapter step = {ms(u['step'])}; {int(n)} stitches "
                                                 f"of {steps} (controls included)")
    merges = stitches = 0
    for mode in spec.modes:
        for head in spec.heads:
            if not u["same_width"] and (mode == "merge" or head == "a"):
                continue
            if mode == "merge" and n_a != n_b:
                continue
            merges += splits * (mode == "merge")
            stitches += splits * (mode == "stitch")
    cells = (n_a + 1) * (n_b + 1) if spec.heatmap else 0
    curves = len(spec.modes) * len(spec.heads)
    seconds = setup + merges * score + (stitches + cells) * stitch + curves * sample
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {stitches + cells} stitches of "
                              f"{steps}, {merges} merges")


def expected_steps(spec: LMStitchSpec | DepthSpec, store: Store) -> tuple[int, str]:
    """The steps one adapter of ``spec`` is expected to train, and how that was reached: ``spec.steps`` until
    "steps"; until "converged" the median stop of the converged stitches stored under the same stopping rule
    (``check_every``, ``patience``, ``tol``), at most the cap, else ``STOP_PRIOR_CHECKS`` x patience checks.
    A converged run of the default rule stopped at 300..650 of its 2,000-step cap (bench/estimate_bench.py):
    timing the cap said 442 s for a 101 s run.
    """
    if not spec.converges:
        return spec.steps, f"{spec.steps:,} steps"
    rule = (spec.check_every, spec.patience, spec.tol)
    stops = sorted(n for kind in ("lmstitch", "lmdepth") for rec in store.list_runs(kind, "done", limit=LEARN_FROM)
                   if (rec.spec.get("check_every"), rec.spec.get("patience"), rec.spec.get("tol")) == rule
                   for n in stopped_steps(rec.summary))  # fmt: skip
    if stops:
        n = min(spec.steps, stops[len(stops) // 2])
        return n, f"about {n:,} steps (the median stop of {len(stops)} stored converged stitches; at most {spec.steps:,})"
    n = min(spec.steps, STOP_PRIOR_CHECKS * spec.patience * spec.check_every)
    return n, f"about {n:,} steps (training stops once the held-out loss stalls; at most {spec.steps:,})"


def estimate_merge(spec: MergeSpec, ectx: EstimateContext) -> Estimate:
    """A, B and the merged model scored and sampled."""
    return estimate_lm("merge", spec, ectx)


def estimate_lm_stitch(spec: LMStitchSpec, ectx: EstimateContext) -> Estimate:
    """A and B scored, the adapter fitted and trained, the stitched model scored and sampled."""
    return estimate_lm("lmstitch", spec, ectx)


def estimate_depth(spec: DepthSpec, ectx: EstimateContext) -> Estimate:
    """Every split's merges and stitches (and the heat map's), with a sample per curve."""
    return estimate_lm("lmdepth", spec, ectx)
