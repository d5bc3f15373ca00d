"""The driver :func:`run_sweep`, registered as ``sweep`` on import; only it writes the store (the
``positions.json`` artifact after each finished position, and the summary)."""

from __future__ import annotations

import json
import logging
import time

from stitchcore.backends import Unit, cells_per_node
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.sweep.estimate import estimate_sweep
from stitchcore.experiments.sweep.plan import _prepare, check_sweep
from stitchcore.experiments.sweep.read import POSITIONS_ARTIFACT, curves, noise_sender_along, penalty_ci_along
from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.experiments.sweep.units import _reference, position_unit
from stitchcore.measures.simplicity import GZIP_LEVEL, REPORT_DEFINITIONS, SHARPNESS_DEFINITION
from stitchcore.measures.traits import parse_metric
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import pack_model
from stitchcore.models.refs import parse_ref, random_twins
from stitchcore.models.sources import load_model

__all__ = ["run_sweep"]

log = logging.getLogger(__name__)


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
