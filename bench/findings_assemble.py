"""Traft & Cheney's claims, measured by the ``assemble`` experiment over independently trained models (issue 39).

    STITCHLAB_JOB_THREADS=1 python bench/findings_assemble.py [--seeds 0 1 2] [--store DIR] > findings_assemble.json

An assembly, not a probe: the zoo ResNet (basic blocks 1,1,1,1, width 16) trained on digits resized to 32x32, one
model per MODEL seed (``zoo train --arch resnet --dataset digits --image-size 32 --seed S``, cached in ``--store``,
default ``.findings/assemble``), assembled from its own bottom and top (the paper's within-network case): sender
``layer1.0`` (16 x 32x32) into receiver ``layer3.0`` (64 x 8x8), a 4x gap (two 2x steps) whose rest in B is a
whole stage (``layer4``, 128 channels) before the pooling and the head, so "complex beats linear" compares networks
whose layers after the adapter still work, not probes on top of a pooled vector.  Every adapter kind x {bilinear,
strided} x {chained, one-shot}, and No Downsample, trained alike (AdamW lr 2e-3, wd 0.05, cosine, ``--epochs``, the
same images and steps for every cell: equal budgets); nothing is tuned, so no setting is chosen on the test images
(the digits test split, 450 images).  The adapter seed is the model seed: every seed is one independent replicate.

Prints one JSON object: ``cells`` (per recipe: the mean over model seeds and its Student t 95% interval,
``stitchcore.measures.intervals.across_seeds`` clipped to [0, 1], the per-seed values, the adapter's parameters and
the whole network's MACs: the recipes compared are not of one size), ``findings`` (``bench/_findings.py``: each
claim beside the baseline that could break it, the paired effect over model seeds and the computed verdict), and
``details`` (B alone per seed, No Downsample, ResNet-50's multiply-adds at 224 against the paper's Table 1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _findings import finding  # bench/ is the script's folder

from stitchcore.cuts import get_cut, split
from stitchcore.experiments import run_experiment
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.measures.intervals import across_seeds
from stitchcore.models.sources import load_model
from stitchcore.stitching.evaluate import module_flops
from stitchcore.store.results import Store

SEEDS = (0, 1, 2)
KINDS = ("linear", "linear_relu", "conv3x3_relu", "bottleneck")
COMPLEX = KINDS[1:]
SENDER, RECEIVER = "layer1.0", "layer3.0"  # 32x32 -> 8x8; B's layer4, pooling and head after the receiver
IMAGE_SIZE = 32
KEPT = "conv3x3_relu/both/bilinear/chained"  # the assembly the cost claim is tested on, fixed before measuring
MARGIN = 0.02  # "keeps the whole network's accuracy": within 2 points of B alone (chosen before measuring)
PAPER = "Traft & Cheney"
ACCURACY = (0.0, 1.0)


def recipe(seed: int, epochs: int | None) -> ZooRecipe:
    """The zoo ResNet on 32x32 digits at model ``seed`` (``epochs``: None = the recipe's default)."""
    return ZooRecipe(arch="resnet", dataset="digits", seed=seed, image_size=IMAGE_SIZE,
                     **({"epochs": epochs} if epochs else {}))  # fmt: skip


def over_seeds(values: list[float | None]) -> dict:
    """Mean over model seeds with its Student t 95% interval (clipped to [0, 1]; None under 3 seeds)."""
    got = [float(v) for v in values if v is not None]
    if not got:
        return {"mean": None, "ci": None, "n_seeds": 0}
    if len(got) == 1:
        return {"mean": round(got[0], 4), "ci": None, "n_seeds": 1, "values": [round(got[0], 4)]}
    mean, lo, hi = across_seeds(got, bounds=ACCURACY)
    return {"mean": round(mean, 4), "ci": None if lo is None else [round(lo, 4), round(hi, 4)],
            "n_seeds": len(got), "values": [round(v, 4) for v in got]}  # fmt: skip


def resnet50_macs() -> dict:
    from torchvision.models import resnet50

    torch.manual_seed(0)
    flops = module_flops(resnet50(weights=None).eval(), torch.zeros(1, 3, 224, 224))
    return {"paper_macs": 4.09e9, "project_macs": flops // 2, "project_flops": flops,
            "ratio": round(flops / 2 / 4.09e9, 4)}


def receiver_rest(store: Store, ref: str) -> dict:
    """What B keeps after the receiver cut: its MACs and convolutions (refuses a rest without any: a probe)."""
    model = load_model(ref, store=store)
    s_cut, r_cut = get_cut(model, SENDER), get_cut(model, RECEIVER)
    _, suffix = split(model, r_cut)
    convs = sum(isinstance(m, nn.Conv2d) for m in suffix.modules())
    if not convs:
        raise SystemExit(f"B's rest after {RECEIVER} has no convolution: that would compare probes, not assemblies")
    gap = s_cut.shape[-1] / r_cut.shape[-1]
    return {"sender_shape": list(s_cut.shape), "receiver_shape": list(r_cut.shape), "gap": f"{gap:g}x",
            "rest_convs": convs, "rest_macs": module_flops(suffix.eval(), torch.zeros(1, *r_cut.shape)) // 2,
            "whole_macs": module_flops(model.model.eval(), model.example_input(1)) // 2}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="model seeds (3 or more)")
    ap.add_argument("--store", default=str(Path(__file__).resolve().parents[1] / ".findings" / "assemble"))
    ap.add_argument("--epochs", type=int, default=10, help="adapter epochs, every cell alike")
    ap.add_argument("--zoo-epochs", type=int, default=None, help="ResNet training epochs (default: the recipe's)")
    ap.add_argument("--max-train", type=int, default=None, help="cap on adapter training images (a quick check)")
    ap.add_argument("--max-test", type=int, default=None, help="cap on test images (a quick check)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per: dict[str, list[float | None]] = {}  # recipe/rescale -> accuracy per model seed
    size: dict[str, dict] = {}  # recipe/rescale -> adapter params and network MACs (the same for every seed)
    base: list[float] = []
    seconds = {"models": 0.0, "assemble": 0.0}
    with Store(args.store) as store:
        refs = []
        for seed in args.seeds:
            t = time.perf_counter()
            refs.append(run_experiment("zoo", recipe(seed, args.zoo_epochs), store).record.summary["ref"])
            seconds["models"] += time.perf_counter() - t
        rest = receiver_rest(store, refs[0])
        for seed, ref in zip(args.seeds, refs, strict=True):
            t = time.perf_counter()
            for rescale, resamples in (("chained", ("bilinear", "strided", "no_downsample")),
                                       ("oneshot", ("bilinear", "strided"))):  # fmt: skip
                spec = AssembleSpec(ref, ref, senders=(SENDER,), receivers=(RECEIVER,), kinds=KINDS,
                                    resamples=resamples, rescale=rescale, epochs=args.epochs, seed=seed,
                                    max_train=args.max_train, max_test=args.max_test)  # fmt: skip
                summary = run_experiment("assemble", spec, store).record.summary
                for c in summary["cells"]:
                    name = f"{c['recipe']}/{rescale}" if c["resample"] != "no_downsample" else c["recipe"]
                    per.setdefault(name, []).append(c["accuracy"])
                    if c.get("macs") is not None:
                        size[name] = {"adapter_params": c["adapter_params"], "macs": c["macs"]}
            base.append(summary["base"]["b"]["accuracy"])
            seconds["assemble"] += time.perf_counter() - t
            print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    cells = {k: {**over_seeds(v), **size.get(k, {})} for k, v in sorted(per.items())}

    def acc(name: str) -> list[float]:
        return per[name]

    def kinds_mean(resample: str, rescale: str) -> list[float]:  # per seed: the mean over the four kinds
        return [statistics.fmean(per[f"{k}/both/{resample}/{rescale}"][i] for k in KINDS) for i in range(len(base))]

    def params(name: str) -> int | None:
        return size.get(name, {}).get("adapter_params")

    lin = "linear/both/bilinear/chained"
    found = [finding(
        "complex adapters beat a linear one between distant layers", PAPER, acc(f"{k}/both/bilinear/chained"),
        "the linear adapter, same pair, budget and rescaling", acc(lin), side="greater", bounds=ACCURACY,
        what=f"accuracy, {k} ({params(f'{k}/both/bilinear/chained')} params) vs linear ({params(lin)})",
        note=f"{SENDER} -> {RECEIVER}, {rest['gap']} chained bilinear; B's {rest['rest_convs']} convolutions after "
             "the receiver stay in the network.") for k in COMPLEX]  # fmt: skip
    found.append(finding(
        "bilinear (Downsample) is the best rescaling", PAPER, kinds_mean("bilinear", "chained"),
        "strided rescaling, same kinds and budget", kinds_mean("strided", "chained"), side="greater", bounds=ACCURACY,
        what="accuracy, mean of the four kinds, chained",
        note=f"Not of one size: the strided linear adapter has {params('linear/both/strided/chained')} parameters "
             f"against the bilinear one's {params(lin)} (a 2x2 patch convolution per step)."))  # fmt: skip
    found.append(finding(
        "several scale steps need one adapter per 2x step", PAPER, kinds_mean("bilinear", "chained"),
        "one adapter resizing by the whole ratio (one-shot)", kinds_mean("bilinear", "oneshot"), side="greater",
        bounds=ACCURACY, what=f"accuracy, mean of the four kinds, bilinear, {rest['gap']} gap"))
    kept_macs = size.get(KEPT, {}).get("macs")
    cheaper = kept_macs is not None and kept_macs < rest["whole_macs"]
    found.append(finding(
        f"an assembled network keeps the whole network's accuracy (within {MARGIN:.0%}) at a lower cost", PAPER,
        acc(KEPT), "B alone (the whole ResNet)", base, side="greater", margin=MARGIN, bounds=ACCURACY,
        what=f"accuracy, {KEPT} at {kept_macs} MACs vs the whole network's {rest['whole_macs']}",
        note=f"The assembly and the margin ({MARGIN:.0%}) fixed before measuring; "
             + ("it is the cheaper network." if cheaper else "it is NOT cheaper here, so the cost side fails.")))
    print(json.dumps({
        "setting": {"model": f"zoo resnet (blocks 1,1,1,1, width 16), digits at {IMAGE_SIZE}x{IMAGE_SIZE}",
                    "refs": refs, "sender": SENDER, "receiver": RECEIVER, **rest, "epochs": args.epochs,
                    "zoo_epochs": args.zoo_epochs, "seeds": args.seeds, "max_train": args.max_train,
                    "max_test": args.max_test, "chosen_on": "nothing tuned: the defaults (no test-set selection)",
                    "seconds": {k: round(v) for k, v in seconds.items()}},
        "cells": cells,
        "findings": found,
        "details": {"b_alone": over_seeds(base),
                    "no_downsample": {k: cells.get(f"{k}/both/no_downsample") for k in KINDS},
                    "macs": resnet50_macs()},
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
