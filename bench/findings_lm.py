"""The GPT-2 stitching report's claims, measured on char-GPTs of the default zoo recipe (issue 25, item 4).

Needs six char-GPTs in ``--store`` (about 3.5 min each on one thread; train them first, in the background):

    for o in adamw sgd; do for s in 0 1 2; do
      STITCHLAB_JOB_THREADS=1 python -m stitchcore zoo train --store /tmp/lm --arch gpt --dataset pydoc \\
          --seed $s --optimizer $o --threads 1 --quiet; done; done
    STITCHLAB_JOB_THREADS=1 python bench/findings_lm.py --store /tmp/lm > findings_lm.json

Seed pairs (0, 1), (0, 2), (1, 2) of each optimiser.  Every run goes through the store (``lmdepth`` runs), so a
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

from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec
from stitchcore.store.results import Store

PAIRS = ((0, 1), (0, 2), (1, 2))
STITCH_SPLITS = (0, 2, 4)  # stitch sweeps at the bottom, the middle and after the last block (CPU time: ~6
# converged stitches per pair); merges take every split
FREE = 0.05  # "almost for free": a merge penalty within 5% of the base loss (chosen before measuring)
LINEAR_R2 = 0.95  # "grows linearly": a straight line through the points explains >= 95% of their variance


def ref(seed: int, optimizer: str) -> str:
    """The default recipe's zoo name (SGD is the zoo's default optimiser, so it has no suffix)."""
    return f"zoo:gpt-pydoc-s{seed}" + ("-adamw" if optimizer == "adamw" else "")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--eval-windows", type=int, default=128)
    ap.add_argument("--stitch-optimizers", default="adamw", help="whose pairs get the stitch sweeps (costly)")
    ap.add_argument("--only", default=None, metavar="OPT:SA,SB:MODE",
                    help="run one sweep into the store and exit (e.g. adamw:0,1:stitch), to start while models train")
    args = ap.parse_args()
    torch.set_num_threads(1)
    store = Store(args.store)
    if args.only:
        opt, seeds, mode = args.only.split(":")
        sa, sb = (int(x) for x in seeds.split(","))
        if mode == "legacy":
            legacy(store, ref(sa, opt), ref(sb, opt), 4, args.eval_windows)
        else:
            depth(store, ref(sa, opt), ref(sb, opt), (mode,), args.eval_windows)
        return
    merges: dict[str, list[dict]] = {}
    stitches: dict[str, list[dict]] = {}
    legacy_at_l: dict[str, list[float]] = {}
    for opt in ("adamw", "sgd"):
        for sa, sb in PAIRS:
            a, b = ref(sa, opt), ref(sb, opt)
            merges.setdefault(opt, []).append(depth(store, a, b, ("merge",), args.eval_windows))
            if opt in args.stitch_optimizers.split(","):
                s = depth(store, a, b, ("stitch",), args.eval_windows)
                stitches.setdefault(opt, []).append(s)
                legacy_at_l.setdefault(opt, []).append(legacy(store, a, b, s["n_layer"]["a"], args.eval_windows))
    n_layer = merges["adamw"][0]["n_layer"]["a"]
    base = {opt: mean_spread([s["base"][r]["loss"] for s in runs for r in ("a", "b")]) for opt, runs in merges.items()}

    # Claim 1: keeping A's head makes stitching better (head-A stitches have a smaller penalty than head-B ones).
    inner = range(n_layer)  # splits 0 .. L-1: at L the head-A stitch is A itself (checked apart)
    below = [k for k in STITCH_SPLITS if k < n_layer]
    head_claim = {}
    for opt, runs in stitches.items():
        c = [curves(r["points"]) for r in runs]
        head_a = [statistics.fmean(x[("stitch", "a")][k] for k in below) for x in c]
        head_b = [statistics.fmean(x[("stitch", "b")][k] for k in below) for x in c]
        gap = [ha - hb for ha, hb in zip(head_a, head_b, strict=True)]
        gs = mean_spread(gap)
        verdict = ("agrees" if gs["mean"] > 2 * gs["spread"] / len(gap) ** 0.5 else
                   "disagrees" if gs["mean"] < -2 * gs["spread"] / len(gap) ** 0.5 else "within noise")
        head_claim[opt] = {
            f"head_a_mean_penalty_splits_{below}": mean_spread(head_a),
            f"head_b_mean_penalty_splits_{below}": mean_spread(head_b),
            "head_a_minus_head_b": gs,
            "by_split": {str(k): {"head_a": mean_spread([x[("stitch", "a")][k] for x in c]),
                                  "head_b": mean_spread([x[("stitch", "b")][k] for x in c])}
                         for k in STITCH_SPLITS},
            "verdict": verdict,
        }
    at_l = {opt: {"old_reading_lstsq_200_steps": mean_spread(legacy_at_l[opt]),
                  "now_converged_best_start": mean_spread([curves(r["points"])[("stitch", "a")][n_layer] for r in runs])}
            for opt, runs in stitches.items()}  # fmt: skip

    # Claim 2 (Fig. 5): SGD-trained seeds merge almost for free.  Merge with A's head and A's (tied) embeddings,
    # at least one block substituted (splits 0 .. L-1), averaged over splits.
    free = {}
    kept0 = range(1, n_layer)  # B's blocks from k >= 1: A's block 0 stays with A's embeddings
    for opt, runs in merges.items():
        c = [curves(r["points"])[("merge", "a")] for r in runs]
        free[opt] = {
            "mean_merge_penalty_head_a_splits_0_to_L-1": mean_spread([statistics.fmean(x[k] for k in inner) for x in c]),
            "mean_merge_penalty_head_a_splits_1_to_L-1": mean_spread([statistics.fmean(x[k] for k in kept0) for x in c]),
            "by_split": {str(k): mean_spread([x[k] for x in c]) for k in range(n_layer + 1)},
        }
    sgd = free["sgd"]["mean_merge_penalty_head_a_splits_1_to_L-1"]["mean"]
    adamw = free["adamw"]["mean_merge_penalty_head_a_splits_1_to_L-1"]["mean"]
    last = free["sgd"]["by_split"][str(n_layer - 1)]["mean"]
    free["verdict"] = ("agrees" if abs(sgd) <= FREE else "partly" if abs(last) <= FREE else "disagrees") + (
        f": block 0 kept, SGD {sgd:+.3f} vs AdamW {adamw:+.3f} averaged over splits 1..L-1; SGD with only the last "
        f"block substituted {last:+.3f} (free = within {FREE:.0%} of the base loss)")

    # Claim 3 (Fig. 3): the penalty grows linearly with the fraction of layers substituted.  Head A + A's
    # embeddings: split k substitutes B's blocks k .. L-1, fraction (L - k) / L; head B + B's embeddings: A's
    # blocks 0 .. k-1 into B, fraction k / L.  Fraction 0 is the base model itself (penalty 0).
    linear = {}
    for opt, runs in merges.items():
        per: dict[str, dict[str, list[float]]] = {"a": {"r2": [], "slope": []}, "b": {"r2": [], "slope": []}}
        for r in runs:
            c = curves(r["points"])
            for head in ("a", "b"):
                frac = {k: (n_layer - k) / n_layer if head == "a" else k / n_layer for k in range(n_layer + 1)}
                xs = [frac[k] for k in sorted(c[("merge", head)])]
                ys = [c[("merge", head)][k] for k in sorted(c[("merge", head)])]
                slope, r2 = linear_fit(xs, ys)
                per[head]["r2"].append(r2)
                per[head]["slope"].append(slope)
            ka = [k for k in sorted(c[("merge", "a")]) if k >= 1]  # head A, block 0 kept with its embeddings
            slope, r2 = linear_fit([(n_layer - k) / n_layer for k in ka], [c[("merge", "a")][k] for k in ka])
            per.setdefault("a_block0_kept", {"r2": [], "slope": []})
            per["a_block0_kept"]["r2"].append(r2)
            per["a_block0_kept"]["slope"].append(slope)
        linear[opt] = {f"head_{h}": {"r2": mean_spread(v["r2"]), "slope_per_fraction": mean_spread(v["slope"])}
                       for h, v in per.items()}  # fmt: skip
    r2s = [linear[o][f"head_{h}"]["r2"]["mean"] for o in linear for h in ("a", "b", "a_block0_kept")]
    linear["verdict"] = (("agrees" if min(r2s) >= LINEAR_R2 else "partly" if max(r2s) >= LINEAR_R2 else "disagrees")
                         + f": mean R² (AdamW, then SGD: head A, head B, head A with block 0 kept) {', '.join(f'{v:.3f}' for v in r2s)} "
                           f"(linear = R² >= {LINEAR_R2})")  # fmt: skip

    print(json.dumps({
        "setup": {"store": args.store, "pairs": PAIRS, "n_layer": n_layer, "eval_windows": args.eval_windows,
                  "base_loss": base, "penalty": "(L_base - L) / L_base, negative = worse (the report's sign)",
                  "stitch_training": "until converged on held-out train text (cap 2000 steps), start best of "
                                     "lstsq and identity; merges: embeddings tied to the head"},
        "claims": {
            "keeping_a_head_makes_stitching_better": {
                "paper": "head-preserving stitches (A's head kept) have a smaller loss penalty than B-head ones",
                "project": head_claim},
            "head_a_stitch_at_split_L": {
                "paper": "not stated; the identity gives A itself, penalty 0",
                "project": at_l},
            "sgd_seeds_merge_almost_for_free_fig5": {
                "paper": "SGD-trained seeds merge with almost no loss penalty (Fig. 5)", "project": free},
            "penalty_linear_in_fraction_substituted_fig3": {
                "paper": "the merge penalty grows linearly with the fraction of layers substituted (Fig. 3)",
                "project": linear},
        },
    }, indent=1))


if __name__ == "__main__":
    main()
