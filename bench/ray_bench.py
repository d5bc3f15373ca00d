"""Benchmark: the same trained matrix in this process and on a local 2-worker Ray cluster, and what Ray costs.

Two digit CNNs (zoo:cnn-digits-s0 / -s1, trained in ``--store``, a temp dir by default) and one trained
matrix of them (``MatrixSpec(mode="trained", epochs=--epochs, max_train=--max-train)``), run three times
with ``rerun=True``:

- ``local``: the local backend in this process, ``torch.set_num_threads(1)``; the time inside each
  receiver unit (``receiver_unit``: fitting, training and scoring its cells) is summed as ``cell_work_s``.
- ``ray_cold`` then ``ray_warm``: ``RunOptions("ray")`` on a Ray started here (``connect(None)``) with
  ``--workers`` CPUs, one torch thread per task; cold is the first run (worker processes start and import
  torch), warm the second on the same connection.  ``task_execute_s``: the summed ``task:execute`` spans
  of the run's tasks from ``ray.timeline()`` (receiver units, which rebuild their workspace from the shipped
  models, and one ``sender_activations`` task per sender model).
- ``max_abs_acc_diff``: the largest |accuracy(local) - accuracy(ray)| over the cells.
- ``overhead``: a no-op task's round trip (median of ``--calls``), and ``ray.put`` + ``ray.get`` of a
  model-sized state dict (the sender CNN's) in the driver; ``connect_s`` / ``disconnect_s``.

Prints one JSON object (progress on stderr); ``definitions`` says what each fraction is.
Run: ``python bench/ray_bench.py [--store DIR] [--epochs 3] [--max-train N] [--workers 2]``.
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

from stitchcore.experiments import matrix as matrix_module
from stitchcore.experiments import run_experiment
from stitchcore.experiments.backends import RunOptions
from stitchcore.experiments.matrix import MatrixSpec, partial_cells
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store


def log(msg: str) -> None:
    print(f"[ray_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def run_local(spec: MatrixSpec, store: Store) -> tuple[dict, float, float]:
    """(cells by (sender, receiver), wall seconds, seconds inside the receiver units)."""
    real, spent = matrix_module.receiver_unit, [0.0]

    def clocked(*args: Any) -> Iterator[tuple[str, Any]]:
        gen = real(*args)
        while True:  # time only the unit's own steps, not the driver's handling of its events
            t0 = time.perf_counter()
            try:
                event = next(gen)
            except StopIteration:
                spent[0] += time.perf_counter() - t0
                return
            spent[0] += time.perf_counter() - t0
            yield event

    with mock.patch.object(matrix_module, "receiver_unit", clocked):
        out, wall = timed(lambda: run_experiment("matrix", spec, store, rerun=True))
    return cells_of(store, out.record.id), wall, round(spent[0], 3)


def cells_of(store: Store, run_id: str) -> dict[tuple[str, str], dict]:
    return {(c["sender"], c["receiver"]): c for c in partial_cells(store, run_id) if c.get("variant") == "trained"}


def task_execute_seconds(ray: Any, since: float, until: float) -> float | None:
    """Summed ``task:execute`` spans that started in [since, until] (epoch seconds); None if no timeline."""
    time.sleep(2.0)  # workers flush their task events about once a second
    try:
        events = ray.timeline()
    except Exception:  # noqa: BLE001 - the timeline is a nicety, the bench goes on without it
        return None
    spans = [e["dur"] for e in events if e.get("cat") == "task:execute" and since * 1e6 <= e["ts"] <= until * 1e6]
    return round(sum(spans) / 1e6, 3) if spans else None


def run_ray(spec: MatrixSpec, store: Store, ray: Any) -> dict[str, Any]:
    since = time.time()
    out, wall = timed(lambda: run_experiment("matrix", spec, store, rerun=True, options=RunOptions("ray")))
    cells = cells_of(store, out.record.id)
    return {"wall_s": wall, "task_execute_s": task_execute_seconds(ray, since, time.time()), "cells": cells,
            "nodes": len({c.get("node") for c in cells.values()}),
            "devices": sorted({str(c.get("device")) for c in cells.values()})}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="results store (zoo models are cached there); default a temp dir")
    ap.add_argument("--epochs", type=int, default=3, help="matrix training epochs per cell")
    ap.add_argument("--max-train", type=int, default=None, help="cap on training images (default all)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the Ray started here (one task each)")
    ap.add_argument("--calls", type=int, default=50, help="no-op round trips to take the median of")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tmp = tempfile.TemporaryDirectory(prefix="ray_bench-") if args.store is None else None
    store = Store(tmp.name if tmp else args.store)

    log("zoo models")
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    spec = MatrixSpec(refs[0], refs[1], mode="trained", epochs=args.epochs, max_train=args.max_train, seed=0)
    log(f"local: {spec.label()}")
    local, local_s, cell_work_s = run_local(spec, store)

    import ray

    from stitchcore.experiments.backends import ray_backend

    log(f"ray: starting a {args.workers}-CPU Ray here")
    with mock.patch.object(os, "cpu_count", lambda: args.workers):  # connect(None) gives Ray os.cpu_count() CPUs
        _, connect_s = timed(lambda: ray_backend.connect(None))
    try:
        workers = int(ray.cluster_resources().get("CPU", 0))
        log("ray: cold run")
        cold = run_ray(spec, store, ray)
        log("ray: warm run")
        warm = run_ray(spec, store, ray)
        noop = ray.remote(lambda: None)
        ray.get([noop.remote() for _ in range(workers)])  # warm the workers up
        trips = [timed(lambda: ray.get(noop.remote()))[1] for _ in range(args.calls)]
        state = load_model(refs[0], store=store).model.state_dict()
        nbytes = sum(t.numel() * t.element_size() for t in state.values())
        put_get = [timed(lambda: ray.get(ray.put(state)))[1] for _ in range(10)]
    finally:
        _, disconnect_s = timed(ray_backend.disconnect)

    diffs = [abs(local[k]["accuracy"] - c["accuracy"]) for run in (cold, warm) for k, c in run["cells"].items()
             if local.get(k, {}).get("accuracy") is not None and c["accuracy"] is not None]  # fmt: skip
    capacity = warm["wall_s"] * workers
    busy = warm["task_execute_s"]
    result = {
        "bench": "ray_bench", "spec": spec.to_dict(), "cells": len(local), "workers": workers,
        "local_s": local_s, "cell_work_s": cell_work_s,
        "ray_cold_s": cold["wall_s"], "ray_warm_s": warm["wall_s"],
        "ray_cold_task_execute_s": cold["task_execute_s"], "ray_warm_task_execute_s": busy,
        "speedup_warm_vs_local": round(local_s / warm["wall_s"], 3),
        "fraction_outside_cell_work": round(1 - cell_work_s / capacity, 3),
        "fraction_outside_tasks": None if busy is None else round(1 - busy / capacity, 3),
        "max_abs_acc_diff": max(diffs) if diffs else None, "cells_compared": len(diffs),
        "ray_cell_nodes": warm["nodes"], "ray_cell_devices": warm["devices"],
        "overhead": {"connect_s": connect_s, "disconnect_s": disconnect_s,
                     "noop_task_round_trip_ms": round(statistics.median(trips) * 1e3, 3),
                     "state_dict_bytes": nbytes, "put_get_state_dict_ms": round(statistics.median(put_get) * 1e3, 3)},
        "definitions": {
            "cell_work_s": "local run: seconds inside the receiver units (fit, train, score every cell), 1 thread",
            "task_execute_s": "Ray run: summed task:execute spans from ray.timeline() (receiver units incl. "
                              "rebuilding their workspace, and the sender_activations tasks)",
            "fraction_outside_cell_work": "1 - cell_work_s / (ray_warm_s * workers): share of the workers' "
                                          "wall time not spent on the cells' own work",
            "fraction_outside_tasks": "1 - ray_warm_task_execute_s / (ray_warm_s * workers): share idle or "
                                      "in scheduling, shipping and result handling",
        },
        "note": "tiny models: every task is well under a second of cell work, so scheduling, shipping the models "
                "and rebuilding each unit's workspace dominate and the 2-worker cluster is not faster than one "
                "process; Ray pays off for larger models and on several nodes or GPUs",
        "torch": torch.__version__, "ray": ray.__version__, "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }  # fmt: skip
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
