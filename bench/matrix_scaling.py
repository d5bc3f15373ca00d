"""Benchmark: closed-form matrices from shared moments, their proxy and cut recommender, scaling and memory.

- ``shared_moments``: the closed-form 32 x 32 matrix of the two deep zoo ResNets below, end to end
  (``run_experiment``) with the shared-moment fits (``units.SHARED_MOMENTS = True``, the default) and with
  the previous per-cell path (``False``: ``fit_adapter`` cell by cell), same process, same store: seconds,
  ``speedup_vs_per_cell`` and the largest difference in any cell's accuracy and residual.  Then the fits
  alone on the same cached activations: every cell by ``fit_adapter``, by :class:`SharedFits` (with and
  without the proxy's held-out moments), and by a per-pair ``torch.linalg.lstsq`` on the cell's whole
  [N*H*W, C+1] data matrix, as Patchscopes-style scripts do it (``speedup_vs_per_pair_lstsq``; its residuals
  differ from the ridge fits' by the ridge alone).  ``end_to_end_floor``: what no fit can remove, the
  matrix's scoring passes (every cell's 450 test images through B's suffix, timed cell by cell).  Since issue 42
  the cells into one receiver can be scored in one pass of its suffix per test batch (``units.SHARED_SCORING``, on
  by default on a GPU): ``end_to_end_s`` gives the three paths (per cell; shared fits alone, a CPU's default;
  shared fits and scoring) and ``shared_scoring_speedup`` what the shared scoring adds on this device.
- ``proxy``: the same 32 x 32 matrix in mode ``proxy`` (moments only): its seconds as a share of the
  closed-form matrix's.
- ``recommender``: zoo pairs; each ranking of every cut pair that needs no stitch (the proxy matrix's held-out
  R² and CKA, the closed-form matrix's accuracy, a KLAS-style probe KL: a logistic probe at every cut, the
  symmetric KL of two cuts' predictions on held-out training images, and the relative-depth baseline) against
  the trained matrix of the Hernandez et al. recipe (random init, strided, 3 epochs): Spearman's rho per pair
  and whether a best trained cell is in the top 5.  The default ranking is chosen on five selection pairs
  (digits, seeds 0/1: CNN x CNN, ResNet x ResNet, CNN x ResNet, ResNet x CNN, MLP x MLP) and reported on twelve
  held-out ones (the same architectures at seeds 2/3; the zoo ViT and Swin; mnist5k): ``spearman`` with its
  95% bootstrap interval over the held-out pairs, beside ``baseline_spearman`` (relative depth) and their
  paired ``difference``.

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
[--sizes 4 8 16 32] [--no-memory] [--parts shared_moments proxy recommender scaling memory]``.
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

from stitchcore.cuts import get_cut, list_cuts, split  # noqa: E402
from stitchcore.experiments import run_experiment  # noqa: E402
from stitchcore.experiments.dataset_check import pair_dataset  # noqa: E402
from stitchcore.experiments.matrix import MatrixSpec, preset_fields  # noqa: E402
from stitchcore.experiments.matrix import units as matrix_units  # noqa: E402
from stitchcore.experiments.matrix.recommend import agreement, recommend  # noqa: E402
from stitchcore.experiments.zoo import ZooRecipe  # noqa: E402
from stitchcore.models.sources import load_model  # noqa: E402
from stitchcore.stitching.activations import collect_cuts  # noqa: E402
from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility  # noqa: E402
from stitchcore.stitching.fits import fit_adapter, lin_rows  # noqa: E402
from stitchcore.stitching.layers import to_rows  # noqa: E402
from stitchcore.stitching.shared_fits import SharedFits  # noqa: E402
from stitchcore.store.results import Store  # noqa: E402

BIG = "timm:resnet50?pretrained=false&num_classes=10"  # A; B adds in_chans=3 (the same net, its own random init)
STAGES = ("layer1", "layer2", "layer3", "layer4")
BUDGET_MB = 1024
PARTS = ("shared_moments", "proxy", "recommender", "scaling", "memory")


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


def _max_diff(a: list[list], b: list[list]) -> float:
    return max((abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb) if x is not None and y is not None),
               default=0.0)  # fmt: skip


def _matrix(spec: MatrixSpec, store: Store) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = run_experiment("matrix", spec, store, rerun=True)
    return time.perf_counter() - t0, out.record.summary


def _fits_alone(ref_a: str, ref_b: str, cuts: tuple[str, ...], store: Store) -> dict:
    """Every cell's fit on the same cached training activations, four ways; seconds and agreement."""
    a, b = load_model(ref_a, store=store), load_model(ref_b, store=store)
    ds = pair_dataset(MatrixSpec(ref_a, ref_b), a, b)
    senders, receivers = [get_cut(a, c) for c in cuts], [get_cut(b, c) for c in cuts]
    cpu = torch.device("cpu")
    xa = collect_cuts(a, senders, ds, "train", device=cpu)
    yb = collect_cuts(b, receivers, ds, "train", device=cpu)
    n = len(ds.labels("train"))
    spec = AdapterSpec(init="lstsq")

    def built() -> list:
        torch.manual_seed(0)
        return [build_adapter(spec, s, r) for s in senders for r in receivers if compatibility(s, r, spec) is None]

    per_cell = built()
    t0 = time.perf_counter()
    res_cell = [fit_adapter(ad, ((xa[ad.sender.name][i : i + 256], yb[ad.receiver.name][i : i + 256])
                                 for i in range(0, n, 256))) for ad in per_cell]  # fmt: skip
    t_cell = time.perf_counter() - t0
    out = {"cells": len(per_cell), "images": n, "per_cell_s": round(t_cell, 2)}
    for hold in (0, matrix_units.HOLD_EVERY):
        shared = built()
        t0 = time.perf_counter()
        fits = SharedFits(shared, "lstsq", hold_every=hold, budget=2**30)
        for i in range(0, n, 256):
            fits.update({k: v[i : i + 256] for k, v in xa.items()}, {k: v[i : i + 256] for k, v in yb.items()}, first=i)
        records = fits.records()
        out["shared_s" if not hold else "shared_with_proxy_s"] = round(time.perf_counter() - t0, 2)
        if not hold:
            out["factors"], out["stacked_products_a_batch"] = fits.n_groups, fits.n_buckets
            out["max_abs_diff_residual_vs_per_cell"] = max(abs(r["residual"] - c) for r, c in zip(records, res_cell))
            mid = senders[len(senders) // 2].name  # one sender's adapters into every receiver, on 64 images
            h, diffs = xa[mid][:64].float(), []
            for mine, theirs in zip(shared, per_cell):
                if mine.sender.name == mid:
                    with torch.no_grad():
                        diffs.append(float((mine.eval()(h) - theirs.eval()(h)).abs().max()))
            out["max_abs_diff_output_vs_per_cell"] = max(diffs)
            shared_residuals = [r["residual"] for r in records]
    for dtype, name in ((torch.float32, "per_pair_lstsq"), (torch.float64, "per_pair_lstsq_float64")):
        t0 = time.perf_counter()
        res_lstsq = []
        for ad in built():  # the per-pair way: the cell's whole data matrix, one torch.linalg.lstsq each
            with torch.no_grad():
                x = lin_rows(ad, xa[ad.sender.name]).to(dtype)  # [N*H*W, C_in]
                y = to_rows(ad.targets(yb[ad.receiver.name])).to(dtype)  # [N*H*W, C_out]
            x1 = torch.cat([x, torch.ones(len(x), 1, dtype=dtype)], dim=1)
            w = torch.linalg.lstsq(x1, y).solution  # [C_in + 1, C_out]; default driver and rcond
            res_lstsq.append(float(((x1 @ w - y) ** 2).sum() / (y**2).sum()))
        out[f"{name}_s"] = round(time.perf_counter() - t0, 2)
        # float32 (the activations' dtype, as scripts call it): its default rcond (eps * rows) drops directions
        out[f"max_abs_diff_residual_vs_{name.removeprefix('per_pair_')}"] = max(
            abs(r - s) for r, s in zip(res_lstsq, shared_residuals))
    out["speedup_vs_per_cell"] = round(out["per_cell_s"] / out["shared_s"], 1)
    out["speedup_vs_per_pair_lstsq"] = round(out["per_pair_lstsq_s"] / out["shared_s"], 1)
    return out


def _scoring_floor(ref_b: str, cuts: tuple[str, ...], n_test: int, store: Store) -> float:
    """Seconds of B's suffix from each receiver over ``n_test`` images, once per sender: what scoring costs."""
    b = load_model(ref_b, store=store)
    total = 0.0
    for name in cuts:
        r = get_cut(b, name)
        suffix = split(b, r)[1].eval()
        x = torch.randn(min(n_test, 256), *r.shape)
        with torch.no_grad():
            suffix(x[:4])
            t0 = time.perf_counter()
            for _ in range(-(-n_test // 256)):
                suffix(x)
            total += (time.perf_counter() - t0) * len(cuts)
    return round(total, 2)


def shared_moments(store: Store, n: int) -> tuple[dict, dict]:
    """The ``shared_moments`` and ``proxy`` parts (see the module doc)."""
    ref_a, ref_b = deep_zoo(store)
    cuts = spread([c.name for c in list_cuts(load_model(ref_a, store=store))], n)
    spec = MatrixSpec(ref_a, ref_b, senders=cuts, receivers=cuts)
    _matrix(MatrixSpec(ref_a, ref_b, senders=cuts[:4], receivers=cuts[:4]), store)  # warm-up: loads, imports
    runs = {}
    paths = {"per_cell": (False, False), "shared_fits": (True, False), "shared": (True, True)}
    for name, (fits_shared, scoring_shared) in paths.items():  # the previous paths first: no warmer machine after
        matrix_units.SHARED_MOMENTS, matrix_units.SHARED_SCORING = fits_shared, scoring_shared
        log(f"closed-form {n} x {n}, {name}")
        runs[name] = _matrix(spec, store)
    matrix_units.SHARED_MOMENTS, matrix_units.SHARED_SCORING = True, None
    (t_new, s_new), (t_old, s_old), (t_fits, s_fits) = runs["shared"], runs["per_cell"], runs["shared_fits"]
    default = "shared" if torch.cuda.is_available() else "shared_fits"  # units.SHARED_SCORING's default here
    t_default = runs[default][0]
    log(f"proxy {n} x {n}")
    t_proxy, _ = _matrix(MatrixSpec(ref_a, ref_b, senders=cuts, receivers=cuts, mode="proxy"), store)
    log("fits alone: per cell, shared, per-pair lstsq")
    fits = _fits_alone(ref_a, ref_b, cuts, store)
    out = {
        "cuts": n, "cells": s_new["n_cells"],
        # shared: shared-moment fits and each receiver's cells scored in one suffix pass a test batch; shared_fits:
        # the fits alone shared (issue 29's path); per_cell: neither
        "end_to_end_s": {"shared": round(t_new, 2), "shared_fits": round(t_fits, 2), "per_cell": round(t_old, 2)},
        "default_path": default,
        "end_to_end_speedup": round(t_old / t_default, 2),  # per cell against this device's default path
        "shared_scoring_speedup": round(t_fits / t_new, 2),
        "end_to_end_floor_scoring_s": _scoring_floor(ref_b, cuts, s_new["n_test"], store),
        "max_abs_diff": {"accuracy": _max_diff(s_new["values"], s_old["values"]),
                         "accuracy_shared_scoring": _max_diff(s_new["values"], s_fits["values"]),
                         "residual": _max_diff(s_new["residual"], s_old["residual"]),
                         "fit_output": fits["max_abs_diff_output_vs_per_cell"]},
        "fits": fits,
        "speedup_vs_per_cell": fits["speedup_vs_per_cell"],
        "speedup_vs_per_pair_lstsq": fits["speedup_vs_per_pair_lstsq"],
    }  # fmt: skip
    proxy = {"seconds": round(t_proxy, 2), "closed_form_s": round(t_default, 2), "share": round(t_proxy / t_default, 3)}
    return out, proxy


# (A's architecture, B's architecture, dataset, A's seed; B's is the next): the pairs the default ranking is chosen
# on, and the held-out ones it is reported on: other seeds of the same architectures, architectures never used
# for choosing (the zoo ViT and Swin), and another dataset (mnist5k: 28x28 MNIST, three conv blocks)
SELECTION_PAIRS = (("cnn", "cnn", "digits", 0), ("resnet", "resnet", "digits", 0), ("cnn", "resnet", "digits", 0),
                   ("resnet", "cnn", "digits", 0), ("mlp", "mlp", "digits", 0))
HELDOUT_PAIRS = (("cnn", "cnn", "digits", 2), ("resnet", "resnet", "digits", 2), ("cnn", "resnet", "digits", 2),
                 ("resnet", "cnn", "digits", 2), ("mlp", "mlp", "digits", 2),
                 ("vit", "vit", "digits", 0), ("swin", "swin", "digits", 0), ("vit", "cnn", "digits", 0),
                 ("cnn", "vit", "digits", 0),
                 ("cnn", "cnn", "mnist5k", 0), ("mlp", "mlp", "mnist5k", 0), ("cnn", "mlp", "mnist5k", 0))
CANDIDATES = ("r2", "cka", "accuracy", "probe_kl", "depth")  # depth: the baseline every other must clear
def _pair_scores(arch_a: str, arch_b: str, dataset: str, seed: int, store: Store) -> dict:
    """One pair's rankings against its trained matrix (the Hernandez et al. recipe): Spearman and best-in-top-5."""
    from stitchcore.experiments.zoo_recipe import recipe_for

    refs = [run_experiment("zoo", recipe_for(arch, dataset, seed=s), store).record.summary["ref"]
            for arch, s in ((arch_a, seed), (arch_b, seed + 1))]  # fmt: skip
    log(f"recommender: {refs[0]} x {refs[1]}")
    t_proxy, proxy = _matrix(MatrixSpec(*refs, mode="proxy"), store)
    _, closed = _matrix(MatrixSpec(*refs), store)
    t_trained, trained = _matrix(MatrixSpec(*refs, **preset_fields("hernandez")), store)
    senders, receivers = trained["senders"], trained["receivers"]
    row = {"a": refs[0], "b": refs[1], "dataset": dataset,
           "cells": sum(v is not None for r in trained["values"] for v in r),
           "proxy_s": round(t_proxy, 2), "trained_s": round(t_trained, 2)}  # fmt: skip
    for by in CANDIDATES:  # each ranking as the library gives it, from the proxy matrix (accuracy: closed form's)
        row[by] = agreement(recommend(closed if by == "accuracy" else proxy, by=by), trained["values"], senders,
                            receivers)  # fmt: skip
    return row


def _mean_ci(values: list[float], seed: int = 0) -> tuple[float, list[float]]:
    """The mean over pairs and its 95% percentile-bootstrap interval (pairs resampled)."""
    from stitchcore.measures.intervals import bootstrap_mean_ci

    t = torch.tensor(values, dtype=torch.float64)
    return round(float(t.mean()), 3), [round(v, 3) for v in bootstrap_mean_ci(t, seed=seed)]


def recommender(store: Store) -> dict:
    """The ``recommender`` part (see the module doc): the ranking with the best mean Spearman on the selection
    pairs is the default; its Spearman on the held-out pairs, with a 95% interval over them, beside the
    relative-depth baseline's and their paired difference."""
    selection = [_pair_scores(*p, store) for p in SELECTION_PAIRS]
    heldout = [_pair_scores(*p, store) for p in HELDOUT_PAIRS]

    def rho(rows: list[dict], by: str) -> list[float]:  # a pair whose ranking is constant counts as 0
        return [r[by]["spearman"] or 0.0 for r in rows]

    chosen = max((by for by in CANDIDATES if by != "depth"), key=lambda by: sum(rho(selection, by)))
    mean, ci = _mean_ci(rho(heldout, chosen))
    base, base_ci = _mean_ci(rho(heldout, "depth"))
    diff, diff_ci = _mean_ci([x - y for x, y in zip(rho(heldout, chosen), rho(heldout, "depth"))])

    def table(rows: list[dict]) -> dict:
        return {by: {"spearman": _mean_ci(rho(rows, by))[0], "spearman_ci": _mean_ci(rho(rows, by))[1],
                     "best_in_top5": round(sum(bool(r[by]["best_in_top"]) for r in rows) / len(rows), 3)}
                for by in CANDIDATES}  # fmt: skip

    return {"trained_recipe": "hernandez", "chosen_on": "selection pairs (mean Spearman)", "ranked_by": chosen,
            "spearman": mean, "spearman_ci": ci,
            "best_in_top5": round(sum(bool(r[chosen]["best_in_top"]) for r in heldout) / len(heldout), 3),
            "baseline": "depth", "baseline_spearman": base, "baseline_spearman_ci": base_ci,
            "difference": diff, "difference_ci": diff_ci,
            "heldout_pairs": len(heldout), "selection_pairs": len(selection),
            "selection": table(selection), "heldout": table(heldout),
            "pairs": {"selection": selection, "heldout": heldout}}  # fmt: skip


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
    streamed = "budget; streaming" in done.stderr  # run.py's log line
    return {"completed": got["status"] == "done", "streamed": streamed, "budget_mb": BUDGET_MB, **got,
            "limit_mb": round(limit, 1), "under_limit": got["peak_rss_mb"] < limit}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="zoo models and runs are cached there; default a temp dir")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--no-memory", action="store_true", help="skip the resnet50 memory run")
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--shared-cuts", type=int, default=32, help="the shared-moments and proxy matrices' n x n")
    ap.add_argument("--json", action="store_true", help="print the JSON object alone (the default; progress on stderr)")
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
    store = Store(root)
    if "shared_moments" in args.parts or "proxy" in args.parts:
        result["shared_moments"], result["proxy"] = shared_moments(store, args.shared_cuts)
    if "recommender" in args.parts:
        result["recommender"] = recommender(store)
    if "scaling" in args.parts:
        result["scaling"] = scaling(store, args.sizes)
    if "memory" in args.parts and not args.no_memory:
        result["memory"] = memory(root)
    print(json.dumps(result, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
