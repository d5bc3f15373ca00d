"""What a worker runs for a matrix: the units (one per receiver grid in closed form, one per receiver when
trained, one per variant when streaming) and their workspace.

Every cell works on activations, never on images twice:

* ``closed-form``: fit the linear adapter by least squares, every cell of a receiver grid from shared moments
  (:class:`~stitchcore.stitching.shared_fits.SharedFits`, which also gives each cell's proxy: held-out R² and
  CKA), and score suffix_B(S(h)) on the test split -- every cell in seconds.  ``proxy``: the fits alone.
* ``trained``: start from that fit (or from random weights with init="random")
  and train the adapter for ``epochs`` on the spec's objective: the task loss through B's frozen
  suffix, or the copy task (``match``: MSE to B's own activation at the receiving cut), or a sum.
* controls: made as the matrix's cells, but task-trained into a random receiver where the cells never see the
  task loss (:func:`~.spec.cell_objective` says how each variant's cells train).  The noise sender's activations
  are class-clustered noise of each sender cut's shape and scale (:func:`noise_activations`), made from A's cached
  ones; it has no model, so it needs the cached path (a streamed matrix refuses it).

Cached mode: one forward pass of A over the data records every sender cut at once (forward hooks on the
cut modules, each checked against the ``split`` prefix; a cut whose hook disagrees runs its own prefix),
and one pass of B records every receiver cut (the least-squares targets); :func:`grid_unit` fits every closed-form
cell into the receivers of one grid and scores them, :func:`receiver_unit` fits, trains and scores the cells into
one receiver.  Streamed mode (the activations would exceed
the memory budget): :func:`streamed_unit` fits every adapter from one pass of A and B per batch, trains
(trained mode, controls) with each step's activations computed for its drawn batch, and scores them from
one pass of A over the test images (:mod:`stitchcore.stitching.streamed`).

A unit runs in the driver's process on the run's own :class:`_Workspace`, or on another process on one
rebuilt from what the driver shipped (:func:`_unit_workspace`); cells that no adapter can join come back
with ``skipped_reason`` instead of a score.  Units never write the store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from stitchcore.backends import UnitContext
from stitchcore.cuts import Cut, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset
from stitchcore.experiments.matrix.spec import MatrixSpec, cell_objective
from stitchcore.measures.intervals import mean_ci, paired_difference_ci
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import ModelPackage
from stitchcore.stitching.activations import CutsOnDemand, OnDemand, collect, collect_cuts
from stitchcore.stitching.adapters import build_adapter, compatibility, larger_map_refusal
from stitchcore.stitching.evaluate import ClassifierScore, evaluate_batches, score_logits, stitching_penalty
from stitchcore.stitching.final_features import HeadInput, checked_head, head_of
from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
from stitchcore.stitching.noise_sender import clustered_noise
from stitchcore.stitching.shared_fits import shared_fits
from stitchcore.stitching.shared_suffix import frozen_for_training, train_adapters_shared_suffix
from stitchcore.stitching.streamed import StreamedCell, fit_streamed, images_per_slice, score_streamed
from stitchcore.stitching.train import TrainKnobs

__all__ = ["NOISE_KEY", "grid_of", "grid_unit", "noise_activations", "receiver_unit", "resolve_cuts",
           "sender_activations", "streamed_unit"]  # fmt: skip


EVAL_BATCH = 256  # at most this many images of activations per slice fitted or scored (fewer where the budget says)
HOLD_EVERY = 5  # the proxy's held-out R²: every fifth training image is held out of the fit it scores
SHARED_MOMENTS = True  # False: each closed-form cell fitted on its own, as before shared moments (for bench/)
# True: the closed-form cells into one receiver are scored together, one pass of its suffix per test batch for all of
# them (:func:`_score_receiver`); False: cell by cell, as before; None (the default): together on a GPU, cell by
# cell on a CPU, where the stacked batches were slower (bench/matrix_scaling.py, 2 cores: 73 s against 52 s for
# the 32 x 32 closed-form matrix; a CPU's time per image grows with the batch)
SHARED_SCORING: bool | None = None
JOINT_ELEMENTS = 2**24  # trained mode: at most this many stacked suffix-input values (adapters x batch x receiver size)
NOISE_KEY = "noise"  # the noise sender's model key in a workspace: activations only, made from A's ("a")


def _scores_together(device: torch.device) -> bool:
    """Whether a closed-form unit scores a receiver's cells together (:data:`SHARED_SCORING`)."""
    return SHARED_SCORING if SHARED_SCORING is not None else device.type == "cuda"


def resolve_cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
    if names is None:
        return list_cuts(m)
    return [get_cut(m, name) for name in names]  # CutError names the close ones


def _batched(*tensors: torch.Tensor, size: int = EVAL_BATCH) -> Iterator[tuple[torch.Tensor, ...]]:
    n = len(tensors[0])
    for i in range(0, n, size):
        yield tuple(t[i : i + size] for t in tensors)


@dataclass
class _Workspace:
    """Everything the cells share: cuts, cached activations, labels, suffixes and base accuracies.

    Model keys: "a", "b" (the spec's models), "a_rand", "b_rand" (their random-init twins, controls) and
    :data:`NOISE_KEY` (the noise sender: activations only, no model of its own).
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
    base_correct: dict[str, torch.Tensor]  # model key -> float [N_test]: 1.0 where the whole model is right
    models: dict[str, LoadedModel]  # model key -> model
    ds: ImageDataset
    budget: int  # bytes of activations held in memory at once
    work: int  # bytes an image of one forward pass's working memory (the larger model's)
    streamed: bool = False  # closed form over the budget: no caches, every pass streams (stitching.streamed)
    batch: int = EVAL_BATCH  # images per forward pass when caching activations
    # model key -> B's own final features over the training images [N_train, D] (the final objective), made when
    # a unit first needs them: cached, or per drawn batch when streamed
    final_train: dict[str, torch.Tensor | OnDemand] = field(default_factory=dict)


def final_features(ws: _Workspace, recv: str, device: torch.device) -> torch.Tensor | OnDemand:
    """B's (model key ``recv``) own final features over the training images, [N_train, D]: what the final
    objective trains each adapter's stitched model to reproduce."""
    if recv not in ws.final_train:
        m = ws.models[recv]
        module = HeadInput(m.model.eval(), checked_head(m.model, m.example_input().to(device)), features_only=True)
        n = len(ws.y_train)
        ws.final_train[recv] = (OnDemand(module, ws.ds, m.preprocess, "train", n, device) if ws.streamed else
                                collect(module, ws.ds, m.preprocess, "train", limit=n, device=device,
                                        batch_size=ws.batch))  # fmt: skip
    return ws.final_train[recv]


def training_top(suffix: nn.Module, objective: dict[str, float]) -> nn.Module | None:
    """What a receiver's adapters train through: B's suffix frozen for training (:func:`frozen_for_training`), read
    at its head too for the final objective; None where the objective never runs B's top (the copy task)."""
    if not {"task", "final"} & set(objective):
        return None
    top = frozen_for_training(suffix)
    return HeadInput(top, head_of(top)) if "final" in objective else top


def noise_activations(
    train: dict[str, torch.Tensor], y_train: torch.Tensor, y_test: torch.Tensor, n_classes: int, seed: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The noise sender's activations (train, test), cut by cut: class-clustered noise
    (:func:`~stitchcore.stitching.noise_sender.clustered_noise`) for the training labels ``y_train`` [N_train]
    and the test labels ``y_test`` [N_test], from one set of class centres (``seed``), each split scaled like A's
    training activations ``train[cut]`` [N_train, *cut.shape] at that cut.

    >>> y = torch.tensor([0, 1, 1, 0])
    >>> tr, te = noise_activations({"fc1": torch.randn(4, 3) * 5}, y, y[:2], n_classes=2, seed=0)
    >>> tuple(tr["fc1"].shape), tuple(te["fc1"].shape), torch.equal(tr["fc1"][:2], te["fc1"])  # new test draws
    ((4, 3), (2, 3), False)
    """
    noise_train, noise_test = {}, {}
    for cut, real in train.items():
        shape = tuple(real.shape[1:])
        noise_train[cut] = clustered_noise(y_train, shape, n_classes=n_classes, seed=seed, split="train", like=real)
        noise_test[cut] = clustered_noise(y_test, shape, n_classes=n_classes, seed=seed, split="test", like=real)
    return noise_train, noise_test


def _new_cell(spec: MatrixSpec, s: Cut, r: Cut, suffix: nn.Module | None = None,
              device: torch.device | None = None) -> tuple[dict, nn.Module | None]:  # fmt: skip
    """A cell's empty record and its adapter as built (seeded), or None when no adapter joins the cuts (nor, for a
    No Downsample adapter, when B's rest after ``r``, ``suffix``, cannot take the sender's larger map)."""
    cell = {"sender": s.name, "receiver": r.name, "accuracy": None, "penalty": None, "residual": None,
            "skipped_reason": compatibility(s, r, spec.adapter)}  # fmt: skip
    if cell["skipped_reason"] is not None:
        return cell, None
    torch.manual_seed(spec.seed)
    adapter = build_adapter(spec.adapter, s, r)
    if suffix is not None and device is not None and adapter.plan.out_grid is not None:  # No Downsample alone
        cell["skipped_reason"] = larger_map_refusal(suffix, adapter.to(device), device)
    return cell, None if cell["skipped_reason"] is not None else adapter


def _by_output(items: list[Any], adapter_of: Callable[[Any], nn.Module]) -> list[list[Any]]:
    """``items`` in groups whose adapters (``adapter_of(item)``) give one output shape, in order: the adapters a
    shared-suffix step can stack (No Downsample hands B each sender's own grid; every other adapter B's)."""
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(adapter_of(item).plan.out_grid, []).append(item)
    return list(groups.values())


def _fit_cells(spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str,
               pairs: list[tuple[Cut, Cut]]) -> list[tuple[dict, nn.Module | None]]:  # fmt: skip
    """Each pair's record and adapter A_send[s] -> B_recv[r] (None where no adapter joins the cuts), fitted by
    least squares where the spec says so: all from shared moments (:class:`SharedFits`: one factor per sender
    and grid, every receiver solved at once), each record with its ``residual`` and the proxy's ``r2`` (held
    out) and ``cka``.  ``SHARED_MOMENTS = False`` fits them one by one (the path the bench compares)."""
    built = [_new_cell(spec, s, r, ws.suffixes.get((recv, r.name)), ctx.device) for s, r in pairs]
    live = [(cell, adapter) for cell, adapter in built if adapter is not None]
    if spec.adapter.init in FIT_METHODS and live:
        if not SHARED_MOMENTS and spec.scores:
            for cell, adapter in live:
                s, r = adapter.sender, adapter.receiver
                size = min(EVAL_BATCH, images_per_slice(adapter, s, r, ws.budget))
                batches = _batched(ws.sender_train[send][s.name], ws.receiver_train[recv][r.name], size=size)
                cell["residual"] = round(float(fit_adapter(adapter, batches, method=spec.adapter.init)), 6)
        else:
            fits = shared_fits([a for _, a in live], spec.adapter.init, budget=ws.budget, hold_every=HOLD_EVERY,
                               keep_proxy=not spec.scores)
            sends = {a.sender.name for _, a in live}
            takes = {a.receiver.name for _, a in live}
            n = len(ws.y_train)
            for start in range(0, n, EVAL_BATCH):
                ctx.check_cancel()
                fits.update({c: ws.sender_train[send][c][start : start + EVAL_BATCH] for c in sends},
                            {c: ws.receiver_train[recv][c][start : start + EVAL_BATCH] for c in takes}, first=start)
            for (cell, _), record in zip(live, fits.records()):
                _keep_fit(cell, record)
    return [(cell, adapter.to(ctx.device) if adapter is not None else None) for cell, adapter in built]


def _keep_fit(cell: dict, record: dict[str, float | None]) -> None:
    """A fit's residual and proxy (held-out ``r2``, ``cka``: :meth:`SharedFits.records`) into its cell's record."""
    cell.update({k: None if v is None else round(float(v), 6) for k, v in record.items()})


def _record_score(cell: dict, score: ClassifierScore, ws: _Workspace, recv: str, seed: int) -> None:
    """A cell's test accuracy and penalty (against B_recv), each with its 95% interval over the test images
    (accuracy: exact binomial; penalty: a paired bootstrap, B_recv and the cell scored on the same images)."""
    cell["accuracy"] = score["accuracy"]
    cell["penalty"] = stitching_penalty(ws.bases[recv], score["accuracy"])
    cell["accuracy_ci"] = list(mean_ci(score.correct, seed=seed))
    cell["penalty_ci"] = list(paired_difference_ci(ws.base_correct[recv], score.correct, seed=seed))


def _score_cell(cell: dict, adapter: nn.Module, ctx: UnitContext, ws: _Workspace, send: str, recv: str,
                seed: int) -> dict:  # fmt: skip
    """Test accuracy and penalty (against B_recv) of suffix_B(S(h_test)); fills and returns ``cell``."""
    adapter.eval()
    suffix = ws.suffixes[recv, cell["receiver"]]
    h_test = ws.sender_test[send][cell["sender"]]  # [N_test, *s.shape]
    size = min(EVAL_BATCH, images_per_slice(adapter, adapter.sender, adapter.receiver, ws.budget, ws.work))
    score = evaluate_batches(lambda h: suffix(adapter(h.float())), _batched(h_test, ws.y_test, size=size),
                             ws.num_classes, ctx.device)  # fmt: skip
    _record_score(cell, score, ws, recv, seed)
    return cell


@torch.no_grad()
def _score_receiver(group: list[tuple[dict, nn.Module]], ctx: UnitContext, ws: _Workspace, send: str, recv: str,
                    seed: int) -> None:  # fmt: skip
    """Score cells that share one receiver (and one output grid) together: per test batch, every adapter's output
    stacked [K * B, *r] through B's suffix once -> logits [K * B, classes], split back per cell; each cell's
    accuracy and penalty as :func:`_score_cell` gives them (its own test images, the same suffix)."""
    (_, first), n = group[0], len(ws.y_test)
    suffix = ws.suffixes[recv, first.receiver.name]
    size = min(EVAL_BATCH, images_per_slice(first, first.sender, first.receiver, ws.budget, ws.work))
    per_pass = max(1, JOINT_ELEMENTS // (size * math.prod(first.receiver.shape)))
    for start in range(0, len(group), per_pass):
        part = group[start : start + per_pass]
        logits: list[list[torch.Tensor]] = [[] for _ in part]
        for adapter in (a for _, a in part):
            adapter.eval()
        for i in range(0, n, size):
            ctx.check_cancel()
            mids = [a(ws.sender_test[send][c["sender"]][i : i + size].to(ctx.device).float()) for c, a in part]
            out = suffix(torch.cat(mids)).float().cpu()  # [K * B, classes]
            for k, chunk in enumerate(out.split([len(m) for m in mids])):
                logits[k].append(chunk)
        for (cell, _), rows in zip(part, logits, strict=True):
            _record_score(cell, score_logits(torch.cat(rows), ws.y_test, ws.num_classes), ws, recv, seed)


def _run_receiver(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, senders: list[Cut], r: Cut,
    train_suffix: nn.Module | None, objective: dict[str, float] | None,
) -> list[dict]:
    """Every cell A_send[s] -> B_recv[r] for s in ``senders``: fit, train (``objective``; None: none), score.

    Trained adapters train together through one pass of ``train_suffix`` (B's frozen suffix, BN
    folded) per step (see :mod:`stitchcore.stitching.shared_suffix`); each gets the gradient of its
    own loss.  The copy term (``match``) compares each output with B's own activation at ``r``.
    """
    fitted = _fit_cells(spec, ctx, ws, send, recv, [(s, r) for s in senders])
    live = [(cell, adapter) for cell, adapter in fitted if adapter is not None]
    for group in _by_output(live, lambda cell_adapter: cell_adapter[1]) if objective is not None else ():
        train_adapters_shared_suffix(
            [adapter for _, adapter in group], train_suffix,
            [ws.sender_train[send][cell["sender"]] for cell, _ in group], ws.y_train,
            knobs=TrainKnobs.of(spec), device=ctx.device, check_cancel=ctx.check_cancel,
            precision=spec.precision, objective=objective,
            receiver_acts=ws.receiver_train[recv][r.name] if "match" in objective else None,
            final_acts=final_features(ws, recv, ctx.device) if "final" in objective else None,
        )  # fmt: skip
    for cell, adapter in live:
        _score_cell(cell, adapter, ctx, ws, send, recv, spec.seed)
    return [cell for cell, _ in fitted]


def _run_streamed(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, pairs: list[tuple[Cut, Cut]],
    report: Callable[[float, str], None], objective: dict[str, float] | None = None,
) -> list[dict]:
    """Every cell of ``pairs`` from streamed passes (:mod:`stitchcore.stitching.streamed`): one pass of A and B
    over the training images fits them all in closed form, ``objective`` (None: none) trains them with each
    step's activations computed when its batch is drawn (:func:`_train_streamed`), and one pass of A over the
    test images scores them."""
    built = [_new_cell(spec, s, r, ws.suffixes.get((recv, r.name)), ctx.device) for s, r in pairs]
    live = [(cell, StreamedCell(adapter.to(ctx.device), s, r))
            for (cell, adapter), (s, r) in zip(built, pairs) if adapter is not None]  # fmt: skip
    if live:
        stream = {"device": ctx.device, "budget": ws.budget, "work": ws.work, "check_cancel": ctx.check_cancel}
        share = (1 / 3, 1 / 3) if objective is not None else (1 / 2, 0.0)  # of the unit: fit, train (then score)
        share = share if spec.scores else (1.0, 0.0)
        fitted: list[dict] = [{}] * len(live)
        if spec.adapter.init in FIT_METHODS:
            fitted = fit_streamed([c for _, c in live], ws.models[send], ws.models[recv], ws.ds,
                                  len(ws.y_train), method=spec.adapter.init, hold_every=HOLD_EVERY,
                                  keep_proxy=not spec.scores,
                                  progress=lambda f, m: report(f * share[0], m), **stream)  # fmt: skip
        if objective is not None:
            _train_streamed(spec, ctx, ws, send, recv, [c for _, c in live], objective,
                            lambda f, m: report(share[0] + f * share[1], m))  # fmt: skip
        for (cell, _), record in zip(live, fitted):
            _keep_fit(cell, record)
        if not spec.scores:  # the moments' proxy alone: nothing to score
            return [cell for cell, _ in built]
        suffixes = [ws.suffixes[recv, c.receiver.name] for _, c in live]
        done = sum(share)
        scores = score_streamed([c for _, c in live], suffixes, ws.models[send], ws.ds, len(ws.y_test),
                                progress=lambda f, m: report(done + f * (1 - done), m), **stream)  # fmt: skip
        for (cell, _), score in zip(live, scores):
            _record_score(cell, score, ws, recv, spec.seed)
    return [cell for cell, _ in built]


def _train_streamed(
    spec: MatrixSpec, ctx: UnitContext, ws: _Workspace, send: str, recv: str, cells: list[StreamedCell],
    objective: dict[str, float], report: Callable[[float, str], None],
) -> None:
    """Train the cells' adapters, those into one receiver together through one pass of its suffix per step (as
    :func:`_run_receiver`), on activations computed per drawn batch: one pass of A serves every sender cut (and
    one of B every receiver cut, for the copy term); nothing is cached."""
    n = len(ws.y_train)
    senders = list({c.sender.name: c.sender for c in cells}.values())
    receivers = list({c.receiver.name: c.receiver for c in cells}.values())
    acts_a = CutsOnDemand(ws.models[send], senders, ws.ds, "train", n, ctx.device)
    acts_b = CutsOnDemand(ws.models[recv], receivers, ws.ds, "train", n, ctx.device) if "match" in objective else None
    for k, r in enumerate(receivers):
        group = [c for c in cells if c.receiver.name == r.name]
        report(k / len(receivers), f"training {len(group)} adapter(s) into {r.name} (streamed)")
        per_pass = max(1, JOINT_ELEMENTS // (spec.batch_size * math.prod(r.shape)))
        suffix = training_top(ws.suffixes[recv, r.name], objective)
        alike = _by_output(group, lambda c: c.adapter)
        for part in (same[i : i + per_pass] for same in alike for i in range(0, len(same), per_pass)):
            train_adapters_shared_suffix(
                [c.adapter for c in part], suffix, [acts_a[c.sender.name] for c in part], ws.y_train,
                knobs=TrainKnobs.of(spec), device=ctx.device, check_cancel=ctx.check_cancel,
                precision=spec.precision, objective=objective,
                receiver_acts=acts_b[r.name] if acts_b is not None else None,
                final_acts=final_features(ws, recv, ctx.device) if "final" in objective else None,
            )  # fmt: skip


def _over_seeds(spec: MatrixSpec, variant: str, run: Callable[[MatrixSpec], list[dict]]) -> list[dict]:
    """``run(spec)``'s cells; for the matrix's own cells with ``spec.seeds`` > 1, ``run`` again from seeds
    seed+1, seed+2 ... and each scored cell gains ``seeds``: its accuracy and penalty from every seed, in order
    (the cell's own numbers stay seed's, the stitch its cell link opens).  Controls train from their seed once."""
    cells = run(spec)
    if variant != "trained" or spec.seeds < 2:
        return cells
    runs = [cells, *(run(replace(spec, seed=spec.seed + k)) for k in range(1, spec.seeds))]
    for j, cell in enumerate(cells):
        if cell["accuracy"] is not None:
            cell["seeds"] = {field: [other[j][field] for other in runs] for field in ("accuracy", "penalty")}
    return cells


# ---------------------------------------------------------------------------- units (run by a backend)


def sender_activations(
    model: ModelPackage, senders: list[str], ds: ImageDataset, n_train: int, n_test: int, batch: int,
    context: UnitContext,
) -> dict[str, dict[str, torch.Tensor]]:
    """One pass of a sender model over the data: ``{"train"|"test": {cut: [N, *cut.shape]}}`` (a cluster task)."""
    m = model.unpack()
    cuts = resolve_cuts(m, tuple(senders))
    acts = {"device": context.device, "check_cancel": context.check_cancel, "batch_size": batch}
    return {"train": collect_cuts(m, cuts, ds, "train", limit=n_train, **acts),
            "test": collect_cuts(m, cuts, ds, "test", limit=n_test, **acts)}  # fmt: skip


def _unit_workspace(source: _Workspace | dict, send: str, recv: str, receivers: list[str],
                    context: UnitContext, scoring: bool = True) -> _Workspace:  # fmt: skip
    """The workspace a unit works in: the run's own (local), or one rebuilt from what the driver shipped:
    the two models, the data, the sender's activations (cached mode), B's targets at ``receivers`` and (``scoring``)
    B's suffixes from them."""
    if isinstance(source, _Workspace):
        return source
    models = {send: source["models"][send].unpack().to(context.device),
              recv: source["models"][recv].unpack().to(context.device)}  # whole, then split
    ds, n_train, n_test = source["ds"], source["n_train"], source["n_test"]
    senders = resolve_cuts(models[send], tuple(source["senders"]))
    cuts = resolve_cuts(models[recv], tuple(receivers))
    suffixes = {(recv, r.name): split(models[recv], r)[1].to(context.device).eval()
                for r in cuts if scoring}  # fmt: skip
    acts = source.get("acts")
    if acts is not None and send == NOISE_KEY:  # A's activations shipped: the noise is made here from them
        noise = noise_activations(acts["train"], ds.labels("train")[:n_train], ds.labels("test")[:n_test],
                                  ds.num_classes, source["noise_seed"])  # fmt: skip
        acts = {"train": noise[0], "test": noise[1]}
    targets = {}
    if acts is not None:
        targets = {recv: collect_cuts(models[recv], cuts, ds, "train", limit=n_train, device=context.device,
                                      check_cancel=context.check_cancel, batch_size=source["batch"])}  # fmt: skip
    return _Workspace(
        senders=senders, receivers=cuts, num_classes=ds.num_classes,
        sender_train={send: acts["train"]} if acts else {}, sender_test={send: acts["test"]} if acts else {},
        receiver_train=targets, y_train=ds.labels("train")[:n_train], y_test=ds.labels("test")[:n_test],
        suffixes=suffixes, bases=source["bases"], base_correct=source["base_correct"], models=models, ds=ds,
        budget=source["budget"],
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
    objective = cell_objective(spec, variant)
    trained = objective is not None and bool(pending)
    per_pass = max(1, JOINT_ELEMENTS // (spec.batch_size * math.prod(r.shape))) if trained else 1
    train_suffix = training_top(ws.suffixes[recv, r.name], objective) if trained else None  # once per receiver
    for start in range(0, len(pending), per_pass):
        group = pending[start : start + per_pass]
        context.check_cancel()
        where = f"{len(group)} sender(s) into {r.name}" + ("" if variant == "trained" else f" ({variant.replace('_', ' ')})")
        yield "progress", (start / len(pending), where)
        cells = _over_seeds(spec, variant, lambda sp, group=group: _run_receiver(
            sp, context, ws, send, recv, group, r, train_suffix, objective))  # fmt: skip
        yield "cells", [{"variant": variant, **cell} for cell in cells]


def grid_of(cut: Cut) -> tuple[int, ...]:
    """The samples a fit into ``cut`` sees per image: its grid (map), its token count (tokens), none (vector).
    The closed-form cells into receivers of one grid share their moments' products (:func:`grid_unit`)."""
    return {"map": tuple(cut.shape[1:]), "map_nhwc": tuple(cut.shape[:2]), "tokens": tuple(cut.shape[:1])}.get(
        cut.layout, ())


def grid_unit(
    spec: MatrixSpec, source: _Workspace | dict, variant: str, send: str, recv: str, pairs: list[tuple[str, str]],
    context: UnitContext,
) -> Iterator[tuple[str, Any]]:
    """Every pending closed-form cell of ``pairs`` (every sender into the receivers of one grid): fitted
    together from shared moments (:class:`SharedFits`: one pass over the cached activations, one factor per
    sender, one stacked product for all cross-moments), then scored (a proxy matrix: not scored),
    the cells coming back receiver by receiver, each scored with every other cell into its receiver in one
    suffix pass a test batch (on a GPU; SHARED_SCORING), else sender by sender, one cell a pass."""
    receivers = list(dict.fromkeys(r for _, r in pairs))
    ws = _unit_workspace(source, send, recv, receivers, context, spec.scores)
    cuts = {("s", c.name): c for c in ws.senders} | {("r", c.name): c for c in ws.receivers}
    where = "" if variant == "trained" else f" ({variant.replace('_', ' ')})"
    yield "progress", (0.0, f"fitting {len(pairs)} cells into {len(receivers)} receiver(s) from shared moments{where}")
    fitted = _fit_cells(spec, context, ws, send, recv, [(cuts["s", s], cuts["r", r]) for s, r in pairs])
    if not spec.scores:  # nothing to score: every cell at once (one write of the cells, not one a sender)
        yield "cells", [{"variant": variant, **cell} for cell, _ in fitted]
        return
    if _scores_together(context.device):  # receiver by receiver: one suffix pass a test batch for every cell into it
        by_receiver: dict[str, list[tuple[dict, nn.Module | None]]] = {}
        for cell, adapter in fitted:
            by_receiver.setdefault(cell["receiver"], []).append((cell, adapter))
        for k, (receiver, mine) in enumerate(by_receiver.items()):
            context.check_cancel()
            yield "progress", (k / len(by_receiver), f"scoring {len(mine)} sender(s) into {receiver}{where}")
            live = [(cell, adapter) for cell, adapter in mine if adapter is not None]
            for group in _by_output(live, lambda cell_adapter: cell_adapter[1]):
                _score_receiver(group, context, ws, send, recv, spec.seed)
            yield "cells", [{"variant": variant, **cell} for cell, _ in mine]
        return
    by_sender: dict[str, list[tuple[dict, nn.Module | None]]] = {}
    for cell, adapter in fitted:
        by_sender.setdefault(cell["sender"], []).append((cell, adapter))
    for k, (sender, mine) in enumerate(by_sender.items()):
        context.check_cancel()
        yield "progress", (k / len(by_sender), f"scoring {sender} into {len(mine)} receiver(s){where}")
        for cell, adapter in mine:
            if adapter is not None:
                _score_cell(cell, adapter, context, ws, send, recv, spec.seed)
        yield "cells", [{"variant": variant, **cell} for cell, _ in mine]


def streamed_unit(
    spec: MatrixSpec, source: _Workspace | dict, variant: str, send: str, recv: str, pairs: list[tuple[str, str]],
    context: UnitContext,
) -> Iterator[tuple[str, Any]]:
    """Every pending cell of a variant over the memory budget, from the same streamed passes."""
    ws = _unit_workspace(source, send, recv, list(dict.fromkeys(r for _, r in pairs)), context, spec.scores)
    cuts = {("s", c.name): c for c in ws.senders} | {("r", c.name): c for c in ws.receivers}
    yield "progress", (0.0, f"{len(pairs)} cells streamed" + ("" if variant == "trained" else f" ({variant})"))
    cells = _over_seeds(spec, variant, lambda sp: _run_streamed(
        sp, context, ws, send, recv, [(cuts["s", s], cuts["r", r]) for s, r in pairs], context.report,
        cell_objective(sp, variant)))  # fmt: skip
    yield "cells", [{"variant": variant, **cell} for cell in cells]
