"""Benchmark: the stitching matrix of two zoo ResNets on digits, closed-form and trained, against a hand-written loop.

Two zoo ResNets (``arch="resnet"``, blocks [2,2,2,2], width 8, digits upscaled to 16x16, seeds 0
and 1; trained once and cached in ``--store``) give 10 cuts each (stem, layer1.0 .. layer4.1,
pool) -> 100 cells (a vector sender into a spatial receiver is skipped, as the library does).

Timed, in one process:

- ``closed_form_s``: ``run_experiment("matrix", MatrixSpec(a, b, mode="closed-form"), rerun=True)``
  -- end to end (load models, cache every cut's activations, lstsq fit + test score per cell).
- ``trained_s``: the same with ``mode="trained", adapter=AdapterSpec(init="random"), epochs=N``:
  adapters trained on cached sender activations, all the adapters into one receiver together
  through one pass of B's frozen suffix (BatchNorm folded, channels-last) per step;
  ``--precision bf16`` runs them under bfloat16 autocast (the baseline stays fp32).
- ``baseline_s``: the same trained matrix written by hand in plain PyTorch: per cell
  ``torch.manual_seed(seed)``; ``build_adapter``; AdamW (same lr / wd) + cosine schedule; for each
  epoch, for each batch (same batch size, same per-epoch ``randperm`` from a generator seeded with
  ``seed``, exactly as ``train_adapter`` draws it): ``with no_grad: h = prefix_A(preprocess_A(x))``,
  ``loss = CE(suffix_B(adapter(h)), y)``; then test accuracy.  The full frozen prefix runs every
  step.  When the whole baseline would exceed ``--baseline-budget`` seconds, cells are timed in a
  fixed shuffled order until the budget is spent and the total is extrapolated from the mean per
  timed cell (``baseline_cells_timed`` < ``cells`` says so; accuracy is compared on timed cells).

Times are best-of ``--repeats`` (default 2; every run listed in ``*_runs_s``); trained and baseline
runs alternate, and ``speedup_per_pair`` gives baseline / trained for each adjacent pair.
Prints one JSON object (progress on stderr).  ``--quick``: 2 x 2 cuts, 1 epoch, and zoo models of
5 epochs (their own cache entries) unless ``--zoo-epochs`` is given -- a smoke run under 30 s.
Run: ``python bench/matrix_bench.py [--epochs 2] [--store DIR] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import random
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
        prefixes[s.name] = split(ma.model, s, ma.example_input())[0].eval()
    if r.name not in suffixes:
        suffixes[r.name] = split(mb.model, r, mb.example_input())[1].eval()
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--store", default=None, help="results store (zoo models are cached there); default a temp dir"
    )
    ap.add_argument(
        "--epochs", type=int, default=2, help="adapter training epochs (trained matrix and baseline)"
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 x 2 cuts, 1 epoch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="trained matrix precision (bf16: autocast, fast with AMX / a GPU); the baseline stays fp32")
    ap.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed runs of each of the three (best-of reported, all listed); default 2, --quick 1",
    )
    ap.add_argument(
        "--zoo-epochs",
        type=int,
        default=None,
        help=f"zoo training epochs (default {ZOO_EPOCHS}; --quick: {QUICK_ZOO_EPOCHS} unless given)",
    )
    ap.add_argument(
        "--baseline-budget",
        type=float,
        default=480.0,
        help="seconds; past this the baseline stops and extrapolates from the cells timed",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    epochs = 1 if args.quick else args.epochs
    repeats = args.repeats or (1 if args.quick else 2)
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
    cuts_a, cuts_b = list_cuts(ma.model, ma.example_input()), list_cuts(mb.model, mb.example_input())
    if args.quick:  # one spatial, one late cut each
        cuts_a, cuts_b = [cuts_a[1], cuts_a[-2]], [cuts_b[1], cuts_b[-2]]
    names_a, names_b = tuple(c.name for c in cuts_a), tuple(c.name for c in cuts_b)
    ds = load_dataset("digits")

    log(f"closed-form matrix {len(cuts_a)} x {len(cuts_b)}")
    cf_spec = MatrixSpec(ref_a, ref_b, senders=names_a, receivers=names_b, mode="closed-form")
    cf_runs = [timed_matrix(cf_spec, store) for _ in range(repeats)]
    cf_summary, closed_form_s = cf_runs[0][0], min(t for _, t in cf_runs)

    tr_spec = MatrixSpec(ref_a, ref_b, senders=names_a, receivers=names_b, mode="trained",
                         adapter=AdapterSpec(init="random"), epochs=epochs, precision=args.precision)  # fmt: skip
    cells = [(s, r) for s in cuts_a for r in cuts_b if compatibility(s, r, tr_spec.adapter) is None]
    order = list(cells)
    random.Random(0).shuffle(order)  # timed subset (if any) spread over senders and receivers

    def baseline_run() -> tuple[float, int, dict]:
        prefixes, suffixes, acc = {}, {}, {}  # splits count in the baseline's time
        t0 = time.perf_counter()
        for s, r in order:
            acc[s.name, r.name] = baseline_cell(tr_spec, ma, mb, s, r, ds, prefixes, suffixes)
            if time.perf_counter() - t0 > args.baseline_budget:
                break
        spent = time.perf_counter() - t0
        return (spent if len(acc) == len(cells) else spent / len(acc) * len(cells)), len(acc), acc

    # Trained and baseline runs interleave (T, B, T, B ...) so each pair sees similar load on a shared host.
    tr_runs, base_runs = [], []
    for k in range(repeats):
        log(f"trained matrix, {epochs} epoch(s), run {k + 1}/{repeats}")
        tr_runs.append(timed_matrix(tr_spec, store))
        log(f"baseline: {len(cells)} cells, budget {args.baseline_budget:.0f} s, run {k + 1}/{repeats}")
        b_s, timed, b_acc = baseline_run()
        base_runs.append(b_s)
        if k == 0:
            base_acc = b_acc
        if timed < len(cells):
            break  # over budget: one (extrapolated) baseline run only
    timed = len(base_acc)
    tr_summary, trained_s = tr_runs[0][0], min(t for _, t in tr_runs)
    trained = {
        (s, r): tr_summary["values"][i][j] for i, s in enumerate(names_a) for j, r in enumerate(names_b)
    }
    baseline_s = min(base_runs)

    diffs = [abs(base_acc[k] - trained[k]) * 100 for k in base_acc]
    tr_vals = [v for v in trained.values() if v is not None]
    trained_mean = sum(tr_vals) / len(tr_vals)
    cf_vals = [v for row in cf_summary["values"] for v in row if v is not None]
    base_mean = sum(base_acc.values()) / timed
    mean_abs_diff = sum(diffs) / len(diffs)
    speedup = baseline_s / trained_s
    result = {
        "device": f"cpu ({platform.processor() or platform.machine()})",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "quick": args.quick,
        "zoo": {
            "refs": [ref_a, ref_b],
            "test_acc": zoo_acc,
            "epochs": args.zoo_epochs,
            "train_s": round(zoo_s, 2),
        },
        "cuts": {"senders": list(names_a), "receivers": list(names_b)},
        "cells": len(cuts_a) * len(cuts_b),
        "cells_trainable": len(cells),
        "epochs": epochs,
        "precision": args.precision,
        "repeats": repeats,
        "closed_form_s": round(closed_form_s, 2),
        "closed_form_runs_s": [round(t, 2) for _, t in cf_runs],
        "closed_form_mean_acc": round(sum(cf_vals) / len(cf_vals), 4),
        "trained_s": round(trained_s, 2),
        "trained_runs_s": [round(t, 2) for _, t in tr_runs],
        "trained_mean_acc": round(trained_mean, 4),
        "baseline_s": round(baseline_s, 2),
        "baseline_runs_s": [round(t, 2) for t in base_runs],
        "baseline_cells_timed": timed,
        "baseline_extrapolated": timed < len(cells),
        "baseline_mean_acc": round(base_mean, 4),
        "trained_mean_acc_on_timed_cells": round(sum(trained[k] for k in base_acc) / timed, 4),
        "mean_abs_diff_pts": round(mean_abs_diff, 3),
        "max_abs_diff_pts": round(max(diffs), 3),
        "speedup": round(speedup, 2),
        "speedup_per_pair": [round(b / t, 2) for (_, t), b in zip(tr_runs, base_runs)],
        "targets": {
            "closed_form_under_30s": closed_form_s < 30,
            "trained_5x": speedup >= 5,
            "equal_accuracy": mean_abs_diff < 2,
        },
    }
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
