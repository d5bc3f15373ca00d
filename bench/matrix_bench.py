"""Benchmark: time to accuracy of the stitching matrix of two zoo ResNets on digits, against the hand-written loop.

Two zoo ResNets (``arch="resnet"``, blocks [2,2,2,2], width 8, digits upscaled to 16x16, seeds 0
and 1; trained once and cached in ``--store``) give 10 cuts each (stem, layer1.0 .. layer4.1,
pool) -> 100 cells (a vector sender into a spatial receiver is skipped, as the library does).

Accuracy against time, in one process, every point a separate full run (mean test accuracy over the
joinable cells):

- ``hand_loop``: the trained matrix written by hand in plain PyTorch, what a user would write
  without this library, at 1, 2, 4 and 8 epochs: per cell ``torch.manual_seed(seed)``;
  ``build_adapter`` (random init, the same linear adapter with BatchNorm both sides); AdamW (same lr /
  wd) + cosine schedule; each step (same batch size and per-epoch ``randperm`` as ``train_adapter``)
  ``with no_grad: h = prefix_A(preprocess_A(x))``, ``loss = CE(suffix_B(adapter(h)), y)``; then test
  accuracy.  The full frozen prefix runs every step.
- ``ours``: ``run_experiment("matrix", ...)`` end to end (load, cache every cut's activations, fit,
  train, score): closed form (``epochs`` 0) and closed form then 1, 2 and 4 trained epochs (all the
  adapters into one receiver trained together through one pass of B's folded suffix per step).
- ``time_to_accuracy``: ``target_acc`` = the hand loop's best mean accuracy, ``baseline_s`` the hand
  run that reached it, ``ours_s`` when our curve reaches it (interpolated between our two runs around
  it), ``speedup`` = baseline_s / ours_s.  Target: at least 5.
- ``floor``: our longest run's training steps (``trained_s``, the wall time inside
  ``train_adapters_shared_suffix``) against the same steps with no adapter: B's folded suffix forward
  and backward on a [K * B, *receiver] input (``floor_s``).  Target ``ratio`` at most 1.3.
  ``adapters_alone_s``: the same steps with the adapters and their optimiser and no suffix, so
  ``floor_plus_adapters_alone_s`` is what the two parts cost apart and ``ratio_to_the_parts`` what
  training them together through one suffix pass adds.

Prints one JSON object (progress on stderr).  ``--quick``: 2 x 2 cuts, hand loop at 1 and 2 epochs,
ours at 0 and 1, zoo models of 5 epochs (their own cache entries) unless ``--zoo-epochs`` is given.
Run: ``python bench/matrix_bench.py [--store DIR] [--quick]``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import logging
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility
from stitchcore.cuts import list_cuts, split
from stitchcore.data.images import load_dataset
from stitchcore.experiments.matrix import units as matrix_units  # the trained cells train there
from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.models.sources import load_model
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store
from stitchcore.stitching.train import cosine_schedule, make_optimizer

ZOO_EPOCHS = 20  # sgd defaults; measured > 90% digits test accuracy for both seeds (see zoo_acc in the JSON)
QUICK_ZOO_EPOCHS = 5  # --quick in a fresh store: the two zoo trainings dominate; 5 epochs keeps it < 30 s
EVAL_BATCH = 256


def log(msg: str) -> None:
    print(f"[matrix_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def zoo_models(store: Store, epochs: int) -> tuple[list[str], list[float], float]:
    """Train (or reuse) the two zoo ResNets; (refs, test accuracies, seconds spent training)."""
    refs, accs, spent = [], [], 0.0
    for seed in (0, 1):
        recipe = ZooRecipe(arch="resnet", dataset="digits", seed=seed, epochs=epochs, image_size=16,
                           arch_kwargs={"blocks": [2, 2, 2, 2], "width": 8})  # fmt: skip
        out = run_experiment("zoo", recipe, store)
        spent += 0.0 if out.cached else out.seconds
        refs.append(out.record.summary["ref"])
        accs.append(float(out.record.summary["accuracy"]))
    return refs, accs, spent


def timed_matrix(spec: MatrixSpec, store: Store) -> tuple[dict, float]:
    t0 = time.perf_counter()
    out = run_experiment("matrix", spec, store, rerun=True)
    return out.record.summary, time.perf_counter() - t0


def baseline_cell(spec: MatrixSpec, ma, mb, s, r, ds, prefixes: dict, suffixes: dict) -> float:
    """One cell the hand-written way: full frozen prefix of A every step, adapter, frozen suffix of B."""
    if s.name not in prefixes:
        prefixes[s.name] = split(ma, s)[0].eval()
    if r.name not in suffixes:
        suffixes[r.name] = split(mb, r)[1].eval()
    prefix, suffix = prefixes[s.name], suffixes[r.name]
    for p in list(prefix.parameters()) + list(suffix.parameters()):
        p.requires_grad_(False)
    pre = ma.preprocess if ma.preprocess is not None else (lambda x: x)

    torch.manual_seed(spec.seed)
    adapter = build_adapter(spec.adapter, s, r)
    params = [p for p in adapter.parameters() if p.requires_grad]
    n = len(ds.labels("train")) if spec.max_train is None else min(spec.max_train, len(ds.labels("train")))
    total = math.ceil(n / spec.batch_size) * spec.epochs
    opt = make_optimizer(params, spec.optimizer, spec.lr, spec.weight_decay)  # AdamW(lr, wd)
    sched = cosine_schedule(opt, total)
    gen = torch.Generator().manual_seed(spec.seed)
    x_all, y_all = ds.images("train")[:n], ds.labels("train")[:n]
    adapter.train()
    for _ in range(spec.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, spec.batch_size):
            idx = order[start : start + spec.batch_size]
            if len(idx) < 2:  # BatchNorm needs two samples in train mode
                continue
            with torch.no_grad():
                h = prefix(pre(x_all[idx]))
            loss = F.cross_entropy(suffix(adapter(h)), y_all[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    adapter.eval()
    correct = seen = 0
    with torch.no_grad():
        x_test, y_test = ds.images("test"), ds.labels("test")
        if spec.max_test is not None:
            x_test, y_test = x_test[: spec.max_test], y_test[: spec.max_test]
        for i in range(0, len(y_test), EVAL_BATCH):
            logits = suffix(adapter(prefix(pre(x_test[i : i + EVAL_BATCH]))))
            correct += int((logits.argmax(1) == y_test[i : i + EVAL_BATCH]).sum())
            seen += len(logits)
    return correct / seen


class TrainingClock:
    """Wraps the matrix's ``train_adapters_shared_suffix``: the wall time of every call and what it
    trained (adapter count, suffix, rows, batch size, epochs, receiver shape), to replay as the floor."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __enter__(self) -> TrainingClock:
        real = self.real = matrix_units.train_adapters_shared_suffix

        def timed(adapters, suffix, sender_acts, labels, **kw):
            t0 = time.perf_counter()
            out = real(adapters, suffix, sender_acts, labels, **kw)
            seconds = time.perf_counter() - t0
            with torch.no_grad():  # eval mode after training: no state changes
                shape = tuple(adapters[0](sender_acts[0][:2].float()).shape[1:])
            self.calls.append({"seconds": seconds, "k": len(adapters), "suffix": suffix, "n": len(labels),
                               "labels": labels, "batch_size": kw["knobs"].batch_size, "epochs": kw["knobs"].epochs,
                               "shape": shape, "adapters": adapters, "sender_acts": sender_acts,
                               "optimizer": (kw["knobs"].optimizer, kw["knobs"].lr, kw["knobs"].weight_decay)})  # fmt: skip
            return out

        matrix_units.train_adapters_shared_suffix = timed
        return self

    def __exit__(self, *exc) -> None:
        matrix_units.train_adapters_shared_suffix = self.real

    @property
    def seconds(self) -> float:
        return sum(c["seconds"] for c in self.calls)


def floor_seconds(calls: list[dict]) -> float:
    """The same steps as ``calls`` with no adapter: B's frozen (folded) suffix forward and backward on a
    [K * B, *receiver] input that needs a gradient, cross-entropy against the same labels."""
    spent = 0.0
    gen = torch.Generator().manual_seed(0)
    for call in calls:
        k, n, bs = call["k"], call["n"], call["batch_size"]
        sizes = [min(bs, n - start) for start in range(0, n, bs)]
        x_full = torch.randn(k * bs, *call["shape"], generator=gen)
        t0 = time.perf_counter()
        for _ in range(call["epochs"]):
            for b in sizes:
                if b < 2:
                    continue
                x = x_full[: k * b]
                if x.dim() == 4:
                    x = x.contiguous(memory_format=torch.channels_last)
                x.requires_grad_(True)
                y = call["labels"][:b].repeat(k)
                loss = F.cross_entropy(call["suffix"](x), y, reduction="none").view(k, b).mean(1).sum()
                loss.backward()
        spent += time.perf_counter() - t0
    return spent


def adapters_alone_seconds(calls: list[dict]) -> float:
    """The same steps as ``calls`` with no suffix: copies of the adapters forward on the same batches of cached
    sender activations, a loss on their outputs, backward, and the same optimiser step (what a step costs
    beyond the floor)."""
    spent = 0.0
    for call in calls:
        adapters = [copy.deepcopy(a).train() for a in call["adapters"]]
        name, lr, wd = call["optimizer"]
        opt = make_optimizer([p for a in adapters for p in a.parameters()], name, lr, wd)
        n, bs = call["n"], call["batch_size"]
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        for _ in range(call["epochs"]):
            order = torch.randperm(n, generator=gen)
            for start in range(0, n, bs):
                idx = order[start : start + bs]
                if len(idx) < 2:
                    continue
                outs = [a(h[idx].float()) for a, h in zip(adapters, call["sender_acts"])]
                loss = sum(o.square().mean() for o in outs)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        spent += time.perf_counter() - t0
    return spent


def mean_over(values: dict, cells: list[tuple[str, str]]) -> float:
    return sum(values[c] for c in cells) / len(cells)


def time_to(target: float, curve: list[dict]) -> float | None:
    """Seconds at which ``curve`` (points {seconds, mean_acc}, each a separate run) first reaches ``target``,
    linearly interpolated between the two runs around it; None if it never does."""
    points = sorted(curve, key=lambda p: p["seconds"])
    for i, p in enumerate(points):
        if p["mean_acc"] >= target:
            if i == 0:
                return p["seconds"]  # no result exists before the first run ends
            q = points[i - 1]
            frac = (target - q["mean_acc"]) / (p["mean_acc"] - q["mean_acc"])
            return q["seconds"] + max(0.0, frac) * (p["seconds"] - q["seconds"])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="results store (zoo models are cached there); default a temp dir")
    ap.add_argument("--hand-epochs", type=int, nargs="+", default=[1, 2, 4, 8],
                    help="the hand loop's points on its curve (one full run each)")
    ap.add_argument("--ours-epochs", type=int, nargs="+", default=[0, 1, 2, 4],
                    help="our points: 0 = closed form, N = closed form then N trained epochs (one run each)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 x 2 cuts, hand 1 2, ours 0 1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="our trained runs' precision (bf16: autocast, fast with AMX / a GPU); hand loop: fp32")
    ap.add_argument("--zoo-epochs", type=int, default=None,
                    help=f"zoo training epochs (default {ZOO_EPOCHS}; --quick: {QUICK_ZOO_EPOCHS} unless given)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.hand_epochs, args.ours_epochs = [1, 2], [0, 1]
    if args.zoo_epochs is None:
        args.zoo_epochs = QUICK_ZOO_EPOCHS if args.quick else ZOO_EPOCHS

    tmp = None
    if args.store is None:
        tmp = tempfile.TemporaryDirectory(prefix="matrix_bench-")
        root = tmp.name
    else:
        root = args.store
    store = Store(root)

    log("zoo models")
    (ref_a, ref_b), zoo_acc, zoo_s = zoo_models(store, args.zoo_epochs)
    ma, mb = load_model(ref_a, store=store), load_model(ref_b, store=store)
    cuts_a, cuts_b = list_cuts(ma), list_cuts(mb)
    if args.quick:  # one spatial, one late cut each
        cuts_a, cuts_b = [cuts_a[1], cuts_a[-2]], [cuts_b[1], cuts_b[-2]]
    names_a, names_b = tuple(c.name for c in cuts_a), tuple(c.name for c in cuts_b)
    ds = load_dataset("digits")

    hand_spec = MatrixSpec(ref_a, ref_b, senders=names_a, receivers=names_b, mode="trained",
                           adapter=AdapterSpec(init="random"))  # fmt: skip
    joinable = [(s, r) for s in cuts_a for r in cuts_b if compatibility(s, r, hand_spec.adapter) is None]
    cells = [(s.name, r.name) for s, r in joinable]

    hand = []
    for epochs in args.hand_epochs:
        log(f"hand loop: {len(joinable)} cells, random init, {epochs} epoch(s)")
        spec = dataclasses.replace(hand_spec, epochs=epochs)
        prefixes, suffixes, acc = {}, {}, {}  # splits count in the hand loop's time
        t0 = time.perf_counter()
        for s, r in joinable:
            acc[s.name, r.name] = baseline_cell(spec, ma, mb, s, r, ds, prefixes, suffixes)
        hand.append({"epochs": epochs, "seconds": round(time.perf_counter() - t0, 2),
                     "mean_acc": round(mean_over(acc, cells), 4)})  # fmt: skip

    ours, clocks = [], {}
    for epochs in args.ours_epochs:
        if epochs == 0:
            spec = MatrixSpec(ref_a, ref_b, senders=names_a, receivers=names_b, mode="closed-form")
        else:
            spec = MatrixSpec(ref_a, ref_b, senders=names_a, receivers=names_b, mode="trained", epochs=epochs,
                              precision=args.precision)  # fmt: skip
        log(f"ours: {spec.label()}" + (f", {epochs} epoch(s)" if epochs else ""))
        with TrainingClock() as clock:
            summary, seconds = timed_matrix(spec, store)
        clocks[epochs] = clock
        values = {(s, r): summary["values"][i][j] for i, s in enumerate(names_a) for j, r in enumerate(names_b)}
        ours.append({"epochs": epochs, "mode": spec.mode, "seconds": round(seconds, 2),
                     "mean_acc": round(mean_over(values, cells), 4),
                     "training_s": round(clock.seconds, 2)})  # fmt: skip

    target = max(p["mean_acc"] for p in hand)
    baseline_s = min(p["seconds"] for p in hand if p["mean_acc"] >= target)
    ours_s = time_to(target, ours)
    speedup = baseline_s / ours_s if ours_s else None

    longest = max(e for e in args.ours_epochs)
    floor = None
    if longest > 0:
        log(f"floor: the {longest}-epoch run's steps through B's suffix alone")
        floor_s = floor_seconds(clocks[longest].calls)
        alone_s = adapters_alone_seconds(clocks[longest].calls)
        trained_s = clocks[longest].seconds
        floor = {"epochs": longest, "floor_s": round(floor_s, 2), "trained_s": round(trained_s, 2),
                 "ratio": round(trained_s / floor_s, 3), "target_ratio_at_most": 1.3,
                 "adapters_alone_s": round(alone_s, 2),
                 "floor_plus_adapters_alone_s": round(floor_s + alone_s, 2),
                 "ratio_to_the_parts": round(trained_s / (floor_s + alone_s), 3)}  # fmt: skip

    result = {
        "device": f"cpu ({platform.processor() or platform.machine()})",
        "gpu": "none lent to this run" if not torch.cuda.is_available() else torch.cuda.get_device_name(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "quick": args.quick,
        "zoo": {"refs": [ref_a, ref_b], "test_acc": zoo_acc, "epochs": args.zoo_epochs, "train_s": round(zoo_s, 2)},
        "cuts": {"senders": list(names_a), "receivers": list(names_b)},
        "cells": len(cuts_a) * len(cuts_b),
        "cells_joinable": len(cells),
        "precision": args.precision,
        "hand_loop": hand,
        "ours": ours,
        "time_to_accuracy": {"target_acc": target, "baseline_s": baseline_s,
                             "ours_s": round(ours_s, 2) if ours_s else None,
                             "speedup": round(speedup, 2) if speedup else None, "target_speedup_at_least": 5},
        "floor": floor,
    }
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
