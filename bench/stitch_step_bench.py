"""Benchmark: a whole stitch run against the plain PyTorch loop a user would write for it, in one process.

Same models, cut, adapter (a random-init linear adapter with BatchNorm both sides), data, batch, epochs,
optimiser (AdamW lr 1e-2, wd 0.05) and torch threads (1).  Two cases: the bundled digit CNNs (block2 ->
block2, native 8x8), and two random-init timm ``test_resnet`` (layer1.0 -> layer1.0) on digits through timm's
own preprocessing (centre 160x160 crop of 182, so the prefix dominates).

- ``ours_s``: ``run_experiment("stitch", ...)`` end to end: A's prefix once per image (its activations cached),
  adapter training through B's suffix, a test evaluation after every epoch (the page's curve), A's and B's own
  accuracy at the end.
- ``plain_s``: the loop a user writes: every step, A's prefix under ``no_grad``, adapter, B's suffix, loss,
  backward, step; one test evaluation at the end.  No A/B scoring, no per-epoch curve.
- ``plain_same_outputs_s``: that loop plus what the run reports beside the stitched accuracy: a test evaluation
  after every epoch, and A's and B's own accuracy.
- ``ratio`` = plain_same_outputs_s / ours_s (> 1: ours is faster; the issue's floor is 0.9),
  ``ratio_to_bare_loop`` = plain_s / ours_s, and ``images_per_s`` of each (training images x epochs / seconds).

Both stitched models are scored on the same test images; their accuracies are printed beside the times (the
same recipe, so they should be close, not equal: the plain loop draws its batches its own way).
Run: ``python bench/stitch_step_bench.py [--epochs 5] [--cases digits,test_resnet,resnet50] [--threads 1]``;
prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.cuts import get_cut, split  # noqa: E402
from stitchcore.data.images import load_dataset  # noqa: E402
from stitchcore.experiments import run_experiment  # noqa: E402
from stitchcore.experiments.stitch import StitchSpec  # noqa: E402
from stitchcore.experiments.zoo import ZooRecipe  # noqa: E402
from stitchcore.models.sources import load_model  # noqa: E402
from stitchcore.stitching.adapters import AdapterSpec, build_adapter  # noqa: E402
from stitchcore.store.results import Store  # noqa: E402

ADAPTER = AdapterSpec(init="random")
LR, WD, BATCH = 1e-2, 0.05, 64


def plain_loop(a_ref: str, b_ref: str, cut: str, store: Store, epochs: int, n_train: int, n_test: int,
               same_outputs: bool = False) -> dict:  # fmt: skip
    """The hand-written stitch: prefix each step (no cache), AdamW, one evaluation at the end; ``same_outputs``:
    also a test evaluation after every epoch and A's and B's own accuracy (what the run reports)."""
    t0 = time.perf_counter()
    a, b = load_model(a_ref, store=store), load_model(b_ref, store=store)
    ds = load_dataset("digits")
    cut_a, cut_b = get_cut(a, cut), get_cut(b, cut)  # a stage name ("layer2") resolves as the run resolves it
    prefix_a, _ = split(a, cut_a)
    _, suffix_b = split(b, cut_b)
    torch.manual_seed(0)
    adapter = build_adapter(ADAPTER, cut_a, cut_b)
    opt = torch.optim.AdamW(adapter.parameters(), lr=LR, weight_decay=WD)
    def accuracy(model) -> float:
        adapter.eval()
        right = total = 0
        with torch.no_grad():
            for x, y in ds.batches("test", 256, limit=n_test):
                right += int((model(x).argmax(1) == y).sum())
                total += len(y)
        return right / total

    def stitched(x: torch.Tensor) -> torch.Tensor:
        return suffix_b(adapter(prefix_a(a.preprocess(x))))

    for epoch in range(epochs):
        adapter.train()
        for x, y in ds.batches("train", BATCH, shuffle=True, seed=epoch, limit=n_train):
            with torch.no_grad():
                h = prefix_a(a.preprocess(x))
            loss = torch.nn.functional.cross_entropy(suffix_b(adapter(h)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if same_outputs and epoch < epochs - 1:
            accuracy(stitched)
    score = accuracy(stitched)
    if same_outputs:
        accuracy(lambda x: a.model(a.preprocess(x)))
        accuracy(lambda x: b.model(b.preprocess(x)))
    return {"seconds": time.perf_counter() - t0, "accuracy": score}


def one_case(name: str, a_ref: str, b_ref: str, cut: str, store: Store, epochs: int, n_train: int,
             n_test: int) -> dict:  # fmt: skip
    spec = StitchSpec(a_ref, b_ref, cut, cut, adapter=ADAPTER, lr=LR, weight_decay=WD, epochs=epochs,
                      batch_size=BATCH, max_train=n_train, max_test=n_test, dataset="digits")  # fmt: skip
    run_experiment("stitch", spec, store)  # warm: imports, model loads, first-call overheads, both paths
    plain_loop(a_ref, b_ref, cut, store, 1, BATCH, 256)
    t0 = time.perf_counter()
    ours = run_experiment("stitch", spec, store, rerun=True).record.summary
    ours_s = time.perf_counter() - t0
    bare = plain_loop(a_ref, b_ref, cut, store, epochs, n_train, n_test)
    same = plain_loop(a_ref, b_ref, cut, store, epochs, n_train, n_test, same_outputs=True)
    images = epochs * n_train
    return {"case": name, "cut": cut, "epochs": epochs, "train_images": n_train, "test_images": n_test,
            "ours_s": round(ours_s, 2), "plain_s": round(bare["seconds"], 2),
            "plain_same_outputs_s": round(same["seconds"], 2),
            "ratio": round(same["seconds"] / ours_s, 2), "ratio_to_bare_loop": round(bare["seconds"] / ours_s, 2),
            "images_per_s": {"ours": round(images / ours_s, 1), "plain": round(images / bare["seconds"], 1)},
            "accuracy": {"ours": ours["accuracy"], "plain": round(bare["accuracy"], 4)}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--cases", default="digits,test_resnet",
                        help="of: digits, test_resnet, resnet50 (two timm ResNet-50s at 224, layer2, 128 images)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    chosen = set(args.cases.split(","))
    torch.set_num_threads(args.threads)
    cases = []
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "store") as store:
        if "digits" in chosen:
            refs = [run_experiment("zoo", ZooRecipe(seed=s), store).record.summary["ref"] for s in (0, 1)]
            cases.append(one_case("digit CNNs", refs[0], refs[1], "block2", store, args.epochs, 1024, 512))
        if "test_resnet" in chosen:
            hub = "timm:test_resnet?num_classes=10&pretrained=false"
            cases.append(one_case("timm test_resnet at 160", hub, hub + "&seed=1", "layer1.0", store, args.epochs,
                                  256, 256))  # fmt: skip
        if "resnet50" in chosen:
            big = "timm:resnet50?num_classes=10&pretrained=false"
            cases.append(one_case("timm ResNet-50s at 224", big, big + "&seed=1", "layer2", store, args.epochs, 128,
                                  128))  # fmt: skip
    print(json.dumps({"bench": "stitch_step", "torch": torch.__version__, "threads": args.threads,
                      "machine": platform.machine(), "cases": cases}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
