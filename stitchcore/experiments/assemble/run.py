"""The driver :func:`run_assemble`, registered as ``assemble`` on import; only it writes the store."""

from __future__ import annotations

import logging
import time
from typing import Any

from stitchcore.backends import Unit
from stitchcore.experiments._cells import CellBook
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.assemble.estimate import (
    estimate_assemble,
)
from stitchcore.experiments.assemble.read import (
    pareto_front,
    with_penalty,
)
from stitchcore.experiments.assemble.spec import (
    CELLS_ARTIFACT,
    AssembleSpec,
    recipe_name,
)
from stitchcore.experiments.assemble.units import (
    _base_score,
    _blank,
    _cell_key,
    _forward_cost,
    _Parts,
    _prepare,
    _scored,
    check_assemble,
    sender_unit,
)
from stitchcore.measures.intervals import pack_outcomes
from stitchcore.models.package import pack_model

log = logging.getLogger(__name__)


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
