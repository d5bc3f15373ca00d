"""Experiment ``matrix``: stitch every sender cut of A into every receiver cut of B.

The heat map of stitched accuracies is Hernandez, Dangovski & Lu's functional
similarity matrix.  One forward pass of A over the data records every sender
cut at once (forward hooks on the cut modules, each checked against the
``split`` prefix; a cut whose hook disagrees runs its own prefix), and one pass
of B records every receiver cut (the least-squares targets).  Every cell then
works on those cached activations only:

* ``closed-form``: fit the linear adapter by least squares (``fits.fit_adapter``)
  and score suffix_B(S(h)) on the test split -- every cell in seconds.
* ``trained``: start from that fit (or from random weights with init="random")
  and train the adapter for ``epochs`` on the task loss through B's frozen suffix.

When the cached activations would exceed the memory budget (``STITCHLAB_ACT_BUDGET_MB``), a
closed-form matrix streams instead (:mod:`stitchcore.stitching.streamed`): one pass of A and B
per batch fits every adapter, one pass of A over the test images scores them, and only a batch
of activations is held at a time.  A trained matrix over the budget is refused with what to change.

Cells that no adapter can join (a vector sender into a spatial receiver) are
skipped with the reason; they never fail the matrix.  Finished cells stream
into the store (``cell_acc`` metric points and the ``cells.json`` artifact,
rewritten after every cell) and into a resume file, so a cancelled or crashed
matrix keeps its cells and a re-run of the same spec does not recompute them.
:func:`partial_cells` reads the finished cells back; :func:`cell_grid` lays them out.

Controls (``controls=True``, zoo models only): the same matrix with a random-init
sender (A?init=random&seed=SEED), a random-init receiver (B?init=random), and
both random.  Debiased = values - control values, one matrix per control
(``debiased_by_control``): with the random sender, what the trained bottom
contributes beyond the adapter + trained top alone.  ``debiased`` keeps the
random sender's (the only one stored before); :func:`debiased` and
:func:`control_tables` read both old and new summaries, :func:`skipped_pairs`
the skipped cells with their reasons.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stitchcore.backends import Backend, Unit, UnitContext
from stitchcore.cuts import Cut, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset, load_dataset
from stitchcore.errors import StitchError
from stitchcore.experiments._cells import CellBook
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import (
    check_at_least,
    check_choice,
    check_positive,
    check_sample_caps,
    spec_from_dict,
)
from stitchcore.experiments.dataset_check import check_head_classes, resolve_dataset
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
    where,
)
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import ModelPackage, pack_model
from stitchcore.models.refs import ModelRef, parse_ref
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import collect_cuts, forward_bytes_per_image, memory_budget_bytes
from stitchcore.stitching.adapters import AdapterSpec, build_adapter, compatibility
from stitchcore.stitching.evaluate import evaluate_batches, stitching_penalty
from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
from stitchcore.stitching.shared_suffix import PRECISIONS, frozen_for_training, train_adapters_shared_suffix
from stitchcore.stitching.streamed import (
    StreamedCell,
    fit_streamed,
    images_per_batch,
    images_per_slice,
    score_streamed,
)
from stitchcore.stitching.train import OPTIMIZERS, TrainKnobs
from stitchcore.store.results import Store

__all__ = ["CELLS_ARTIFACT", "CONTROLS", "CONTROL_NAMES", "MODES", "VARIANTS", "ControlTable", "MatrixSpec", "blank_cells_mean", "cell_axes", "cell_grid", "control_tables", "debiased", "difference", "estimate_matrix", "failed_pairs", "partial_cells", "partial_path", "receiver_unit", "run_matrix", "sender_activations", "skipped_pairs", "streamed_unit"]  # fmt: skip

log = logging.getLogger(__name__)

MODES = ("closed-form", "trained")
VARIANTS = ("trained", "random_sender", "random_receiver", "random_both")  # matrix first, then the controls
CONTROLS = VARIANTS[1:]
CONTROL_NAMES = {"random_sender": "random sender", "random_receiver": "random receiver", "random_both": "both random"}
CELLS_ARTIFACT = "cells.json"
EVAL_BATCH = 256
JOINT_ELEMENTS = 2**24  # trained mode: at most this many stacked suffix-input values (adapters x batch x receiver size)


def _lstsq_adapter() -> AdapterSpec:
    return AdapterSpec(kind="linear", norm="both", resample="bilinear", init="lstsq")


@dataclass(frozen=True)
class MatrixSpec:
    """Every sender cut of A x every receiver cut of B; hashed into the run id like any spec.

    >>> MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=["block1", "fc1"]).label()
    'matrix zoo:cnn-digits-s0 x zoo:cnn-digits-s1 (closed-form, 2 x all cuts)'
    """

    a: str  # ModelRef of the sender model (its bottoms); canonical spelling
    b: str  # ModelRef of the receiver model (its tops; penalties are against B)
    senders: tuple[str, ...] | None = None  # sender cut names of A, in order; None = every cut of A
    receivers: tuple[str, ...] | None = None  # receiver cut names of B; None = every cut of B
    adapter: AdapterSpec = field(default_factory=_lstsq_adapter)  # linear + BN both, lstsq: Csiszarik et al.
    mode: str = "closed-form"  # closed-form (lstsq fit only, seconds) | trained (fit, then task training)
    epochs: int = 3  # trained mode: few epochs, the lstsq start is already close (Csiszarik et al.)
    optimizer: str = "adamw"  # trained mode: adamw | sgd
    lr: float = 1e-2  # trained mode; as StitchSpec (small data gives few steps)
    weight_decay: float = 0.05  # trained mode; Traft & Cheney
    batch_size: int = 64  # trained mode
    seed: int = 0  # adapter init, data order, and the random-init controls' weights
    dataset: str | None = None  # None: the dataset B was trained on
    max_train: int | None = None  # cap on training images (fits and training); None = all
    max_test: int | None = None  # cap on test images; None = all
    controls: bool = False  # also random sender / random receiver / both random (zoo refs only)
    precision: str = "fp32"  # trained mode: fp32 | bf16 (autocast; fast on GPUs and AMX CPUs, slow elsewhere)

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        for role in ("senders", "receivers"):
            names = getattr(self, role)
            if names is None:
                continue
            if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
                raise StitchError(
                    f"{role} is a list of cut names (e.g. ['block1', 'fc1']) or None for all cuts"
                )
            names = tuple(names)
            if not names or len(set(names)) != len(names):
                raise StitchError(f"{role} must name at least one cut, each once; got {list(names)}")
            object.__setattr__(self, role, names)
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))
        if self.mode not in MODES:
            raise StitchError(f"unknown matrix mode {self.mode!r}; use one of: {', '.join(MODES)}")
        if self.mode == "closed-form" and self.adapter.init not in FIT_METHODS:
            raise StitchError(
                f"closed-form mode fits each adapter on cached activations, so init must be one of"
                f" {', '.join(FIT_METHODS)} (got {self.adapter.init!r}); or use mode='trained'"
            )
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.epochs < 0 or self.batch_size < 1:
            raise StitchError("epochs must be >= 0 and batch size >= 1")
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_sample_caps(self)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["adapter"] = self.adapter.to_dict()
        d["senders"] = list(self.senders) if self.senders is not None else None
        d["receivers"] = list(self.receivers) if self.receivers is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MatrixSpec:
        return spec_from_dict(cls, dict(d))

    def label(self) -> str:
        n_s = len(self.senders) if self.senders is not None else "all cuts"
        n_r = len(self.receivers) if self.receivers is not None else "all cuts"
        extra = ", controls" if self.controls else ""
        return f"matrix {self.a} x {self.b} ({self.mode}, {n_s} x {n_r}{extra})"


def _nbytes(cuts: list[Cut], n: int) -> int:
    return sum(math.prod(c.shape) for c in cuts) * n * 4


# ---------------------------------------------------------------------------- resume file


def partial_path(store: Store, run_id: str) -> Path:
    """Where a matrix run keeps its finished cells until it succeeds (survives a re-run's reset)."""
    return store.partial_path(run_id)


def _cell_key(variant: str, sender: str, receiver: str) -> str:
    return f"{variant}|{sender}|{receiver}"


# ---------------------------------------------------------------------------- reading the cells back


def partial_cells(store: Store, run_id: str) -> list[dict]:
    """The cells a matrix run has finished so far (all of them once done); [] before the first one.

    One record per cell: ``variant`` (one of :data:`VARIANTS`), ``sender``, ``receiver``,
    ``accuracy``, ``penalty``, ``residual`` (None where not computed) and ``skipped_reason``
    (None unless no adapter can join the two cuts).  Read from the run's ``cells.json``, which
    the run rewrites after every group of cells, so a running or cancelled matrix is readable.
    """
    try:
        cells = json.loads(store.artifact_path(run_id, CELLS_ARTIFACT).read_text())
    except (StitchError, OSError, ValueError):  # no artifact yet (StoreError), or caught mid-replace
        return []
    return cells if isinstance(cells, list) else []


def cell_grid(cells: list[dict], senders: list[str], receivers: list[str], field: str = "accuracy",
              variant: str = "trained") -> list[list]:  # fmt: skip
    """[senders][receivers] of one field of ``variant``'s cells; None where a cell is skipped or not done yet.

    >>> cells = [{"variant": "trained", "sender": "fc1", "receiver": "fc2", "accuracy": 0.9}]
    >>> cell_grid(cells, ["block1", "fc1"], ["fc2"])
    [[None], [0.9]]
    """
    values = {(c["sender"], c["receiver"]): c.get(field) for c in cells if c.get("variant", "trained") == variant}
    return [[values.get((s, r)) for r in receivers] for s in senders]


def cell_axes(cells: list[dict], variant: str = "trained") -> tuple[list[str], list[str]]:
    """The sender and receiver names ``variant``'s cells mention, in the order they first appear."""
    mine = [c for c in cells if c.get("variant", "trained") == variant]
    return list(dict.fromkeys(c["sender"] for c in mine)), list(dict.fromkeys(c["receiver"] for c in mine))


Grid = list[list[float | None]]  # [senders][receivers]; None where a cell is skipped or not done


def difference(values: Sequence[Sequence[float | None]], control: Sequence[Sequence[float | None]]) -> Grid:
    """``values - control`` cell by cell (rounded to 6 places); None where either is None.

    >>> difference([[0.9, None], [0.5, 0.4]], [[0.2, 0.1], [None, 0.5]])
    [[0.7, None], [None, -0.1]]
    """
    return [[None if t is None or c is None else round(t - c, 6) for t, c in zip(row_t, row_c, strict=True)]
            for row_t, row_c in zip(values, control, strict=True)]  # fmt: skip


def debiased(summary: Mapping[str, Any], control: str = "random_sender") -> Grid | None:
    """Debiased matrix of a finished matrix summary against one control: trained - ``control``, cell by cell.

    Reads ``debiased_by_control`` (runs since all three controls are debiased), else the stored
    ``debiased`` (older runs kept only the random sender's), else computes it from ``values`` and
    ``controls``; None when the run has no such control.

    >>> s = {"values": [[0.9]], "controls": {"random_receiver": [[0.1]]}, "debiased": [[0.5]]}
    >>> debiased(s, "random_receiver"), debiased(s, "random_sender"), debiased(s, "random_both")
    ([[0.8]], [[0.5]], None)
    """
    if control not in CONTROLS:
        raise StitchError(f"unknown matrix control {control!r}; use one of: {', '.join(CONTROLS)}")
    stored = (summary.get("debiased_by_control") or {}).get(control)
    if stored is not None:
        return stored
    if summary.get("debiased") is not None and (summary.get("debiased_control") or "random_sender") == control:
        return summary["debiased"]
    values, grid = summary.get("values"), (summary.get("controls") or {}).get(control)
    return difference(values, grid) if values is not None and grid is not None else None


@dataclass(frozen=True)
class ControlTable:
    """One control of a matrix, ready to draw: its accuracies and the debiased matrix against it."""

    control: str  # one of CONTROLS
    name: str  # in words: "random sender" | "random receiver" | "both random"
    values: Grid | None  # the control's stitched accuracy [senders][receivers]; None if the summary lacks it
    debiased: Grid | None  # trained accuracy - the control's, cell by cell (higher = the trained model adds more)


def control_tables(
    summary: Mapping[str, Any] | None, cells: list[dict], senders: Sequence[str], receivers: Sequence[str], *,
    controls: bool = False,
) -> list[ControlTable]:  # fmt: skip
    """The controls of a matrix run, in :data:`CONTROLS` order: from its summary once done (old summaries
    with only the random sender's ``debiased`` included), else from its finished ``cells`` (a running run).

    ``controls=True`` (the spec asks for them) gives every control a table before its first cell.

    >>> cells = [{"variant": v, "sender": "fc1", "receiver": "fc2", "accuracy": a}
    ...          for v, a in (("trained", 0.9), ("random_sender", 0.3))]
    >>> [(t.name, t.values, t.debiased) for t in control_tables(None, cells, ["fc1"], ["fc2"])]
    [('random sender', [[0.3]], [[0.6]])]
    """
    s = summary or {}
    tables = []
    if s.get("controls") or s.get("debiased") is not None:
        for control in CONTROLS:
            values = (s.get("controls") or {}).get(control)
            diff = debiased(s, control)
            if values is not None or diff is not None:
                tables.append(ControlTable(control, CONTROL_NAMES[control], values, diff))
        return tables
    trained = cell_grid(cells, list(senders), list(receivers))
    seen = {c.get("variant") for c in cells}
    for control in CONTROLS:
        if controls or control in seen:
            values = cell_grid(cells, list(senders), list(receivers), variant=control)
            tables.append(ControlTable(control, CONTROL_NAMES[control], values, difference(trained, values)))
    return tables


def skipped_pairs(summary: Mapping[str, Any] | None, cells: list[dict]) -> dict[tuple[str, str], str]:
    """``(sender, receiver) -> reason`` of every pair no adapter can join: the summary's ``skipped``
    (``"sender->receiver"`` keys) and any cell with a ``skipped_reason`` (a running run's).

    >>> skipped_pairs({"skipped": {"fc1->block1": "vector into a map"}}, [])
    {('fc1', 'block1'): 'vector into a map'}
    """
    out: dict[tuple[str, str], str] = {}
    for pair, reason in ((summary or {}).get("skipped") or {}).items():
        sender, _, receiver = str(pair).partition("->")
        out[sender, receiver] = str(reason)
    for c in cells:
        if c.get("skipped_reason"):
            out.setdefault((c["sender"], c["receiver"]), str(c["skipped_reason"]))
    return out


def failed_pairs(summary: Mapping[str, Any] | None, cells: list[dict]) -> dict[tuple[str, str], str]:
    """``(sender, receiver) -> reason`` of every trained-variant cell that failed for good (a cluster task
    whose retries were spent); the rest of the matrix completed.

    >>> failed_pairs(None, [{"variant": "trained", "sender": "fc1", "receiver": "fc2", "failed_reason": "node died"}])
    {('fc1', 'fc2'): 'node died'}
    """
    out: dict[tuple[str, str], str] = {}
    for key, reason in ((summary or {}).get("failed") or {}).items():
        variant, _, pair = str(key).partition("|")
        sender, _, receiver = pair.partition("->")
        if variant == "trained":
            out[sender, receiver] = str(reason)
    for c in cells:
        if c.get("failed_reason") and c.get("variant", "trained") == "trained":
            out.setdefault((c["sender"], c["receiver"]), str(c["failed_reason"]))
    return out


def blank_cells_mean(status: str, failed: Mapping[tuple[str, str], str]) -> str | None:
    """What a blank cell of a matrix run in ``status`` means, for the heat maps' hover and legend (None: a
    finished run with every cell computed has none).

    >>> blank_cells_mean("running", {}), blank_cells_mean("done", {("fc1", "fc2"): "node died"})
    ('not computed yet', 'failed on the cluster: Retry the failed parts')
    """
    if status in ("queued", "running"):
        return "not computed yet"
    if failed:
        return "failed on the cluster: Retry the failed parts"
    return None if status == "done" else "not computed (the run ended first)"


# ---------------------------------------------------------------------------- the experiment


def _random_ref(ref: str, seed: int) -> str:
    r = parse_ref(ref)
    params = dict(r.params)
    params.update(init="random", seed=str(seed))
    return str(ModelRef(r.scheme, r.name, r.file, tuple(params.items())))


def _resolve_cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
    if names is None:
        return list_cuts(m)
    return [get_cut(m, name) for name in names]  # CutError names the close ones


def _base_accuracy(
    m: LoadedModel, ds: ImageDataset, n_test: int, device: torch.device, batch: int = EVAL_BATCH
) -> float:
    def forward(x: torch.Tensor) -> torch.Tensor:  # [B, C, H, W] images in [0, 1] -> logits [B, K]
        return m.model(m.preprocess(x) if m.preprocess is not None else x)

    batches = ds.batches("test", batch, limit=n_test)
    return evaluate_batches(forward, batches, ds.num_classes, device)["accuracy"]


def _batched(*tensors: torch.Tensor, size: int = EVAL_BATCH) -> Iterator[tuple[torch.Tensor, ...]]:
    n = len(tensors[0])
    for i in range(0, n, size):
        yield tuple(t[i : i + size] for t in tensors)


@dataclass
class _Workspace:
    """Everything the cells share: cuts, cached activations, labels, suffixes and base accuracies.

    Model keys: "a", "b" (the spec's models) and "a_rand", "b_rand" (their random-init twins, controls).
    """

    senders: list[Cut]
    receivers: list[Cut]
    num_classes: int
    sender_train: dict[str, dict[str, torch.Tensor]]  # model key -> cut -> [N_train, *cut.shape]
    sender_test: dict[str, dict[str, torch.Tensor]]  # model key -> cut -> [N_test, *cut.shape]
    receiver_train: dict[str, dict[str, torch.Tensor]]  # model key -> cut -> [N_train, *cut.shape] (targets)
    y_train: torch.Tensor  # int64 [N_train]
    y_test: torch.Tensor  # int64 [N_test]
    suffixes: dict[tuple[str, str], nn.Module]  # (model key, receiver cut) -> frozen eval-mode suffix
    bases: dict[str, float]  # model key -> test accuracy of the whole model
    models: dict[str, LoadedModel]  # model key -> model
    ds: ImageDataset
    budget: int  # bytes of activations held in memory at once
    work: int  # bytes an image of one forward pass's working memory (the larger model's)
    streamed: bool = False  # closed form over the budget: no caches, every pass streams (stitching.streamed)
    batch: int = EVAL_BATCH  # images per forward pass when caching activations


def _check_controls(spec: MatrixSpec) -> None:
    """Controls need trained zoo models (their random-init twins come from zoo:NAME?init=random)."""
    if spec.controls:
        for ref in (spec.a, spec.b):
            r = parse_ref(ref)
            if r.scheme != "zoo" or r.param("init", "trained") != "trained":
                raise StitchError(
                    f"controls need trained zoo models for now (random-init twins come from zoo:NAME?init=random);"
                    f" {ref} is not one: run without controls"
                )


def _inputs(spec: MatrixSpec, store: Store) -> tuple[dict[str, LoadedModel], ImageDataset, list[Cut], list[Cut]]:
    """A and B loaded, the data (B's head fits it) and the chosen cuts; StitchError for what cannot run."""
    models = {"a": load_model(spec.a, store=store), "b": load_model(spec.b, store=store)}
    for key, role in (("a", "A"), ("b", "B")):
        if models[key].input_kind != "image":
            raise StitchError(
                f"model {role} ({models[key].ref}) is a language model; matrices need image models"
            )
    ds = load_dataset(resolve_dataset(spec.dataset, models["a"], models["b"]))
    check_head_classes(models["b"], ds, "B")
    check_head_classes(models["a"], ds, "A")
    return models, ds, _resolve_cuts(models["a"], spec.senders), _resolve_cuts(models["b"], spec.receivers)


def check_matrix(spec: MatrixSpec, store: Store) -> None:
    """What the run checks before its first cell, without computing any: controls, models, data, cut names."""
    _check_controls(spec)
    _inputs(spec, store)


def _prepare(
    spec: MatrixSpec, ctx: RunContext, variants: list[tuple[str, str, str]], cache: bool = True
) -> tuple[_Workspace, str]:
    """Load the models, check the memory budget, then cache every cut's activations (one pass per model).

    ``cache=False`` (the units run elsewhere and compute their own): no activations are recorded here.
    """
    device = ctx.device
    ctx.progress(0.0, "loading models")
    models, ds, senders, receivers = _inputs(spec, ctx.store)
    if spec.controls:
        models["a_rand"] = load_model(_random_ref(spec.a, spec.seed), store=ctx.store)
        models["b_rand"] = load_model(_random_ref(spec.b, spec.seed), store=ctx.store)
    n_train, n_test = (len(ds.labels(s)) for s in ("train", "test"))
    n_train = n_train if spec.max_train is None else min(spec.max_train, n_train)
    n_test = n_test if spec.max_test is None else min(spec.max_test, n_test)

    sending = sorted({v[1] for v in variants})
    receiving = sorted({v[2] for v in variants})  # random twins have the same cut shapes
    need = len(sending) * _nbytes(senders, n_train + n_test) + len(receiving) * _nbytes(receivers, n_train)
    budget = memory_budget_bytes()
    streamed = need > budget
    if streamed and spec.mode == "trained":
        raise StitchError(
            f"this matrix caches {need / 2**20:.1f} MB of activations, over the {budget / 2**20:.0f} MB budget"
            " (STITCHLAB_ACT_BUDGET_MB), and trained adapters train on cached activations: use fewer samples"
            " (max_train / max_test) or fewer cuts (senders / receivers), raise the budget, or use mode"
            " 'closed-form' (it streams the data instead)"
        )
    if streamed:
        log.info("matrix: %.1f MB of activations over the %.0f MB budget; streaming the closed-form fits",
                 need / 2**20, budget / 2**20)  # fmt: skip

    suffixes = {}
    for key in receiving:
        m = models[key]
        for r in receivers:
            suffixes[key, r.name] = split(m, r)[1].to(device).eval()
    common = {"senders": senders, "receivers": receivers, "num_classes": ds.num_classes, "suffixes": suffixes,
              "y_train": ds.labels("train")[:n_train], "y_test": ds.labels("test")[:n_test], "models": models,
              "ds": ds, "budget": budget}  # fmt: skip
    work = max(forward_bytes_per_image(m) for m in models.values())
    common["work"] = work
    # forward passes in batches whose cut activations and working memory stay within a third of the budget
    batch = images_per_batch(_nbytes(senders, 1) + _nbytes(receivers, 1) + work, budget)
    bases = {key: _base_accuracy(m, ds, n_test, device, batch) for key, m in models.items()}
    common["batch"] = batch
    if streamed or not cache:
        return _Workspace(sender_train={}, sender_test={}, receiver_train={}, bases=bases, streamed=streamed,
                          **common), ds.name  # fmt: skip
    ctx.progress(0.0, "caching activations")
    acts = {"device": device, "check_cancel": ctx.check_cancel, "batch_size": batch}
    ws = _Workspace(
        sender_train={
            k: collect_cuts(models[k], senders, ds, "train", limit=n_train, **acts) for k in sending
        },
        sender_test={k: collect_cuts(models[k], senders, ds, "test", limit=n_test, **acts) for k in sending},
        receiver_train={
            k: collect_cuts(models[k], receivers, ds, "train", limit=n_train, **acts) for k in receiving
        },
        bases=bases,
        **common,
    )
    return ws, ds.name


def _new_cell(spec: MatrixSpec, s: Cut, r: Cut) -> tuple[dict, nn.Module | None]:
    """A cell's empty record and its adapter as built (seeded), or None when no adapter joins the cuts."""
    cell = {"sender": s.name, "receiver": r.name, "accuracy": None, "penalty": None, "residual": None,
            "skipped_reason": compatibility(s, r, spec.adapter)}  # fmt: skip
    if cell["skipped_reason"] is not None:
        return cell, None
    torch.manual_seed(spec.seed)
    return cell, build_adapter(spec.adapter, s, r)


def _fitted_cell(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, s: Cut, r: Cut
) -> tuple[dict, nn.Module | None]:
    """A cell's record and its adapter A_send[s] -> B_recv[r], fitted by least squares where the spec says so.

    The adapter is None when the two cuts cannot be joined (the record says why).
    """
    cell, adapter = _new_cell(spec, s, r)
    if adapter is None:
        return cell, None
    if spec.adapter.init in FIT_METHODS:
        size = min(EVAL_BATCH, images_per_slice(adapter, s, r, ws.budget))  # a wide sender into a fine grid: few
        pairs = _batched(ws.sender_train[send][s.name], ws.receiver_train[recv][r.name], size=size)
        cell["residual"] = round(float(fit_adapter(adapter, pairs, method=spec.adapter.init)), 6)
    return cell, adapter.to(ctx.device)


def _score_cell(cell: dict, adapter: nn.Module, ctx: UnitContext, ws: _Workspace, send: str, recv: str) -> dict:
    """Test accuracy and penalty (against B_recv) of suffix_B(S(h_test)); fills and returns ``cell``."""
    adapter.eval()
    suffix = ws.suffixes[recv, cell["receiver"]]
    h_test = ws.sender_test[send][cell["sender"]]  # [N_test, *s.shape]
    size = min(EVAL_BATCH, images_per_slice(adapter, adapter.sender, adapter.receiver, ws.budget, ws.work))
    score = evaluate_batches(lambda h: suffix(adapter(h.float())), _batched(h_test, ws.y_test, size=size),
                             ws.num_classes, ctx.device)  # fmt: skip
    cell["accuracy"] = score["accuracy"]
    cell["penalty"] = stitching_penalty(ws.bases[recv], score["accuracy"])
    return cell


def _run_receiver(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, senders: list[Cut], r: Cut,
    train_suffix: nn.Module | None,
) -> list[dict]:
    """Every cell A_send[s] -> B_recv[r] for s in ``senders``: fit, train (trained mode), score.

    In trained mode all these adapters train together through one pass of ``train_suffix`` (B's
    frozen suffix, BN folded) per step (see :mod:`stitchcore.stitching.shared_suffix`); each gets the
    gradient of its own loss.
    """
    fitted = [_fitted_cell(spec, ctx, ws, send, recv, s, r) for s in senders]
    live = [(cell, adapter) for cell, adapter in fitted if adapter is not None]
    if spec.mode == "trained" and live:
        train_adapters_shared_suffix(
            [adapter for _, adapter in live], train_suffix,
            [ws.sender_train[send][cell["sender"]] for cell, _ in live], ws.y_train,
            knobs=TrainKnobs.of(spec), device=ctx.device, check_cancel=ctx.check_cancel,
            precision=spec.precision,
        )  # fmt: skip
    for cell, adapter in live:
        _score_cell(cell, adapter, ctx, ws, send, recv)
    return [cell for cell, _ in fitted]


def _run_streamed(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, pairs: list[tuple[Cut, Cut]],
    report: Callable[[float, str], None],
) -> list[dict]:
    """Every cell of ``pairs`` in closed form from streamed passes (:mod:`stitchcore.stitching.streamed`):
    one pass of A and B over the training images fits them all, one pass of A over the test images scores them."""
    built = [_new_cell(spec, s, r) for s, r in pairs]
    live = [(cell, StreamedCell(adapter.to(ctx.device), s, r))
            for (cell, adapter), (s, r) in zip(built, pairs) if adapter is not None]  # fmt: skip
    if live:
        stream = {"device": ctx.device, "budget": ws.budget, "work": ws.work, "check_cancel": ctx.check_cancel}
        residuals = fit_streamed([c for _, c in live], ws.models[send], ws.models[recv], ws.ds, len(ws.y_train),
                                 method=spec.adapter.init, progress=lambda f, m: report(f / 2, m),
                                 **stream)  # fmt: skip
        suffixes = [ws.suffixes[recv, c.receiver.name] for _, c in live]
        scores = score_streamed([c for _, c in live], suffixes, ws.models[send], ws.ds, len(ws.y_test),
                                progress=lambda f, m: report(0.5 + f / 2, m), **stream)  # fmt: skip
        for (cell, _), residual, score in zip(live, residuals, scores):
            cell["residual"] = round(float(residual), 6)
            cell["accuracy"] = score["accuracy"]
            cell["penalty"] = stitching_penalty(ws.bases[recv], score["accuracy"])
    return [cell for cell, _ in built]


# ---------------------------------------------------------------------------- units (run by a backend)


def sender_activations(
    model: ModelPackage, senders: list[str], ds: ImageDataset, n_train: int, n_test: int, batch: int,
    context: UnitContext,
) -> dict[str, dict[str, torch.Tensor]]:
    """One pass of a sender model over the data: ``{"train"|"test": {cut: [N, *cut.shape]}}`` (a cluster task)."""
    m = model.unpack()
    cuts = _resolve_cuts(m, tuple(senders))
    acts = {"device": context.device, "check_cancel": context.check_cancel, "batch_size": batch}
    return {"train": collect_cuts(m, cuts, ds, "train", limit=n_train, **acts),
            "test": collect_cuts(m, cuts, ds, "test", limit=n_test, **acts)}  # fmt: skip


def _unit_workspace(source: _Workspace | dict, send: str, recv: str, receivers: list[str],
                    context: UnitContext) -> _Workspace:  # fmt: skip
    """The workspace a unit works in: the run's own (local), or one rebuilt from what the driver shipped:
    the two models, the data, the sender's activations (cached mode) and B's targets at ``receivers``."""
    if isinstance(source, _Workspace):
        return source
    models = {send: source["models"][send].unpack(), recv: source["models"][recv].unpack()}
    ds, n_train, n_test = source["ds"], source["n_train"], source["n_test"]
    senders = _resolve_cuts(models[send], tuple(source["senders"]))
    cuts = _resolve_cuts(models[recv], tuple(receivers))
    suffixes = {(recv, r.name): split(models[recv], r)[1].to(context.device).eval()
                for r in cuts}  # fmt: skip
    acts = source.get("acts")
    targets = {}
    if acts is not None:
        targets = {recv: collect_cuts(models[recv], cuts, ds, "train", limit=n_train, device=context.device,
                                      check_cancel=context.check_cancel, batch_size=source["batch"])}  # fmt: skip
    return _Workspace(
        senders=senders, receivers=cuts, num_classes=ds.num_classes,
        sender_train={send: acts["train"]} if acts else {}, sender_test={send: acts["test"]} if acts else {},
        receiver_train=targets, y_train=ds.labels("train")[:n_train], y_test=ds.labels("test")[:n_test],
        suffixes=suffixes, bases=source["bases"], models=models, ds=ds, budget=source["budget"],
        work=source["work"], streamed=acts is None, batch=source["batch"],
    )  # fmt: skip


def receiver_unit(
    spec: MatrixSpec, source: _Workspace | dict, variant: str, send: str, recv: str, receiver: str,
    senders: list[str], context: UnitContext,
) -> Iterator[tuple[str, Any]]:
    """Every pending cell A_send[s] -> B_recv[receiver], s in ``senders``, in JOINT_ELEMENTS groups that
    share one pass of B's suffix per step (trained mode); yields progress before each group and its cells."""
    ws = _unit_workspace(source, send, recv, [receiver], context)
    r = next(c for c in ws.receivers if c.name == receiver)
    pending = [s for s in ws.senders if s.name in senders]
    trained = spec.mode == "trained" and bool(pending)
    per_pass = max(1, JOINT_ELEMENTS // (spec.batch_size * math.prod(r.shape))) if trained else 1
    train_suffix = frozen_for_training(ws.suffixes[recv, r.name]) if trained else None  # once per receiver
    for start in range(0, len(pending), per_pass):
        group = pending[start : start + per_pass]
        context.check_cancel()
        where = f"{len(group)} sender(s) into {r.name}" + ("" if variant == "trained" else f" ({variant.replace('_', ' ')})")
        yield "progress", (start / len(pending), where)
        yield "cells", [{"variant": variant, **cell}
                        for cell in _run_receiver(spec, context, ws, send, recv, group, r, train_suffix)]  # fmt: skip


def streamed_unit(
    spec: MatrixSpec, source: _Workspace | dict, variant: str, send: str, recv: str, pairs: list[tuple[str, str]],
    context: UnitContext,
) -> Iterator[tuple[str, Any]]:
    """Every pending cell of a variant over the memory budget, from the same streamed passes."""
    ws = _unit_workspace(source, send, recv, list(dict.fromkeys(r for _, r in pairs)), context)
    cuts = {("s", c.name): c for c in ws.senders} | {("r", c.name): c for c in ws.receivers}
    yield "progress", (0.0, f"{len(pairs)} cells streamed" + ("" if variant == "trained" else f" ({variant})"))
    cells = _run_streamed(spec, context, ws, send, recv, [(cuts["s", s], cuts["r", r]) for s, r in pairs],
                          context.report)  # fmt: skip
    yield "cells", [{"variant": variant, **cell} for cell in cells]


def _ship(ws: _Workspace, backend: Backend, sending: list[str]) -> tuple[dict, dict[str, Any]]:
    """What units on another process need, shared once per run: each model as a package, the data, the
    numbers; and (cached mode) one sender-activations task per sending model."""
    packages = {key: backend.share(pack_model(m)) for key, m in ws.models.items()}
    common = {"ds": backend.share(ws.ds), "n_train": len(ws.y_train), "n_test": len(ws.y_test), "batch": ws.batch,
              "budget": ws.budget, "work": ws.work, "bases": ws.bases, "senders": [s.name for s in ws.senders]}
    acts = {} if ws.streamed else {
        key: backend.call(sender_activations, packages[key], common["senders"], common["ds"], common["n_train"],
                          common["n_test"], ws.batch) for key in sending}  # fmt: skip
    return packages, {"common": common, "acts": acts}


def _source_for(shipped: tuple[dict, dict] | None, ws: _Workspace, send: str, recv: str) -> _Workspace | dict:
    if shipped is None:
        return ws
    packages, rest = shipped
    return {**rest["common"], "models": {send: packages[send], recv: packages[recv]}, "acts": rest["acts"].get(send)}


def _table(cells: list[dict], ws: _Workspace, variant: str, what: str) -> list[list]:
    """[senders][receivers] of one cell field (None where skipped)."""
    return cell_grid(cells, [s.name for s in ws.senders], [r.name for r in ws.receivers], what, variant)


# ---------------------------------------------------------------------------- estimate


def _matrix_units(spec: MatrixSpec, ectx: EstimateContext) -> dict:
    device = ectx.device
    from stitchcore.stitching.adapters import compatibility

    t0 = time.perf_counter()
    a, b = ectx.load(spec.a), ectx.load(spec.b)
    ds = load_dataset(resolve_dataset(spec.dataset, a, b))

    def cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
        return list_cuts(m) if names is None else [get_cut(m, n) for n in names]

    senders, receivers = cuts(a, spec.senders), cuts(b, spec.receivers)
    setup = time.perf_counter() - t0
    pairs = [(s, r) for s in senders for r in receivers if compatibility(s, r, spec.adapter) is None]
    if not pairs:
        return {"setup": setup, "cells": 0, "full_a": 0.0, "full_b": 0.0, "fit": 0.0, "step": 0.0, "eval": 0.0,
                "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip
    by_receiver = {}
    for s, r in pairs:
        by_receiver.setdefault(r.name, (s, r))
    sampled = spread(list(by_receiver.values()))
    per = [pair_units(a, b, ds, s, r, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for s, r in sampled]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in ("fit", "step", "eval")}
    return {**mean, "setup": setup, "cells": len(pairs), "full_a": full_forward(a, ds, device),
            "full_b": full_forward(b, ds, device), "n_train": len(ds.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def estimate_matrix(spec: MatrixSpec, ectx: EstimateContext) -> Estimate:
    """Both models over the data once per variant, then every cell's fit or training and its scoring."""
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "controls", "mode", "precision")
    fixed = {k: v for k, v in spec.to_dict().items() if k not in scale}
    key = ("matrix", repr(sorted(fixed.items())), ectx.model_key(spec.a),
           ectx.model_key(spec.b), where(ectx.device))  # fmt: skip
    u = calibrated(key, lambda: _matrix_units(spec, ectx))
    n_train, n_test = image_counts(u, spec)
    variants = 4 if spec.controls else 1
    models = 2 if spec.controls else 1  # each sending / receiving model runs once over the data
    steps = spec.epochs * -(-n_train // spec.batch_size) if spec.mode == "trained" else 0
    fits = spec.adapter.init in ("lstsq", "procrustes")
    cell = n_train * u["fit"] * fits + steps * u["step"] + n_test * u["eval"]
    cells = int(u["cells"]) * variants
    seconds = (u["setup"] + models * ((n_train + n_test) * u["full_a"] + n_train * u["full_b"])
               + 2 * models * n_test * (u["full_a"] + u["full_b"]) / 2 + cells * cell)  # fmt: skip
    what = f"{cells} cells of {steps:,} adapter steps" if steps else f"{cells} least-squares cells"
    return estimate_from(seconds, f"calibrated: 1 cell = {ms(cell)}; {what}")


@register_experiment("matrix", MatrixSpec.from_dict, check=check_matrix, backends=("local", "ray"),
                     estimate=estimate_matrix)
def run_matrix(spec: MatrixSpec, ctx: RunContext) -> dict:
    """Fill the sender x receiver matrix of ``spec`` cell by cell; returns the summary stored with the run.

    The units (one per receiver, or per variant when streaming) run on ``ctx.options``' backend; only
    this process writes the store, as cells come back.
    """
    t0 = time.perf_counter()
    _check_controls(spec)
    variants = [("trained", "a", "b")]  # (variant, sender model key, receiver model key)
    if spec.controls:
        variants += [("random_sender", "a_rand", "b"), ("random_receiver", "a", "b_rand"),
                     ("random_both", "a_rand", "b_rand")]  # fmt: skip
    backend = ctx.backend()
    ws, dataset = _prepare(spec, ctx, variants, cache=backend.name == "local")

    plan = [_cell_key(v, s.name, r.name) for v, _, _ in variants for r in ws.receivers for s in ws.senders]
    book = CellBook(ctx, CELLS_ARTIFACT, lambda c: _cell_key(c["variant"], c["sender"], c["receiver"]), plan,
                    metric=lambda c: "cell_acc" if c["variant"] == "trained" else f"cell_acc:{c['variant']}")
    done, keep, n_cells = book.done, book.keep, len(plan)
    if done:
        log.info("matrix %s: resuming with %d finished cell(s)", ctx.run_id, len(done))

    units: list[Unit] = []
    unit_cells: dict[str, list[tuple[str, str]]] = {}  # unit key -> its (sender, receiver) pairs
    shipped = None if backend.name == "local" else _ship(ws, backend, sorted({v[1] for v in variants}))
    for variant, send, recv in variants:  # receiver by receiver: trained adapters into one receiver share its suffix
        source = _source_for(shipped, ws, send, recv)
        todo = []
        for r in ws.receivers:
            for s in ws.senders:
                key = _cell_key(variant, s.name, r.name)
                if key in done:
                    keep(done[key])
                else:
                    todo.append((s.name, r.name))
        if not todo:
            continue
        if ws.streamed:
            units.append(Unit(variant, streamed_unit, (spec, source, variant, send, recv, todo), len(todo)))
            unit_cells[variant] = todo
            continue
        for r in ws.receivers:
            mine = [s for s, rr in todo if rr == r.name]
            if mine:
                key = f"{variant}|{r.name}"
                units.append(Unit(key, receiver_unit, (spec, source, variant, send, recv, r.name, mine), len(mine)))
                unit_cells[key] = [(s, r.name) for s in mine]
    if len(book):
        book.save()

    inside_step: dict[str, float] = {}  # unit key -> how far a local unit is through its long step (streaming)

    def overall(message: str) -> None:
        busy = sum(f * sum(1 for s, r in unit_cells[k] if _cell_key(k.split("|")[0], s, r) not in book)
                   for k, f in inside_step.items())  # fmt: skip
        ctx.progress(min(0.99, (len(book) + busy) / n_cells), message)

    def inside(unit: Unit, fraction: float, message: str) -> None:
        inside_step[unit.key] = fraction
        overall(message)

    for event in backend.run_units(units, ctx.cancel, on_progress=inside):
        key = event.unit.key
        if event.kind == "progress":
            overall(f"cell {len(book) + 1}/{n_cells}: {event.payload[1]}{event.where_words}")
        elif event.kind == "cells":
            inside_step.pop(key, None)
            for cell in event.payload:
                keep(event.stamp(cell))
            book.save()
        elif event.kind == "failed":
            variant = key.split("|")[0]
            for s, r in unit_cells[key]:
                if _cell_key(variant, s, r) not in book:
                    keep({"variant": variant, "sender": s, "receiver": r, "accuracy": None, "penalty": None,
                          "residual": None, "skipped_reason": None, "failed_reason": event.payload})  # fmt: skip
            log.warning("matrix %s: unit %s failed: %s", ctx.run_id, key, event.payload)
            book.save()
    ctx.check_cancel()  # Stop during the units: the run ends cancelled, its finished cells kept
    ctx.progress(1.0, f"{n_cells} cells done")
    cells = book.cells()

    values = _table(cells, ws, "trained", "accuracy")
    controls = by_control = None
    if spec.controls:
        controls = {v: _table(cells, ws, v, "accuracy") for v, _, _ in variants[1:]}
        by_control = {v: difference(values, grid) for v, grid in controls.items()}
    skipped = [c for c in cells if c["variant"] == "trained" and c["skipped_reason"] is not None]
    summary = {
        "senders": [s.name for s in ws.senders],
        "receivers": [r.name for r in ws.receivers],
        "values": values,
        "metric": "accuracy",
        "penalty": _table(cells, ws, "trained", "penalty"),
        "residual": _table(cells, ws, "trained", "residual"),
        "skipped": {f"{c['sender']}->{c['receiver']}": c["skipped_reason"] for c in skipped},
        "base": {"a": ws.bases["a"], "b": ws.bases["b"]},
        "base_random": {"a": ws.bases["a_rand"], "b": ws.bases["b_rand"]} if spec.controls else None,
        "controls": controls,
        "debiased": by_control["random_sender"] if by_control else None,  # as stored before the other two
        "debiased_by_control": by_control,  # control -> values - controls[control]
        "debiased_control": "random_sender" if spec.controls else None,
        "mode": spec.mode,
        "dataset": dataset,
        "n_train": len(ws.y_train),
        "n_test": len(ws.y_test),
        "n_cells": len(ws.senders) * len(ws.receivers),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return book.finish(summary, backend, label=lambda c: f"{c['variant']}|{c['sender']}->{c['receiver']}")

