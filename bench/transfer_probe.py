"""A class probe and class directions carried through a fitted stitch (issue 43, the ``transfer`` kind), along depth.

    python bench/transfer_probe.py [--pairs 3] [--arch cnn] [--store DIR] > bench/transfer_probe_cpu_DATE.json
    python bench/transfer_probe.py --text [--pairs 2] [--store DIR] > bench/transfer_text_cpu_DATE.json

``--text``: the zoo's default GPT on pydoc, ``char`` at seed S into ``bpe:512`` at seed S (S = 0 .. pairs−1; no
model in two pairs), the probe of "inside a string literal" (balanced accuracy) at every position.

Trains (or reads back from ``--store``, default ``.findings/transfer``) the zoo's default ``--arch`` recipe on
digits at seeds 0 .. 2·pairs−1 and pairs them (0, 1), (2, 3), ...: no model in two pairs.  Each pair runs one
``transfer`` along depth (A's coarse cuts, B's at the same depth) through the store.  Per cut: the transferred,
native and random-adapter accuracies and the transferred / native ratio, and the steering shifts, each as the mean
and a Student t 95% interval over the pairs (``measures.intervals.across_seeds``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import new_spec, run_experiment
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.measures.intervals import across_seeds
from stitchcore.store.results import Store

SIDES = ("transferred", "native", "random_adapter")


def _mean_ci(values: list[float]) -> dict:
    """Mean and Student t 95% interval over the pairs (None under 3 pairs: across_seeds gives none)."""
    mean, lo, hi = across_seeds(values)
    ci = None if lo is None else [round(lo, 4), round(hi, 4)]
    return {"mean": round(mean, 4), "ci": ci, "values": [round(v, 4) for v in values]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--arch", default="cnn")
    ap.add_argument("--store", default=".findings/transfer")
    ap.add_argument("--text", action="store_true", help="char GPT into BPE GPT on pydoc (a token property)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    store, t0 = Store(args.store), time.perf_counter()
    if args.text:
        refs = [run_experiment("zoo", ZooRecipe.from_dict({"arch": "gpt", "dataset": "pydoc", "seed": s, "optimizer":
                                                           "adamw", "tokenizer": tok}), store).record.summary["ref"]
                for s in range(args.pairs) for tok in ("char", "bpe:512")]  # fmt: skip
    else:
        refs = [run_experiment("zoo", ZooRecipe(arch=args.arch, dataset="digits", seed=s), store).record.summary["ref"]
                for s in range(2 * args.pairs)]
    runs = [run_experiment("transfer", new_spec("transfer", {"a": refs[2 * k], "b": refs[2 * k + 1]}), store).record
            for k in range(args.pairs)]
    cuts = [(p["cut_a"], p["cut_b"]) for p in runs[0].summary["points"]]
    rows = []
    for n, (ca, cb) in enumerate(cuts):
        pts = [r.summary["points"][n] for r in runs]
        rows.append({"cut_a": ca, "cut_b": cb, **{side: _mean_ci([p[side] for p in pts]) for side in SIDES},
                     "ratio": _mean_ci([p["ratio"] for p in pts]),
                     **({"steering": {side: _mean_ci([p["steering"][side] for p in pts]) for side in SIDES}}
                        if "steering" in pts[0] else {}),
                     "carried_in": sum(p["verdict"].startswith("carried") for p in pts)})  # fmt: skip
    what = ("char GPT into BPE-512 GPT on pydoc: A's probe of 'inside a string literal' (balanced accuracy) carried "
            "through the closed-form token adapter" if args.text else f"zoo {args.arch} pairs on digits: A's class "
            "probe carried into B through the closed-form stitch adapter")  # fmt: skip
    print(json.dumps({"what": what + " (transferred), fitted on B (native), through a random-init adapter",
                      "device": "cpu", "torch": torch.__version__, "pairs": [[refs[2 * k], refs[2 * k + 1]]
                                                                             for k in range(args.pairs)],
                      "chance": runs[0].summary["chance"], "n_test": runs[0].summary["n_test"], "by_cut": rows,
                      "runs": [r.id for r in runs], "seconds": round(time.perf_counter() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
