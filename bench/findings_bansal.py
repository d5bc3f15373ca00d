"""Findings of Bansal et al.'s new presets (issue 25 item 5) and the report's two-cue preset (JSON on stdout).

    STITCHLAB_JOB_THREADS=1 python bench/findings_bansal.py [--seeds 0 2 4] [--store DIR]

Each preset runs whole at every seed (its models trained, its sweeps run) on the digits test split.  Per
finding: the paper's claim, the project's numbers per cut (mean and min..max over the seeds), the verdict
(checked against the thresholds the tests in tests/test_sweep_bansal_more.py assert) and the seconds a preset
took per seed (one torch thread).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _seeds import per_position  # bench/ is the script's folder

from stitchcore.experiments.sweep import penalty_along
from stitchcore.experiments.trait_presets import get_preset, run_preset
from stitchcore.store.results import Store

PRESETS = ("label-noise", "coarse-labels", "kernel-size", "early-convergence", "two-cue")
CLAIMS = {
    "label-noise": "Noisy-label models have good early layers and poor late ones; more noise, worse late layers "
                   "(Bansal et al. Sec. 4: 10%, 50%, 100% noise on CIFAR-10).",
    "coarse-labels": "A model trained on a coarse task (CIFAR-10 objects vs animals) still has good early layers; "
                     "its late layers lose the fine classes (Bansal et al.).",
    "kernel-size": "The 1x1 stitching layer suffices: larger kernels change the penalty little (Bansal et al.).",
    "early-convergence": "Early layers converge faster: an early checkpoint's first layers stitch into the final "
                         "model with a small penalty long before its late layers do (Bansal et al.).",
    "two-cue": "The cue a stitched model uses comes from the model whose layers decide: B's cue at early cuts, "
               "A's at late ones (Oxford report, MNIST-CIFAR).",
}


def measure(name: str, seeds: list[int], root: Path) -> dict:
    lines: dict[str, list] = {}
    seconds = []
    positions: list[str] = []
    for seed in seeds:
        store = Store(root / f"{name}-{seed}")
        t0 = time.perf_counter()
        _, sweeps = run_preset(name, store, seed=seed)
        seconds.append(round(time.perf_counter() - t0, 1))
        preset = get_preset(name, seed=seed)
        for title, outcome in zip(preset.sweep_titles, sweeps, strict=True):
            summary = outcome.record.summary
            positions = summary["positions"]
            key = title.replace(f"seed {seed}", "seed s")
            if name == "two-cue":
                for metric in ("decor:left", "decor:right", "accuracy"):
                    lines.setdefault(metric, []).append(summary["stitched"][metric])
            else:
                lines.setdefault(key, []).append(penalty_along(summary))
    out = {"claim": CLAIMS[name], "positions": positions, "seconds_per_seed": seconds,
           "lines": {k: per_position(v) for k, v in lines.items()}}  # fmt: skip
    out["verdict"] = verdict(name, out["lines"])
    return out


def verdict(name: str, lines: dict) -> str:
    """The finding's verdict from the per-cut stats (first cut = block1, last = fc2)."""
    first = {k: v[0] for k, v in lines.items()}
    last = {k: v[-1] for k, v in lines.items()}
    if name == "label-noise":
        ok = (all(first[k]["max"] <= 0.05 for k in first) and last["A with 100% wrong labels -> clean B"]["min"]
              > last["A with 50% noisy labels -> clean B"]["mean"] - 0.05
              and last["A with 50% noisy labels -> clean B"]["min"] > last["A with 10% noisy labels -> clean B"]["max"]
              and last["clean A -> clean B"]["max"] <= 0.03)  # fmt: skip
        return "holds" if ok else "partly"
    if name == "coarse-labels":
        coarse, clean = "A trained on 0-4 vs 5-9 -> 10-class B", "10-class A -> 10-class B"
        ok = first[coarse]["max"] <= 0.03 and last[coarse]["min"] >= 0.1 and last[clean]["max"] <= 0.03
        return "holds" if ok else "partly"
    if name == "kernel-size":
        spread = max(max(v[i]["mean"] for v in lines.values()) - min(v[i]["mean"] for v in lines.values())
                     for i in range(2))  # fmt: skip
        return f"holds (largest gap between kernel means {spread:.3f})" if spread <= 0.03 else \
            f"does not hold (gap {spread:.3f})"
    if name == "early-convergence":
        e1 = lines["epoch 1 -> final model"]
        ok = e1[0]["max"] <= 0.03 and e1[-1]["min"] >= 0.05 and lines["epoch 5 -> final model"][-1]["mean"] < \
            e1[-1]["mean"]
        return "holds" if ok else "partly"
    left, right = lines["decor:left"], lines["decor:right"]  # right cue alone, left cue alone
    ok = left[0]["min"] >= 0.8 and right[0]["max"] <= 0.3 and right[-1]["min"] >= 0.8 and left[-1]["max"] <= 0.3
    return "holds" if ok else "partly"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 2, 4])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--store", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    root = args.store or Path(tempfile.mkdtemp(prefix="findings-bansal-"))
    print(json.dumps({name: measure(name, args.seeds, root) for name in args.presets}, indent=1))


if __name__ == "__main__":
    main()
