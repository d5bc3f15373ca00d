"""Benchmark: closed-form matrix time against the cut grid's size, and the memory of a matrix too big to cache.

- ``scaling``: two zoo ResNets with 32 residual blocks (blocks [8,8,8,8], width 8, digits at 16x16,
  2 epochs, seeds 0 and 1; cached in ``--store``) have 34 cuts (stem, 32 blocks, pool).  Closed-form
  matrices of n x n cuts spread evenly over depth, n = 4, 8, 16 and 32, each run end to end with
  ``run_experiment`` (load, cache every cut's activations, fit, score): ``seconds`` and
  ``seconds_per_cell``.
- ``memory``: a closed-form matrix of two random-init ``timm:resnet50`` (224 x 224 inputs: digits
  upscaled, three channels) over their four stage outputs (layer1 .. layer4, 4 x 4 cells) on 256
  images (128 to fit, 128 to score) with ``STITCHLAB_ACT_BUDGET_MB=1024``.  Caching would hold
  ~2.3 GB of activations, so the matrix streams (``stitchcore.stitching.streamed``).  It runs in a child
  process; ``peak_rss_mb`` is that process's peak resident memory (``ru_maxrss``), against
  ``limit_mb`` = both models' size + the budget + 1 GB.

Prints one JSON object (progress on stderr).  Run: ``python bench/matrix_scaling.py [--store DIR]
[--sizes 4 8 16 32] [--no-memory]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.cuts import list_cuts  # noqa: E402
from stitchcore.experiments import run_experiment  # noqa: E402
from stitchcore.experiments.matrix import MatrixSpec  # noqa: E402
from stitchcore.experiments.zoo import ZooRecipe  # noqa: E402
from stitchcore.models.sources import load_model  # noqa: E402
from stitchcore.store.results import Store  # noqa: E402

BIG = "timm:resnet50?pretrained=false&num_classes=10"  # A; B adds in_chans=3 (the same net, its own random init)
STAGES = ("layer1", "layer2", "layer3", "layer4")
BUDGET_MB = 1024


def log(msg: str) -> None:
    print(f"[matrix_scaling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def deep_zoo(store: Store) -> list[str]:
    refs = []
    for seed in (0, 1):
        recipe = ZooRecipe(arch="resnet", dataset="digits", seed=seed, epochs=2, image_size=16,
                           arch_kwargs={"blocks": [8, 8, 8, 8], "width": 8})  # fmt: skip
        refs.append(run_experiment("zoo", recipe, store).record.summary["ref"])
    return refs


def spread(names: list[str], n: int) -> tuple[str, ...]:
    """``n`` of ``names`` evenly spaced over depth, first and last included."""
    if n >= len(names):
        return tuple(names)
    return tuple(names[round(i * (len(names) - 1) / (n - 1))] for i in range(n))


def scaling(store: Store, sizes: list[int]) -> list[dict]:
    ref_a, ref_b = deep_zoo(store)
    m = load_model(ref_a, store=store)
    names = [c.name for c in list_cuts(m)]
    rows = []
    for n in sizes:
        cuts = spread(names, n)
        log(f"closed-form {len(cuts)} x {len(cuts)}")
        t0 = time.perf_counter()
        out = run_experiment("matrix", MatrixSpec(ref_a, ref_b, senders=cuts, receivers=cuts), store, rerun=True)
        seconds = time.perf_counter() - t0
        cells = out.record.summary["n_cells"]
        rows.append({"cuts": len(cuts), "cells": cells, "seconds": round(seconds, 2),
                     "seconds_per_cell": round(seconds / cells, 4)})  # fmt: skip
    return rows


def memory_child(store_dir: str) -> None:
    """In the child: the big streamed matrix; prints its summary's facts and this process's peak RSS."""
    logging.basicConfig(level=logging.INFO, format="[child] %(message)s", stream=sys.stderr)
    torch.set_num_threads(2)
    store = Store(store_dir)
    a, b = BIG, f"{BIG}&in_chans=3"
    size_mb = sum(sum(t.numel() * t.element_size() for t in (*m.model.parameters(), *m.model.buffers()))
                  for m in (load_model(a, store=store), load_model(b, store=store))) / 2**20  # fmt: skip
    spec = MatrixSpec(a, b, senders=STAGES, receivers=STAGES, dataset="digits", max_train=128, max_test=128)
    t0 = time.perf_counter()
    out = run_experiment("matrix", spec, store, rerun=True)
    s = out.record.summary
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB
    print(json.dumps({"status": out.record.status, "cells": s["n_cells"], "seconds": round(time.perf_counter() - t0, 1),
                      "models_mb": round(size_mb, 1), "peak_rss_mb": round(peak, 1),
                      "values": s["values"]}))  # fmt: skip


def memory(store_dir: str) -> dict:
    env = {**os.environ, "STITCHLAB_ACT_BUDGET_MB": str(BUDGET_MB), "HF_HUB_OFFLINE": "1"}
    log(f"two random-init timm:resnet50, 4 x 4 stage cuts, 256 images, budget {BUDGET_MB} MB (child process)")
    done = subprocess.run([sys.executable, __file__, "--memory-child", store_dir], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        return {"completed": False, "error": done.stderr[-2000:]}
    got = json.loads(done.stdout.strip().splitlines()[-1])
    limit = got["models_mb"] + BUDGET_MB + 1024
    streamed = "streaming the closed-form fits" in done.stderr
    return {"completed": got["status"] == "done", "streamed": streamed, "budget_mb": BUDGET_MB, **got,
            "limit_mb": round(limit, 1), "under_limit": got["peak_rss_mb"] < limit}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="zoo models and runs are cached there; default a temp dir")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--no-memory", action="store_true", help="skip the resnet50 memory run")
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(2)
    tmp = tempfile.TemporaryDirectory(prefix="matrix_scaling-") if args.store is None else None
    root = tmp.name if tmp is not None else args.store
    result = {"bench": "matrix_scaling", "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
              "torch": torch.__version__, "python": platform.python_version()}  # fmt: skip
    result["scaling"] = scaling(Store(root), args.sizes)
    if not args.no_memory:
        result["memory"] = memory(root)
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
