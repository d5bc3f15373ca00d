"""The settings and verdict thresholds the findings use, chosen on validation data by stitchcore.measures.selection.

    STITCHLAB_JOB_THREADS=1 python bench/settings_chosen.py [--store DIR] > bench/settings_chosen.json

Nothing here sees a test image.  Every model is trained on ``digits|val300s0`` (the 1,047 train images left
after holding 300 out) and every number is read on those 300 held-out images, at validation model seeds
(VALIDATION_SEEDS: 30, 40, 50) that the findings (model seeds 0, 10, 20) never use.

* ``equivalence`` (``bench/findings_bansal.py``'s EQUIVALENCE, the margin of "no penalty" and "gains nothing"):
  connectivity's trained pairs (seed s+1 into seed s) at each validation seed, each stitched at adapter seeds
  0, 1, 2 (the Bansal presets' stitching layer and budget); the null effects are the penalty differences between
  two adapter seeds of one stitch, at every cut: zero by construction.  ``selection.noise_margin`` (95%, rounded
  up to 0.005).
* ``task_epochs`` (``trait_presets.TASK_EPOCHS``, the Oxford presets' stitch budget): the inheritance claim
  sweep (A calls 3s 8s, B plain, the stitch trained without 3s) at each validation seed, trained for 5, 10, 20
  and 30 epochs; its curve is "3 read as 8" at every cut, averaged over the seeds; ``selection.plateau`` with the
  tolerance a rate on the ~30 held-out 3s can resolve: the noise margin of the same curve's adapter-seed nulls.

Prints ``{"equivalence": Choice, "task_epochs": Choice, "seconds"}``; ``tests/test_selection.py`` checks that
the constants in the code are what these rules pick from the committed JSON.  About 5 minutes on one thread.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import run_experiment
from stitchcore.experiments.sweep import SweepSpec, penalty_along
from stitchcore.experiments.trait_presets import RELABEL_TO, STITCHING_LAYER, TRAIT_CLASS, get_preset, zoo_ref
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.measures.selection import noise_margin, plateau
from stitchcore.store.results import Store

VALIDATION = "digits|val300s0"  # 300 train images held out: every model and adapter here trains on the rest
VALIDATION_SEEDS = (30, 40, 50)  # model seeds the findings (0, 10, 20) never use
ADAPTER_SEEDS = (0, 1, 2)
EPOCH_CANDIDATES = (5, 10, 20, 30)
CONFUSION = f"confusion:{TRAIT_CLASS}->{RELABEL_TO}"


def _summary(store: Store, spec: SweepSpec, *recipes: ZooRecipe) -> dict:
    for r in recipes:
        run_experiment("zoo", r, store)
    return run_experiment("sweep", spec, store).record.summary


def _seed_nulls(curves: list[list[float]]) -> list[float]:
    """Differences between every two adapter seeds' curves, point by point (zero by construction)."""
    return [x - y for c1, c2 in itertools.combinations(curves, 2) for x, y in zip(c1, c2, strict=True)]


def equivalence(store: Store) -> dict:
    """The noise margin of a penalty: adapter-seed nulls of connectivity's pairs at the validation seeds."""
    template = get_preset("connectivity").sweeps[0]  # the Bansal stitching layer, task-trained, clean data
    nulls = []
    for seed in VALIDATION_SEEDS:
        a, b = ZooRecipe(arch="cnn", seed=seed + 1, dataset=VALIDATION), ZooRecipe(arch="cnn", seed=seed, dataset=VALIDATION)
        spec = replace(template, a=zoo_ref(a), b=zoo_ref(b), dataset=VALIDATION)
        nulls += _seed_nulls([penalty_along(_summary(store, replace(spec, seed=s), a, b)) for s in ADAPTER_SEEDS])
    return noise_margin(nulls, coverage=0.95, step=0.005).to_dict()


def task_epochs(store: Store) -> dict:
    """The Oxford stitch budget: where the inheritance curve levels off on the validation images."""
    template = get_preset("inheritance").sweeps[0]
    assert template.adapter == STITCHING_LAYER  # the report's linear stitch, least-squares start
    curves: dict[int, list[list[float]]] = {e: [] for e in EPOCH_CANDIDATES}
    nulls = []
    for seed in VALIDATION_SEEDS:
        a = ZooRecipe(arch="cnn", seed=seed + 1, dataset=VALIDATION, relabel=(TRAIT_CLASS, RELABEL_TO))
        b = ZooRecipe(arch="cnn", seed=seed, dataset=VALIDATION)
        spec = replace(template, a=zoo_ref(a), b=zoo_ref(b), dataset=VALIDATION, train_data=f"{VALIDATION}|drop{TRAIT_CLASS}",
                       metrics=("accuracy", CONFUSION), control=False, simplicity=False)  # fmt: skip
        for e in EPOCH_CANDIDATES:
            curves[e].append(_summary(store, replace(spec, epochs=e), a, b)["stitched"][CONFUSION])
        longest = max(EPOCH_CANDIDATES)
        nulls += _seed_nulls([_summary(store, replace(spec, epochs=longest, seed=s))["stitched"][CONFUSION]
                              for s in ADAPTER_SEEDS])  # fmt: skip
    tolerance = noise_margin(nulls, coverage=0.95, step=0.005)
    mean = {e: [round(statistics.fmean(c[i] for c in cs), 4) for i in range(len(cs[0]))] for e, cs in curves.items()}
    chosen = plateau(mean, tolerance.value).to_dict()
    chosen["evidence"].update(curves={str(e): c for e, c in mean.items()}, tolerance_from=tolerance.to_dict())
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=str(Path(__file__).resolve().parents[1] / ".findings" / "settings"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    store = Store(args.store)
    out, seconds = {}, {}
    for name, choose in (("equivalence", equivalence), ("task_epochs", task_epochs)):
        t0 = time.perf_counter()
        out[name] = choose(store)
        seconds[name] = round(time.perf_counter() - t0)
        print(f"{name}: {out[name]['value']} ({seconds[name]} s)", file=sys.stderr, flush=True)
    print(json.dumps({**out, "validation": VALIDATION, "validation_seeds": list(VALIDATION_SEEDS),
                      "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
