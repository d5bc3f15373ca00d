"""Experiment ``assemble``: new networks from parts, at disparate depths and across families (Traft & Cheney).

Every cell joins A's bottom, up to a sender cut, to B's top, from a receiver cut, through a
trained adapter made by one *recipe* (kind x BatchNorm placement x spatial rescaling):

    C(x) = suffix_B,r(S(prefix_A,s(x)))

Sender and receiver may sit at any depth (a low layer of A into a high layer of B skips B's
blocks; the other way repeats them) and in any layout: feature maps [B, C, H, W], Swin's
channels-last maps [B, H, W, C], ViT tokens [B, N, D] (with a class token, made by the adapter
or taken from B: ``cls_token``), vectors.  The adapter is trained on the task with A and B
frozen, AdamW lr 2e-3, weight decay 0.05, cosine to zero (the seed's settings), starting from
random weights; its BatchNorm statistics are then set to those of its training inputs (one
pass, no weight changes); each cell then records

* ``accuracy`` on the test split with its 95% interval over the test images (``accuracy_ci``: exact binomial,
  ``measures.intervals.mean_ci``), the ``penalty`` against B alone (B's accuracy minus the cell's: C answers with
  B's head) with its paired bootstrap interval (``penalty_ci``: B and the cell scored on the same images,
  resampled together), which test images it got right (``outcomes``, packed: a later paired interval against
  another cell), the adapter's ``adapter_params`` and ``adapter_flops``;
* the whole assembled network's ``flops`` (FlopCounterMode on one example: prefix + adapter +
  suffix) and ``params``;
* with ``finetune_baseline``, ``finetune_accuracy`` (and ``finetune_accuracy_ci``): the same network with every
  part trained (copies: A and B stay untouched), the seed's "drop the skipped blocks, fine-tune all".

Runs stored before the intervals (issue 39) have cells without ``accuracy_ci``, ``penalty``, ``penalty_ci`` and
``outcomes``; every reader takes them as absent (no error bar, a dash in a table).

A's and B's own accuracy, FLOPs and parameters are the reference points (``base``), and the
Pareto front of accuracy against FLOPs over every cell and A and B is part of the result
(:func:`pareto_front`).  A sender's activations are computed once and reused for every
receiver and recipe.  Cells stream into the ``cells.json`` artifact and a resume file, so a
cancelled or crashed run continues where it stopped; a pair no adapter of the recipe can join
is a cell with its ``skipped_reason``.  Two recipes that build the same adapter for a pair (say
``bilinear`` and ``strided`` between equal grids) are trained once (``same_as``).
"""

from __future__ import annotations

import copy
import json
import logging
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from stitchcore.backends import Unit, UnitContext
from stitchcore.cuts import Cut, coarse_cuts, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset
from stitchcore.errors import StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LR,
    MAX_WEIGHT_DECAY,
    check_count,
    check_image_caps,
    check_rate,
)
from stitchcore.experiments._cells import CellBook
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
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
    spread,
)  # fmt: skip
from stitchcore.measures.intervals import mean_ci, pack_outcomes, paired_difference_ci, unpack_outcomes
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import pack_model
from stitchcore.models.refs import parse_ref
from stitchcore.stitching.activations import collect
from stitchcore.stitching.adapter_kinds import list_adapters
from stitchcore.stitching.adapters import (
    CLS_TOKENS,
    NO_DOWNSAMPLE,
    NORMS,
    RESAMPLES,
    RESCALES,
    AdapterSpec,
    build_adapter,
    compatibility,
)
from stitchcore.stitching.evaluate import (
    ClassifierScore,
    count_params,
    module_flops,
    score_logits,
    stitching_penalty,
)
from stitchcore.stitching.train import (
    OPTIMIZERS,
    AdapterTargets,
    TrainKnobs,
    recalibrate_batchnorm,
    train_adapter,
    train_classifier,
)
from stitchcore.store.results import Store

__all__ = ["CELLS_ARTIFACT", "DEFAULT_KINDS", "AssembleSpec", "assemble_plan", "assembled_cells", "cell_rows", "check_assemble", "default_cuts", "estimate_assemble", "pareto_front", "recipe_name", "run_assemble", "sender_unit", "with_penalty"]

log = logging.getLogger(__name__)

CELLS_ARTIFACT = "cells.json"
DEFAULT_KINDS = ("linear", "linear_relu", "conv3x3_relu", "bottleneck")  # Traft & Cheney's adapters
COARSE = 3  # default cut set: this many cuts of each model, spread over depth (3 x 3 pairs x 8 recipes)
EVAL_BATCH = 256
CLS_SAMPLES = 256  # training images averaged for B's own class token (cls_token="receiver")


@dataclass(frozen=True)
class AssembleSpec(DataFiles, Spec):
    """Join A's bottom to B's top at every (sender, receiver) pair with every adapter recipe.

    >>> s = AssembleSpec("zoo:resnet-digits-s0", "zoo:vit-digits-s0-adamw")
    >>> [recipe_name(r) for r in s.recipes()][:3], len(s.recipes())
    (['linear/both/bilinear', 'linear/both/strided', 'linear_relu/both/bilinear'], 8)
    """

    a: str  # ModelRef of the bottom model (its layers up to the sender cut)
    b: str  # ModelRef of the top model (its layers after the receiver cut, and its head)
    senders: tuple[str, ...] | None = None  # A's cuts; None = default_cuts: COARSE maps/token cuts over depth
    receivers: tuple[str, ...] | None = None  # B's cuts; None = default_cuts
    kinds: tuple[str, ...] = DEFAULT_KINDS  # adapter kinds (stitching.adapter_kinds)
    norms: tuple[str, ...] = ("both",)  # BatchNorm placements: none | bn_before | bn_after | both
    # spatial rescaling: none | bilinear | nearest | strided | no_downsample (the sender's grid goes on into B)
    resamples: tuple[str, ...] = ("bilinear", "strided")
    cls_token: str = "adapter"  # a ViT receiver's class token: learned by the adapter, or B's own ("receiver")
    optimizer: str = "adamw"  # Traft & Cheney: AdamW, lr 2e-3, weight decay 0.05, cosine to 0
    lr: float = 2e-3
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps per cell
    batch_size: int = 64
    dataset: str | None = None  # None: the dataset B was trained on (C answers with B's head)
    finetune_baseline: bool = False  # also fine-tune every assembled network end to end (copies)
    finetune_epochs: int = 5
    finetune_lr: float = 5e-4
    max_train: int | None = None  # cap on training images; None = all
    max_test: int | None = None  # cap on test images; None = all
    seed: int = 0  # adapter init and data order
    # a gap of more than 2x: "chained" = one adapter per 2x step (Traft & Cheney); "oneshot" = one adapter that
    # resizes by the whole ratio (every run before issue 25: a spec dict without the key reads as "oneshot")
    rescale: str = "chained"
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES

    # built-in data: the run ids of before; no rescale key: a run from before chained rescaling
    LEGACY: ClassVar[dict[str, Any]] = {"data_id": None, "rescale": "oneshot"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        for name, valid in (("kinds", tuple(list_adapters())), ("norms", NORMS),
                            ("resamples", (*RESAMPLES, NO_DOWNSAMPLE)),
                            ("senders", None), ("receivers", None)):  # fmt: skip
            value = getattr(self, name)
            if value is None:
                continue
            items = (value,) if isinstance(value, str) else tuple(value)
            if not items or len(set(items)) != len(items):
                raise StitchError(f"{name} must name at least one value, each once; got {list(items)}")
            for item in items if valid is not None else ():
                check_choice(name[:-1], item, valid)
            object.__setattr__(self, name, items)
        if "identity" in self.kinds:
            raise StitchError("kind 'identity' adds no adapter (a merge); assemble joins parts with trained adapters")
        check_choice("cls_token", self.cls_token, CLS_TOKENS)
        check_choice("rescale", self.rescale, RESCALES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_positive("lr", self.lr, "the seed's value is 2e-3")
        check_rate("lr", self.lr, MAX_LR, "the seed's value is 2e-3")
        check_positive("finetune_lr", self.finetune_lr, "e.g. 5e-4")
        check_rate("finetune_lr", self.finetune_lr, MAX_LR, "e.g. 5e-4")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_count("epochs", self.epochs, 1, MAX_EPOCHS, "e.g. 10", "each epoch trains every cell's adapter again")
        check_count("finetune_epochs", self.finetune_epochs, 1, MAX_EPOCHS, "e.g. 5")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_seed("seed", self.seed)
        check_image_caps(self)
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    def recipes(self) -> list[AdapterSpec]:
        """Every adapter recipe of the spec: kinds x norms x resamples, random init, in that order."""
        return [AdapterSpec(kind=k, norm=n, resample=r, cls_token=self.cls_token, rescale=self.rescale)
                for k in self.kinds for n in self.norms for r in self.resamples]  # fmt: skip

    def label(self) -> str:
        return f"assemble {self.a} -> {self.b} ({len(self.recipes())} recipes)"


def recipe_name(spec: AdapterSpec) -> str:
    """``kind/norm/resample``: a recipe's name in cells, tables and the CLI."""
    return f"{spec.kind}/{spec.norm}/{spec.resample}"


# ---------------------------------------------------------------------------- results, read back


def pareto_front(points: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the points no other point beats: none has higher ``accuracy`` at no more ``flops``
    (or equal accuracy at fewer); of equal points the first.  Points without both numbers, and copies
    (``same_as``), are left out; sorted by FLOPs.

    >>> pareto_front([{"accuracy": 0.9, "flops": 10}, {"accuracy": 0.8, "flops": 20}, {"accuracy": 0.95, "flops": 30}])
    [0, 2]
    """
    ok = [i for i, p in enumerate(points)
          if p.get("accuracy") is not None and p.get("flops") is not None and not p.get("same_as")]  # fmt: skip

    def beaten(i: int) -> bool:
        a, f = points[i]["accuracy"], points[i]["flops"]
        return any(points[j]["accuracy"] >= a and points[j]["flops"] <= f
                   and (points[j]["accuracy"] > a or points[j]["flops"] < f) for j in ok if j != i)  # fmt: skip

    front, seen = [], set()
    for i in ok:  # of points with equal accuracy and FLOPs (e.g. two resamplings of a 1x1 map) the first stands
        if not beaten(i) and (points[i]["accuracy"], points[i]["flops"]) not in seen:
            seen.add((points[i]["accuracy"], points[i]["flops"]))
            front.append(i)
    return sorted(front, key=lambda i: (points[i]["flops"], -points[i]["accuracy"]))


def assembled_cells(store: Store, run_id: str) -> list[dict]:
    """The cells an assemble run has finished so far (all of them once done); [] before the first.

    One record per (sender, receiver, recipe): ``sender``, ``receiver``, ``sender_layout``,
    ``receiver_layout``, ``recipe``, ``adapter``, ``norm``, ``resample``, ``accuracy``, ``flops``,
    ``macs``, ``params`` (the whole assembled network's), ``adapter_params``, ``adapter_flops``,
    ``finetune_accuracy``, ``skipped_reason`` (None unless no adapter of the recipe joins the pair) and
    ``same_as`` (the recipe whose identical adapter was trained instead); runs since issue 39 also
    ``accuracy_ci``, ``penalty``, ``penalty_ci`` and ``outcomes``.  Read from ``cells.json``, rewritten
    after every sender.
    """
    try:
        cells = json.loads(store.artifact_path(run_id, CELLS_ARTIFACT).read_text())
    except (StitchError, OSError, ValueError):  # no artifact yet (StoreError), or caught mid-replace
        return []
    return cells if isinstance(cells, list) else []


def with_penalty(cell: dict[str, Any], base: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """``cell`` with its ``penalty`` against B alone (B's accuracy minus the cell's) and that penalty's paired 95%
    interval (``penalty_ci``: B's and the cell's right/wrong on the same test images, resampled together); the
    cell as it is when either side lacks its ``outcomes`` (a skipped cell, a run stored before them).

    >>> b = {"accuracy": 0.75, "outcomes": pack_outcomes(torch.tensor([1, 1, 1, 0]))}
    >>> c = with_penalty({"accuracy": 0.5, "outcomes": pack_outcomes(torch.tensor([1, 1, 0, 0]))}, b, 0)
    >>> c["penalty"], c["penalty_ci"][0] >= 0.0
    (0.25, True)
    >>> with_penalty({"accuracy": None}, b, 0)
    {'accuracy': None}
    """
    mine, theirs = unpack_outcomes(cell.get("outcomes")), unpack_outcomes(base.get("outcomes"))
    if mine is None or theirs is None or mine.shape != theirs.shape or cell.get("accuracy") is None:
        return cell
    return {**cell, "penalty": stitching_penalty(base["accuracy"], cell["accuracy"]),
            "penalty_ci": list(paired_difference_ci(theirs, mine, seed=seed))}  # fmt: skip


def _count(v: int | None) -> str:
    """A parameter or MAC count in a few characters: 2368 -> '2.37k', 21382400 -> '21.4M'."""
    if v is None:
        return "-"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return str(v)


def _span(ci: Sequence[float] | None, signed: bool = False) -> str:
    return "" if not ci else (f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if signed else f"[{ci[0]:.3f}, {ci[1]:.3f}]")


def cell_rows(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One table row per cell, for a page or a CSV: the pair, the recipe, accuracy and penalty (against B) with
    their 95% intervals over the test images (empty in runs stored before them), the whole network's MACs, the
    adapter's parameters beside them (adapter comparisons are at unequal sizes: a strided linear adapter is
    a patch convolution with kernel x kernel times a 1x1 one's weights), and why a cell was skipped.

    >>> row = cell_rows([{"sender": "layer1.0", "receiver": "layer3.0", "recipe": "linear/both/bilinear",
    ...                   "accuracy": 0.9, "accuracy_ci": [0.87, 0.93], "penalty": 0.08, "penalty_ci": [0.05, 0.11],
    ...                   "macs": 6_700_000, "adapter_params": 2368, "params": 120_000}])[0]
    >>> row["accuracy"], row["accuracy 95% CI"], row["penalty 95% CI"], row["MACs"], row["adapter params"]
    (0.9, '[0.870, 0.930]', '[+0.050, +0.110]', '6.7M', 2368)
    """
    rows = []
    for c in cells:
        rows.append({"sender": c.get("sender"), "receiver": c.get("receiver"), "recipe": c.get("recipe"),
                     "accuracy": c.get("accuracy"), "accuracy 95% CI": _span(c.get("accuracy_ci")),
                     "penalty (B − C)": c.get("penalty"), "penalty 95% CI": _span(c.get("penalty_ci"), signed=True),
                     "MACs": _count(c.get("macs")), "adapter params": c.get("adapter_params"),
                     "network params": c.get("params"), "fine-tuned e2e": c.get("finetune_accuracy"),
                     "note": c.get("skipped_reason") or (f"= {c['same_as']}" if c.get("same_as") else "")
                     or c.get("failed_reason") or ""})  # fmt: skip
    return rows


# ---------------------------------------------------------------------------- parts


def default_cuts(cuts: list[Cut]) -> list[Cut]:
    """The default cut set of one model: COARSE cuts spread over its feature maps and token cuts (vector
    cuts after pooling only take vectors: a linear probe, not an assembled network), all cuts if it has none.

    >>> from types import SimpleNamespace as C
    >>> cuts = [C(name=f"b{i}", layout="map", depth=i / 8) for i in range(6)] + [C(name="pool", layout="vector", depth=1)]
    >>> [c.name for c in default_cuts(cuts)]
    ['b0', 'b2', 'b5']
    """
    spatial = [c for c in cuts if c.layout != "vector"]
    return coarse_cuts(spatial or cuts, COARSE)


def _cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
    """The named cuts (aliases resolved, CutError for an unknown one) in execution order, or the default set."""
    every = list_cuts(m)
    if names is None:
        return default_cuts(every)
    picked = {get_cut(m, n).name for n in names}
    return [c for c in every if c.name in picked]


@dataclass
class _Parts:
    """Everything a run reuses across cells: models, data, cuts, B's suffixes and their costs."""

    a: LoadedModel
    b: LoadedModel
    data: ImageDataset
    senders: list[Cut]
    receivers: list[Cut]
    n_train: int
    n_test: int
    suffixes: dict[str, nn.Module]  # receiver name -> suffix_B (frozen, eval)
    suffix_cost: dict[str, tuple[int, int]]  # receiver name -> (params, FLOPs per example)
    receiver_cls: dict[str, torch.Tensor] = field(default_factory=dict)  # receiver name -> B's mean class token [D]


def _prepare(spec: AssembleSpec, store: Store) -> _Parts:
    a, b = load_pair(spec, store, input_kind="image", hint="assemble joins image classifiers")
    data = pair_dataset(spec, a, b)
    check_head_classes(b, data, "B")
    senders, receivers = _cuts(a, spec.senders), _cuts(b, spec.receivers)
    n_train = len(data.labels("train")) if spec.max_train is None else min(spec.max_train, len(data.labels("train")))
    n_test = len(data.labels("test")) if spec.max_test is None else min(spec.max_test, len(data.labels("test")))
    return _Parts(a, b, data, senders, receivers, n_train, n_test, {}, {})


def assemble_plan(spec: AssembleSpec, a: LoadedModel, b: LoadedModel) -> tuple[list[Cut], list[tuple[Cut, Cut,
                                                                                                   AdapterSpec]]]:
    """A's sender cuts, and the (sender, receiver, recipe) cells that train an adapter: those an adapter of
    the recipe can join, one per distinct adapter (a recipe building the same one as another is a copy)."""
    senders, receivers = _cuts(a, spec.senders), _cuts(b, spec.receivers)
    trained, seen = [], set()
    for s in senders:
        for r in receivers:
            for recipe in spec.recipes():
                if compatibility(s, r, recipe) is None:
                    key = (s.name, r.name, recipe.kind, recipe.norm, repr(build_adapter(recipe, s, r).plan))
                    if key not in seen:
                        seen.add(key)
                        trained.append((s, r, recipe))
    return senders, trained


def check_assemble(spec: AssembleSpec, store: Store) -> None:
    """Everything the run checks before its first cell: models, cut names, data and B's head."""
    _prepare(spec, store)


def _forward_cost(m: LoadedModel) -> tuple[int, int]:
    """(parameters, FLOPs per example) of a whole model on its model-input example."""
    return count_params(m.model, trainable_only=False), module_flops(m.model, m.example_input(1))


def _scored(score: ClassifierScore, seed: int, key: str = "accuracy") -> dict[str, Any]:
    """``{key: accuracy, key_ci: its 95% interval over the test images}`` of a score (``correct`` [N])."""
    return {key: score["accuracy"], f"{key}_ci": list(mean_ci(score.correct, seed=seed))}


@torch.no_grad()
def _base_score(m: LoadedModel, parts: _Parts, device: torch.device) -> ClassifierScore:
    model = m.model.to(device).eval()
    logits = [model(x).float().cpu() for x, _ in parts.data.model_batches("test", EVAL_BATCH, m.preprocess, device,
                                                                           limit=parts.n_test)]  # fmt: skip
    return score_logits(torch.cat(logits), parts.data.labels("test")[: parts.n_test], parts.data.num_classes)


def _suffix(parts: _Parts, r: Cut, device: torch.device) -> nn.Module:
    """B after the receiver cut (split once per receiver), frozen and in eval mode."""
    if r.name not in parts.suffixes:
        _, suffix = split(parts.b, r)
        suffix.to(device).eval()
        example = torch.zeros(1, *r.shape, device=device)
        parts.suffixes[r.name] = suffix
        parts.suffix_cost[r.name] = (count_params(suffix, trainable_only=False), module_flops(suffix, example))
    return parts.suffixes[r.name]


@torch.no_grad()
def _receiver_cls(parts: _Parts, r: Cut, device: torch.device) -> torch.Tensor:
    """B's own class token at the receiving cut, averaged over the first CLS_SAMPLES training images: [D]
    (computed once per receiver)."""
    if r.name not in parts.receiver_cls:
        prefix, _ = split(parts.b, r)
        prefix.to(device).eval()
        h = collect(prefix, parts.data, parts.b.preprocess, "train", device=device,
                    limit=min(CLS_SAMPLES, parts.n_train))  # fmt: skip
        parts.receiver_cls[r.name] = h[:, 0].float().mean(0)
    return parts.receiver_cls[r.name]


class _Assembled(nn.Module):
    """prefix_A -> adapter -> suffix_B as one module: A's model input [B, ...] -> logits [B, K]."""

    def __init__(self, prefix: nn.Module, adapter: nn.Module, suffix: nn.Module) -> None:
        super().__init__()
        self.prefix, self.adapter, self.suffix = prefix, adapter, suffix

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.suffix(self.adapter(self.prefix(x)))


def _finetune(spec: AssembleSpec, ctx: UnitContext, parts: _Parts, prefix: nn.Module, adapter: nn.Module,
              suffix: nn.Module) -> ClassifierScore:  # fmt: skip
    """Copies of prefix, adapter and suffix trained together on the task; the result's test score."""
    net = _Assembled(copy.deepcopy(prefix), copy.deepcopy(adapter), copy.deepcopy(suffix)).to(ctx.device)
    for p in net.parameters():
        p.requires_grad_(True)
    y = parts.data.labels("train")[: parts.n_train]
    gen = torch.Generator().manual_seed(spec.seed)
    steps = -(-parts.n_train // spec.batch_size)

    def batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:  # one batch of images at a time
        order = torch.randperm(parts.n_train, generator=gen)
        for i in range(0, parts.n_train, spec.batch_size):
            idx = order[i : i + spec.batch_size]
            yield parts.data.model_inputs("train", idx, parts.a.preprocess, ctx.device), y[idx]

    train_classifier(net, batches, steps, optimizer="adamw", lr=spec.finetune_lr, weight_decay=spec.weight_decay,
                     momentum=0.9, epochs=spec.finetune_epochs, device=ctx.device,
                     check_cancel=ctx.check_cancel)  # fmt: skip
    net.eval()
    with torch.no_grad():
        logits = torch.cat([net(x).float().cpu() for x, _ in parts.data.model_batches(
            "test", EVAL_BATCH, parts.a.preprocess, ctx.device, limit=parts.n_test)])  # fmt: skip
    return score_logits(logits, parts.data.labels("test")[: parts.n_test], parts.data.num_classes)


@torch.no_grad()
def _takes_larger_map(suffix: nn.Module, adapter: nn.Module, device: torch.device) -> str | None:
    """None when B's rest after the receiver cut runs on the adapter's larger (No Downsample) map and still gives
    one row of logits, else why not (a flatten into a fixed Linear, a fixed grid ...)."""
    x = torch.zeros(2, *adapter.sender.shape, device=device)  # [2, *sender.shape]
    was = adapter.training
    adapter.eval()
    try:
        out = suffix(adapter(x))  # [2, classes] when B's rest is fully convolutional up to a global pooling
        ok = isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == 2
        why = None if ok else f"gives {list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
    except (RuntimeError, ValueError, AssertionError) as e:  # shape errors of fixed-size layers
        why = str(e).splitlines()[0][:120]
    finally:
        adapter.train(was)
    if why is None:
        return None
    (h, w), name = adapter.plan.out_grid, adapter.receiver.name
    return (f"No Downsample: B's layers after {name} do not take the sender's {h}x{w} map ({why}); it needs B's "
            "rest to be convolutional up to a global pooling (a ResNet)")


def _cell_key(sender: str, receiver: str, recipe: str) -> str:
    return f"{sender}|{receiver}|{recipe}"


def _blank(s: Cut, r: Cut, recipe: AdapterSpec) -> dict[str, Any]:
    return {"sender": s.name, "receiver": r.name, "sender_layout": s.layout, "receiver_layout": r.layout,
            "sender_depth": round(s.depth, 4), "receiver_depth": round(r.depth, 4), "recipe": recipe_name(recipe),
            "adapter": recipe.kind, "norm": recipe.norm, "resample": recipe.resample, "accuracy": None,
            "accuracy_ci": None, "penalty": None, "penalty_ci": None, "flops": None, "macs": None, "params": None,
            "adapter_params": None, "adapter_flops": None, "adapter_macs": None, "finetune_accuracy": None,
            "skipped_reason": None, "same_as": None}  # fmt: skip


def _sender_cells(spec: AssembleSpec, ctx: UnitContext, parts: _Parts, s: Cut,
                  todo: list[tuple[Cut, AdapterSpec]]) -> Iterator[dict]:  # fmt: skip
    """Every pending (receiver, recipe) cell of sender ``s``, in ``todo`` order, from one pass of A's prefix."""
    device = ctx.device
    prefix, _ = split(parts.a, s)
    prefix.to(device).eval()
    prefix_cost = (count_params(prefix, trainable_only=False), module_flops(prefix, parts.a.example_input(1).to(device)))
    acts = {"device": device, "batch_size": EVAL_BATCH, "check_cancel": ctx.check_cancel}
    h_train = collect(prefix, parts.data, parts.a.preprocess, "train", limit=parts.n_train, **acts)  # [N, *s.shape]
    h_test = collect(prefix, parts.data, parts.a.preprocess, "test", limit=parts.n_test, **acts)
    y_train = parts.data.labels("train")[: parts.n_train]
    y_test = parts.data.labels("test")[: parts.n_test]
    built = {}  # (receiver, adapter repr) -> the cell that trained it
    for r, recipe in todo:
        ctx.check_cancel()
        cell = _blank(s, r, recipe)
        why = compatibility(s, r, recipe)
        if why is not None:
            yield {**cell, "skipped_reason": why}
            continue
        torch.manual_seed(spec.seed)
        adapter = build_adapter(recipe, s, r)
        plan_key = (r.name, recipe.kind, recipe.norm, repr(adapter.plan))
        if plan_key in built:  # the same adapter under another recipe name (e.g. no resampling needed)
            twin = built[plan_key]
            yield {**twin, **{k: cell[k] for k in ("recipe", "resample")}, "same_as": twin["recipe"]}
            continue
        suffix = _suffix(parts, r, device)
        if adapter.plan.out_grid is not None and (why := _takes_larger_map(suffix, adapter, device)) is not None:
            yield {**cell, "skipped_reason": why}
            continue
        if adapter.cls_fixed is not None:
            adapter.set_receiver_cls(_receiver_cls(parts, r, device))
        adapter.to(device)
        train_adapter(adapter, suffix, h_train, AdapterTargets(labels=y_train), objective={"task": 1.0},
                      knobs=TrainKnobs.of(spec), device=device, check_cancel=ctx.check_cancel)  # fmt: skip
        recalibrate_batchnorm(adapter, h_train, device, batch_size=EVAL_BATCH)
        with torch.no_grad():
            logits = torch.cat([suffix(adapter(h_test[i : i + EVAL_BATCH].to(device))).float().cpu()
                                for i in range(0, len(h_test), EVAL_BATCH)])  # fmt: skip
        ad_params = count_params(adapter, trainable_only=False)
        example = torch.zeros(1, *s.shape, device=device)  # [1, *sender.shape]
        ad_flops = module_flops(adapter, example)
        suffix_params, suffix_flops = parts.suffix_cost[r.name]
        if adapter.plan.out_grid is not None:  # No Downsample: B's rest runs on the larger map
            suffix_flops = module_flops(nn.Sequential(adapter, suffix), example) - ad_flops
        flops = prefix_cost[1] + ad_flops + suffix_flops
        score = score_logits(logits, y_test, parts.data.num_classes)
        cell.update(**_scored(score, spec.seed), outcomes=pack_outcomes(score.correct), adapter_params=ad_params,
                    adapter_flops=ad_flops, adapter_macs=ad_flops // 2, params=prefix_cost[0] + ad_params
                    + suffix_params, flops=flops, macs=flops // 2, rescale=spec.rescale)  # fmt: skip
        if spec.finetune_baseline:
            cell.update(_scored(_finetune(spec, ctx, parts, prefix, adapter, suffix), spec.seed, "finetune_accuracy"))
        built[plan_key] = cell
        yield cell


def sender_unit(spec: AssembleSpec, source: _Parts | dict, s: Cut, todo: list[tuple[Cut, AdapterSpec]],
                context: UnitContext) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: sender ``s``'s pending cells, each yielded as it is done (locally ``source`` is the run's
    parts; elsewhere the models come as packages and B's suffixes are split in the worker)."""
    parts = source if isinstance(source, _Parts) else _Parts(
        source["a"].unpack().to(context.device), source["b"].unpack().to(context.device), source["data"], [], [],
        source["n_train"], source["n_test"], {}, {})  # whole, then split
    yield "progress", (0.0, f"A[{s.name}] into B: {len(todo)} cell(s)")
    for i, cell in enumerate(_sender_cells(spec, context, parts, s, todo)):
        yield "cells", [cell]
        if i + 1 < len(todo):
            yield "progress", ((i + 1) / len(todo), f"A[{s.name}] into B[{todo[i + 1][0].name}]")


# ---------------------------------------------------------------------------- estimate


def _assemble_units(spec: AssembleSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    ds = pair_dataset(spec, a, b)
    senders, trained = assemble_plan(spec, a, b)  # the cells that train an adapter: (sender, receiver, recipe)
    setup = time.perf_counter() - t0
    per = [pair_units(a, b, ds, s, r, recipe, spec.batch_size, "task", spec.optimizer, device)
           for s, r, recipe in spread(trained)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]} if per else {"prefix_a": 0.0, "step": 0.0,
                                                                                  "eval": 0.0}  # fmt: skip
    return {**mean, "setup": setup, "senders": len(senders), "cells": len(trained),
            "full": full_forward(a, ds, device) + full_forward(b, ds, device),
            "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_assemble(spec: AssembleSpec, ectx: EstimateContext) -> Estimate:
    """Each sender's pass, then every cell's adapter training and scoring (and the fine-tune baseline)."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "finetune_baseline", "finetune_epochs",
             "finetune_lr")  # fmt: skip
    key = ectx.pair_key("assemble", spec, scale)
    u = calibrated(key, lambda: _assemble_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    # per cell: the adapter's steps, a BN recalibration pass and the test pass through B's suffix
    cell = steps * u["step"] + (n_train + n_test) * u["eval"]
    if spec.finetune_baseline:  # every part trains: forward + backward of the whole network ~ 3 forwards
        cell += spec.finetune_epochs * n_train * 3 * (u["prefix_a"] + u["eval"]) + n_test * (u["prefix_a"] + u["eval"])
    seconds = u["setup"] + n_test * u["full"] + u["senders"] * (n_train + n_test) * u["prefix_a"] + u["cells"] * cell
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {int(u['cells'])} adapters of "
                              f"{steps:,} steps")


@register_experiment("assemble", AssembleSpec.from_dict, check=check_assemble, backends=("local", "ray"),
                     estimate=estimate_assemble)
def run_assemble(spec: AssembleSpec, ctx: RunContext) -> dict:
    """Train every (sender, receiver, recipe) cell of ``spec``; returns the summary stored with the run."""
    t0 = time.perf_counter()
    ctx.progress(0.0, "loading models")
    parts = _prepare(spec, ctx.store)
    parts.a.to(ctx.device), parts.b.to(ctx.device)  # whole, then split: a part moved alone leaves two devices
    recipes = spec.recipes()
    ctx.progress(0.01, "scoring A and B alone")
    base = {}
    for role, m in (("a", parts.a), ("b", parts.b)):
        params, flops = _forward_cost(m)
        score = _base_score(m, parts, ctx.device)
        base[role] = {"ref": m.ref, **_scored(score, spec.seed), "outcomes": pack_outcomes(score.correct),
                      "flops": flops, "macs": flops // 2, "params": params}  # fmt: skip
    plan = [_cell_key(s.name, r.name, recipe_name(rec)) for s in parts.senders for r in parts.receivers
            for rec in recipes]  # fmt: skip
    book = CellBook(ctx, CELLS_ARTIFACT, lambda c: _cell_key(c["sender"], c["receiver"], c["recipe"]), plan,
                    metric=lambda c: "cell_acc")
    done, keep, n_cells = book.done, book.keep, len(plan)
    if done:
        log.info("assemble %s: resuming with %d finished cell(s)", ctx.run_id, len(done))

    backend = ctx.backend()
    source: _Parts | dict = parts
    if backend.name != "local":  # each model once through the object store; the worker splits its own suffixes
        source = {"a": backend.share(pack_model(parts.a)), "b": backend.share(pack_model(parts.b)),
                  "data": backend.share(parts.data), "n_train": parts.n_train, "n_test": parts.n_test}  # fmt: skip
    units, todo_of = [], {}
    for s in parts.senders:
        todo = []
        for r in parts.receivers:
            for rec in recipes:
                key = _cell_key(s.name, r.name, recipe_name(rec))
                keep(done[key]) if key in done else todo.append((r, rec))
        if todo:
            units.append(Unit(s.name, sender_unit, (spec, source, s, todo), len(todo)))
            todo_of[s.name] = todo
    for event in backend.run_units(units, ctx.cancel):
        if event.kind == "progress":
            ctx.progress(0.02 + 0.98 * len(book) / n_cells,
                         f"cell {len(book) + 1}/{n_cells}: {event.payload[1]}{event.where_words}")
        elif event.kind == "cells":
            for cell in event.payload:  # the penalty against B, paired over the test images, computed here
                keep(event.stamp(with_penalty(cell, base["b"], spec.seed)))
            book.save()
        elif event.kind == "failed":
            s = next(c for c in parts.senders if c.name == event.unit.key)
            for r, rec in todo_of[s.name]:
                if _cell_key(s.name, r.name, recipe_name(rec)) not in book:
                    keep({**_blank(s, r, rec), "failed_reason": event.payload})
            log.warning("assemble %s: sender %s failed: %s", ctx.run_id, s.name, event.payload)
            book.save()
    ctx.check_cancel()  # Stop during the units: the run ends cancelled, its finished cells kept
    cells = book.cells()
    ctx.progress(1.0, f"{n_cells} cells done")
    points = [*cells, base["a"], base["b"]]
    front = pareto_front(points)
    summary = {
        "a": spec.a,
        "b": spec.b,
        "senders": [c.name for c in parts.senders],
        "receivers": [c.name for c in parts.receivers],
        "recipes": [recipe_name(r) for r in recipes],
        "cells": cells,
        "pareto": [_front_point(i, cells, base) for i in front],
        "base": base,
        "dataset": parts.data.name,
        "n_train": parts.n_train,
        "n_test": parts.n_test,
        "cls_token": spec.cls_token,
        "rescale": spec.rescale,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return book.finish(summary, backend)


def _front_point(i: int, cells: list[dict], base: dict[str, dict]) -> dict[str, Any]:
    """Point ``i`` of cells + [A, B] as a front entry: a cell's index and names, or the base model's role."""
    if i < len(cells):
        c = cells[i]
        return {"cell": i, "sender": c["sender"], "receiver": c["receiver"], "recipe": c["recipe"],
                "accuracy": c["accuracy"], "accuracy_ci": c.get("accuracy_ci"), "flops": c["flops"],
                "macs": c.get("macs"), "params": c["params"], "adapter_params": c.get("adapter_params")}  # fmt: skip
    role = "a" if i == len(cells) else "b"
    return {"base": role, **{k: v for k, v in base[role].items() if k != "outcomes"}}
