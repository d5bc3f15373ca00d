"""Benchmark: what intervals and the similarity null add to a run's time (the issue's targets: at most 1.5x for a
run, 1.1x for a closed-form matrix).

- ``similarity``: ``similarity_matrix`` over two digit CNNs' every cut and the whole test split (450 images),
  with neither intervals nor null, then with both (95% interval per cell, a null of 20 permutations), for the
  streamed minibatch CKA and a full-batch measure (SVCCA); same process, same features.
- ``stitch`` and ``matrix``: a run end to end, and the seconds spent inside the interval functions (every call
  of ``mean_ci`` / ``paired_difference_ci`` timed); ``ratio`` = run / (run - intervals).

Run: ``python bench/intervals_bench.py``; prints one JSON object.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.cuts import get_cut, list_cuts  # noqa: E402
from stitchcore.data.images import load_dataset  # noqa: E402
from stitchcore.experiments import run_experiment  # noqa: E402
from stitchcore.experiments.matrix.spec import MatrixSpec  # noqa: E402
from stitchcore.experiments.stitch import StitchSpec  # noqa: E402
from stitchcore.experiments.zoo import ZooRecipe  # noqa: E402
from stitchcore.measures import intervals  # noqa: E402
from stitchcore.measures.similarity import similarity_matrix  # noqa: E402
from stitchcore.models.sources import load_model  # noqa: E402
from stitchcore.store.results import Store  # noqa: E402


def similarity_case(a, b, measure: str, cuts: tuple[str, ...] | None = None, images: torch.Tensor | None = None
                    ) -> dict:  # fmt: skip
    """``images`` [N, C, H, W] in [0, 1] (default: the digits test split); ``cuts`` (default: every cut)."""
    ds = load_dataset("digits")
    cuts_a, cuts_b = ((list_cuts(a), list_cuts(b)) if cuts is None else
                      ([get_cut(a, c) for c in cuts], [get_cut(b, c) for c in cuts]))  # fmt: skip
    xs = [x for x, _ in ds.batches("test", 256)] if images is None else list(images.split(256))

    def batches(m):
        return [m.preprocess(x) if m.preprocess else x for x in xs]

    def once(**kw) -> float:
        t0 = time.perf_counter()
        similarity_matrix(a.model, b.model, cuts_a, cuts_b, batches(a), batches(b), measure=measure, **kw)
        return time.perf_counter() - t0

    once(intervals=False)  # warm
    plain = min(once(intervals=False) for _ in range(2))
    ci = min(once(intervals=True) for _ in range(2))
    null = min(once(intervals=False, null_permutations=20) for _ in range(2))
    full = min(once(intervals=True, null_permutations=20) for _ in range(2))
    return {"measure": measure, "model": getattr(a, "ref", "?"), "cells": len(cuts_a) * len(cuts_b),
            "images": sum(len(x) for x in xs), "plain_s": round(plain, 3), "with_intervals_s": round(ci, 3),
            "with_null_s": round(null, 3), "with_intervals_and_null_s": round(full, 3),
            "intervals_ratio": round(ci / plain, 2), "null_ratio": round(null / plain, 2),
            "ratio": round(full / plain, 2)}


def hub_case() -> dict:
    """A ResNet-18 pair (timm, random weights: no download) on 256 images of 64 x 64, four stage cuts: where the
    forward passes, not the Grams, take the time."""
    a = load_model("timm:resnet18?pretrained=false&num_classes=10")
    b = load_model("timm:resnet18?pretrained=false&num_classes=10&seed=1")
    images = torch.rand(256, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    return similarity_case(a, b, "cka-linear", cuts=("layer1", "layer2", "layer3", "layer4"), images=images)


def timed_run(kind: str, spec, store) -> dict:
    spent = [0.0]
    originals = {name: getattr(intervals, name) for name in ("mean_ci", "paired_difference_ci")}

    def timing(fn):
        def wrapped(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
        return wrapped

    import stitchcore.experiments.matrix.units as units
    import stitchcore.experiments.stitch as stitch

    patched = [(mod, name) for mod in (units, stitch) for name in originals if hasattr(mod, name)]
    for mod, name in patched:
        setattr(mod, name, timing(originals[name]))
    try:
        t0 = time.perf_counter()
        run_experiment(kind, spec, store, rerun=True)
        total = time.perf_counter() - t0
    finally:
        for mod, name in patched:
            setattr(mod, name, originals[name])
    return {"kind": kind, "run_s": round(total, 3), "intervals_s": round(spent[0], 4),
            "ratio": round(total / (total - spent[0]), 3)}


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "store") as store:
        refs = [run_experiment("zoo", ZooRecipe(seed=s), store).record.summary["ref"] for s in (0, 1)]
        a, b = load_model(refs[0], store=store), load_model(refs[1], store=store)
        out = {
            "bench": "intervals", "torch": torch.__version__, "threads": 1,
            "similarity": [similarity_case(a, b, "cka-linear"), similarity_case(a, b, "svcca"),
                           hub_case()],
            "runs": [timed_run("stitch", StitchSpec(refs[0], refs[1], "block2", "block2", epochs=5), store),
                     timed_run("matrix", MatrixSpec(refs[0], refs[1]), store)],
        }  # fmt: skip
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
