"""Experiment ``sweep``: move the cut along depth and see where a trait lives (Oxford report).

A and B share an architecture (their widths may differ: the adapter maps A's channels to
B's, as Bansal et al. plug a wider model's bottom into a thinner top).  At every position
(a block-level cut ``c``) the stitched model is C_c(x) = suffix_B,c(S(prefix_A,c(x))): A's layers up to and
including ``c``, a trained adapter, B's layers after ``c``.  At each position the
adapter is trained (task loss on ``train_data``'s train split, A and B frozen; the
same building blocks as the ``stitch`` experiment) and then measured on the test
split of ``dataset``:

* the chosen trait metrics (:mod:`stitchcore.measures.traits`), and per-class accuracy, each with its 95%
  interval over the test examples it reads (``metrics_ci``, ``per_class_ci``: exact binomial for 0/1 outcomes
  such as a class's accuracy, else a bootstrap seeded with the spec's seed; runs stored before them have none);
* the simplicity measures of C_c (:mod:`stitchcore.measures.simplicity`);
* the random-init control: the same stitch between untrained twins of A and B
  (``zoo:NAME?init=random&seed=S``, one pair per control seed), to show what the
  adapter alone can learn;
* the noise-sender control (``noise_control``; "Functional Alignment Can Mislead", ICML 2025): the same
  adapter (init, epochs, data order) trained from a sender of class-clustered noise with A's activation
  shape and scale (:func:`stitchcore.stitching.noise_sender.clustered_noise`) into B's layers after the cut.
  It knows each image's label and nothing else, so a stitch that does no better is not evidence about A's
  layers; ``summary["noise_sender"]`` holds its curves with paired intervals (:func:`noise_sender_along`).

A alone and B alone give the reference lines.  Each finished position is appended
to the ``positions.json`` artifact (with the references) and logged as metric
points, so a page shows the curves growing while the job runs (:func:`partial_positions`
reads them back in the shape of the summary).

``train_data`` lets the adapter be trained on data that lacks the trait's evidence
(e.g. ``digits|drop3`` for a class-3 trait): whatever C then does with class 3
comes from A's and B's layers, not from the adapter.
"""

from __future__ import annotations

import gzip
import json
import logging
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from stitchcore.backends import Unit, UnitContext, cells_per_node
from stitchcore.cuts import Cut, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset, load_dataset
from stitchcore.errors import AdapterError, CutError, StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_EPOCHS,
    MAX_LR,
    MAX_WEIGHT_DECAY,
    check_adapter_rank,
    check_count,
    check_image_caps,
    check_rate,
)
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_at_most,
    check_choice,
    check_positive,
    check_seed,
)
from stitchcore.experiments.dataset_check import check_head_classes, head_mismatch, load_pair, pair_dataset
from stitchcore.experiments.estimate import (
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    full_forward,
    image_counts,
    ms,
    pair_units,
    spread,
    timed,
)  # fmt: skip
from stitchcore.experiments.sweep_read import (
    POSITIONS_ARTIFACT,
    SIMPLICITY_KEYS,
    curves,
    noise_sender_along,
    noise_sender_words,
    partial_positions,
    penalty_along,
    penalty_ci_along,
)
from stitchcore.measures.intervals import (
    grouped_mean_ci,
    mean_ci,
    pack_outcomes,
    unpack_outcomes,
)
from stitchcore.measures.simplicity import (
    GZIP_LEVEL,
    REPORT_DEFINITIONS,
    SHARPNESS_DEFINITION,
    report_simplicity,
    simplicity,
)
from stitchcore.measures.traits import check_classes, compute, compute_ci, metric_dataset, parse_metric
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import ModelPackage, pack_model
from stitchcore.models.refs import TWIN_SEEDS, parse_ref, random_twins
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import collect
from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility
from stitchcore.stitching.evaluate import score_logits
from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
from stitchcore.stitching.noise_sender import clustered_noise
from stitchcore.stitching.train import OPTIMIZERS, AdapterTargets, TrainKnobs, train_adapter
from stitchcore.store.results import Store

__all__ = ["POSITIONS_ARTIFACT", "SIMPLICITY_KEYS", "SweepSpec", "check_sweep", "curves", "estimate_sweep",
           "noise_sender_along", "noise_sender_words", "partial_positions", "penalty_along", "penalty_ci_along",
           "position_unit", "run_sweep"]

log = logging.getLogger(__name__)

EVAL_BATCH = 256


@dataclass(frozen=True)
class SweepSpec(DataFiles, Spec):
    """Stitch A's bottom to B's top at every depth; measure traits and simplicity at each.

    >>> SweepSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", metrics=("class_acc:3",)).label()
    'sweep zoo:cnn-digits-s0 -> zoo:cnn-digits-s1 (class_acc:3, all cuts)'
    """

    a: str  # ModelRef of the bottom model (its layers up to the cut)
    b: str  # ModelRef of the top model (its layers after the cut); A's architecture, any width
    positions: tuple[str, ...] | None = None  # cut names in execution order; None = every cut
    metrics: tuple[str, ...] = ("accuracy",)  # trait metrics, see stitchcore.measures.traits
    dataset: str | None = None  # evaluation data (test split); None = the dataset B was trained on
    train_data: str | None = None  # adapter training data (train split); None = the evaluation dataset
    adapter: AdapterSpec = field(default_factory=AdapterSpec)  # linear, BN both sides, random init
    optimizer: str = "adamw"  # as StitchSpec
    lr: float = 1e-2  # as StitchSpec: small data gives few steps
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps per position
    batch_size: int = 64
    seed: int = 0  # adapter init and data order; control twins use seed, seed+1, ...
    control: bool = True  # the random-init control at every position (zoo refs only)
    control_seeds: int = 2  # random pairs per position; the band spans their min..max
    simplicity: bool = True  # gradient norm, sharpness, gzip size per position and for A, B
    sharpness_eps: float = 0.1  # relative perturbation size per tensor (0.05 gives increases near the noise)
    sharpness_draws: int = 5  # perturbations averaged
    max_train: int | None = None  # cap on adapter training images; None = all
    max_test: int | None = None  # cap on test images; None = all
    # Added for issue 25 (LEGACY below: what a dict stored before them computed).
    twin_seeds: str = "distinct"  # control pairs: A's and B's twins from different seeds (refs.random_twins)
    simplicity_adapter: bool = True  # the project's three measures count the adapter's parameters too
    simplicity_report: bool = True  # also the Oxford report's definitions (measures.simplicity.report_simplicity)
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES
    # Added for issue 39: at every position the same adapter also trained from a sender of class-clustered noise
    # (A's activation shape and scale; stitching.noise_sender): a stitch that does no better says nothing of A
    noise_control: bool = True

    # Before: one seed for both twins (one network when A and B share an architecture), measures over A's and
    # B's weights only, no report definitions, no noise sender.
    LEGACY: ClassVar[dict[str, Any]] = {"twin_seeds": "shared", "simplicity_adapter": False, "simplicity_report": False,
                                        "data_id": None, "noise_control": False}  # fmt: skip
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("dataset", "train_data")  # both read from disk when on files

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        if isinstance(self.metrics, str) or not self.metrics:
            raise StitchError("metrics is a non-empty list of trait metrics, e.g. ['accuracy', 'class_acc:3']")
        keys = tuple(dict.fromkeys(parse_metric(m).key for m in self.metrics))
        object.__setattr__(self, "metrics", keys)
        if self.positions is not None:
            names = (self.positions,) if isinstance(self.positions, str) else tuple(self.positions)
            if not names or len(set(names)) != len(names):
                raise StitchError(f"positions must name at least one cut, each once; got {list(names)}")
            object.__setattr__(self, "positions", names)
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("twin_seeds", self.twin_seeds, TWIN_SEEDS)
        if not isinstance(self.noise_control, bool):
            raise StitchError(f"noise_control (--no-noise-control) is true or false, not {self.noise_control!r}")
        for name, used in (("twin_seeds", self.control), ("simplicity_adapter", self.simplicity),
                           ("simplicity_report", self.simplicity)):  # fmt: skip
            if not used:  # a rule that changes nothing keeps its legacy value: the run id does not move
                object.__setattr__(self, name, self.LEGACY[name])
        check_count("epochs", self.epochs, 0, MAX_EPOCHS, "0 keeps the fitted start",
                    "each epoch passes over the training images, at every position")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_count("control_seeds", self.control_seeds, 1, MAX_DRAWS, "e.g. 2",
                    "each trains a random pair's adapter at every position")
        check_count("sharpness_draws", self.sharpness_draws, 1, MAX_DRAWS, "e.g. 5")
        check_at_least("sharpness_eps", self.sharpness_eps, 0, "a relative size, e.g. 0.05")
        check_at_most("sharpness_eps", self.sharpness_eps, 10, "a relative size, e.g. 0.05")
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_rate("lr", self.lr, MAX_LR, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_seed("seed", self.seed)
        check_image_caps(self)
        check_adapter_rank(self.adapter)
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    def label(self) -> str:
        where = f"{len(self.positions)} cuts" if self.positions else "all cuts"
        return f"sweep {self.a} -> {self.b} ({', '.join(self.metrics)}, {where})"


# ---------------------------------------------------------------------------- helpers


def _positions(spec: SweepSpec, a: LoadedModel, b: LoadedModel) -> list[tuple[Cut, Cut]]:
    """The swept cuts as (A's cut, B's cut of the same name), in A's execution order: every cut of A (or the
    named ones; CutError naming the close ones for a name A lacks).  Widths may differ (a wider A into a
    thinner B): the adapter maps A's channels to B's; AdapterError when it cannot join the pair."""
    cuts_a = list_cuts(a)
    cuts_b = {c.name: c for c in list_cuts(b)}
    by_name = {c.name: c for c in cuts_a}
    names = spec.positions or tuple(c.name for c in cuts_a)
    unknown = [n for n in names if n not in by_name]
    for n in unknown:
        try:
            canonical = get_cut(a, n).name
        except CutError:
            continue
        raise CutError(f"{n} is another name of {canonical} in {a.ref}; sweep positions are canonical cut names: "
                       f"use {canonical}")
    if unknown:
        raise CutError(f"no cut(s) {unknown} in {a.ref}; its cuts are: {', '.join(by_name)}")
    for n in names:
        other = cuts_b.get(n)
        why = "it has no such cut" if other is None else compatibility(by_name[n], other, spec.adapter)
        if why is not None:
            raise AdapterError(
                f"a sweep joins A and B at cuts of the same name: {a.ref}[{n}] is {by_name[n].shape} and {b.ref} "
                f"cannot take it there ({why}); pick two models of one architecture (widths may differ)"
            )
    order = [c.name for c in cuts_a]
    return [(by_name[n], cuts_b[n]) for n in sorted(names, key=order.index)]


def _forward(model: nn.Module, m: LoadedModel) -> nn.Module:
    """model(preprocess(x)) as one module (preprocessing has no weights)."""

    class WithPreprocess(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, C, H, W] images in [0, 1] -> logits [B, K]
            return self.net(m.preprocess(x) if m.preprocess is not None else x)

    return WithPreprocess()


@dataclass
class _Data:
    """Datasets of one sweep: adapter training data and every evaluation set the metrics read."""

    train: ImageDataset
    base: ImageDataset  # the evaluation set proper (accuracy, per-class, simplicity)
    evals: dict[str, ImageDataset]  # metric_dataset name -> dataset (base included)
    metric_sets: dict[str, str]  # metric key -> evaluation dataset name
    n_train: int
    n_test: int
    a_own: _Data | None = None  # A's reference data when A's head is another task's (a coarse-label A)


def _batches(ds: ImageDataset, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(ds.batches("test", EVAL_BATCH, limit=n))


def _measure(spec: SweepSpec, data: _Data, logits: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Trait metric values and per-class accuracy from logits [N, K] per evaluation set, with their 95% intervals
    over the test examples each reads: {"metrics", "metrics_ci", "per_class", "per_class_ci", "outcomes"}
    (``outcomes``: which base test images it got right, packed, for :func:`penalty_ci_along`)."""
    values, spans = {}, {}
    for key, name in data.metric_sets.items():
        metric, labels = parse_metric(key), data.evals[name].labels("test")[: data.n_test]
        values[key] = compute(metric, logits[name], labels)
        spans[key] = compute_ci(metric, logits[name], labels, seed=spec.seed)
    labels = data.base.labels("test")[: data.n_test]
    score = score_logits(logits[data.base.name], labels, data.base.num_classes)
    return {"metrics": values, "metrics_ci": spans, "per_class": score["per_class"],
            "per_class_ci": grouped_mean_ci(score.correct, labels, data.base.num_classes, seed=spec.seed),
            "outcomes": pack_outcomes(score.correct)}


def _simplicity(spec: SweepSpec, model: nn.Module, data: _Data, adapter: nn.Module | None = None) -> dict[str, Any]:
    """The project's measures (over A's and B's weights and, with ``simplicity_adapter``, the adapter's; runs
    stored before leave the adapter out) and, with ``simplicity_report``, the report's (every parameter, test
    batches of ``batch_size``)."""
    exclude = adapter.parameters() if adapter is not None and not spec.simplicity_adapter else ()
    out = simplicity(model, _batches(data.base, data.n_test), eps=spec.sharpness_eps, draws=spec.sharpness_draws,
                     seed=spec.seed, exclude=exclude)  # fmt: skip
    out.pop("definition", None)
    if spec.simplicity_report:
        batches = list(data.base.batches("test", spec.batch_size, limit=data.n_test))
        out.update(report_simplicity(model, batches, seed=spec.seed))
    return {k: (round(v, 8) if isinstance(v, float) else v) for k, v in out.items()}


@dataclass
class _Sender:
    """What a position's stitch trains on, kept for the noise sender trained after it at the same position."""

    suffix_b: nn.Module  # B's layers after its cut
    h_train: torch.Tensor  # [n_train, *cut_a.shape] A's activations on the training images
    y_train: torch.Tensor  # [n_train] their labels
    target: torch.Tensor | None  # [n_train, *cut_b.shape] B's activations for a closed-form start, else None


def _train(spec: SweepSpec, ctx: UnitContext, cuts: tuple[Cut, Cut], sender: _Sender,
           h_train: torch.Tensor) -> tuple[nn.Module, list[dict[str, float]]]:  # fmt: skip
    """The adapter A[cut] -> B[cut] trained from ``h_train`` [n_train, *cut_a.shape] (A's activations, or a noise
    sender's) into ``sender.suffix_b``: built from ``spec.seed``, fitted to ``sender.target`` for a closed-form
    init, then trained on the task; (adapter in eval mode, per-epoch history)."""
    torch.manual_seed(spec.seed)
    adapter = build_adapter(spec.adapter, *cuts)
    if spec.adapter.init in FIT_METHODS:
        pairs = ((h_train[i : i + EVAL_BATCH], sender.target[i : i + EVAL_BATCH])
                 for i in range(0, len(h_train), EVAL_BATCH))  # fmt: skip
        fit_adapter(adapter, pairs, method=spec.adapter.init)
    adapter.to(ctx.device)
    history = train_adapter(
        adapter, sender.suffix_b, h_train, AdapterTargets(labels=sender.y_train), objective={"task": 1.0},
        knobs=TrainKnobs.of(spec), device=ctx.device, check_cancel=ctx.check_cancel,
    )  # fmt: skip
    adapter.eval()
    return adapter, history


@torch.no_grad()
def _logits(adapter: nn.Module, suffix_b: nn.Module, h: torch.Tensor, device: torch.device) -> torch.Tensor:
    """suffix_B(S(h)) for sender activations ``h`` [N, *cut_a.shape] -> logits [N, K] on the CPU."""
    return torch.cat([suffix_b(adapter(h[i : i + EVAL_BATCH].to(device))).float().cpu()
                      for i in range(0, len(h), EVAL_BATCH)])  # fmt: skip


def _stitch_at(
    spec: SweepSpec, ctx: UnitContext, a: LoadedModel, b: LoadedModel, cuts: tuple[Cut, Cut], data: _Data,
    with_simplicity: bool, gaps: bool = False,
) -> tuple[dict[str, Any], _Sender]:
    """Train the adapter A[cut] -> B[cut] and measure C = suffix_B(S(prefix_A(x))); (the row's measures, what the
    adapter was trained on).

    ``gaps``: also ``logit_gap`` {"a", "b"}: max |logit(C) − logit(A)| and the same against B over the test
    images (0.0 = C is that model bit for bit, as a weight substitution between a model and its own copy is).
    """
    device = ctx.device
    cut_a, cut_b = cuts
    a.to(device), b.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    prefix_a, _ = split(a, cut_a)
    prefix_b, suffix_b = split(b, cut_b)
    acts = {"device": device, "batch_size": EVAL_BATCH, "check_cancel": ctx.check_cancel}
    h_train = collect(prefix_a, data.train, a.preprocess, "train", limit=data.n_train, **acts)  # [N, *cut.shape]
    target = (collect(prefix_b, data.train, b.preprocess, "train", limit=data.n_train, **acts)
              if spec.adapter.init in FIT_METHODS else None)  # fmt: skip
    sender = _Sender(suffix_b, h_train, data.train.labels("train")[: data.n_train], target)
    adapter, history = _train(spec, ctx, cuts, sender, h_train)
    logits = {name: _logits(adapter, suffix_b, collect(prefix_a, ds, a.preprocess, "test", limit=data.n_test, **acts),
                            device) for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    if gaps:
        with torch.no_grad():
            c = logits[data.base.name]
            out["logit_gap"] = {}
            for role, m in (("a", a), ("b", b)):
                ref = torch.cat([_forward(m.model.to(device).eval(), m)(x.to(device)).float().cpu()
                                 for x, _ in _batches(data.base, data.n_test)])  # fmt: skip
                if ref.shape == c.shape:  # a coarse-label A's logits are another task's: no gap to it
                    out["logit_gap"][role] = float((c - ref).abs().max())
    if history:  # the adapter's training loss per epoch: a plateau shows as a flat tail
        out["train_loss"] = [round(r["train_loss"], 6) for r in history]
    if with_simplicity:
        stitched = _forward(nn.Sequential(prefix_a, adapter, suffix_b), a)
        out["simplicity"] = _simplicity(spec, stitched, data, adapter=adapter)
    return out, sender


def _noise_at(spec: SweepSpec, ctx: UnitContext, cuts: tuple[Cut, Cut], sender: _Sender, data: _Data) -> dict[str, Any]:
    """The noise-sender control at one position: the same adapter (init, seed, epochs, data order) trained from
    class-clustered noise of A's activation shape and scale (``clustered_noise`` over the training labels; the
    test images' labels give new draws from the same clusters) into B's suffix; its measures as a row's, plus
    ``accuracy`` and ``accuracy_ci`` on the evaluation set proper."""
    shape = tuple(sender.h_train.shape[1:])  # [*cut_a.shape]

    def noise(labels: torch.Tensor, split_name: str) -> torch.Tensor:  # [N, *cut_a.shape]
        return clustered_noise(labels, shape, n_classes=data.train.num_classes, seed=spec.seed, split=split_name,
                               like=sender.h_train)  # fmt: skip

    adapter, history = _train(spec, ctx, cuts, sender, noise(sender.y_train, "train"))
    logits = {name: _logits(adapter, sender.suffix_b, noise(ds.labels("test")[: data.n_test], "test"), ctx.device)
              for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    correct = unpack_outcomes(out["outcomes"])
    out["accuracy"] = round(float(correct.mean()), 6)
    out["accuracy_ci"] = list(mean_ci(correct, seed=spec.seed))
    if history:
        out["train_loss"] = [round(r["train_loss"], 6) for r in history]
    return out


@torch.no_grad()
def _reference(spec: SweepSpec, ctx: RunContext, m: LoadedModel, data: _Data) -> dict[str, Any]:
    """A or B alone: trait metrics, per-class accuracy, simplicity."""
    model = _forward(m.model.to(ctx.device).eval(), m)
    logits = {name: torch.cat([model(x.to(ctx.device)).float().cpu() for x, _ in _batches(ds, data.n_test)])
              for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    if spec.simplicity:
        with torch.enable_grad():
            out["simplicity"] = _simplicity(spec, model, data)
    return out


def _own_data(spec: SweepSpec, a: LoadedModel, base: ImageDataset) -> _Data | None:
    """A's own task when its head does not fit ``base`` (Bansal et al.'s coarse-label A: only A's bottom is used,
    so its head may be another task's); accuracy-only sweeps, A's reference scored on A's own data."""
    if head_mismatch(a, base, "A") is None or set(spec.metrics) != {"accuracy"} or not a.dataset:
        return None
    own = load_dataset(a.dataset)
    if head_mismatch(a, own, "A") is not None or own.image_shape != base.image_shape:
        return None
    n_test = len(own.labels("test")) if spec.max_test is None else min(spec.max_test, len(own.labels("test")))
    return _Data(own, own, {own.name: own}, {"accuracy": own.name}, 0, n_test)


def _load_data(spec: SweepSpec, a: LoadedModel, b: LoadedModel) -> _Data:
    base = pair_dataset(spec, a, b)
    check_head_classes(b, base, "B")
    a_own = _own_data(spec, a, base)
    if a_own is None:
        check_head_classes(a, base, "A")
    train = load_dataset(spec.train_data) if spec.train_data else base
    if train.image_shape != base.image_shape or train.num_classes != base.num_classes:
        raise StitchError(f"train_data {train.name} ({train.image_shape}, {train.num_classes} classes) does not match"
                          f" {base.name} ({base.image_shape}, {base.num_classes}); use a variant of the same data")
    metric_sets = {}
    for key in spec.metrics:
        metric = parse_metric(key)
        check_classes(metric, base.num_classes)
        metric_sets[key] = metric_dataset(metric, base.name)
    evals = {base.name: base}
    for name in metric_sets.values():
        evals.setdefault(name, load_dataset(name))
    n_train = len(train.labels("train")) if spec.max_train is None else min(spec.max_train, len(train.labels("train")))
    n_test = min(len(ds.labels("test")) for ds in evals.values())
    n_test = n_test if spec.max_test is None else min(spec.max_test, n_test)
    return _Data(train, base, evals, metric_sets, n_train, n_test, a_own)


# ---------------------------------------------------------------------------- the experiment


def _prepare(spec: SweepSpec, store: Store) -> tuple[LoadedModel, LoadedModel, list[tuple[Cut, Cut]], _Data]:
    """A and B loaded, the swept cuts and the data; StitchError for anything that cannot run."""
    a, b = load_pair(spec, store, input_kind="image", hint="sweeps need image classifiers")
    return a, b, _positions(spec, a, b), _load_data(spec, a, b)


def check_sweep(spec: SweepSpec, store: Store) -> None:
    """Everything the run checks before its first position, without training: models, cut names and shapes,
    data and heads, trait metrics."""
    _prepare(spec, store)


def position_unit(spec: SweepSpec, source: dict, i: int, n: int, pair: tuple[Cut, Cut],
                  context: UnitContext) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: the stitch at position ``i`` of ``n``, its noise sender (``spec.noise_control``) and its
    random-init control stitches; one row.

    ``source``: the models (``a``, ``b``, ``controls`` pairs; loaded here, packages from another process)
    and the data.
    """
    def model(m: LoadedModel | ModelPackage) -> LoadedModel:
        return m.unpack() if isinstance(m, ModelPackage) else m

    a, b, data = model(source["a"]), model(source["b"]), source["data"]
    cut = pair[0]
    steps = 1 + spec.noise_control + len(source["controls"])
    yield "progress", (0.0, f"position {i + 1}/{n}: {cut.name}")
    stitched, sender = _stitch_at(spec, context, a, b, pair, data, spec.simplicity, gaps=True)
    row = {"position": cut.name, "depth": round(cut.depth, 4), **stitched, "control": []}
    if spec.noise_control:  # right after the stitch: it reuses A's activations (their scale) and B's fit targets
        yield "progress", (1 / steps, f"position {i + 1}/{n}: {cut.name} (noise sender)")
        row["noise_sender"] = _noise_at(spec, context, pair, sender, data)
    del sender
    for k, (ra, rb) in enumerate(source["controls"]):
        done = 1 + spec.noise_control + k
        yield "progress", (done / steps, f"position {i + 1}/{n}: {cut.name} (random-init control {k + 1})")
        row["control"].append(_stitch_at(spec, context, model(ra), model(rb), pair, data, False)[0])
    yield "cells", [row]


# ---------------------------------------------------------------------------- estimate


def _gzip_seconds_per_byte() -> float:
    data = torch.randn(1 << 18).numpy().tobytes()  # 1 MiB of float32 weights
    return timed(lambda: gzip.compress(data, compresslevel=9, mtime=0)) / len(data)


def _sweep_units(spec: SweepSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    cuts = _positions(spec, a, b)
    ds = pair_dataset(spec, a, b)
    train = load_dataset(spec.train_data) if spec.train_data else ds
    setup = time.perf_counter() - t0
    per = [pair_units(a, b, train, ca, cb, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for ca, cb in spread(cuts)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]}
    n_bytes = 4 * sum(p.numel() for p in a.model.parameters())
    return {**mean, "setup": setup, "positions": len(cuts), "full": full_forward(a, ds, device),
            "gzip": n_bytes * _gzip_seconds_per_byte(), "n_train": len(train.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_sweep(spec: SweepSpec, ectx: EstimateContext) -> Estimate:
    """Every position's stitch, its noise sender and its controls, the reference scores and the simplicity
    measures."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "control", "control_seeds",
             "simplicity", "sharpness_eps", "sharpness_draws", "metrics", "noise_control")  # fmt: skip
    key = ectx.pair_key("sweep", spec, scale)
    u = calibrated(key, lambda: _sweep_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    evals = 1 + sum(":" in m and not m.startswith(("class_acc", "confusion")) for m in spec.metrics)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    fits = spec.adapter.init in ("lstsq", "procrustes")
    one = (n_train * (u["prefix_a"] + fits * (u["prefix_b"] + u["fit"])) + steps * u["step"]
           + evals * n_test * (u["prefix_a"] + u["eval"]))  # fmt: skip
    # the noise sender reuses the stitch's activations: its fit, its training steps and its evaluations
    noise = (n_train * fits * u["fit"] + steps * u["step"] + evals * n_test * u["eval"]) if spec.noise_control else 0.0
    controls = spec.control_seeds if spec.control and all(r.startswith("zoo:") for r in (spec.a, spec.b)) else 0
    # gradient norm (forward + backward ~ 3 forwards) and sharpness (a forward per draw) over the test set
    simple = (n_test * u["full"] * (3 + spec.sharpness_draws) + u["gzip"]) if spec.simplicity else 0.0
    positions = int(u["positions"])
    stitches = positions * (1 + controls + spec.noise_control)
    seconds = (u["setup"] + 2 * (evals * n_test * u["full"] + simple) + positions * (one * (1 + controls) + noise)
               + positions * simple)  # fmt: skip
    also = " (a noise sender's among them)" if spec.noise_control else ""
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {stitches} stitches of "
                              f"{steps:,} steps{also}")


@register_experiment("sweep", SweepSpec.from_dict, check=check_sweep, backends=("local", "ray"), estimate=estimate_sweep)
def run_sweep(spec: SweepSpec, ctx: RunContext) -> dict:
    """Stitch at every position of ``spec``; returns the summary stored with the run."""
    t0 = time.perf_counter()
    ctx.progress(0.0, "loading models")
    a, b, cuts, data = _prepare(spec, ctx.store)
    controls: list[tuple[LoadedModel, LoadedModel]] = []
    twins: list[tuple[str, str]] = []
    control_note = None
    if spec.control:
        if all(parse_ref(r).scheme == "zoo" and parse_ref(r).param("init", "trained") == "trained"
               for r in (spec.a, spec.b)):  # fmt: skip
            twins = [random_twins(spec.a, spec.b, spec.seed, k, spec.twin_seeds) for k in range(spec.control_seeds)]
            controls = [(load_model(ra, store=ctx.store), load_model(rb, store=ctx.store)) for ra, rb in twins]
        else:
            control_note = "the random-init control needs trained zoo models (zoo:NAME); it was skipped"
    ctx.progress(0.02, "scoring A and B alone")
    reference = {"a": _reference(spec, ctx, a, data.a_own or data), "b": _reference(spec, ctx, b, data)}
    if data.a_own is not None:  # A's head is another task's: its reference line is on its own data
        reference["a"]["dataset"] = data.a_own.base.name
    header = {"reference": reference, "metrics": list(spec.metrics), "classes": list(data.base.classes),
              "all_positions": [c.name for c, _ in cuts]}  # fmt: skip
    backend = ctx.backend()
    source = {"a": a, "b": b, "controls": controls, "data": data}
    if backend.name != "local":  # each model once through the object store
        source = {"a": backend.share(pack_model(a)), "b": backend.share(pack_model(b)), "data": backend.share(data),
                  "controls": [(backend.share(pack_model(ra)), backend.share(pack_model(rb))) for ra, rb in controls]}
    units = [Unit(f"{i}|{pair[0].name}", position_unit, (spec, source, i, len(cuts), pair)) for i, pair in enumerate(cuts)]
    done: dict[int, dict] = {}
    failed: dict[str, str] = {}
    for event in backend.run_units(units, ctx.cancel):
        i = int(event.unit.key.split("|")[0])
        if event.kind == "progress":
            ctx.progress(0.05 + 0.95 * (len(done) + event.payload[0]) / len(cuts), event.payload[1] + event.where_words)
        elif event.kind == "cells":
            (row,) = event.payload
            done[i] = event.stamp(row)
            ctx.log(i, {f"stitched:{k}": v for k, v in row["metrics"].items() if v is not None})
            rows = [done[k] for k in sorted(done)]
            ctx.store.put_artifact(ctx.run_id, POSITIONS_ARTIFACT,
                                   json.dumps({**header, "positions": rows}, default=float).encode())  # fmt: skip
        elif event.kind == "failed":
            failed[cuts[i][0].name] = event.payload
            log.warning("sweep %s: position %s failed: %s", ctx.run_id, cuts[i][0].name, event.payload)
    ctx.check_cancel()  # Stop during the units: the run ends cancelled
    rows = [done[k] for k in sorted(done)]
    ctx.progress(1.0, f"{len(cuts)} positions done")
    definition = {
        "sharpness": SHARPNESS_DEFINITION, "eps": spec.sharpness_eps, "draws": spec.sharpness_draws,
        "grad_norm": "||grad of mean test cross-entropy||_2 over weights and biases (norm layers excluded)",
        "gzip_bits": f"gzip level {GZIP_LEVEL} of the parameters as float32 little-endian, in bits",
        "weights": ("the stitched model's weights taken from A and B and the adapter's" if spec.simplicity_adapter
                    else "the stitched model's weights taken from A and B; the adapter is not measured"),
        **(REPORT_DEFINITIONS if spec.simplicity_report else {}),
    }  # fmt: skip
    out = {
        **curves(rows, spec.metrics),
        "a": spec.a,
        "b": spec.b,
        "metrics": list(spec.metrics),
        "metric_labels": {k: parse_metric(k).label for k in spec.metrics},
        "reference": reference,
        "classes": list(data.base.classes),
        "rows": rows,
        "control_note": control_note,
        "control_seeds": len(controls),
        "control_refs": [list(t) for t in twins],  # the untrained (A, B) pairs, each from its own seed
        "simplicity_definition": definition if spec.simplicity else None,
        "dataset": data.base.name,
        "train_data": data.train.name,
        "eval_sets": data.metric_sets,
        "n_train": data.n_train,
        "n_test": data.n_test,
        "seconds": round(time.perf_counter() - t0, 3),
        **({"failed": failed} if failed else {}),  # position -> why (its cluster task failed for good)
        **({"backend": backend.describe(), "nodes": cells_per_node(rows)} if backend.name != "local" else {}),
    }
    return {**out, "penalty_ci": penalty_ci_along(out), "noise_sender": noise_sender_along(out)}
