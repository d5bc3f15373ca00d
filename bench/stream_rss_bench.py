"""Benchmark: peak memory of a stitch on a synthetic ImageFolder of 1,000 vs 8,000 images (64x64 PNGs, two
random-init timm ResNet-18s saved as files with a 64-pixel input, layer1 -> layer1, one epoch).

Each case runs in a fresh process (``--child``) that reports its own peak RSS (``ru_maxrss``) and its children's
(DataLoader workers).  Two activation budgets per size: the default (2048 MB: the prefix activations of the whole
train split are cached, as every stitch did before) and 1 MB (under the cache: each batch's activations are
computed when it is drawn, ``activations: streamed``).  ``cache_mb``: what the sender activations of both
splits take when cached (64 x 16 x 16 floats an image).  ``growth`` = peak RSS at 8,000 / at 1,000 - 1; the issue's
target for the streamed run is under 0.15.

Issue 42's cases: ``--px 224 --init lstsq --epochs 0 --budgets 64`` (a closed-form start at the models' own
resolution, a 64 MB budget; the folder given plain, which new specs read per batch at the models' own transform,
``--plain``).

Run: ``python bench/stream_rss_bench.py [--sizes 1000,8000] [--px 64] [--init random] [--epochs 1] [--budgets
2048,1] [--plain]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = {"cached": "2048", "streamed": "1"}


def make_folder(root: Path, n_train: int, n_test: int = 200, classes: int = 10, size: int = 64) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            c = i % classes
            d = root / split / f"c{c}"
            d.mkdir(parents=True, exist_ok=True)
            img = rng.normal(0, 30, (size, size, 3)) + np.array([(c * 37) % 256, (c * 91) % 256, (c * 53) % 256])
            Image.fromarray(np.clip(img, 0, 255).astype("uint8")).save(d / f"{i}.png")


def child(n: int, folder: str, work: str, px: int = 64, init: str = "random", epochs: int = 1,
          plain: bool = False) -> dict:  # fmt: skip
    """One stitch in this process; its peak RSS and its children's, in MB."""
    import torch

    sys.path.insert(0, str(ROOT))
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.models.sources import load_model
    from stitchcore.models.sources.checkpoint import save_checkpoint
    from stitchcore.stitching.adapters import AdapterSpec
    from stitchcore.store.results import Store

    torch.set_num_threads(2)
    refs = []
    for seed in (0, 1):
        path = Path(work) / f"r18-s{seed}.safetensors"
        if not path.exists():
            m = load_model(f"timm:resnet18?pretrained=false&num_classes=10&seed={seed}")
            save_checkpoint(m.model, path, arch=("timm:resnet18", {"num_classes": 10}))
        refs.append(f"file:{path}?size={px}")  # timm's transform at px: shorter side px / 0.95, centre px
    dataset = f"imagefolder:{folder}" if plain else f"imagefolder:{folder}?full&size={px}"
    spec = StitchSpec(refs[0], refs[1], "layer1", "layer1", adapter=AdapterSpec(init=init), epochs=epochs,
                      dataset=dataset)  # fmt: skip
    t0 = time.perf_counter()
    with Store(Path(work) / f"store-{n}-{os.environ['STITCHLAB_ACT_BUDGET_MB']}") as store:
        out = run_experiment("stitch", spec, store, device="cpu").record.summary
    per_image = 4 * math.prod(out["cut_a"]["shape"])  # float32 bytes of one image's sender activation
    return {"dataset": spec.dataset.replace(folder, "FOLDER"), "train_images": out["n_train"], "cache_mb": round(per_image * (out["n_train"] + out["n_test"]) / 2**20, 1), "seconds": round(time.perf_counter() - t0, 1),
            "activations": out.get("activations", "cached"), "accuracy": out["accuracy"],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "children_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,8000")
    parser.add_argument("--px", type=int, default=64, help="the images' side and the models' input size")
    parser.add_argument("--init", default="random", help="the adapter's start (lstsq: a closed-form fit)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--budgets", default=",".join(BUDGETS.values()), help="activation budgets, MB")
    parser.add_argument("--plain", action="store_true", help="give the folder plain (a new spec streams it)")
    parser.add_argument("--child", nargs=3, metavar=("N", "FOLDER", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    knobs = {"px": args.px, "init": args.init, "epochs": args.epochs, "plain": args.plain}
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], args.child[2], **knobs)))
        return
    budgets = {("cached" if int(b) >= 2048 else "streamed" if int(b) <= 1 else f"budget{b}"): b
               for b in args.budgets.split(",")}  # fmt: skip
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in sizes:
            folder = Path(work) / f"images-{n}"
            make_folder(folder, n, size=args.px)
            for mode, budget in budgets.items():
                env = dict(os.environ, STITCHLAB_ACT_BUDGET_MB=budget)
                flags = ["--px", str(args.px), "--init", args.init, "--epochs", str(args.epochs)] + (
                    ["--plain"] if args.plain else [])
                done = subprocess.run([sys.executable, __file__, "--child", str(n), str(folder), work, *flags],
                                      env=env, capture_output=True, text=True, check=True)  # fmt: skip
                rows.append({"mode": mode, "budget_mb": int(budget), **json.loads(done.stdout.strip().splitlines()[-1])})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    growth = {}
    for mode in budgets:
        peaks = [r["peak_rss_mb"] for r in rows if r["mode"] == mode]
        growth[mode] = round(peaks[-1] / peaks[0] - 1, 3) if len(peaks) > 1 else None
    print(json.dumps({"bench": "stream_rss", "sizes": sizes, **knobs, "cpus": os.cpu_count(), "runs": rows,
                      "growth": growth}, indent=1))


if __name__ == "__main__":
    main()
