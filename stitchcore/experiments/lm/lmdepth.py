"""Experiment ``lmdepth``: merge and/or stitch penalties at every split, per head, and optionally every
(i, j) stitch (the heat map).

Each point and each heat-map row is a unit (:func:`depth_unit`, module-level: Ray ships it by reference)
on the run's backend; the driver (:func:`run_depth`) writes the store.  Each finished point is logged
as the metric series ``penalty:{mode}:{head}:{embed}`` (step = split; sweeps stored before the embedding
choice logged ``penalty:{mode}:{head}``, whose merges read A's embeddings), which :func:`partial_points`
reads back while the sweep runs.  A curve is named by mode, head and embeddings (:func:`curve_label`);
a stitch reads A's embeddings (A's bottom runs up to the adapter).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stitchcore.backends import Unit, UnitContext, cells_per_node
from stitchcore.errors import CutError, StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.lm._pair import (
    LMSetup,
    UnitRun,
    common_summary,
    joined_scores,
    pair_shapes,
    receiver_block,
    sample_of,
    setup_in_worker,
    setup_pair,
    stitch_once,
)
from stitchcore.experiments.lm.cross import check_cross
from stitchcore.experiments.lm.cross_depth import cross_skipped, run_cross_depth
from stitchcore.experiments.lm.estimate import estimate_depth
from stitchcore.experiments.lm.specs import DepthSpec
from stitchcore.lm.evaluate import lm_loss
from stitchcore.lm.parts import build_merge, cut_name
from stitchcore.models.package import pack_model
from stitchcore.plots.penalty import format_pct, loss_penalty_pct

__all__ = ["check_depth", "curve_label", "depth_unit", "labelled_points", "partial_points", "run_depth"]

log = logging.getLogger(__name__)

PENALTY_SERIES = "penalty"  # depth sweeps log each point as penalty:{mode}:{head}:{embed} (read by partial_points)


def _depth_splits(spec: DepthSpec, n_a: int) -> None:
    if bad := [k for k in spec.splits or () if not 0 <= k <= n_a]:
        raise CutError(f"splits {bad} are outside 0..{n_a} (A has {n_a} blocks)")


def _depth_tasks(spec: DepthSpec, n_a: int, n_b: int, width_a: int, width_b: int,
                 splits: list[int]) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """The (mode, head, split) points a depth sweep runs, and the curves it skips with the reason."""
    tasks, skipped = [], {}
    for mode in spec.modes:
        for head in spec.heads:
            why = None
            if width_a != width_b and (mode == "merge" or head == "a"):
                why = f"needs equal widths (A: D={width_a}, B: D={width_b})"
            elif mode == "merge" and n_a != n_b:
                why = f"needs equal depths to substitute blocks i..L (A: {n_a}, B: {n_b} blocks)"
            if why:
                skipped[f"{mode}, head {head}"] = why
            else:
                tasks += [(mode, head, k) for k in splits]
    if not tasks and not spec.heatmap:
        raise StitchError(f"nothing to run: {'; '.join(f'{k} {v}' for k, v in skipped.items())}; use mode stitch, head b")
    return tasks, skipped


def check_depth(spec: DepthSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary (or, across tokenizers, what that sweep needs),
    the splits, and that some curve can run."""
    sa, sb = pair_shapes(spec, store, across=lambda ca, cb: check_cross(spec, ca, cb))
    _depth_splits(spec, sa["n_layer"])
    if sa["cross"]:
        cross_skipped(spec)  # merges and A's head read one vocabulary: refused when nothing else is asked
        return
    splits = list(spec.splits) if spec.splits is not None else list(range(sa["n_layer"] + 1))
    _depth_tasks(spec, sa["n_layer"], sb["n_layer"], sa["width"], sb["width"], splits)


def curve_label(mode: str, head: str, embed: str = "a") -> str:
    """The curve a depth point belongs to, by mode, head and embeddings (whose wte + wpe read the input).

    >>> curve_label("merge", "b", "b"), curve_label("stitch", "a")
    ('merge, head B, embed B', 'stitch, head A, embed A')
    """
    return f"{mode}, head {head.upper()}, embed {embed.upper()}"


def labelled_points(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored or partial depth points with their curve label (mode, head and embeddings); points stored before
    the embedding choice have no ``embed`` and read A's embeddings.

    >>> labelled_points([{"mode": "merge", "head": "b", "label": "merge, head B", "split": 0}])[0]["label"]
    'merge, head B, embed A'
    """
    return [{**p, "embed": p.get("embed", "a"), "label": curve_label(p["mode"], p["head"], p.get("embed", "a"))}
            if "mode" in p and "head" in p else dict(p) for p in points]  # fmt: skip


def _penalty_series(mode: str, head: str, embed: str) -> str:
    """The metric series a depth sweep logs each finished point to (step = split): ``penalty:merge:b:b``."""
    return f"{PENALTY_SERIES}:{mode}:{head}:{embed}"


def partial_points(metrics: Mapping[str, Sequence[tuple[int, float]]]) -> list[dict[str, Any]]:
    """The depth-sweep points a run has logged so far, from its metric series (a job snapshot's ``metrics``
    or ``store.series(run_id)``); the same keys as the summary's ``points`` except the cut name ("").

    >>> partial_points({"penalty:merge:b:b": [(0, -0.5), (1, -0.2)], "loss": [(1, 2.0)]})[1]["label"]
    'merge, head B, embed B'
    >>> partial_points({"penalty:merge:a": [(0, -0.5)]})[0]  # logged before the embedding choice: A's
    {'label': 'merge, head A, embed A', 'split': 0, 'loss_penalty': -0.5, 'cut': '', 'mode': 'merge', 'head': 'a', 'embed': 'a'}
    """
    out = []
    for name, pts in metrics.items():
        parts = name.split(":")
        if len(parts) not in (3, 4) or parts[0] != PENALTY_SERIES or not all(parts[1:]):
            continue
        mode, head, embed = parts[1], parts[2], parts[3] if len(parts) == 4 else "a"
        out += [{"label": curve_label(mode, head, embed), "split": int(k), "loss_penalty": v, "cut": "", "mode": mode,
                 "head": head, "embed": embed} for k, v in pts]  # fmt: skip
    return out


def depth_unit(spec: DepthSpec, source: LMSetup | dict, job: tuple, step0: int, context: UnitContext,
               ) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: one point of a curve (``("point", mode, head, split, with_sample)``) or one row of the
    heat map (``("row", i)``: A's position i into every position of B).  Yields the training loss points
    (``"metrics"``) and the results (``"cells"``)."""
    s = source if isinstance(source, LMSetup) else setup_in_worker(source, context.device)
    run, n_a, n_b = UnitRun(context), s.a.n_layer, s.b.n_layer
    if job[0] == "point":
        _, mode, head, k, with_sample = job
        j = receiver_block(k, n_a, n_b)
        yield "progress", (0.0, f"{mode}, head {head}, split {k}")
        embed = spec.merge_embed(head) if mode == "merge" else "a"
        if mode == "merge":
            model = build_merge(s.a, s.b, k, n_a, head, embed)
            res = joined_scores(s, head, lm_loss(model, s.windows, s.device, context.check_cancel))
        else:
            model, res = stitch_once(s, spec, run, k, j, head, step0=step0, span=(0.0, 1.0), log_every=10)
        point = {"mode": mode, "head": head, "embed": embed, "split": k, "receiver": j,
                 "depth": round(k / max(n_a, 1), 6), "cut": cut_name(s.a.family, k),
                 "label": curve_label(mode, head, embed), "layout": model.layout,
                 "loss": res["loss"], "loss_penalty": res["loss_penalty"], "penalty_base": head,
                 **{key: res[key] for key in ("loss_ci", "loss_penalty_ci") if key in res}}  # fmt: skip
        if mode == "stitch":
            point["start_from"] = res["start_from"]
            if "held_out" in res:
                point["held_out"] = {k2: v for k2, v in res["held_out"].items() if k2 != "checks"}
        sample = sample_of(model, s.a, s.data, spec, s.block, s.device) if with_sample else None
        yield "metrics", run.take()
        yield "cells", [{"point": point, "sample": sample}]
        return
    _, i = job
    for j in range(n_b + 1):
        yield "progress", (j / (n_b + 1), f"heat map: A's {cut_name(s.a.family, i)} into B's {cut_name(s.b.family, j)}")
        _, res = stitch_once(s, spec, run, i, j, "b", step0=step0 + j * max(spec.steps, 1), span=(0.0, 1.0),
                             log_every=25)  # fmt: skip
        yield "metrics", run.take()
        yield "cells", [{"cell": [i, j], "loss_penalty": res["loss_penalty"],
                         "loss_penalty_ci": res.get("loss_penalty_ci")}]


@register_experiment("lmdepth", DepthSpec.from_dict, check=check_depth, backends=("local", "ray"),
                     estimate=estimate_depth)
def run_depth(spec: DepthSpec, ctx: RunContext) -> dict:
    """Merge and stitch penalties at every split, per head; optionally every (i, j) stitch.

    Each point and each heat-map row is a unit on ``ctx.options``' backend; this process writes the store.
    Across tokenizers: :func:`~stitchcore.experiments.lm.cross_depth.run_cross_depth`, in bits per byte.
    """
    if pair_shapes(spec, ctx.store, across=lambda ca, cb: None)[0]["cross"]:
        return run_cross_depth(spec, ctx)
    t0 = time.perf_counter()
    s = setup_pair(spec, ctx, lambda a, _b: _depth_splits(spec, a.n_layer))
    n_a, n_b = s.a.n_layer, s.b.n_layer
    splits = list(spec.splits) if spec.splits is not None else list(range(n_a + 1))
    tasks, skipped = _depth_tasks(spec, n_a, n_b, s.a.width, s.b.width, splits)
    per_stitch = max(spec.steps, 1)
    backend = ctx.backend()
    source: LMSetup | dict = s
    if backend.name != "local":
        la, lb = s.loaded
        source = {"a": backend.share(pack_model(la)), "b": backend.share(pack_model(lb)),
                  "data": backend.share(s.data), "windows": s.windows, "block": s.block, "base": s.base,
                  "base_windows": s.base_windows, "seed": s.seed}  # fmt: skip
    units, offset = [], 0  # offset: the first metric step of each unit, as when they ran one after another
    for mode, head, k in tasks:
        job = ("point", mode, head, k, k == splits[len(splits) // 2])  # one sample per curve, at the middle split
        units.append(Unit(f"{mode}|{head}|{k}", depth_unit, (spec, source, job, offset)))
        offset += per_stitch if mode == "stitch" else 1
    if spec.heatmap:
        for i in range(n_a + 1):
            units.append(Unit(f"row|{i}", depth_unit, (spec, source, ("row", i), offset), cells=n_b + 1))
            offset += per_stitch * (n_b + 1)
    weight = {u.key: (per_stitch if u.key.startswith("stitch") else 1) if u.cells == 1 else per_stitch * u.cells
              for u in units}  # fmt: skip
    total, finished = sum(weight.values()), 0.0
    inside: dict[str, float] = {}

    def overall(message: str) -> None:
        busy = sum(weight[k] * f for k, f in inside.items())
        ctx.progress(0.05 + 0.9 * min(1.0, (finished + busy) / total), message)

    def report(unit: Unit, fraction: float, message: str) -> None:
        inside[unit.key] = fraction
        overall(message)

    found: dict[str, dict] = {}
    values = [[None] * (n_b + 1) for _ in range(n_a + 1)] if spec.heatmap else None
    values_ci = [[None] * (n_b + 1) for _ in range(n_a + 1)] if spec.heatmap else None  # [lo, hi] per cell
    failed: dict[str, str] = {}
    samples = dict(s.samples)
    def points(unit: Unit, step: int, metrics: dict[str, float]) -> None:
        ctx.log(step, metrics)

    for event in backend.run_units(units, ctx.cancel, on_progress=report, on_metrics=points):
        key = event.unit.key
        if event.kind == "progress":
            inside[key] = event.payload[0]
            overall(event.payload[1] + event.where_words)
        elif event.kind == "metrics":
            for step, metrics in event.payload:
                ctx.log(step, metrics)
        elif event.kind == "cells":
            for item in event.payload:
                if "point" in item:
                    p = item["point"]
                    found[key] = event.stamp(p)
                    ctx.log(p["split"], {_penalty_series(p["mode"], p["head"], p["embed"]): p["loss_penalty"]})
                    if item["sample"] is not None:
                        samples[f"{p['label']}, split {p['split']}"] = item["sample"]
                    finished += weight[key]
                    inside.pop(key, None)
                    shown = format_pct(loss_penalty_pct(p["loss_penalty"]))  # as the page draws it: higher = worse
                    overall(f"{p['mode']}, head {p['head']}, split {p['split']}: loss penalty {shown}")
                else:
                    i, j = item["cell"]
                    values[i][j] = item["loss_penalty"]
                    values_ci[i][j] = item.get("loss_penalty_ci")
                    finished += per_stitch
                    inside.pop(key, None)
        elif event.kind == "failed":
            failed[key] = event.payload
            log.warning("lmdepth %s: %s failed: %s", ctx.run_id, key, event.payload)
    ctx.check_cancel()  # Stop during the units: the run ends cancelled
    points = [found[u.key] for u in units if u.key in found]
    heat = None
    if spec.heatmap:
        heat = {"rows": [cut_name(s.a.family, i) for i in range(n_a + 1)],
                "cols": [cut_name(s.b.family, j) for j in range(n_b + 1)], "values": values, "head": "b",
                "values_ci": values_ci}  # each cell's 95% interval of its loss penalty (paired with B's windows)
    out = common_summary(s, spec)
    out.update({"mode": "depth", "points": points, "splits": splits, "skipped": skipped, "heatmap": heat,
                "embed": spec.embed, "until": spec.until, "start": spec.start,
                "samples": samples, "seconds": round(time.perf_counter() - t0, 3)})
    if failed:  # unit key -> why (its cluster task failed for good); the rest completed
        out["failed"] = failed
    if backend.name != "local":
        out["backend"] = backend.describe()
        out["nodes"] = cells_per_node(points)
    return out
