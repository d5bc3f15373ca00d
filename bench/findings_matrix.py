"""Stitching-matrix findings of Hernandez, Dangovski & Lu, over independently trained model pairs (issue 39).

    STITCHLAB_JOB_THREADS=1 python bench/findings_matrix.py [--seeds 0 10 20] [--store DIR] [--max-train 600]

One model pair per MODEL seed S: two digit CNNs of the default recipe, ``zoo:cnn-digits-sS`` as A and
``zoo:cnn-digits-s(S+1)`` as B (trained into ``--store``, default ``.findings/matrix``, and cached there), so
the default seeds 0, 10, 20 (``experiments.preset_seeds.model_seeds(3)``) give three pairs that share no model and
the intervals are over independent pairs (``bench/_findings.py``: a Student t 95% interval of the paired effect).
Cuts block1, block2 (maps), fc1, fc2 (vectors; a vector never feeds a map, so those cells are skipped).  Every
matrix is the paper's recipe (``preset_fields("hernandez")``: strided resampling, task-trained, ``--epochs``)
with every control (random sender, random receiver, both random, noise sender), made like the cells
(``control_training="matched"``: the same training for cells and controls, an equal budget); its adapter seed
is the model seed.  The copy-objective matrix is the same recipe with ``objective="match"``.  Nothing is tuned
here: the recipe is the paper's, so no setting is chosen on the test images (the digits test split).

Prints ``{"findings": [...], "details": {...}}``: each claim beside the baseline that could break it, the
per-pair numbers, the paired effect and its computed verdict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _findings import finding, interval  # bench/ is the script's folder

from stitchcore.experiments import run_experiment
from stitchcore.experiments.matrix import MatrixSpec, preset_fields
from stitchcore.experiments.preset_seeds import model_seeds
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store

PAPER = "Hernandez, Dangovski & Lu 2023"
CUTS = ("block1", "block2", "fc1", "fc2")
LATE = [(s, r) for s in ("fc1", "fc2") for r in ("fc1", "fc2")]  # vector senders into vector receivers
EARLY = [(s, r) for s in ("block1", "block2") for r in ("block1", "block2")]  # maps into the conv blocks
LATER_INTO_EARLIER = [("block2", "block1"), ("fc2", "fc1")]
EARLIER_INTO_LATER = [("block1", "block2"), ("fc1", "fc2")]
OFF_DIAGONAL = [(s, r) for s in CUTS for r in CUTS if s != r]
EVERY = [(s, r) for s in CUTS for r in CUTS]
ACCURACY = (0.0, 1.0)


def cells_mean(grid: list[list], pairs: list[tuple[str, str]]) -> float | None:
    """The mean of ``grid`` (rows: sender cuts, columns: receiver cuts, both :data:`CUTS`) over ``pairs``,
    skipped cells (None) left out; None when every one is skipped.

    >>> g = [[0.9, 0.8, None, None], [0.7, 0.6, None, None], [0.5, 0.4, 0.3, 0.2], [0.1, 0.2, 0.3, 0.5]]
    >>> cells_mean(g, [("block1", "block1"), ("fc2", "fc2"), ("fc1", "block1")])
    0.6333333333333333
    """
    got = [grid[CUTS.index(s)][CUTS.index(r)] for s, r in pairs]
    got = [float(v) for v in got if v is not None]
    return statistics.fmean(got) if got else None


def pair_numbers(seed: int, store: Store, args: argparse.Namespace) -> dict[str, float | None]:
    """The numbers one model pair (seeds ``seed``, ``seed + 1``) gives every finding."""
    a, b = (run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (seed, seed + 1))  # fmt: skip
    common = {"senders": CUTS, "receivers": CUTS, "max_train": args.max_train, "epochs": args.epochs,
              "seed": seed, **{k: v for k, v in preset_fields("hernandez").items() if k not in ("epochs", "objective")}}  # fmt: skip
    paper = run_experiment("matrix", MatrixSpec(a, b, controls=True, objective="task", **common), store).record.summary
    copy = run_experiment("matrix", MatrixSpec(a, b, objective="match", **common), store).record.summary
    controls = paper["controls"]
    return {
        "a": a, "b": b,
        "random_receiver_late": cells_mean(controls["random_receiver"], LATE),
        "random_receiver_early": cells_mean(controls["random_receiver"], EARLY),
        "random_both_late": cells_mean(controls["random_both"], LATE),
        "later_into_earlier": cells_mean(paper["values"], LATER_INTO_EARLIER),
        "earlier_into_later": cells_mean(paper["values"], EARLIER_INTO_LATER),
        "task_off_diagonal": cells_mean(paper["values"], OFF_DIAGONAL),
        "copy_off_diagonal": cells_mean(copy["values"], OFF_DIAGONAL),
        "cells": cells_mean(paper["values"], EVERY),
        "noise_sender": cells_mean(controls["noise_sender"], EVERY),
        "random_sender": cells_mean(controls["random_sender"], EVERY),
        "cells_late": cells_mean(paper["values"], LATE),
        "noise_sender_late": cells_mean(controls["noise_sender"], LATE),
        "chance": 1.0 / 10,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=model_seeds(3), help="model seeds: pair (S, S+1) each")
    ap.add_argument("--store", default=str(Path(__file__).resolve().parents[1] / ".findings" / "matrix"))
    ap.add_argument("--max-train", type=int, default=600, help="adapter training images per cell")
    ap.add_argument("--epochs", type=int, default=3, help="adapter epochs per cell (controls alike)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    store = Store(args.store)
    per = [pair_numbers(seed, store, args) for seed in args.seeds]

    def col(key: str) -> list[float]:
        return [p[key] for p in per]

    found = [
        finding("Late senders into a random receiver's late layers stitch well", PAPER, col("random_receiver_late"),
                "the same random receiver's conv blocks", col("random_receiver_early"), side="greater",
                bounds=ACCURACY, what="accuracy, fc1/fc2 into an untrained B's fc1/fc2 (trained stitches)",
                note="A stitch into an untrained receiver is weak evidence about the receiver (the paper's point)."),
        finding("A later sender into an earlier receiver stitches better than the reverse", PAPER,
                col("later_into_earlier"), "earlier into later (block1->block2, fc1->fc2)",
                col("earlier_into_later"), side="greater", bounds=ACCURACY,
                what="accuracy, block2->block1 and fc2->fc1"),
        finding("Copy-task stitches (MSE to B's activation) score below task-trained ones", PAPER,
                col("copy_off_diagonal"), "task-trained stitches, the same cells", col("task_off_diagonal"),
                side="less", bounds=ACCURACY, what="accuracy, off-diagonal cells"),
        finding("A's layers stitch better than class-clustered noise of their shape (noise sender)",
                "Functional Alignment Can Mislead, ICML 2025", col("cells"), "noise sender, same stitch and budget",
                col("noise_sender"), side="greater", bounds=ACCURACY, what="accuracy, every cell",
                note="Clustered noise carries the labels; a cell above it says something about A's layer."),
    ]
    details = {k: interval(col(k), ACCURACY) for k in per[0] if k not in ("a", "b")}
    print(json.dumps({"findings": found, "details": details, "pairs": [[p["a"], p["b"]] for p in per],
                      "cuts": CUTS, "seeds": args.seeds, "max_train": args.max_train, "epochs": args.epochs,
                      "seconds": round(time.perf_counter() - t0, 1)}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
