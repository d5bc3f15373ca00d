"""Experiment ``stitch``: join A's bottom to B's top with an adapter and train it.

C(x) = suffix_B(S(prefix_A(x))).  A's prefix sees A's preprocessing of each
image, B sees its own, and A, B and C are scored on the same test images.  The
frozen prefix runs once over the data (cached activations); only the adapter
and the frozen suffix run per step.

The noise-sender control (``noise_control``; "Functional Alignment Can Mislead", ICML 2025) trains the run's
adapter again (its seed, init, objective and epochs) from class-clustered noise of A[cut_a]'s shape and scale
(:func:`stitchcore.stitching.noise_sender.clustered_noise`): a sender that knows each image's label and nothing
else.  The summary's ``controls["noise_sender"]`` gives its accuracy and penalty with 95% intervals, and
``margin`` (stitched − noise accuracy, paired over the test images): a stitch that does no better is not
evidence about A's layers.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch
from torch import nn
from safetensors.torch import save

from stitchcore.cuts import Cut, get_cut, split, split_segment
from stitchcore.errors import AdapterError, StitchError
from stitchcore.experiments._bounds import (
    MAX_ADAPTER_SEEDS,
    MAX_BATCH,
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
from stitchcore.experiments.dataset_check import check_head_classes, load_pair, pair_dataset
from stitchcore.experiments.estimate import (
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    full_forward,
    image_counts,
    ms,
    pair_units,
)  # fmt: skip
from stitchcore.experiments.stitch_words import NOISE_SENDER_WORDS, noise_sender_words
from stitchcore.measures.intervals import grouped_mean_ci, mean_ci, paired_difference_ci, seed_spread
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.activations import OnDemand, collect, memory_budget_bytes
from stitchcore.stitching.adapters import (AdapterSpec, adapter_cost, build_adapter, compatibility,
                                          larger_map_refusal)
from stitchcore.stitching.evaluate import ClassifierScore, evaluate_batches, stitching_penalty
from stitchcore.stitching.final_features import HeadInput, checked_head
from stitchcore.stitching.fits import fit_adapter
from stitchcore.stitching.noise_sender import clustered_noise
from stitchcore.stitching.precision import PRECISIONS, Autocast, autocast
from stitchcore.stitching.train import OPTIMIZERS, AdapterTargets, TrainKnobs, parse_objective, train_adapter

__all__ = ["ADAPTER_WEIGHTS", "NOISE_SENDER_WORDS", "StitchSpec", "estimate_stitch", "noise_sender_words", "run_stitch",
           "stitch_cuts", "stitched_accuracy"]

log = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter.safetensors"
EVAL_BATCH = 256
KEEPS = ("last", "best")  # which epoch's adapter a run keeps (best: on the validation split)
@dataclass(frozen=True)
class _Trained:
    """One seed's adapter and its scores on the test images."""

    adapter: torch.nn.Module
    start: ClassifierScore  # before training (the closed-form start, or the random init)
    test: ClassifierScore  # the adapter kept
    history: list[dict[str, float]]  # per epoch: train loss and the watched split's accuracy
    residual: float | None  # the closed-form fit's relative residual
    kept_epoch: int  # the epoch whose adapter was kept (epochs: the last)


def _copy_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@dataclass(frozen=True)
class StitchSpec(DataFiles, Spec):
    """One stitch: C = suffix_B(S(prefix_A(x))), train S, compare C with A and B.

    The defaults follow Traft & Cheney (AdamW, wd 0.05, cosine to 0; a larger lr
    because small datasets give few steps) with Bansal et al.'s low-capacity
    adapter (linear, BatchNorm before and after).
    """

    a: str  # ModelRef of the bottom model (canonical spelling)
    b: str  # ModelRef of the top model (its head is used; penalty is against B)
    cut_a: str  # sender cut name in A (see stitchcore.cuts.list_cuts)
    cut_b: str  # receiver cut name in B
    # linear, BN before and after, least-squares start (Csiszarik et al.: a strong start, close to trained);
    # the one default of the page, the CLI and the classroom demo
    # least-squares start; a grid gap of more than 2x in chained 2x steps (issue 42: a one-shot 8x8 -> 1x1 read 4
    # of the 64 positions); stored adapters without the key read as one-shot (AdapterSpec's own default)
    adapter: AdapterSpec = field(default_factory=lambda: AdapterSpec(init="lstsq", rescale="chained"))
    objective: str = "task"  # task | match | kd | weighted sum "task+0.5*match"
    kd_temperature: float = 2.0  # softmax temperature for the kd objective
    optimizer: str = "adamw"  # adamw | sgd (momentum 0.9)
    lr: float = 1e-2  # Traft & Cheney use 2e-3 over ImageNet-sized epochs; small data has few steps
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps; random-init adapters reach a ~1-3 point penalty
    batch_size: int = 64
    seed: int = 0
    dataset: str | None = None  # None: the dataset B was trained on
    head: str = "b"  # "b": C = B_top(S(A_bottom)); "a": head-preserving C = A_head(B_middle(S(A_bottom)))
    head_cut: str | None = None  # head="a" only: where B's middle hands over to A's head (same family)
    max_train: int | None = None  # cap on training images (quick runs); None = all
    max_test: int | None = None  # cap on test images; None = all
    precision: str = "fp32"  # fp32 | bf16: autocast over the frozen parts and the adapter (fp32 weights and loss)
    val_fraction: float = 0.1  # of the train images held out as validation (the live curve, keep="best"); 0: none
    split_seed: int = 0  # which images are held out (even over classes); fixed apart from the adapter's seed
    keep: str = "last"  # last: the adapter after the last epoch | best: after its best validation epoch
    seeds: int = 1  # adapters trained with seed, seed+1, ...: the first is the run's, all give the spread
    noise_control: bool = True  # the first seed's adapter trained again from a class-clustered noise sender
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES

    # runs stored before a field computed in fp32, on every train image, watching the test images per epoch,
    # with no noise sender
    LEGACY: ClassVar[dict[str, Any]] = {"precision": "fp32", "val_fraction": 0.0, "split_seed": 0, "keep": "last",
                                        "seeds": 1, "data_id": None, "noise_control": False}  # fmt: skip

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("precision", self.precision, PRECISIONS)
        parse_objective(self.objective)
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_rate("lr", self.lr, MAX_LR, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "typical values 0 .. 0.1 (default 0.05)")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_positive("kd_temperature", self.kd_temperature, "e.g. 2")
        check_at_most("kd_temperature", self.kd_temperature, 1000, "e.g. 2")
        check_count("epochs", self.epochs, 0, MAX_EPOCHS, "0 keeps the adapter's start (e.g. the least-squares fit)",
                    "each epoch passes over the training images")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_seed("seed", self.seed)
        check_image_caps(self)
        if not isinstance(self.val_fraction, (int, float)) or not 0 <= self.val_fraction < 0.5:
            raise StitchError(f"val_fraction must lie in [0, 0.5), got {self.val_fraction!r}: e.g. 0.1 (0: no "
                              "validation split)")
        check_seed("split_seed", self.split_seed)
        check_choice("keep", self.keep, KEEPS)
        if self.keep == "best" and not self.val_fraction:
            raise StitchError("keep='best' picks the epoch on the validation split: set val_fraction, e.g. 0.1",
                              fix={"val_fraction": 0.1})
        check_count("seeds", self.seeds, 1, MAX_ADAPTER_SEEDS, "e.g. 5 adapters for the spread over seeds",
                    "each seed trains the adapter again")
        if not isinstance(self.noise_control, bool):
            raise StitchError(f"noise_control (--no-noise-control) is true or false, not {self.noise_control!r}")
        check_choice("head", self.head, ("a", "b"))
        if (self.head == "a") != (self.head_cut is not None):
            raise StitchError("head='a' needs head_cut (where A's head takes over), and head_cut needs head='a'")
        if self.head == "a" and "final" in parse_objective(self.objective):
            raise StitchError("the final objective matches B's own final features, so B's head runs the top: "
                              "head='a' keeps A's; use objective 'task'", fix={"objective": "task"})  # fmt: skip
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))
        check_adapter_rank(self.adapter)
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    def settings(self) -> str:
        """Everything but the models and cuts, in one line: what Launch runs.

        >>> print(StitchSpec(a="zoo:x", b="zoo:y", cut_a="block1", cut_b="block1", epochs=3).settings())
        linear adapter (BatchNorm both, bilinear resample, lstsq init) · objective task · adamw lr 0.01 · 3 epochs · batch 64 · seed 0 · all images of B's dataset · head b · 0.1 validation (split seed 0) · noise-sender control
        """
        ad = self.adapter
        rank = f", rank {ad.rank}" if ad.rank is not None else ""
        images = ("all images" if self.max_train is None and self.max_test is None else
                  f"{self.max_train or 'all'} train / {self.max_test or 'all'} test images")
        dataset = self.dataset or "B's dataset"
        head = f"head a from {self.head_cut}" if self.head == "a" else "head b"
        return (f"{ad.kind} adapter (BatchNorm {ad.norm}, {ad.resample} resample, {ad.init} init{rank}) · "
                f"objective {self.objective} · {self.optimizer} lr {self.lr:g} · {self.epochs} epochs · "
                f"batch {self.batch_size} · seed {self.seed} · {images} of {dataset} · {head}"
                + (f" · {self.precision}" if self.precision != "fp32" else "")
                + (f" · {self.val_fraction:g} validation (split seed {self.split_seed})" if self.val_fraction else "")
                + (" · keep best" if self.keep == "best" else "") + (f" · {self.seeds} seeds" if self.seeds > 1 else "")
                + (" · noise-sender control" if self.noise_control else ""))

    def label(self) -> str:
        head = f" -> {self.a}[{self.head_cut}:]" if self.head == "a" else ""
        return f"{self.a}[{self.cut_a}] -> {self.b}[{self.cut_b}]{head} ({self.adapter.kind}, {self.adapter.init})"


def _head_cuts_match(a: LoadedModel, b: LoadedModel, head_cut: str) -> Cut:
    """A's cut where its head takes over, checked against B's cut of the same name."""
    at_a = get_cut(a, head_cut)
    at_b = get_cut(b, head_cut)
    if (at_a.shape, at_a.layout) != (at_b.shape, at_b.layout):
        raise AdapterError(
            f"A's head cannot follow B's middle at {head_cut}: A has {at_a.shape} there, B has {at_b.shape};"
            " head preservation needs same-family models"
        )
    return at_a


def _head_preserving_top(a: LoadedModel, b: LoadedModel, cut_b: str, head_cut: str) -> torch.nn.Sequential:
    """B's middle (cut_b -> head_cut) followed by A's head (head_cut -> output)."""
    at_a = _head_cuts_match(a, b, head_cut)
    middle = split_segment(b, cut_b, head_cut)
    _, tail_a = split(a, at_a)
    return torch.nn.Sequential(middle, tail_a)


def _state_bytes(module: torch.nn.Module) -> bytes:
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    return save(state)


def _prepare(spec: StitchSpec, store: Any) -> tuple[LoadedModel, LoadedModel, Any, Cut, Cut]:
    """Load A, B and the data and find both cuts; StitchError for anything that cannot run."""
    a, b = load_pair(spec, store, input_kind="image", hint="use the merge/LM stitching tools")
    ds = pair_dataset(spec, a, b)
    check_head_classes(b, ds, "B")
    check_head_classes(a, ds, "A")
    if spec.val_fraction:
        ds.validation_size(spec.val_fraction)  # DataError now, not after loading, for a set too small to split
    cut_a = get_cut(a, spec.cut_a)
    cut_b = get_cut(b, spec.cut_b)
    reason = compatibility(cut_a, cut_b, spec.adapter)
    if reason is not None:
        raise AdapterError(f"cannot join A[{cut_a.name}] {cut_a.shape} to B[{cut_b.name}] {cut_b.shape}: {reason}")
    if spec.head == "a":
        _head_cuts_match(a, b, spec.head_cut)
    return a, b, ds, cut_a, cut_b


def check_stitch(spec: StitchSpec, store: Any) -> None:
    """Everything the run checks before training, without training: models, data, cuts, adapter fit (and B's
    rest on a No Downsample adapter's larger map)."""
    _, b, _, cut_a, cut_b = _prepare(spec, store)
    if spec.head == "b":
        _check_larger_map(spec, split(b, cut_b)[1], cut_a, cut_b, torch.device("cpu"))


def _check_larger_map(spec: StitchSpec, suffix_b: nn.Module, cut_a: Cut, cut_b: Cut, device: torch.device) -> None:
    """AdapterError (with the fix) when the spec's adapter hands B a larger map (No Downsample) that B's rest cannot
    take: a network whose top flattens into a fixed Linear; a ResNet's global pooling takes it."""
    adapter = build_adapter(spec.adapter, cut_a, cut_b).to(device)
    if (why := larger_map_refusal(suffix_b.eval(), adapter, device)) is not None:
        raise AdapterError(f"{why}; use resample bilinear", fix={"adapter.resample": "bilinear"})


# ---------------------------------------------------------------------------- estimate


def _stitch_units(spec: StitchSpec, ectx: EstimateContext) -> dict[str, float]:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    ds = pair_dataset(spec, a, b)
    cut_a = get_cut(a, spec.cut_a)
    cut_b = get_cut(b, spec.cut_b)
    setup = time.perf_counter() - t0
    u = pair_units(a, b, ds, cut_a, cut_b, spec.adapter, spec.batch_size, spec.objective, spec.optimizer, device)
    u.update(setup=setup, full_a=full_forward(a, ds, device), full_b=full_forward(b, ds, device),
             n_train=len(ds.labels("train")), n_test=len(ds.labels("test")))
    return u


def estimate_stitch(spec: StitchSpec, ectx: EstimateContext) -> Estimate:
    """A and B over the data, the fit, the adapter's training steps and the evaluations."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "kd_temperature", "val_fraction",
             "split_seed", "keep", "seeds", "noise_control")
    key = ectx.pair_key("stitch", spec, scale)
    u = calibrated(key, lambda: _stitch_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    n_val = round(spec.val_fraction * u["n_train"])  # held out of train: scored after every epoch
    n_train = min(n_train, u["n_train"] - n_val)
    needs_receiver = "match" in spec.objective or spec.adapter.init in ("lstsq", "procrustes")
    trainings = spec.seeds + spec.noise_control  # the noise sender: one more training on the cached activations
    steps = spec.epochs * -(-n_train // spec.batch_size) * trainings
    watched = (n_val or n_test) * (spec.epochs + 1) + (2 * n_test if n_val else n_test)  # evals per training
    seconds = (u["setup"] + (n_train + n_val + n_test) * u["prefix_a"] + n_train * (u["prefix_b"] + u["fit"] * trainings)
               * needs_receiver + n_train * u["full_b"] * ("kd" in spec.objective or "final" in spec.objective)
               + steps * u["step"]
               + trainings * watched * u["eval"] + n_test * (u["full_a"] + u["full_b"]))  # fmt: skip
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {steps:,} steps")


def _seed_spread(seeds: list[int], runs: list[_Trained], base: ClassifierScore) -> dict[str, Any]:
    """Each seed's test accuracy and penalty, with their mean and 95% interval across seeds (Student t, clipped
    to the metric's range; None under ``intervals.MIN_SEEDS`` seeds)."""
    acc = [r.test["accuracy"] for r in runs]
    pen = [stitching_penalty(base["accuracy"], a) for a in acc]
    (acc_mean, acc_ci), (pen_mean, pen_ci) = seed_spread(acc, bounds=(0.0, 1.0)), seed_spread(pen, bounds=(-1.0, 1.0))
    return {"seed": seeds, "accuracy": acc, "penalty": pen, "accuracy_mean": acc_mean, "accuracy_ci": acc_ci,
            "penalty_mean": pen_mean, "penalty_ci": pen_ci}


def _noise_summary(run: _Trained | None, stitched: ClassifierScore, base: ClassifierScore, seed: int) -> dict[str, Any]:
    """The noise sender's test accuracy and penalty against the base model, and ``margin`` = stitched − noise
    accuracy, each with its 95% interval over the test images (the differences paired: the same images for
    both); ``skipped`` with the reason when it did not run."""
    if run is None:
        return {"skipped": "A's activations at this cut are over the memory budget (streamed), and the noise "
                           "sender needs them in memory for its scale: cap max_train (--max-train) to run it"}
    got = run.test
    return {
        "accuracy": got["accuracy"],
        "accuracy_ci": list(mean_ci(got.correct, seed=seed)),
        "penalty": stitching_penalty(base["accuracy"], got["accuracy"]),
        "penalty_ci": list(paired_difference_ci(base.correct, got.correct, seed=seed)),
        "margin": round(stitched["accuracy"] - got["accuracy"], 6),
        "margin_ci": list(paired_difference_ci(stitched.correct, got.correct, seed=seed)),
        "start_accuracy": run.start["accuracy"],  # before training (the closed-form fit from noise, or the init)
    }


def stitch_cuts(spec: StitchSpec, store: Any) -> tuple[Cut, Cut]:
    """The two cuts of ``spec`` (A's, B's) as its run sees them: what builds its adapter again."""
    _, _, _, cut_a, cut_b = _prepare(spec, store)
    return cut_a, cut_b


def stitched_accuracy(spec: StitchSpec, store: Any, adapter_state: dict[str, torch.Tensor],
                      device: torch.device | str = "cpu") -> float:  # fmt: skip
    """The test accuracy of A's layers to ``cut_a``, an adapter of ``spec`` holding ``adapter_state``, and B's
    layers after ``cut_b`` (or B's middle and A's head), on the run's own test images: a saved adapter gives its
    run's number again (``api.adapters``)."""
    device = torch.device(device)
    a, b, ds, cut_a, cut_b = _prepare(spec, store)
    a.to(device), b.to(device)
    prefix_a, _ = split(a, cut_a)
    _, suffix_b = split(b, cut_b)
    if spec.head == "a":
        suffix_b = _head_preserving_top(a, b, cut_b.name, spec.head_cut)
    adapter = build_adapter(spec.adapter, cut_a, cut_b)
    adapter.load_state_dict(adapter_state)
    for m in (prefix_a, suffix_b, adapter):
        m.to(device).eval()
    n_test = len(ds.labels("test")) if spec.max_test is None else min(spec.max_test, len(ds.labels("test")))
    h_test = collect(prefix_a, ds, a.preprocess, "test", limit=n_test, device=device, batch_size=EVAL_BATCH)
    y_test = ds.labels("test")[:n_test]
    batches = ((h_test[i: i + EVAL_BATCH], y_test[i: i + EVAL_BATCH]) for i in range(0, n_test, EVAL_BATCH))
    with torch.no_grad():
        return evaluate_batches(lambda h: suffix_b(adapter(h.to(device))), batches, ds.num_classes, device)["accuracy"]


@register_experiment("stitch", StitchSpec.from_dict, check=check_stitch, estimate=estimate_stitch)
def run_stitch(spec: StitchSpec, ctx: RunContext) -> dict:
    """Train the adapter of ``spec``; returns the summary stored with the run."""
    t0 = time.perf_counter()
    device = ctx.device
    ctx.progress(0.0, "loading models")
    a, b, ds, cut_a, cut_b = _prepare(spec, ctx.store)
    a.to(device), b.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    prefix_a, _ = split(a, cut_a)
    prefix_b, suffix_b = split(b, cut_b)
    base, base_role = b, "b"
    if spec.head == "a":
        suffix_b = _head_preserving_top(a, b, cut_b.name, spec.head_cut)
        base, base_role = a, "a"
    for m in (prefix_a, prefix_b, suffix_b):
        m.to(device).eval()
    _check_larger_map(spec, suffix_b, cut_a, cut_b, device)

    objective = parse_objective(spec.objective)
    needs_receiver = "match" in objective or spec.adapter.init in ("lstsq", "procrustes")
    if spec.val_fraction:  # held out of train: the live curve and "keep best" read it, never the test images
        ds = ds.with_validation(spec.val_fraction, spec.split_seed)
    watch = "val" if spec.val_fraction else "test"  # runs stored before the split watched the test images

    n_train, n_test = (len(ds.labels(s)) if cap is None else min(cap, len(ds.labels(s)))
                       for s, cap in (("train", spec.max_train), ("test", spec.max_test)))  # fmt: skip
    n_val = len(ds.labels("val")) if spec.val_fraction else 0
    need = 4 * ((n_train + n_val + n_test) * math.prod(cut_a.shape)
                + n_train * math.prod(cut_b.shape) * needs_receiver)
    budget = memory_budget_bytes()
    streamed = need > budget  # over it: each batch's activations are computed when it is drawn
    # the noise sender's activations sit beside A's (whose scale they take): only when both fit in memory
    noise_bytes = 4 * (n_train + n_val + n_test) * math.prod(cut_a.shape)
    noise = spec.noise_control and need + noise_bytes <= budget
    trainings = spec.seeds + noise
    ctx.progress(0.02, "streaming: prefix activations computed per batch" if streamed else "caching prefix activations")
    acts = dict(device=device, batch_size=EVAL_BATCH, check_cancel=ctx.check_cancel)
    bf16 = spec.precision == "bf16"

    def activations(module, m: LoadedModel, split: str, n: int) -> torch.Tensor | OnDemand:  # [n, *cut shape]
        module = Autocast(module, device) if bf16 else module  # frozen: bf16 inside, float32 out
        if streamed:
            return OnDemand(module, ds, m.preprocess, split, n, device)
        return collect(module, ds, m.preprocess, split, limit=n, **acts)

    h_train, h_test = activations(prefix_a, a, "train", n_train), activations(prefix_a, a, "test", n_test)
    y_train = ds.labels("train")[:n_train]
    y_test = ds.labels("test")[:n_test]
    h_val, y_val = (activations(prefix_a, a, "val", n_val), ds.labels("val")) if n_val else (h_test, y_test)
    receiver = activations(prefix_b, b, "train", n_train) if needs_receiver else None
    teacher = activations(base.model, base, "train", n_train) if "kd" in objective else None
    top = suffix_b  # what the adapter trains through: with the final objective, it also reads B's final features
    final = None
    if "final" in objective:  # B's own final features [n_train, D], read where its head takes them
        head = checked_head(b.model, b.example_input().to(device))
        top = HeadInput(suffix_b, head)
        final = activations(HeadInput(b.model, head, features_only=True), b, "train", n_train)
    targets = AdapterTargets(labels=y_train, receiver=receiver, teacher_logits=teacher, final=final)
    seeds = list(range(spec.seed, spec.seed + spec.seeds))

    def train_seed(k: int, seed: int, sender: tuple | None = None) -> _Trained:
        """Build, fit and train the adapter of ``seed`` (the k-th training); the first one's curves are the run's.
        ``sender``: (train, val, test) activations in place of A's (the noise sender's), else A's."""
        live = k == 0 and sender is None
        h_train, h_val, h_test = sender or (real_train, real_val, real_test)
        torch.manual_seed(seed)
        adapter = build_adapter(spec.adapter, cut_a, cut_b)
        residual = None
        if spec.adapter.init in ("lstsq", "procrustes"):
            ctx.progress((0.1 + 0.85 * k) / trainings, f"closed-form {spec.adapter.init} fit")
            pairs = ((h_train[i: i + EVAL_BATCH], receiver[i: i + EVAL_BATCH]) for i in range(0, n_train, EVAL_BATCH))
            residual = fit_adapter(adapter, pairs, method=spec.adapter.init)
        adapter.to(device)

        def stitched_logits(h: torch.Tensor) -> torch.Tensor:
            with autocast(device, bf16):
                return suffix_b(adapter(h.to(device, torch.float32))).float()

        def score(h, y) -> ClassifierScore:
            adapter.eval()
            batches = ((h[i: i + EVAL_BATCH], y[i: i + EVAL_BATCH]) for i in range(0, len(h), EVAL_BATCH))
            return evaluate_batches(stitched_logits, batches, ds.num_classes, device)

        start_test = score(h_test, y_test)
        watched = score(h_val, y_val) if n_val else start_test
        best = (watched["accuracy"], 0, _copy_state(adapter))  # the epoch "keep best" returns to
        if live:
            ctx.log(0, {f"{watch}_accuracy": watched["accuracy"]}, epoch=0)
        steps_per_epoch = -(-n_train // spec.batch_size)

        def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
            of = " (noise sender)" if sender is not None else f" (seed {k + 1} of {spec.seeds})" if spec.seeds > 1 else ""
            ctx.progress((k + 0.1 + 0.85 * step / total) / trainings, f"training adapter: step {step}/{total}{of}")
            if live and (step % 5 == 0 or step == total):
                ctx.log(step, {"loss": metrics["loss"]})

        def on_epoch(epoch: int) -> dict[str, float]:
            nonlocal watched, best
            watched = score(h_val, y_val)
            acc = watched["accuracy"]
            if acc > best[0]:
                best = (acc, epoch, _copy_state(adapter))
            if live:
                ctx.log(epoch * steps_per_epoch, {f"{watch}_accuracy": acc}, epoch=epoch)
            return {f"{watch}_accuracy": acc}

        knobs = replace(TrainKnobs.of(spec), seed=seed)
        history = train_adapter(adapter, top, h_train, targets, objective=objective, knobs=knobs, device=device,
                                precision=spec.precision, kd_temperature=spec.kd_temperature, on_step=on_step,
                                on_epoch=on_epoch, check_cancel=ctx.check_cancel)  # fmt: skip
        kept = spec.epochs
        if spec.keep == "best":
            _, kept, state = best
            adapter.load_state_dict(state)
        # legacy runs: the last epoch's test evaluation is of the final adapter; a validation run scores it once
        final = (start_test if kept == 0 else watched if watch == "test" and kept == spec.epochs
                 else score(h_test, y_test))  # fmt: skip
        return _Trained(adapter, start_test, final, history, residual, kept)

    real_train, real_val, real_test = h_train, h_val, h_test
    runs = [train_seed(k, seed) for k, seed in enumerate(seeds)]
    noise_run = None
    if noise:  # the first seed's adapter again, from class-clustered noise of A's shape and scale
        def noise_of(labels: torch.Tensor, split_name: str) -> torch.Tensor:  # [N, *cut_a.shape]
            return clustered_noise(labels, tuple(h_train.shape[1:]), n_classes=ds.num_classes, seed=spec.seed,
                                   split=split_name, like=h_train)  # fmt: skip

        noise_test = noise_of(y_test, "test")
        noise_val = noise_of(y_val, "val") if n_val else noise_test
        noise_run = train_seed(spec.seeds, spec.seed, sender=(noise_of(y_train, "train"), noise_val, noise_test))
    first = runs[0]
    adapter, start_score, stitched, history, residual = (first.adapter, first.start, first.test, first.history,
                                                         first.residual)  # fmt: skip
    params, flops = adapter_cost(adapter)
    ctx.progress(0.96, "scoring A, B and the stitched model")
    limit = len(h_test)
    _, suffix_a = split(a, cut_a)  # A's own accuracy from its cached test activations: no second prefix pass
    suffix_a.to(device).eval()
    suffix_a = Autocast(suffix_a, device) if bf16 else suffix_a
    score_a = evaluate_batches(
        lambda h: suffix_a(h.to(device)), ((h_test[i: i + EVAL_BATCH], y_test[i: i + EVAL_BATCH])
                                           for i in range(0, limit, EVAL_BATCH)), ds.num_classes, device,
    )  # fmt: skip
    score_b = evaluate_batches(
        Autocast(b.model, device) if bf16 else b.model, ds.model_batches("test", EVAL_BATCH, b.preprocess, device,
                                                                          limit=limit), ds.num_classes, device
    )
    ctx.store.put_artifact(ctx.run_id, ADAPTER_WEIGHTS, _state_bytes(adapter))
    base_score = score_a if base_role == "a" else score_b
    controls = {"noise_sender": _noise_summary(noise_run, stitched, base_score, spec.seed)} if spec.noise_control else {}
    return {
        "accuracy": stitched["accuracy"],
        "base": {"a": score_a["accuracy"], "b": score_b["accuracy"]},
        "penalty": stitching_penalty((score_a if base_role == "a" else score_b)["accuracy"], stitched["accuracy"]),
        "penalty_base": base_role,
        # 95% intervals over the test images: exact binomial for accuracies, a paired bootstrap for the penalty
        "accuracy_ci": list(mean_ci(stitched.correct, seed=spec.seed)),
        "penalty_ci": list(paired_difference_ci(base_score.correct, stitched.correct, seed=spec.seed)),
        "base_ci": {"a": list(mean_ci(score_a.correct, seed=spec.seed)), "b": list(mean_ci(score_b.correct, seed=spec.seed))},
        "start_accuracy": start_score["accuracy"],
        "per_class": stitched["per_class"],
        "per_class_ci": grouped_mean_ci(stitched.correct, y_test, ds.num_classes, seed=spec.seed),
        "per_class_base": {"a": score_a["per_class"], "b": score_b["per_class"]},
        "per_class_base_ci": {r: grouped_mean_ci(sc.correct, y_test, ds.num_classes, seed=spec.seed)
                              for r, sc in (("a", score_a), ("b", score_b))},
        "classes": list(ds.classes),
        "dataset": ds.name,
        "n_train": n_train,
        "n_test": limit,
        **({"n_val": n_val, "watched": watch} if n_val else {}),  # the split the per-epoch curve is on
        **({"kept_epoch": first.kept_epoch} if spec.keep == "best" else {}),
        **({"seeds": _seed_spread(seeds, runs, base_score)} if spec.seeds > 1 else {}),
        **({"activations": "streamed"} if streamed else {}),  # over the budget: computed per batch, not cached
        **({"controls": controls} if controls else {}),  # runs stored before the noise sender have none
        "cut_a": cut_a.to_dict(),
        "cut_b": cut_b.to_dict(),
        "params": int(params),
        "flops": int(flops),
        "lstsq_residual": None if residual is None else round(float(residual), 6),
        "history": history,
        "preprocess": {
            "a": a.preprocess.to_dict() if a.preprocess else None,
            "b": b.preprocess.to_dict() if b.preprocess else None,
        },
        "seconds": round(time.perf_counter() - t0, 3),
    }

