"""Experiment ``similarity``: representational similarity of every cut pair, under one registered measure
(CKA, Procrustes, RSA, SVCCA, ridge R², k-NN Jaccard).

The representational companion of the stitching matrix (Bansal et al. compare
the two): the same images go through A (A's preprocessing) and B (B's), one
forward pass each per batch collects every cut, and the measure is computed for
all pairs, with a shuffled-input baseline because small-batch HSIC is biased.

Beside each value: its 95% interval over the images; the *dependence test (shuffled images)*: the measure with
B's images permuted against A's, and the value in units of that spread (stored as ``null`` and ``calibrated``).
It tests only that A and B see the same images: any two networks fed the same images pass it, an untrained B
included (130-200 sds on digit CNNs), so it says nothing about what B learned.  The null that does: the same
measure against ``random_null_seeds`` random-init networks of B's architecture (``random_null``), per cell
their mean, a 95% interval where one more random B falls, and the trained value in their standard deviations
(:mod:`stitchcore.measures.random_null`): what B's training adds beyond its architecture and the inputs.
"""

from __future__ import annotations

import logging
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
from stitchcore.experiments._spec import Spec, check_at_least, check_choice, check_seed, field_label
from stitchcore.experiments.dataset_check import pair_dataset
from stitchcore.experiments.estimate import (
    Estimate, EstimateContext, calibrated, estimate_from, full_forward, ms, timed, where,
)  # fmt: skip
from stitchcore.measures.cka import HALF_SAMPLES
from stitchcore.measures.random_null import beyond, random_null_cells
from stitchcore.measures.similarity import (
    FULL_BATCH_HALVES, TOKEN_MODES, get_measure, list_measures, similarity_matrix,
)  # fmt: skip
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import MAX_SEED, parse_ref, random_twin
from stitchcore.models.sources import load_model

__all__ = ["DEPENDENCE_TEST", "MAX_TWINS", "MIN_NULL_SEEDS", "SimilaritySpec", "dependence_words",
           "estimate_similarity", "random_null_map", "random_null_words", "run_similarity", "similarity_map_words"]

log = logging.getLogger(__name__)

DEPENDENCE_TEST = "dependence test (shuffled images)"  # the permutation null's name wherever it is shown
MAX_TWINS = 100  # random-init Bs of the null: each is one more pass over the images
# the fewest random-init Bs a null with an interval takes (issue 39): with 5 the 95% range of one more random B is
# ±3.04 of their sds, with 3 already ±4.97, with 2 ±15.6 (measures.random_null.prediction_factor); 1 is the one
# untrained twin of runs stored before, which has no interval
MIN_NULL_SEEDS = 5


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
    null_permutations: int = 20  # K: the dependence test, B's images permuted K times against A's (0: none)
    random_null: bool = True  # also A against untrained twins of B (B's architecture, random weights)
    # how many twins (seeds seed, seed+1, ...; at least MIN_NULL_SEEDS): their spread is the null's; 5 gives a 95%
    # range of +-3.04 sds (runs stored before it had one twin; without random_null it is moot and kept at that
    # value: one run id)
    random_null_seeds: int = 5
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES

    # runs stored before a null computed none; ERAS: the defaults of each release, newest first (lookups)
    # (data_id: None for built-in data, left out of the run id; never an era: a folder's runs name its files)
    LEGACY: ClassVar[dict[str, Any]] = {"null_permutations": 0, "random_null": False, "random_null_seeds": 1,
                                        "data_id": None}
    ERAS: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"random_null_seeds": 1}, {"random_null": False},
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
        check_count("random_null_seeds", self.random_null_seeds, 1, MAX_TWINS, f"e.g. {MIN_NULL_SEEDS}",
                    "each twin is one more pass over the images")
        if self.random_null and 1 < self.random_null_seeds < MIN_NULL_SEEDS:
            raise StitchError(f"{field_label('random_null_seeds')} must be at least {MIN_NULL_SEEDS} (got "
                              f"{self.random_null_seeds}): fewer untrained Bs give the null no useful interval "
                              f"(with 3, one more random B falls within ±5 of their sds); 1 is the single twin of "
                              f"runs stored before, with no interval")  # fmt: skip
        if not self.random_null:  # no twin: the count means nothing, and one value keeps one run id
            object.__setattr__(self, "random_null_seeds", self.LEGACY["random_null_seeds"])
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
        pair_dataset(spec, ectx.load(spec.a), ectx.load(spec.b))  # once cold: a process reads a data set once
        t0 = time.perf_counter()  # (2.1 s for digits), and the job worker has read it for the models' own runs
        a, b = ectx.load(spec.a), ectx.load(spec.b)
        ds = pair_dataset(spec, a, b)
        n_a = len(list_cuts(a) if spec.senders is None else spec.senders)
        n_b = len(list_cuts(b) if spec.receivers is None else spec.receivers)
        x = torch.randn(spec.batch_size, 512, dtype=torch.float64)
        (x @ x.T) @ (x @ x.T)  # warm-up: the first product also allocates and picks kernels
        # about one pair's work per batch: the fastest of 3 (one product is milliseconds: a single preemption on a
        # busy machine doubled the estimate at load 2, bench/estimate_bench.py)
        gram = min(timed(lambda: (x @ x.T) @ (x @ x.T)) for _ in range(3))
        return {"setup": time.perf_counter() - t0, "full": full_forward(a, ds, ectx.device) + full_forward(b, ds, ectx.device),
                "pairs": n_a * n_b, "gram": gram, "n": len(ds.labels(spec.split))}  # fmt: skip

    key = ("similarity", spec.a, spec.b, repr(spec.senders), repr(spec.receivers), spec.dataset, spec.split,
           spec.batch_size, ectx.model_key(spec.a), ectx.model_key(spec.b), where(ectx.device))
    u = calibrated(key, units)
    n = int(u["n"] if spec.max_samples is None else min(spec.max_samples, u["n"]))
    twins = spec.random_null_seeds if spec.random_null else 0
    passes = 1 + spec.baseline + twins  # the values, the shuffled baseline, one pass per untrained twin
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

    twins = spec.random_null_seeds if spec.random_null else 0
    share = 2 / (2 + twins)  # of the progress bar: a twin's pass (no interval, no null) is about half the first's
    result = similarity_matrix(
        a.model, b.model, cuts[0], cuts[1], batches(a), batches(b), measure=spec.measure,
        token_mode=spec.token_mode, shuffle_baseline=spec.baseline, check_cancel=ctx.check_cancel,
        progress=lambda f, msg: ctx.progress(share * f, msg), seed=spec.seed, null_permutations=spec.null_permutations,
    )
    if twins:
        result["random_null"] = _against_untrained_b(spec, ctx, a, b, cuts, batches, result["values"], share)
    return {**result, "dataset": ds.name, "split": spec.split}


def _same_weights(x: torch.nn.Module, y: torch.nn.Module) -> bool:
    """Whether two modules hold the same tensors under the same names (a random-init A or B drawn from the seed
    of a twin: the same network, which would put A or B itself into the null)."""
    sx, sy = x.state_dict(), y.state_dict()
    return sx.keys() == sy.keys() and all(
        sx[k].shape == sy[k].shape and torch.equal(sx[k].cpu(), sy[k].cpu()) for k in sx)


def _against_untrained_b(spec: SimilaritySpec, ctx: RunContext, a: LoadedModel, b: LoadedModel,
                         cuts: list[list[Cut]], batches, values: list, share: float) -> dict[str, Any]:  # fmt: skip
    """The measure of A against ``random_null_seeds`` random-init twins of B over the same images.

    ``{"ref": the first twin, "refs": every twin, "seeds": k, "values": their mean [n_a][n_b], "per_seed", and
    from two twins "sd", "ci", "calibrated", "threshold"}`` (:func:`~stitchcore.measures.random_null.
    random_null_cells`), or ``{"skipped": why}`` where B has no twin (hf:, file: refs).  Twins come from seeds
    seed, seed + 1, ...; a seed whose network is A's or B's own (a random-init A or B of that seed) is passed
    over.  A value an untrained B reaches is what the architecture and the inputs give alone."""
    k = spec.random_null_seeds
    refs: list[str] = []
    draws: list[torch.Tensor] = []
    seed = spec.seed
    while len(refs) < k:
        try:
            ref = random_twin(spec.b, seed % (MAX_SEED + 1))
        except RefError as exc:
            return {"skipped": str(exc)}
        seed += 1
        ctx.progress(share + (1 - share) * len(refs) / k, f"against an untrained B ({ref})")
        twin = load_model(ref, store=ctx.store)
        twin.model.to(ctx.device).eval()
        if _same_weights(twin.model, a.model) or _same_weights(twin.model, b.model):
            log.info("similarity: %s is A or B itself; the null draws the next seed", ref)
            continue
        twin_cuts = [get_cut(twin, c.name) for c in cuts[1]]
        done = len(refs)
        got = similarity_matrix(
            a.model, twin.model, cuts[0], twin_cuts, batches(a), batches(twin), measure=spec.measure,
            token_mode=spec.token_mode, check_cancel=ctx.check_cancel, seed=spec.seed, intervals=False,
            progress=lambda f, msg, done=done: ctx.progress(share + (1 - share) * (done + f) / k,
                                                            f"untrained B {done + 1}/{k}: {msg}"),
        )  # fmt: skip
        refs.append(ref)
        draws.append(torch.tensor(got["values"], dtype=torch.float64))
    measure = get_measure(spec.measure)
    cells = random_null_cells(torch.tensor(values, dtype=torch.float64), torch.stack(draws),
                              higher_is_similar=measure.higher_is_similar, bounds=measure.bounds)  # fmt: skip
    return {"ref": refs[0], "refs": refs, "seeds": k, **cells}


def _cells(summary: dict[str, Any], grid: list) -> list[tuple[float, str, str]]:
    """(value, A cut, B cut) of every cell of ``grid`` that has a value."""
    return [(v, a, b) for a, row in zip(summary["senders"], grid) for b, v in zip(summary["receivers"], row)
            if v is not None]  # fmt: skip


def random_null_words(summary: dict[str, Any]) -> str:
    """What the random-init-B null of a similarity summary says, in one sentence ("" without one).

    With two or more twins: in how many cells trained B is beyond the random-B 95% range.  A run stored with one
    twin has no spread: its sentence gives the differences, which no interval backs.

    >>> random_null_words({"senders": ["x", "y"], "receivers": ["u"], "measure": "cka-linear",
    ...                    "values": [[0.9], [0.7]], "random_null": {"values": [[0.88], [0.3]]}})
    'How much more similar trained B is than untrained B: +0.02 to +0.40 (largest at y × u); 1 of 2 cells within 0.05 of it (there the value is mostly architecture and inputs).'
    >>> print(random_null_words({"senders": ["x", "y"], "receivers": ["u"], "measure": "cka-linear",
    ...                    "values": [[0.9], [0.7]], "random_null": {"seeds": 5, "values": [[0.88], [0.3]],
    ...                    "calibrated": [[0.5], [8.0]], "threshold": 3.04}}))
    Against 5 random-init Bs (B's architecture, no training): trained B is beyond their 95% range in 1 of 2 cells (the most at y × u, 8.0 sds); in the other 1 it is as similar as an untrained B.
    """
    twin = summary.get("random_null") or {}
    if not twin.get("values"):
        return ""
    null = _random_null(summary)
    if null is not None:
        cells = _cells(summary, null["calibrated"])
        if not cells:
            return ""
        above = [c for c in cells if c[0] > null["threshold"]]
        most = max(cells)
        where = f"(the most at {most[1]} × {most[2]}, {most[0]:.1f} sds)"
        rest = len(cells) - len(above)
        return (f"Against {null['seeds']} random-init Bs (B's architecture, no training): trained B is beyond their "
                f"95% range in {len(above)} of {len(cells)} cells {where}"
                + (f"; in the other {rest} it is as similar as an untrained B." if rest else "."))
    sign = -1.0 if summary.get("measure") == "procrustes" else 1.0  # a distance: lower = more similar
    cells = [(sign * (v - u), a, b) for a, row, trow in zip(summary["senders"], summary["values"], twin["values"])
             for b, v, u in zip(summary["receivers"], row, trow) if v is not None and u is not None]
    if not cells:
        return ""
    gain, a, b = max(cells)
    close = sum(1 for d, *_ in cells if abs(d) <= 0.05)
    return (f"How much more similar trained B is than untrained B: {min(d for d, *_ in cells):+.2f} to {gain:+.2f} "
            f"(largest at {a} × {b}); {close} of {len(cells)} cells within 0.05 of it (there the value is mostly "
            "architecture and inputs).")


def _random_null(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The summary's random-B null when it has a spread (two twins or more), else None."""
    twin = summary.get("random_null") or {}
    if twin.get("calibrated") is None or twin.get("threshold") is None:
        return None
    return twin


def random_null_map(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The calibrated map of a similarity summary: the trained value in random-init-B standard deviations, or
    None where the run has no null with a spread (none, skipped, one twin: runs stored before, or hf:/file: B).

    ``{"grid": [n_a][n_b] (value − random-B mean) / random-B sd, + = more similar, "seeds": k, "threshold": the
    sds at the 95% range's similar end, "within": {(A cut, B cut): note} for cells not beyond it, "title"}``.

    >>> m = random_null_map({"senders": ["x"], "receivers": ["u", "v"], "measure": "cka-linear",
    ...                      "random_null": {"seeds": 5, "values": [[0.5, 0.5]], "calibrated": [[8.0, 1.0]],
    ...                                      "threshold": 3.04}})
    >>> m["title"]
    'beyond random-init B: sds above the mean of 5 untrained Bs'
    >>> print(m["within"])
    {('x', 'v'): "within the 95% range of untrained Bs (below 3.04 sds): as similar as B's architecture alone"}
    """
    null = _random_null(summary)
    if null is None:
        return None
    threshold = float(null["threshold"])
    ahead = beyond(null) or []
    within = {(a, b): f"within the 95% range of untrained Bs (below {threshold:.2f} sds): as similar as B's "
                      "architecture alone"
              for a, row in zip(summary["senders"], ahead) for b, up in zip(summary["receivers"], row) if up is False}
    return {"grid": null["calibrated"], "seeds": int(null.get("seeds") or len(null.get("refs") or ())),
            "threshold": threshold, "within": within,
            "title": f"beyond random-init B: sds above the mean of {null.get('seeds')} untrained Bs"}


def dependence_words(summary: dict[str, Any]) -> str:
    """The dependence test (shuffled images) of a similarity summary in one sentence ("" without one): what its
    values are, and that it is not the question of similarity.

    >>> print(dependence_words({"null": {"mean": [[0.01, -0.02]], "std": [[0.005, 0.004]], "k": 20}}))
    Dependence test (shuffled images; 20 permutations of B's images against A's): shuffled values -0.020 to 0.010, spread 0.004 to 0.005; its map is (value − shuffled mean) / spread. Any two networks fed the same images pass it, an untrained B too: it tests that they see the same images, not that B learned what A did.
    """
    null = summary.get("null")
    if not null:
        return ""
    means = [v for row in null["mean"] for v in row if v is not None]
    spreads = [v for row in null["std"] for v in row if v is not None]
    if not means or not spreads:
        return ""
    return (f"{DEPENDENCE_TEST[0].upper()}{DEPENDENCE_TEST[1:-1]}; {null['k']} permutations of B's images against "
            f"A's): shuffled values {min(means):.3f} to {max(means):.3f}, spread {min(spreads):.3f} to "
            f"{max(spreads):.3f}; its map is (value − shuffled mean) / spread. Any two networks fed the same images "
            "pass it, an untrained B too: it tests that they see the same images, not that B learned what A did.")


def similarity_map_words(summary: dict[str, Any], view: str) -> str:
    """Which maps of a similarity run are shown and how to read them, in a few sentences: ``view`` "calibrated"
    (the map against random-init Bs, where the run has one) or "raw" (the values beside their baselines).  A run
    without a null that has a spread (stored before it, one twin, or a B without a twin) says why it has only its
    raw maps.

    >>> s = {"senders": ["x", "y"], "receivers": ["u"], "measure": "cka-linear", "values": [[0.9], [0.7]],
    ...      "random_null": {"seeds": 5, "values": [[0.88], [0.3]], "calibrated": [[0.5], [8.0]], "threshold": 3.04}}
    >>> print(similarity_map_words(s, "calibrated"))  # doctest: +NORMALIZE_WHITESPACE
    Calibrated map: each cell is trained B's value in standard deviations of 5 untrained Bs' values above their
    mean (+ = more similar); a ring ○ marks a cell within their 95% range (below 3.04 sds), where the value is
    what B's architecture and the inputs give without training. Against 5 random-init Bs (B's architecture, no
    training): trained B is beyond their 95% range in 1 of 2 cells (the most at y × u, 8.0 sds); in the other 1
    it is as similar as an untrained B.
    >>> print(similarity_map_words({**s, "random_null": {"ref": "zoo:b?init=random&seed=0", "values": [[0.88],
    ...                             [0.3]]}}, "calibrated").split(". ")[0])
    One untrained B has no spread: no calibrated map
    """
    twin = summary.get("random_null") or {}
    calibrated = random_null_map(summary)
    null = random_null_words(summary)
    if calibrated is None:
        if twin.get("skipped"):
            why = f"No random-init-B null ({twin['skipped']}): the raw maps only."
        elif twin.get("values"):
            why = ("One untrained B has no spread: no calibrated map. Its raw maps are shown; the untrained B's "
                   "values are one draw, with no interval.")
        else:
            why = ("No random-init-B null (this run was stored before it): the raw maps only; a value here may be "
                   "what B's architecture and the inputs give without training.")
        return " ".join(w for w in (why, null, dependence_words(summary)) if w)
    k, top = calibrated["seeds"], calibrated["threshold"]
    if view == "calibrated":
        return (f"Calibrated map: each cell is trained B's value in standard deviations of {k} untrained Bs' values "
                f"above their mean (+ = more similar); a ring ○ marks a cell within their 95% range (below {top:.2f}"
                " sds), where the value is what B's architecture and the inputs give without training. " + null)
    return (f"Raw maps: the measure, then where the run has them the shuffled-input baseline, the mean of {k} "
            "untrained Bs (hover: the 95% range where one more untrained B falls) and the dependence test. "
            + " ".join(w for w in (null, dependence_words(summary)) if w))
