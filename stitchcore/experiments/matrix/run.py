"""The driver of a matrix run: :func:`run_matrix`, registered as the experiment ``matrix``.

It loads A and B (and their random-init twins for the controls), checks the memory budget, caches the
activations when the units run here, cuts the pending cells into units (:mod:`.units`: one per receiver,
or one per variant when streaming) and hands them to the run's backend.  Only this process writes the
store: finished cells stream into it as they come back (``cell_acc`` metric points and the ``cells.json``
artifact, rewritten after every group of cells) and into a resume file, so a cancelled or crashed matrix
keeps its cells and a re-run of the same spec does not recompute them.  A unit that fails for good on a
cluster stores its cells with the reason; the rest of the matrix completes.

Cells that no adapter can join (a vector sender into a spatial receiver) are skipped with the reason;
they never fail the matrix.  A matrix whose activations exceed the memory budget (``STITCHLAB_ACT_BUDGET_MB``)
streams them, except the noise-sender control, which is made from A's cached activations: a streamed matrix with
it is refused with what to change.

Debiased maps (cell minus control) are stored only for the controls made as the cells (:func:`~.spec.made_alike`):
closed form beside closed form, trained beside trained.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import torch

from stitchcore.backends import Backend, Unit
from stitchcore.cuts import Cut, split
from stitchcore.data.images import ImageDataset
from stitchcore.errors import StitchError
from stitchcore.experiments._cells import CellBook
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.dataset_check import check_head_classes, load_pair, pair_dataset
from stitchcore.experiments.matrix.estimate import estimate_matrix
from stitchcore.experiments.matrix.read import across_seed_grids, cell_grid, difference
from stitchcore.experiments.matrix.spec import CELLS_ARTIFACT, MODE_RULES, MatrixSpec, cell_objective, made_alike
from stitchcore.experiments.matrix.units import (
    EVAL_BATCH,
    NOISE_KEY,
    _Workspace,
    grid_of,
    grid_unit,
    noise_activations,
    receiver_unit,
    resolve_cuts,
    sender_activations,
    streamed_unit,
)
from stitchcore.measures.probe_kl import HOLD_EVERY, cut_probes, pooled, pooled_cuts, probe_kl_grid
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import pack_model
from stitchcore.models.refs import parse_ref, random_twins
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import collect_cuts, forward_bytes_per_image, memory_budget_bytes
from stitchcore.stitching.evaluate import ClassifierScore, evaluate_batches
from stitchcore.stitching.streamed import images_per_batch
from stitchcore.store.results import Store

__all__ = ["check_matrix", "run_matrix"]

log = logging.getLogger(__name__)

# variant -> (sender model key, receiver model key) in the workspace
VARIANT_MODELS = {"trained": ("a", "b"), "random_sender": ("a_rand", "b"), "random_receiver": ("a", "b_rand"),
                  "random_both": ("a_rand", "b_rand"), "noise_sender": (NOISE_KEY, "b")}  # fmt: skip


def _nbytes(cuts: list[Cut], n: int) -> int:
    return sum(math.prod(c.shape) for c in cuts) * n * 4


def _cell_key(variant: str, sender: str, receiver: str) -> str:
    return f"{variant}|{sender}|{receiver}"


def _base_score(
    m: LoadedModel, ds: ImageDataset, n_test: int, device: torch.device, batch: int = EVAL_BATCH
) -> ClassifierScore:
    """The whole model's test score (``.correct``: per image, what the cells' paired penalty intervals need)."""
    batches = ds.model_batches("test", batch, m.preprocess, device, limit=n_test)  # model input on device
    return evaluate_batches(m.model, batches, ds.num_classes, device)


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
    a, b = load_pair(spec, store, input_kind="image", hint="matrices need image models")
    models = {"a": a, "b": b}
    ds = pair_dataset(spec, models["a"], models["b"])
    check_head_classes(models["b"], ds, "B")
    check_head_classes(models["a"], ds, "A")
    return models, ds, resolve_cuts(models["a"], spec.senders), resolve_cuts(models["b"], spec.receivers)


def _counts(spec: MatrixSpec, ds: ImageDataset) -> tuple[int, int]:
    """The training and test images the run uses (the spec's caps applied)."""
    n_train, n_test = (len(ds.labels(s)) for s in ("train", "test"))
    n_train = n_train if spec.max_train is None else min(spec.max_train, n_train)
    return n_train, n_test if spec.max_test is None else min(spec.max_test, n_test)


def _activation_bytes(spec: MatrixSpec, senders: list[Cut], receivers: list[Cut], n_train: int, n_test: int) -> int:
    """Bytes of the activations a cached run holds: every sending model's (and the noise sender's) sender cuts
    over both splits, every receiving model's receiver cuts over the training split."""
    variants = [VARIANT_MODELS[v] for v in spec.variants]
    sending, receiving = {send for send, _ in variants}, {recv for _, recv in variants}
    return len(sending) * _nbytes(senders, n_train + n_test) + len(receiving) * _nbytes(receivers, n_train)


def _check_noise_fits(spec: MatrixSpec, need: int, budget: int) -> None:
    """The noise sender is made from A's cached activations (there is no model to stream): refused over the
    budget."""
    if "noise_sender" in spec.variants and need > budget:
        raise StitchError(
            f"the noise-sender control needs the activations in memory ({need / 2**20:.3g} MB, over the"
            f" {budget / 2**20:.3g} MB budget): lower max_train / max_test, raise STITCHLAB_ACT_BUDGET_MB,"
            " or set noise_sender=False (the CLI's --no-noise-sender)")  # fmt: skip


def check_matrix(spec: MatrixSpec, store: Store) -> None:
    """What the run checks before its first cell, without computing any: controls, models, data, cut names, and
    that a noise sender's activations fit the memory budget."""
    _check_controls(spec)
    _, ds, senders, receivers = _inputs(spec, store)
    if "noise_sender" in spec.variants:
        need = _activation_bytes(spec, senders, receivers, *_counts(spec, ds))
        _check_noise_fits(spec, need, memory_budget_bytes())


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
        twin_a, twin_b = random_twins(spec.a, spec.b, spec.seed, rule=spec.twin_seeds)
        models["a_rand"], models["b_rand"] = load_model(twin_a, store=ctx.store), load_model(twin_b, store=ctx.store)
    for m in models.values():
        m.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    n_train, n_test = _counts(spec, ds)

    sending = sorted({v[1] for v in variants})
    receiving = sorted({v[2] for v in variants})  # random twins have the same cut shapes
    need = _activation_bytes(spec, senders, receivers, n_train, n_test)
    budget = memory_budget_bytes()
    _check_noise_fits(spec, need, budget)
    streamed = need > budget
    if streamed:  # each pass computes what it needs per batch; trained cells recompute A's per drawn batch
        log.info("matrix: %.1f MB of activations over the %.0f MB budget; streaming", need / 2**20, budget / 2**20)

    suffixes = {}
    for key in receiving if spec.scores else ():  # a proxy matrix scores nothing
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
    scores = {key: _base_score(m, ds, n_test, device, batch) for key, m in models.items()
              if spec.scores}  # a proxy matrix scores nothing, so it needs no base to score against
    bases = {key: score["accuracy"] for key, score in scores.items()}
    common["base_correct"] = {key: score.correct for key, score in scores.items()}  # float [N_test] each
    common["batch"] = batch
    if streamed or not cache:
        return _Workspace(sender_train={}, sender_test={}, receiver_train={}, bases=bases, streamed=streamed,
                          **common), ds.name  # fmt: skip
    ctx.progress(0.0, "caching activations")
    acts = {"device": device, "check_cancel": ctx.check_cancel, "batch_size": batch}
    real = [k for k in sending if k != NOISE_KEY]  # the noise sender is made from A's, below
    sender_train = {k: collect_cuts(models[k], senders, ds, "train", limit=n_train, **acts) for k in real}
    sender_test = ({k: collect_cuts(models[k], senders, ds, "test", limit=n_test, **acts) for k in real}
                   if spec.scores else {})  # fmt: skip  (a proxy matrix scores nothing)
    if NOISE_KEY in sending:
        sender_train[NOISE_KEY], sender_test[NOISE_KEY] = noise_activations(
            sender_train["a"], common["y_train"], common["y_test"], ds.num_classes, spec.seed)
    ws = _Workspace(
        sender_train=sender_train,
        sender_test=sender_test,
        receiver_train={
            k: collect_cuts(models[k], receivers, ds, "train", limit=n_train, **acts) for k in receiving
        },
        bases=bases,
        **common,
    )
    return ws, ds.name


def _ship(ws: _Workspace, backend: Backend, sending: list[str], seed: int) -> tuple[dict, dict[str, Any]]:
    """What units on another process need, shared once per run: each model as a package, the data, the
    numbers; and (cached mode) one sender-activations task per sending model (the noise sender's unit makes
    its noise from A's, with ``seed``)."""
    packages = {key: backend.share(pack_model(m)) for key, m in ws.models.items()}
    common = {"ds": backend.share(ws.ds), "n_train": len(ws.y_train), "n_test": len(ws.y_test), "batch": ws.batch,
              "budget": ws.budget, "work": ws.work, "bases": ws.bases, "base_correct": ws.base_correct,
              "senders": [s.name for s in ws.senders], "noise_seed": seed}  # fmt: skip
    real = sorted({"a" if key == NOISE_KEY else key for key in sending})
    acts = {} if ws.streamed else {
        key: backend.call(sender_activations, packages[key], common["senders"], common["ds"], common["n_train"],
                          common["n_test"], ws.batch) for key in real}  # fmt: skip
    return packages, {"common": common, "acts": acts}


def _source_for(shipped: tuple[dict, dict] | None, ws: _Workspace, send: str, recv: str) -> _Workspace | dict:
    if shipped is None:
        return ws
    packages, rest = shipped
    model = "a" if send == NOISE_KEY else send  # the noise sender: A's cuts and activations, the noise made there
    return {**rest["common"], "models": {send: packages[model], recv: packages[recv]},
            "acts": rest["acts"].get(model)}  # fmt: skip


def _table(cells: list[dict], ws: _Workspace, variant: str, what: str) -> list[list]:
    """[senders][receivers] of one cell field (None where skipped)."""
    return cell_grid(cells, [s.name for s in ws.senders], [r.name for r in ws.receivers], what, variant)


def _probe_kl(ws: _Workspace, ctx: RunContext) -> list[list[float]]:
    """The probe KL of every sender cut of A x receiver cut of B (:mod:`stitchcore.measures.probe_kl`): from the
    cached activations of the training images, or one pooled pass of each model over them."""
    n = len(ws.y_train)
    probes = []
    for cached, key, cuts in ((ws.sender_train.get("a"), "a", ws.senders), (ws.receiver_train.get("b"), "b",
                                                                              ws.receivers)):  # fmt: skip
        acts = ({c.name: pooled(cached[c.name], c.layout) for c in cuts} if cached else
                pooled_cuts(ws.models[key], cuts, ws.ds, "train", n=n, device=ctx.device, batch_size=ws.batch,
                            check_cancel=ctx.check_cancel))  # fmt: skip
        probes.append(cut_probes(acts, ws.y_train, ws.num_classes))
    return probe_kl_grid([probes[0][c.name] for c in ws.senders], [probes[1][c.name] for c in ws.receivers])


def _proxy(cells: list[dict], ws: _Workspace) -> dict[str, list[list]] | None:
    """The matrix's proxy grids {"r2", "cka"} [senders][receivers], or None when no cell has them."""
    if not any(c.get("r2") is not None or c.get("cka") is not None for c in cells if c["variant"] == "trained"):
        return None
    return {what: _table(cells, ws, "trained", what) for what in ("r2", "cka")}


@register_experiment("matrix", MatrixSpec.from_dict, check=check_matrix, backends=("local", "ray"),
                     estimate=estimate_matrix)
def run_matrix(spec: MatrixSpec, ctx: RunContext) -> dict:
    """Fill the sender x receiver matrix of ``spec`` cell by cell; returns the summary stored with the run.

    The units (one per receiver, or per variant when streaming) run on ``ctx.options``' backend; only
    this process writes the store, as cells come back.
    """
    t0 = time.perf_counter()
    _check_controls(spec)
    variants = [(v, *VARIANT_MODELS[v]) for v in spec.variants]  # (variant, sender model key, receiver model key)
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
    shipped = None if backend.name == "local" else _ship(ws, backend, sorted({v[1] for v in variants}), spec.seed)
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
        if cell_objective(spec, variant) is None:  # closed form and proxy: one unit a receiver grid
            grids = {r.name: grid_of(r) for r in ws.receivers}
            for grid in dict.fromkeys(grids.values()):
                mine = [(s, r) for s, r in todo if grids[r] == grid]
                if mine:
                    key = f"{variant}|{'x'.join(map(str, grid)) or 'vector'}"
                    units.append(Unit(key, grid_unit, (spec, source, variant, send, recv, mine), len(mine)))
                    unit_cells[key] = mine
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
    cells = book.cells()
    probe_kl = None  # the recommender's first ranking: for a matrix that ranks cells before training them
    if not MODE_RULES[spec.mode].trains and len(ws.y_train) >= 2 * HOLD_EVERY:
        ctx.progress(0.99, "a linear probe at every cut (the cut recommender)")
        probe_kl = _probe_kl(ws, ctx)
    ctx.progress(1.0, f"{n_cells} cells done")

    values = _table(cells, ws, "trained", "accuracy")
    controls = by_control = None
    if spec.controls:
        controls = {v: _table(cells, ws, v, "accuracy") for v, _, _ in variants[1:]}
        # like with like only: a control made otherwise than the cells has no debiased map (read.debiased says why)
        by_control = {v: difference(values, grid) for v, grid in controls.items()
                      if made_alike(spec.mode, spec.objective, spec.control_training, v)}  # fmt: skip
    skipped = [c for c in cells if c["variant"] == "trained" and c["skipped_reason"] is not None]
    summary = {
        "senders": [s.name for s in ws.senders],
        "receivers": [r.name for r in ws.receivers],
        # each cut's fraction of its model's depth: what the relative-depth baseline ranks cells by (recommend)
        "sender_depths": [s.depth for s in ws.senders],
        "receiver_depths": [r.depth for r in ws.receivers],
        # symmetric KL between the predictions of a linear probe at each cut of A and of B (KLAS-style;
        # measures.probe_kl), [senders][receivers]: alike cuts first in the recommender; None for a trained matrix
        "probe_kl": probe_kl,
        "values": values,
        "metric": "accuracy",
        "penalty": _table(cells, ws, "trained", "penalty"),
        # 95% intervals over the test images, [lo, hi] per cell (accuracy exact; penalty a bootstrap paired with B's own)
        "values_ci": _table(cells, ws, "trained", "accuracy_ci"),
        "penalty_ci": _table(cells, ws, "trained", "penalty_ci"),
        "residual": _table(cells, ws, "trained", "residual"),
        # the fits' moments' proxy (stitching.shared_fits): held-out ridge R² and linear CKA per cell; None
        # where no closed-form fit was made (a trained matrix from random weights)
        "proxy": _proxy(cells, ws),
        "skipped": {f"{c['sender']}->{c['receiver']}": c["skipped_reason"] for c in skipped},
        "base": {"a": ws.bases["a"], "b": ws.bases["b"]} if ws.bases else None,
        "base_random": {"a": ws.bases["a_rand"], "b": ws.bases["b_rand"]} if spec.controls else None,
        "controls": controls,
        "controls_ci": {v: _table(cells, ws, v, "accuracy_ci") for v in controls} if controls else None,
        "debiased": by_control.get("random_sender") if by_control else None,  # as stored before the others
        "debiased_by_control": by_control,  # control -> values - controls[control], controls made as the cells
        "debiased_control": "random_sender" if spec.controls else None,
        "mode": spec.mode,
        "objective": spec.objective,
        "control_training": spec.control_training if spec.controls else None,  # "task": controls task-trained
        "controls_at_chance": list(spec.controls_at_chance) or None,  # pinned at chance by construction
        "dataset": dataset,
        "n_train": len(ws.y_train),
        "n_test": len(ws.y_test),
        "n_cells": len(ws.senders) * len(ws.receivers),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if spec.seeds > 1:  # every cell's adapter from several seeds: the mean and t-interval grids across them
        summary["across_seeds"] = across_seed_grids(cells, summary["senders"], summary["receivers"])
    return book.finish(summary, backend, label=lambda c: f"{c['variant']}|{c['sender']}->{c['receiver']}")
