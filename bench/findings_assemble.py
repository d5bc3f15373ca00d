"""Findings of the ``assemble`` experiment beside Traft & Cheney's claims (issue 25), as JSON on stdout.

    STITCHLAB_JOB_THREADS=1 python bench/findings_assemble.py --store /tmp/asm_store --seeds 0 1 2 > out.json

A setting where rescaling matters: the zoo ResNet (basic blocks, width 16) trained on digits resized to
32x32, so its ``layer1.0`` sends a 16-channel 32x32 map; its ``layer4.0`` receives a 128-channel 4x4 map:
an 8x gap (three 2x steps).  A = B (the network assembled from its own bottom and top, the paper's
within-network case).  Every adapter kind x {bilinear, strided} x {chained, one-shot}, plus No Downsample,
trained with the defaults (AdamW lr 2e-3, wd 0.05, cosine, 10 epochs); nothing is tuned, so no setting is
chosen on the test images (the digits test split, 450 images).  Also: ResNet-50's multiply-adds at 224
against the paper's Table 1 (4.09e9).
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
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.models.sources import load_model
from stitchcore.stitching.evaluate import module_flops
from stitchcore.store.results import Store

KINDS = ("linear", "linear_relu", "conv3x3_relu", "bottleneck")
SENDER, RECEIVER = "layer1.0", "layer4.0"


def _stats(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "sd": None, "n": 0}
    return {"mean": round(statistics.fmean(xs), 4), "sd": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0,
            "n": len(xs), "values": [round(x, 4) for x in xs]}


def resnet50_macs() -> dict:
    from torchvision.models import resnet50

    torch.manual_seed(0)
    flops = module_flops(resnet50(weights=None).eval(), torch.zeros(1, 3, 224, 224))
    return {"paper_macs": 4.09e9, "project_macs": flops // 2, "project_flops": flops,
            "ratio": round(flops / 2 / 4.09e9, 4)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--store", default="/tmp/asm_store")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    out: dict = {"setting": {"model": "zoo resnet, digits at 32x32", "sender": SENDER, "receiver": RECEIVER,
                             "gap": "32x32 -> 4x4 (8x)", "epochs": args.epochs, "seeds": args.seeds,
                             "chosen_on": "nothing tuned: the defaults (no test-set selection)"}}
    out["macs"] = resnet50_macs()
    cells: dict[str, list[float]] = {}
    flops: dict[str, int] = {}
    with Store(args.store) as store:
        zoo = run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=0, image_size=32), store)
        ref = zoo.record.summary["ref"]
        model = load_model(ref, store=store)
        out["setting"]["ref"], out["setting"]["base_accuracy"] = ref, zoo.record.summary["accuracy"]
        out["setting"]["base_macs"] = module_flops(model.model, model.example_input(1)) // 2
        for seed in args.seeds:
            for rescale, resamples in (("chained", ("bilinear", "strided", "no_downsample")),
                                       ("oneshot", ("bilinear", "strided"))):  # fmt: skip
                spec = AssembleSpec(ref, ref, senders=(SENDER,), receivers=(RECEIVER,), kinds=KINDS,
                                    resamples=resamples, rescale=rescale, epochs=args.epochs, seed=seed)  # fmt: skip
                summary = run_experiment("assemble", spec, store).record.summary
                for c in summary["cells"]:
                    name = f"{c['recipe']}/{rescale}" if c["resample"] != "no_downsample" else c["recipe"]
                    cells.setdefault(name, []).append(c["accuracy"])
                    if c.get("macs") is not None:
                        flops[name] = c["macs"]
    out["cells"] = {k: {**_stats(v), "macs": flops.get(k)} for k, v in sorted(cells.items())}

    def mean(name: str) -> float | None:
        return out["cells"].get(name, {}).get("mean")

    def kinds_mean(resample: str, rescale: str) -> float:
        return round(statistics.fmean(mean(f"{k}/both/{resample}/{rescale}") for k in KINDS), 4)

    out["findings"] = {
        "bilinear_vs_strided_chained": {
            "paper": "bilinear (Downsample) rescaling is the best", "bilinear": kinds_mean("bilinear", "chained"),
            "strided": kinds_mean("strided", "chained")},
        "bilinear_vs_strided_oneshot": {"bilinear": kinds_mean("bilinear", "oneshot"),
                                        "strided": kinds_mean("strided", "oneshot")},
        "chained_vs_oneshot": {k: {"chained": mean(f"{k}/both/bilinear/chained"),
                                   "oneshot": mean(f"{k}/both/bilinear/oneshot")} for k in KINDS},
        "no_downsample": {k: {"accuracy": mean(f"{k}/both/no_downsample"), "macs": flops.get(f"{k}/both/no_downsample"),
                              "bilinear_chained_macs": flops.get(f"{k}/both/bilinear/chained")} for k in KINDS},
        "complex_vs_linear": {k: mean(f"{k}/both/bilinear/chained") for k in KINDS},
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
