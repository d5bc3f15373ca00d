"""Experiment ``similarity``: representational similarity of every cut pair, under one registered measure
(CKA, Procrustes, RSA, SVCCA, ridge R², k-NN Jaccard).

The representational companion of the stitching matrix (Bansal et al. compare
the two): the same images go through A (A's preprocessing) and B (B's), one
forward pass each per batch collects every cut, and the measure is computed for
all pairs, with a shuffled-input baseline because small-batch HSIC is biased.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from stitchcore.cuts import Cut, get_cut, list_cuts
from stitchcore.data.images import SPLITS, ImageDataset
from stitchcore.errors import StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import Spec, check_at_least, check_choice
from stitchcore.experiments.dataset_check import pair_dataset
from stitchcore.experiments.estimate import (
    Estimate, EstimateContext, calibrated, estimate_from, full_forward, ms, timed, where,
)  # fmt: skip
from stitchcore.measures.similarity import TOKEN_MODES, list_measures, similarity_matrix
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref
from stitchcore.models.sources import load_model

__all__ = ["SimilaritySpec", "estimate_similarity", "run_similarity"]


@dataclass(frozen=True)
class SimilaritySpec(Spec):
    """Every cut of A against every cut of B under one measure, on one image set."""

    a: str  # ModelRef of A (rows)
    b: str  # ModelRef of B (columns)
    senders: tuple[str, ...] | None = None  # A's cuts; None = every cut
    receivers: tuple[str, ...] | None = None  # B's cuts; None = every cut
    measure: str = "cka-linear"  # a registered measure: cka-linear (debiased minibatch), cka-rbf, procrustes, rsa, ...
    token_mode: str = "mean"  # token layouts: mean-pooled per example, or "tokens" as samples
    dataset: str | None = None  # None: the dataset B was trained on
    split: str = "test"  # images compared (held-out by default)
    max_samples: int | None = None  # cap on images; None = the whole split
    batch_size: int = 256  # minibatch for debiased CKA (at least 4)
    baseline: bool = True  # also the shuffled-input baseline
    seed: int = 0  # baseline shuffle
    null_permutations: int = 20  # K: the measure with B's images permuted K times (the null; 0: none)

    LEGACY: ClassVar[dict[str, Any]] = {"null_permutations": 0}  # runs stored before the null computed none

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        for role in ("senders", "receivers"):
            if getattr(self, role) is not None:
                object.__setattr__(self, role, tuple(getattr(self, role)))
        if self.measure not in list_measures():
            raise StitchError(f"unknown measure {self.measure!r}; use one of {', '.join(list_measures())}")
        check_choice("token_mode", self.token_mode, TOKEN_MODES)
        check_choice("split", self.split, SPLITS)
        check_at_least("batch_size", self.batch_size, 4, "debiased CKA needs batches of at least 4 examples")
        if self.max_samples is not None:
            check_at_least("max_samples", self.max_samples, 4, "debiased CKA needs at least 4 images;"
                           " leave it out to use the whole split")
        check_at_least("seed", self.seed, 0)
        check_at_least("null_permutations", self.null_permutations, 0, "e.g. 20 (0: no null)")

    def label(self) -> str:
        return f"{self.measure} {self.a} x {self.b}"


def _inputs(spec: SimilaritySpec, store: Any) -> tuple[LoadedModel, LoadedModel, ImageDataset, list[list[Cut]]]:
    """A, B, the data and [A's cuts, B's cuts]; CutError naming the close names for a bad one."""
    a = load_model(spec.a, store=store)
    b = load_model(spec.b, store=store)
    ds = pair_dataset(spec, a, b)
    cuts = []
    for m, names in ((a, spec.senders), (b, spec.receivers)):
        all_cuts = list_cuts(m)
        cuts.append([get_cut(m, n) for n in names] if names else all_cuts)
    return a, b, ds, cuts


def check_similarity(spec: SimilaritySpec, store: Any) -> None:
    """Models, data and cut names, before anything is stored."""
    _inputs(spec, store)


# ---------------------------------------------------------------------------- estimate


def estimate_similarity(spec: SimilaritySpec, ectx: EstimateContext) -> Estimate:
    """Both models once over the images (every cut recorded), then the measure for every cut pair."""
    def units() -> dict:
        t0 = time.perf_counter()
        a, b = ectx.load(spec.a), ectx.load(spec.b)
        ds = pair_dataset(spec, a, b)
        n_a = len(list_cuts(a) if spec.senders is None else spec.senders)
        n_b = len(list_cuts(b) if spec.receivers is None else spec.receivers)
        x = torch.randn(spec.batch_size, 512, dtype=torch.float64)
        (x @ x.T) @ (x @ x.T)  # warm-up: the first product also allocates and picks kernels
        gram = timed(lambda: (x @ x.T) @ (x @ x.T))  # about one pair's work per batch
        return {"setup": time.perf_counter() - t0, "full": full_forward(a, ds, ectx.device) + full_forward(b, ds, ectx.device),
                "pairs": n_a * n_b, "gram": gram, "n": len(ds.labels(spec.split))}  # fmt: skip

    key = ("similarity", spec.a, spec.b, repr(spec.senders), repr(spec.receivers), spec.dataset, spec.split,
           spec.batch_size, ectx.model_key(spec.a), ectx.model_key(spec.b), where(ectx.device))
    u = calibrated(key, units)
    n = int(u["n"] if spec.max_samples is None else min(spec.max_samples, u["n"]))
    passes = 2 if spec.baseline else 1
    batches = -(-n // spec.batch_size)
    seconds = u["setup"] + passes * (n * u["full"] + batches * u["pairs"] * u["gram"])
    return estimate_from(seconds, f"calibrated: both models = {ms(u['full'] * 1000)} per 1,000 images; "
                              f"{int(u['pairs'])} cut pairs")


@register_experiment("similarity", SimilaritySpec.from_dict, check=check_similarity, estimate=estimate_similarity)
def run_similarity(spec: SimilaritySpec, ctx: RunContext) -> dict:
    ctx.progress(0.0, "loading models")
    a, b, ds, cuts = _inputs(spec, ctx.store)
    for m in (a, b):
        m.model.to(ctx.device).eval()

    def batches(model):
        for x, _ in ds.model_batches(spec.split, spec.batch_size, model.preprocess, ctx.device, limit=spec.max_samples):
            yield x

    result = similarity_matrix(
        a.model, b.model, cuts[0], cuts[1], batches(a), batches(b), measure=spec.measure,
        token_mode=spec.token_mode, shuffle_baseline=spec.baseline, check_cancel=ctx.check_cancel,
        progress=lambda f, msg: ctx.progress(f, msg), seed=spec.seed, null_permutations=spec.null_permutations,
    )
    return {**result, "dataset": ds.name, "split": spec.split}
