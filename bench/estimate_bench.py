"""Benchmark: the estimate a Launch button shows against the run's real wall time, over the README's
command-line examples and the pages' defaults.

Each case is what a user launches: a page default or a README line, as (kind, spec) jobs queued in order
(the classroom demo: two models, then their stitch).  For each, in this order, on one store:

- ``estimate_s``: what the page shows before the click: ``estimate_plan(jobs, wait=True)`` with the job
  runner's threads, plus what is left of the job worker's start-up (``JobRunner.startup_seconds``), as
  ``ui.show_estimate`` adds it;
- ``quick_s``: the first figure a page shows for it (a quick calibration on a few examples), timed on a
  cleared calibration cache before the full one; ``first_figure_after_s`` / ``full_figure_after_s``: how
  long after the page asked each was there;
- ``actual_s``: submit the jobs to a ``JobRunner`` like the app's (a worker process, warm from the start,
  ``--threads`` torch threads) and wait for the last: the wall time from click to result;
- ``ratio`` = actual / estimate (1 = exact; the target: within 0.5 .. 2 for all, 0.67 .. 1.5 for most);
  ``as_shown_*`` count the same with both sides at least 1 s, as the page rounds them ("about 1 s").

The first case runs right after the runner starts (the worker still importing), as a first click after
``streamlit run`` does.  Prints one JSON object (progress on stderr).
``--load N`` keeps N other processes busy (a pure-Python spin each) while it measures, as a machine shared
with other work is: the estimate must hold there too (the issue's load 0 and 2).
Run: ``python bench/estimate_bench.py [--store DIR] [--threads N] [--load N] [--only NAME,...]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import calibration
from stitchcore.experiments import estimate as est
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.lm import DepthSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.trait_presets import get_preset
from stitchcore.experiments.zoo import ZooRecipe, zoo_name
from stitchcore.jobs import JobRunner
from stitchcore.jobs.worker import WorkerProcess
from stitchcore.models.archs import arch_recipe_defaults
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for

S0, S1 = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
SWIN = ZooRecipe(arch="swin", dataset="digits", **arch_recipe_defaults("swin"))
GPT = [ZooRecipe(arch="gpt", dataset="pydoc", seed=s, optimizer="adamw", epochs=2) for s in (0, 1)]


def ref_of(recipe: ZooRecipe) -> str:
    """The zoo ref a recipe's run makes."""
    return f"zoo:{zoo_name(recipe, run_id_for('zoo', recipe.to_dict()))}"


def cases() -> list[tuple[str, list[tuple[str, Any]]]]:
    """(name, jobs) in the order they run: later cases use the models earlier ones train."""
    preset = get_preset("distributed")
    gpt_a, gpt_b = (ref_of(r) for r in GPT)
    return [
        ("home: classroom demo (first click after start)", [
            ("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=0)),
            ("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=1)),
            ("stitch", StitchSpec(a=S0, b=S1, cut_a="block2", cut_b="block2", adapter=AdapterSpec(init="lstsq"))),
        ]),
        ("stitch page defaults (random-init adapter)", [
            ("stitch", StitchSpec(a=S0, b=S1, cut_a="block1", cut_b="block1", adapter=AdapterSpec(init="random")))]),
        ("models page defaults (new seed)", [("zoo", ZooRecipe(seed=2))]),
        ("readme: matrix", [("matrix", MatrixSpec(a=S0, b=S1, seed=1))]),
        ("similarity page defaults (matrix and CKA)", [("matrix", MatrixSpec(a=S0, b=S1)),
                                                      ("similarity", SimilaritySpec(a=S0, b=S1, seed=1))]),
        ("similarity page, trained with controls", [("matrix", MatrixSpec(a=S0, b=S1, mode="trained", epochs=3,
                                                                          controls=True))]),
        ("readme: similarity", [("similarity", SimilaritySpec(a=S0, b=S1, measure="procrustes"))]),
        ("readme: zoo train swin", [("zoo", SWIN)]),
        ("readme: assemble", [("assemble", AssembleSpec(
            a=S0, b=ref_of(SWIN), senders=("block1",), receivers=("layers.0", "layers.1"),
            kinds=("linear", "bottleneck"), resamples=("bilinear",)))]),
        ("traits preset: distributed", [("zoo", r) for r in preset.recipes] + [("sweep", s) for s in preset.sweeps]),
        ("readme: two char-GPTs", [("zoo", r) for r in GPT]),
        ("readme: merge --mode both --head b", [("lmdepth", DepthSpec(a=gpt_a, b=gpt_b, heads=("b",)))]),
        ("stitch: two ImageNet ResNet-18s, quick settings", [("stitch", StitchSpec(
            a="timm:resnet18?pretrained=false&num_classes=10", b="torchvision:resnet18?weights=none&num_classes=10",
            cut_a="layer2.1", cut_b="layer2.1", epochs=2, max_train=300, max_test=300, dataset="digits"))]),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", default=None, help="store folder (default: a fresh temporary one)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per job (the app on 2 cores: 1)")
    p.add_argument("--load", type=int, default=0, help="other processes kept busy meanwhile (default 0)")
    p.add_argument("--only", default="", help="comma-separated case names (substrings) to run")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    torch.set_num_threads(args.threads)
    root = Path(args.store or tempfile.mkdtemp(prefix="estimate-bench-"))
    store = Store(root)
    runner = JobRunner(store, devices=["cpu"], cpu_threads=args.threads, isolation="process", warm=True)
    startup_guess = WorkerProcess.expected_startup  # before the worker has measured its own
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    rows = []
    # each one busy core until killed (a process of its own: the job worker owns this one's multiprocessing)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        for name, jobs in cases():
            if wanted and not any(w in name for w in wanted):
                continue
            est.clear_calibrations()
            token = calibration._NO_WAIT.set(True)  # as a page asks: the quick figure first
            quick, asked = None, time.monotonic()
            try:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    quick = est.estimate_plan(jobs, store, wait=False, threads=args.threads)
                    if quick is not None or not est.calibrating():
                        break
                    time.sleep(0.05)
            finally:
                calibration._NO_WAIT.reset(token)
            quick_after = time.monotonic() - asked
            while est.calibrating():
                time.sleep(0.05)
            full_after = time.monotonic() - asked
            full = est.estimate_plan(jobs, store, wait=True, threads=args.threads)
            startup = runner.startup_seconds()
            shown = None if full is None else (full.seconds + (0.0 if full.stored else startup))
            t0 = time.monotonic()
            last = None
            for kind, spec in jobs:
                last = runner.submit(kind, spec).id
            snap = runner.wait(last, timeout=3600)
            actual = time.monotonic() - t0
            row = {"case": name, "jobs": [k for k, _ in jobs], "estimate_s": None if shown is None else round(shown, 2),
                   "quick_s": None if quick is None else round(quick.seconds + startup, 2),
                   "first_figure_after_s": round(quick_after, 2), "full_figure_after_s": round(full_after, 2),
                   "worker_startup_s": round(startup, 2), "actual_s": round(actual, 2), "state": snap.state,
                   "ratio": None if not shown else round(actual / shown, 2),
                   "basis": None if full is None else full.basis[:300]}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()
        measured = WorkerProcess.expected_startup
        runner.shutdown()
        store.close()
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    # the page rounds to whole seconds ("about 1 s"): under a second either way reads the same
    shown = [max(r["actual_s"], 1.0) / max(r["estimate_s"], 1.0) for r in rows if r["estimate_s"] is not None]
    print(json.dumps({
        "bench": "estimate_vs_actual", "machine": platform.machine(), "cpus": os.cpu_count(),
        "bench_torch_threads": torch.get_num_threads(),
        "threads_per_job": args.threads, "load": args.load, "cases": rows,
        "worker_startup_guess_s": round(startup_guess, 2), "worker_startup_measured_s": round(measured, 2),
        "within_2x": sum(0.5 <= r <= 2 for r in ratios), "within_1_5x": sum(1 / 1.5 <= r <= 1.5 for r in ratios),
        "n": len(ratios), "as_shown_within_2x": sum(0.5 <= r <= 2 for r in shown),
        "as_shown_within_1_5x": sum(1 / 1.5 <= r <= 1.5 for r in shown),
    }, indent=1))


if __name__ == "__main__":
    main()
