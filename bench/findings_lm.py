"""The GPT-2 stitching report's claims, measured on char-GPTs of the default zoo recipe (issue 25, item 4).

    STITCHLAB_JOB_THREADS=1 python bench/findings_lm.py [--seeds 0 1 2 3 4 5] [--store DIR] > findings_lm.json

Trains the char-GPTs it needs into ``--store`` (default ``.findings/lm``; about 3.5 min each on one thread, cached
there: ``zoo train --arch gpt --dataset pydoc --seed S --optimizer O`` makes the same models), one per seed and
optimiser, and pairs consecutive seeds, (0, 1), (2, 3), (4, 5): three model pairs that share no model, so the
intervals are over independent pairs (a Student t 95% interval over three pairs; ``bench/_findings.py``).  Every run goes through the store (``lmdepth`` runs), so a
second call reads them back.  Penalties are the report's ``(L_base - L) / L_base`` (negative = worse than the
base, the model whose head is used), on the validation windows; nothing here is chosen on them (the adapters'
start and stop are chosen on held-out train text, see stitchcore.lm.train).  Prints one JSON object: per claim
the report's statement (its figures' numbers are not in this repository: ``paper`` quotes the claim), the
project's mean and spread (sample standard deviation) over the seed pairs, and the verdict by the rule written
beside it.
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

from _findings import finding  # bench/ is the script's folder

from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec
from stitchcore.experiments.trait_presets import zoo_ref
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store

SEEDS = (0, 1, 2, 3, 4, 5)  # pairs (0, 1), (2, 3), (4, 5): no model in two pairs
STITCH_SPLITS = (0, 2, 4)  # stitch sweeps at the bottom, the middle and after the last block (CPU time: ~6
# converged stitches per pair); merges take every split
FREE = 0.05  # "almost for free": a merge penalty within 5% of the base loss (chosen before measuring)
LINEAR_R2 = 0.95  # "grows linearly": a straight line through the points explains >= 95% of their variance


def recipe(seed: int, optimizer: str) -> ZooRecipe:
    """The zoo's default char-GPT recipe on pydoc at ``seed`` (the CLI's ``zoo train --arch gpt``)."""
    return ZooRecipe(arch="gpt", dataset="pydoc", seed=seed, optimizer=optimizer)


def ref(seed: int, optimizer: str) -> str:
    """The ``zoo:`` ref of :func:`recipe` once trained."""
    return zoo_ref(recipe(seed, optimizer))


def mean_spread(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 4),
            "spread": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "n": len(values),
            "values": [round(v, 4) for v in values]}  # fmt: skip


def curves(points: list[dict]) -> dict[tuple[str, str], dict[int, float]]:
    out: dict[tuple[str, str], dict[int, float]] = {}
    for p in points:
        out.setdefault((p["mode"], p["head"]), {})[p["split"]] = p["loss_penalty"]
    return out


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Slope and R² of the least-squares line through (xs, ys)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    total = sum((y - my) ** 2 for y in ys)
    return slope, 1 - resid / total if total > 0 else 1.0


def depth(store: Store, a: str, b: str, modes: tuple[str, ...], windows: int, **train) -> dict:
    splits = STITCH_SPLITS if modes == ("stitch",) else None
    spec = DepthSpec(a=a, b=b, modes=modes, heads=("a", "b"), eval_windows=windows, sample_tokens=0, splits=splits,
                     **train)
    t0 = time.perf_counter()
    out = run_experiment("lmdepth", spec, store)
    print(f"{a} / {b} {modes}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out.record.summary


def legacy(store: Store, a: str, b: str, n_layer: int, windows: int) -> float:
    """The old reading of a head-A stitch after A's last block: lstsq start, 200 fixed steps."""
    old = LMStitchSpec(a=a, b=b, cut_a=n_layer, head="a", until="steps", start="init", steps=200,
                       eval_windows=windows, sample_tokens=0)
    return run_experiment("lmstitch", old, store).record.summary["loss_penalty"]


def pairs_of(seeds: list[int]) -> list[tuple[int, int]]:
    """Consecutive seeds as model pairs that share no model.

    >>> pairs_of([0, 1, 2, 3, 4, 5])
    [(0, 1), (2, 3), (4, 5)]
    """
    if len(seeds) < 2 or len(seeds) % 2 or len(set(seeds)) != len(seeds):
        raise SystemExit(f"--seeds takes an even number of distinct seeds (pairs share no model), got {seeds}")
    return [(seeds[i], seeds[i + 1]) for i in range(0, len(seeds), 2)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="model seeds, paired consecutively")
    ap.add_argument("--store", default=str(Path(__file__).resolve().parents[1] / ".findings" / "lm"))
    ap.add_argument("--eval-windows", type=int, default=128)
    ap.add_argument("--stitch-optimizers", default="adamw", help="whose pairs get the stitch sweeps (costly)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    store = Store(args.store)
    pairs = pairs_of(args.seeds)
    t0 = time.perf_counter()
    for opt in ("adamw", "sgd"):
        for s in args.seeds:
            run_experiment("zoo", recipe(s, opt), store)
    print(f"models ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    merges: dict[str, list[dict]] = {}
    stitches: dict[str, list[dict]] = {}
    legacy_at_l: dict[str, list[float]] = {}
    for opt in ("adamw", "sgd"):
        for sa, sb in pairs:
            a, b = ref(sa, opt), ref(sb, opt)
            merges.setdefault(opt, []).append(depth(store, a, b, ("merge",), args.eval_windows))
            if opt in args.stitch_optimizers.split(","):
                s = depth(store, a, b, ("stitch",), args.eval_windows)
                stitches.setdefault(opt, []).append(s)
                legacy_at_l.setdefault(opt, []).append(legacy(store, a, b, s["n_layer"]["a"], args.eval_windows))
    n_layer = merges["adamw"][0]["n_layer"]["a"]
    base = {opt: mean_spread([s["base"][r]["loss"] for s in runs for r in ("a", "b")]) for opt, runs in merges.items()}
    paper = "GPT-2 stitching report"
    loss_words = (f"base validation loss AdamW {base['adamw']['mean']:.2f}, SGD {base['sgd']['mean']:.2f} nats/char "
                  "(not matched: SGD models are weaker)")  # fmt: skip
    found = []

    # Claim 1: keeping A's head makes stitching better (head-A stitches have a smaller penalty than head-B ones).
    below = [k for k in STITCH_SPLITS if k < n_layer]
    for opt, runs in stitches.items():
        c = [curves(r["points"]) for r in runs]
        found.append(finding(
            "keeping A's head makes stitching better", paper,
            [statistics.fmean(x[("stitch", "a")][k] for k in below) for x in c], "the same stitch into B's head",
            [statistics.fmean(x[("stitch", "b")][k] for k in below) for x in c], side="greater",
            what=f"{opt}: head-A loss penalty, mean over splits {below}",
            note="Penalties (L_base - L) / L_base, negative = worse."))
    # Claim 2 (Fig. 5): SGD-trained seeds merge almost for free.  Merge with A's head and A's (tied) embeddings,
    # B's blocks from split k >= 1 (A's block 0 stays with its embeddings), averaged over those splits.
    kept0 = range(1, n_layer)
    merge_cost = {opt: [statistics.fmean(curves(r["points"])[("merge", "a")][k] for k in kept0) for r in runs]
                  for opt, runs in merges.items()}  # fmt: skip
    found.append(finding(
        "SGD seeds merge almost for free (Fig. 5)", paper, merge_cost["sgd"], "no merge (the base model, 0)",
        [0.0] * len(pairs), side="greater", margin=FREE, what=f"SGD merge penalty, splits 1..{n_layer - 1}",
        note=f"Free = within {FREE:.0%} of the base loss (chosen before measuring); {loss_words}."))
    found.append(finding(
        "SGD seeds merge more cheaply than AdamW seeds (Fig. 5's direction)", paper, merge_cost["sgd"],
        "AdamW pairs, same splits", merge_cost["adamw"], side="greater",
        what=f"SGD merge penalty, splits 1..{n_layer - 1}", note=loss_words + "; pair i of each optimiser paired."))
    # Claim 3 (Fig. 3): the penalty grows linearly with the fraction of layers substituted (head A, block 0 kept).
    for opt, runs in merges.items():
        r2 = []
        for r in runs:
            c = curves(r["points"])[("merge", "a")]
            ka = [k for k in sorted(c) if k >= 1]
            r2.append(linear_fit([(n_layer - k) / n_layer for k in ka], [c[k] for k in ka])[1])
        found.append(finding(
            "the merge penalty grows linearly with the fraction substituted (Fig. 3)", paper, r2,
            f"the linearity threshold R² {LINEAR_R2}", [LINEAR_R2] * len(r2), side="greater", bounds=(0.0, 1.0),
            what=f"{opt}: R² of a line, head A, block 0 kept",
            note="With block 0 substituted too the line fails (see details.linear)."))

    details = {"merge_penalty_by_split": {opt: {str(k): mean_spread([curves(r["points"])[("merge", "a")][k]
                                                                   for r in runs]) for k in range(n_layer + 1)}
                                          for opt, runs in merges.items()},
               "stitch_at_split_L": {opt: {"old_reading_lstsq_200_steps": mean_spread(legacy_at_l[opt]),
                                           "now": mean_spread([curves(r["points"])[("stitch", "a")][n_layer]
                                                               for r in runs])} for opt, runs in stitches.items()}}
    print(json.dumps({
        "setup": {"store": args.store, "pairs": pairs, "n_layer": n_layer, "eval_windows": args.eval_windows,
                  "base_loss": base, "penalty": "(L_base - L) / L_base, negative = worse (the report's sign)",
                  "stitch_training": "until converged on held-out train text (cap 2000 steps), start best of "
                                     "lstsq and identity; merges: embeddings tied to the head",
                  "seconds": round(time.perf_counter() - t0)},
        "findings": found, "details": details,
    }, indent=1))


if __name__ == "__main__":
    main()
