"""Benchmark: the same trained matrix in this process and on a local 2-worker Ray, and what Ray costs.

Two digit CNNs (zoo:cnn-digits-s0 / -s1, trained in ``--store``, a temp dir by default) and their trained
matrix (``MatrixSpec(mode="trained", epochs=--epochs, max_train=--max-train)``), run with ``rerun=True``:

- ``local``: the local backend in this process, 1 torch thread; ``cell_work_s`` sums the time inside its
  receiver units (``receiver_unit``: fit, train and score the cells into one receiver cut).
- ``ray_cold`` / ``ray_warm``: ``RunOptions("ray")`` on a Ray started here (``connect(None)``, ``--workers``
  CPUs, 1 thread per task).  Cold: the first run (workers start, import torch); warm: ``--warm-runs`` more
  on the same connection, the median reported.  ``*_tasks`` (``ray.timeline()``): ``busy_s`` sums the
  run's task spans on the workers (receiver units, which rebuild their workspace from the shipped models,
  and one ``sender_activations`` task per sender model); when the first began and the last ended.
- ``max_abs_acc_diff``: the largest |accuracy(local) - accuracy(ray)| over the scored cells of every Ray run.
- ``overhead``: a no-op task's round trip (median of ``--calls``), ``ray.put`` + ``ray.get`` of the sender
  CNN's state dict in the driver (median of 10), ``connect_s`` (starting Ray) and ``disconnect_s``.

Prints one JSON object (progress on stderr); ``definitions`` spells out the two fractions.
Run: ``python bench/ray_bench.py [--store DIR] [--epochs 3] [--max-train N] [--workers 2]``
(about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # before Ray is imported or started
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments.matrix import run as matrix_run  # the driver: it makes the units
from stitchcore.experiments import run_experiment
from stitchcore.backends import RunOptions
from stitchcore.experiments.matrix import MatrixSpec, partial_cells
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store

Cells = dict[tuple[str, str], dict]


def log(msg: str) -> None:
    print(f"[ray_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_matrix(spec: MatrixSpec, store: Store, options: RunOptions) -> tuple[Cells, float]:
    """The matrix's trained cells by (sender, receiver), and the run's wall seconds."""
    out, wall = timed(lambda: run_experiment("matrix", spec, store, rerun=True, options=options))
    cells = partial_cells(store, out.record.id)
    return {(c["sender"], c["receiver"]): c for c in cells if c.get("variant") == "trained"}, round(wall, 3)


def run_local(spec: MatrixSpec, store: Store) -> tuple[Cells, float, float, int]:
    """The local run: its cells, wall seconds, seconds spent inside its receiver units, and how many."""
    real, spent, units = matrix_run.receiver_unit, [0.0], [0]

    def clocked(*args: Any) -> Iterator[tuple[str, Any]]:
        gen, units[0] = real(*args), units[0] + 1
        while True:  # only the unit's own steps, not the driver handling its events
            t0 = time.perf_counter()
            event = next(gen, None)
            spent[0] += time.perf_counter() - t0
            if event is None:
                return
            yield event

    with mock.patch.object(matrix_run, "receiver_unit", clocked):
        cells, wall = run_matrix(spec, store, RunOptions())
    return cells, wall, round(spent[0], 3), units[0]


def task_spans(ray: Any, since: float, until: float) -> dict[str, float | None]:
    """``ray.timeline()``'s tasks that began in [since, until] (epoch s): summed spans on the workers, when
    the first began and the last ended (seconds after ``since``), and how many worker processes ran them."""
    time.sleep(2.0)  # workers flush their task events about once a second
    try:
        events = ray.timeline()
    except Exception:  # noqa: BLE001 - the timeline is a nicety; the bench goes on without it
        events = []
    mine = [e for e in events
            if str(e.get("cat", "")).startswith("task::") and since <= e["ts"] / 1e6 <= until]  # fmt: skip
    if not mine:
        return {"busy_s": None, "first_task_at_s": None, "last_task_end_at_s": None, "worker_processes": None}
    spans = [(e["ts"] / 1e6 - since, e["dur"] / 1e6) for e in mine]
    return {"busy_s": round(sum(d for _, d in spans), 3),
            "first_task_at_s": round(min(t for t, _ in spans), 3),
            "last_task_end_at_s": round(max(t + d for t, d in spans), 3),
            "worker_processes": len({e.get("tid") for e in mine})}  # fmt: skip


def run_ray(spec: MatrixSpec, store: Store, ray: Any) -> dict[str, Any]:
    since = time.time()
    cells, wall = run_matrix(spec, store, RunOptions("ray"))
    return {"wall_s": wall, "tasks": task_spans(ray, since, time.time()), "cells": cells,
            "nodes": len({c.get("node") for c in cells.values()}),
            "devices": sorted({str(c.get("device")) for c in cells.values()})}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="results store; default a temp dir")
    ap.add_argument("--epochs", type=int, default=3, help="matrix training epochs")
    ap.add_argument("--max-train", type=int, default=None, help="cap on training images (default all)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the Ray started here (one task each)")
    ap.add_argument("--warm-runs", type=int, default=3, help="warm Ray runs (the median one is reported)")
    ap.add_argument("--calls", type=int, default=50, help="no-op round trips to take the median of")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tmp = tempfile.TemporaryDirectory(prefix="ray_bench-") if args.store is None else None
    store = Store(tmp.name if tmp else args.store)

    log("zoo models")
    zoo = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store) for s in (0, 1)]
    refs = [out.record.summary["ref"] for out in zoo]
    spec = MatrixSpec(refs[0], refs[1], mode="trained", epochs=args.epochs, max_train=args.max_train, seed=0)
    log(f"local: {spec.label()}")
    local, local_s, cell_work_s, units = run_local(spec, store)

    import ray

    from stitchcore.backends import ray_backend

    log(f"ray: starting a {args.workers}-CPU Ray here")
    with mock.patch.object(os, "cpu_count", lambda: args.workers):  # connect(None) starts os.cpu_count() CPUs
        _, connect_s = timed(lambda: ray_backend.connect(None))
    try:
        workers = int(ray.cluster_resources().get("CPU", 0))
        log("ray: cold run")
        cold = run_ray(spec, store, ray)
        log(f"ray: {args.warm_runs} warm run(s)")
        warm_runs = [run_ray(spec, store, ray) for _ in range(max(1, args.warm_runs))]
        warms = sorted(warm_runs, key=lambda r: r["wall_s"])
        warm = warms[len(warms) // 2]
        noop = ray.remote(lambda: None)
        ray.get([noop.remote() for _ in range(workers)])  # every worker up
        trips = [timed(lambda: ray.get(noop.remote()))[1] for _ in range(args.calls)]
        state = load_model(refs[0], store=store).model.state_dict()
        put_get = [timed(lambda: ray.get(ray.put(state)))[1] for _ in range(10)]
    finally:
        _, disconnect_s = timed(ray_backend.disconnect)

    diffs = [abs(local[k]["accuracy"] - c["accuracy"]) for run in (cold, *warms)
             for k, c in run["cells"].items() if c["accuracy"] is not None]  # fmt: skip
    capacity, busy, speedup = warm["wall_s"] * workers, warm["tasks"]["busy_s"], local_s / warm["wall_s"]
    verdict = (f"slower: the warm Ray run took {1 / speedup:.1f}x the in-process time" if speedup < 1
               else f"the warm Ray run was {speedup:.1f}x faster than in process")  # fmt: skip
    inside = "" if busy is None else (f", {max(0.0, busy - cell_work_s):.1f} s other work in tasks "
                                      "(arguments, workspace rebuilds, activations), "
                                      f"{max(0.0, capacity - busy):.1f} s no task")  # fmt: skip
    result = {
        "bench": "ray_bench", "spec": spec.to_dict(), "cells": len(local),
        "receiver_units": units, "workers": workers,
        "local_s": local_s, "cell_work_s": cell_work_s,
        "ray_cold_s": cold["wall_s"], "ray_warm_s": warm["wall_s"],
        "ray_warm_runs_s": [w["wall_s"] for w in warms],
        "ray_cold_tasks": cold["tasks"], "ray_warm_tasks": warm["tasks"],
        "speedup_warm_vs_local": round(speedup, 3),
        "fraction_outside_cell_work": round(1 - cell_work_s / capacity, 3),
        "fraction_outside_tasks": None if busy is None else round(1 - busy / capacity, 3),
        "max_abs_acc_diff": max(diffs) if diffs else None, "scored_cells_compared": len(diffs),
        "ray_cell_nodes": warm["nodes"], "ray_cell_devices": warm["devices"],
        "overhead": {
            "connect_s": round(connect_s, 3), "disconnect_s": round(disconnect_s, 3),
            "noop_task_round_trip_ms": round(statistics.median(trips) * 1e3, 3),
            "state_dict_bytes": sum(t.numel() * t.element_size() for t in state.values()),
            "put_get_state_dict_ms": round(statistics.median(put_get) * 1e3, 3),
        },
        "definitions": {
            "fraction_outside_cell_work": "1 - cell_work_s / (ray_warm_s * workers), cell_work_s timed in "
                                          "the local run (same cells, 1 thread): workers' share not on cells",
            "fraction_outside_tasks": "1 - ray_warm_tasks.busy_s / (ray_warm_s * workers): workers' share "
                                      "with no task running (driver preparation, scheduling, results)",
        },
        "note": (f"tiny models, {workers} workers; {verdict}. Of the workers' {capacity:.1f} s, "
                 f"{cell_work_s:.1f} s was cell work{inside}. A receiver task holds "
                 f"{cell_work_s / units:.2f} s of cell work, small against these fixed costs, so extra"
                 " workers buy little here; Ray pays off where a task's work dwarfs them (larger models,"
                 " more nodes or GPUs)"),
        "torch": torch.__version__, "ray": ray.__version__, "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }  # fmt: skip
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
