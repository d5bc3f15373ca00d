"""Experiment ``similarity``: representational similarity of every cut pair, under one registered measure
(CKA, Procrustes, RSA, SVCCA, ridge R², k-NN Jaccard).

The representational companion of the stitching matrix (Bansal et al. compare
the two): the same images go through A (A's preprocessing) and B (B's), one
forward pass each per batch collects every cut, and the measure is computed for
all pairs, with a shuffled-input baseline because small-batch HSIC is biased.

Beside each value: its 95% interval, the permutation null (B's images shuffled against A's: no shared
structure) with the calibrated score, and the value against an untrained twin of B (``random_null``: what
B's architecture gives without training; measures rise with width and depth alone).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from stitchcore.cuts import Cut, get_cut, list_cuts
from stitchcore.data.images import SPLITS, ImageDataset
from stitchcore.errors import RefError, StitchError
from stitchcore.experiments._bounds import MAX_BATCH, MAX_DRAWS, check_count, check_image_caps
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import Spec, check_at_least, check_choice, check_seed
from stitchcore.experiments.dataset_check import pair_dataset
from stitchcore.experiments.estimate import (
    Estimate, EstimateContext, calibrated, estimate_from, full_forward, ms, timed, where,
)  # fmt: skip
from stitchcore.measures.cka import HALF_SAMPLES
from stitchcore.measures.similarity import (
    FULL_BATCH_HALVES, TOKEN_MODES, get_measure, list_measures, similarity_matrix,
)  # fmt: skip
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref, random_twin
from stitchcore.models.sources import load_model

__all__ = ["SimilaritySpec", "estimate_similarity", "random_null_words", "run_similarity"]


@dataclass(frozen=True)
class SimilaritySpec(DataFiles, Spec):
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
    random_null: bool = True  # also A against an untrained twin of B (B's architecture, random weights)
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES

    # runs stored before a null computed none; ERAS: the defaults of each release, newest first (lookups)
    # (data_id: None for built-in data, left out of the run id; never an era: a folder's runs name its files)
    LEGACY: ClassVar[dict[str, Any]] = {"null_permutations": 0, "random_null": False, "data_id": None}
    ERAS: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"random_null": False},
                                                  {"null_permutations": 0, "random_null": False})

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
        check_count("batch_size", self.batch_size, 4, MAX_BATCH, "debiased CKA needs batches of at least 4 examples")
        if self.max_samples is not None:
            check_at_least("max_samples", self.max_samples, 4, "debiased CKA needs at least 4 images;"
                           " leave it out to use the whole split")
            check_image_caps(self, ("max_samples",), least=4)
        check_seed("seed", self.seed)
        check_count("null_permutations", self.null_permutations, 0, MAX_DRAWS, "e.g. 20 (0: no null)",
                    "each permutation measures every cut pair again")
        object.__setattr__(self, "random_null", bool(self.random_null))
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

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
    passes = 1 + spec.baseline + spec.random_null  # the values, the shuffled baseline, the untrained twin
    batches = -(-n // spec.batch_size)
    # per batch and pair, in Gram products: the value, the null's K permutations and the interval's draws;
    # measured (bench/intervals_bench.py, digit CNNs): minibatch CKA ~1/50 a permutation and ~1/90 a
    # half-sample (permuted Grams, one product each); a full-batch measure recomputes the cell per draw
    if get_measure(spec.measure).minibatch:
        pair_work = 1 + spec.null_permutations / 50 + HALF_SAMPLES / 90
    else:
        pair_work = 1 + spec.null_permutations / 4 + FULL_BATCH_HALVES / 4
    seconds = u["setup"] + passes * n * u["full"] + batches * u["pairs"] * u["gram"] * (passes + pair_work)
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

    with_twin = spec.random_null
    share = 0.75 if with_twin else 1.0  # of the progress bar: the twin's pass is about a third of the work
    result = similarity_matrix(
        a.model, b.model, cuts[0], cuts[1], batches(a), batches(b), measure=spec.measure,
        token_mode=spec.token_mode, shuffle_baseline=spec.baseline, check_cancel=ctx.check_cancel,
        progress=lambda f, msg: ctx.progress(share * f, msg), seed=spec.seed, null_permutations=spec.null_permutations,
    )
    if with_twin:
        result["random_null"] = _against_untrained_b(spec, ctx, a, cuts, batches)
    return {**result, "dataset": ds.name, "split": spec.split}


def _against_untrained_b(spec: SimilaritySpec, ctx: RunContext, a: LoadedModel, cuts: list[list[Cut]],
                         batches) -> dict[str, Any]:  # fmt: skip
    """The measure of A against a random-init twin of B over the same images: ``{"ref", "values"}`` (grid
    [n_a][n_b]), or ``{"skipped": why}`` where B has no twin (hf:, file: refs).  A value that an untrained B
    reaches is what the architecture and the inputs give alone, not what B learned."""
    try:
        ref = random_twin(spec.b, spec.seed)
    except RefError as exc:
        return {"skipped": str(exc)}
    ctx.progress(0.75, f"against an untrained B ({ref})")
    twin = load_model(ref, store=ctx.store)
    twin.model.to(ctx.device).eval()
    twin_cuts = [get_cut(twin, c.name) for c in cuts[1]]
    got = similarity_matrix(
        a.model, twin.model, cuts[0], twin_cuts, batches(a), batches(twin), measure=spec.measure,
        token_mode=spec.token_mode, check_cancel=ctx.check_cancel, seed=spec.seed, intervals=False,
        progress=lambda f, msg: ctx.progress(0.75 + 0.25 * f, f"untrained B: {msg}"),
    )
    return {"ref": ref, "values": got["values"]}


def random_null_words(summary: dict[str, Any]) -> str:
    """What the untrained-B null of a similarity summary says, in one sentence ("" without one).

    >>> random_null_words({"senders": ["x", "y"], "receivers": ["u"], "measure": "cka-linear",
    ...                    "values": [[0.9], [0.7]], "random_null": {"values": [[0.88], [0.3]]}})
    'How much more similar trained B is than untrained B: +0.02 to +0.40 (largest at y × u); 1 of 2 cells within 0.05 of it (there the value is mostly architecture and inputs).'
    """
    twin = (summary.get("random_null") or {}).get("values")
    if not twin:
        return ""
    sign = -1.0 if summary.get("measure") == "procrustes" else 1.0  # a distance: lower = more similar
    cells = [(sign * (v - u), a, b) for a, row, trow in zip(summary["senders"], summary["values"], twin)
             for b, v, u in zip(summary["receivers"], row, trow) if v is not None and u is not None]
    if not cells:
        return ""
    gain, a, b = max(cells)
    close = sum(1 for d, *_ in cells if abs(d) <= 0.05)
    return (f"How much more similar trained B is than untrained B: {min(d for d, *_ in cells):+.2f} to {gain:+.2f} "
            f"(largest at {a} × {b}); {close} of {len(cells)} cells within 0.05 of it (there the value is mostly "
            "architecture and inputs).")
