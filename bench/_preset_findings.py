"""Traits presets over model seeds, read as findings (shared by ``bench/findings_traits.py`` and
``bench/findings_bansal.py``).

A preset at model seed ``k * SEED_STEP`` is ``experiments.preset_seeds.seeded_preset(name, k)``: its models
trained from that seed on and its adapters from seed k, exactly what the Traits page's "Model seeds" and the CLI's
``sweep --preset NAME --model-seeds N`` run, so the runs land in one store and are shared with them.  Each
finding reads one number per seed from the claim's sweep and the same number from the sweep that could break it
(the preset's ``baselines``: a random-init A, a plain A, B stitched into itself, a clean A), then
``_findings.finding`` gives the paired effect over the seeds and its verdict.

>>> at({"positions": ["block1", "fc2"], "stitched": {"accuracy": [0.9, 0.8]},
...     "reference": {"b": {"metrics": {"accuracy": 0.95}}}}, "penalty", -1)
0.15
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import run_experiment
from stitchcore.experiments.preset_seeds import SEED_STEP, seeded_preset
from stitchcore.experiments.sweep import penalty_along
from stitchcore.store.results import Store

__all__ = ["at", "check_title", "main", "mean_over", "preset_indexes", "run_seeds"]

Summary = dict[str, Any]


def preset_indexes(seeds: list[int]) -> list[int]:
    """The ``seeded_preset`` indexes of model seeds (multiples of ``SEED_STEP``: a preset's models take seed ..
    seed + 2 and its random bottoms seed + RANDOM_BOTTOM_SEED).

    >>> preset_indexes([0, 10, 20])
    [0, 1, 2]
    """
    bad = [s for s in seeds if s < 0 or s % SEED_STEP]
    if bad:
        raise SystemExit(f"preset model seeds are multiples of {SEED_STEP} (0, 10, 20, ...), got {bad}")
    return [s // SEED_STEP for s in seeds]


def run_seeds(name: str, store: Store, seeds: list[int], log: Callable[[str], None] | None = None,
              dataset: str | None = None) -> list[list[Summary]]:
    """[seed][sweep] summaries of preset ``name`` at model seeds ``seeds`` (multiples of ``SEED_STEP``; its models
    trained, cached in ``store``) on ``dataset`` (None: the preset's own; "mnist5k": a Bansal preset's 28x28
    scale, ``trait_presets.SCALES``)."""
    out = []
    for k in preset_indexes(seeds):
        t0 = time.perf_counter()
        preset = seeded_preset(name, k, dataset=dataset)
        for recipe in preset.recipes:
            run_experiment("zoo", recipe, store)
        out.append([run_experiment("sweep", s, store).record.summary for s in preset.sweeps])
        if log:
            log(f"{name} seed {k}: {time.perf_counter() - t0:.0f} s")
    return out


def check_title(name: str, index: int, words: str) -> None:
    """Fail loudly if sweep ``index`` of preset ``name`` is no longer the one a finding reads (at every scale)."""
    title = seeded_preset(name, 0).sweep_titles[index]
    if words not in title:
        raise SystemExit(f"preset {name!r} sweep [{index}] is {title!r}, not {words!r}: update the findings script")


def at(summary: Summary, what: str, position: int | str) -> float | None:
    """One number of a sweep ``summary`` at a cut (an index into its positions, or the cut's name): ``what`` is
    "penalty" (B's accuracy minus the stitched accuracy) or a metric the sweep reads (e.g. "confusion:3->8")."""
    positions = list(summary["positions"])
    i = positions.index(position) if isinstance(position, str) else position
    values = penalty_along(summary) if what == "penalty" else summary["stitched"][what]
    return values[i]


def mean_over(values: list[float | None]) -> float | None:
    """The mean of the values present (None: none)."""
    got = [float(v) for v in values if v is not None]
    return statistics.fmean(got) if got else None


def main(description: str, readers: dict[str, Callable[[list[list[Summary]]], list[dict]]],
         dataset: str | None = None) -> None:
    """The command line of a presets findings script: run ``readers``' presets at ``--seeds`` (on ``dataset``,
    :func:`run_seeds`) into ``--store`` and print ``{"findings", "model_seeds", "seconds"}`` (each finding tagged
    with its preset; on another dataset than digits its paper names the scale)."""
    from stitchcore.experiments.trait_presets import SCALES
    import argparse
    import json

    import torch

    from stitchcore.experiments.preset_seeds import model_seeds

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seeds", type=int, nargs="+", default=model_seeds(3),
                    help="model seeds, multiples of 10 (3 or more for an interval)")
    ap.add_argument("--presets", nargs="+", default=list(readers), choices=list(readers))
    ap.add_argument("--store", default=str(Path(__file__).resolve().parents[1] / ".findings" / "traits"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    store = Store(args.store)
    found, seconds = [], {}
    for name in args.presets:
        t0 = time.perf_counter()
        runs = run_seeds(name, store, args.seeds, log=lambda m: print(m, file=sys.stderr, flush=True), dataset=dataset)
        seconds[name] = round(time.perf_counter() - t0)
        scale = {} if dataset in (None, "digits") else {"dataset": dataset}
        found += [{**f, "preset": name, **scale, **({"paper": f"{f['paper']}, at {dataset}: {SCALES[dataset]}"}
                                                   if scale else {})} for f in readers[name](runs)]  # fmt: skip
    print(json.dumps({"findings": found, "model_seeds": args.seeds, "seconds": seconds,
                      "dataset": dataset or "digits"}, indent=1))
