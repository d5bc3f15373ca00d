"""Reading a sweep back: its per-position records as plot-ready curves, the stitching penalty along the cut with
its paired intervals, and a running sweep's finished positions (:func:`partial_positions`).

:mod:`stitchcore.experiments.sweep` writes what these read (and re-exports them: the experiment that writes a
result exports its reader).
"""

from __future__ import annotations

import json
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.measures.intervals import paired_difference_ci, unpack_outcomes
from stitchcore.measures.simplicity import REPORT_KEYS
from stitchcore.store.results import Store

__all__ = ["POSITIONS_ARTIFACT", "SIMPLICITY_KEYS", "curves", "partial_positions", "penalty_along", "penalty_ci_along"]

POSITIONS_ARTIFACT = "positions.json"  # a running sweep's finished positions, rewritten after each one
SIMPLICITY_KEYS = ("grad_norm", "sharpness", "gzip_bits")


def curves(rows: list[dict], metrics: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Per-position records -> plot-ready lists (also for a running sweep's partial rows).

    Returns {"positions", "depths", "stitched": {metric: [v]}, "stitched_ci": {metric: [[lo, hi] | None]},
    "control": {metric: {"min", "max", "mean"}} | None, "per_class": [[acc per position] per class],
    "per_class_ci": [[[lo, hi] | None per position] per class], "simplicity": {measure: [v]} | None}; an
    interval is None at a position stored before intervals.
    """
    out: dict[str, Any] = {"positions": [r["position"] for r in rows], "depths": [r["depth"] for r in rows]}
    out["stitched"] = {k: [r["metrics"].get(k) for r in rows] for k in metrics}
    out["stitched_ci"] = {k: [(r.get("metrics_ci") or {}).get(k) for r in rows] for k in metrics}
    if rows and rows[0].get("control"):
        control = {}
        for k in metrics:
            per = [[c["metrics"].get(k) for c in r["control"]] for r in rows]
            per = [[v for v in vals if v is not None] for vals in per]
            control[k] = {"min": [min(v) if v else None for v in per], "max": [max(v) if v else None for v in per],
                          "mean": [sum(v) / len(v) if v else None for v in per]}  # fmt: skip
        out["control"] = control
    else:
        out["control"] = None
    n_classes = len(rows[0]["per_class"]) if rows else 0
    out["per_class"] = [[r["per_class"][k] for r in rows] for k in range(n_classes)]
    out["per_class_ci"] = [[(r.get("per_class_ci") or [None] * n_classes)[k] for r in rows]
                           for k in range(n_classes)]  # fmt: skip
    if rows and rows[0].get("simplicity"):
        keys = SIMPLICITY_KEYS + tuple(k for k in REPORT_KEYS if k in rows[0]["simplicity"])
        out["simplicity"] = {k: [r["simplicity"].get(k) for r in rows] for k in keys}
    else:
        out["simplicity"] = None
    return out


def penalty_along(data: dict[str, Any]) -> list[float | None]:
    """Stitching penalty accuracy(B) − accuracy(C) (= error(C) − error(B), Bansal et al.; higher = worse) at
    every finished position of a sweep summary or :func:`partial_positions` result; [] without accuracy.

    >>> penalty_along({"stitched": {"accuracy": [0.9, None]}, "reference": {"b": {"metrics": {"accuracy": 0.95}}}})
    [0.05, None]
    """
    base = ((data.get("reference") or {}).get("b") or {}).get("metrics", {}).get("accuracy")
    stitched = (data.get("stitched") or {}).get("accuracy")
    if base is None or stitched is None:
        return []
    return [None if v is None else round(base - v, 6) for v in stitched]


def penalty_ci_along(data: dict[str, Any]) -> list[list[float] | None]:
    """The paired 95% interval of :func:`penalty_along` at every finished position: B and the stitched model
    scored on the same test images, resampled together (``intervals.paired_difference_ci``); None at a
    position, or everywhere, stored before the sweep kept which images each got right; [] without accuracy.

    >>> import torch
    >>> from stitchcore.measures.intervals import pack_outcomes
    >>> b = pack_outcomes(torch.tensor([1] * 40)); c = pack_outcomes(torch.tensor([1] * 36 + [0] * 4))
    >>> penalty_ci_along({"stitched": {"accuracy": [0.9, 1.0]}, "rows": [{"outcomes": c}, {}],
    ...                   "reference": {"b": {"metrics": {"accuracy": 1.0}, "outcomes": b}}})
    [[0.025, 0.2], None]
    """
    if not penalty_along(data):
        return []
    base = unpack_outcomes(((data.get("reference") or {}).get("b") or {}).get("outcomes"))
    spans: list[list[float] | None] = []
    for row in data.get("rows") or []:
        got = unpack_outcomes(row.get("outcomes"))
        if base is None or got is None or got.shape != base.shape or not len(base):
            spans.append(None)
        else:
            spans.append(list(paired_difference_ci(base, got)))
    return spans


def partial_positions(store: Store, run_id: str) -> dict[str, Any]:
    """What a sweep run has finished so far, in the shape of its summary; {} before the first position.

    Keys: those of :func:`curves` (``positions``, ``depths``, ``stitched``, ``control``, ``per_class``,
    ``simplicity``) over the finished positions, plus ``penalty_ci`` (:func:`penalty_ci_along`), ``metrics``,
    ``reference`` (A and B alone),
    ``classes``, ``rows`` (the per-position records) and ``all_positions`` (every position the run
    will visit, so a plot can keep room for the rest).  Read from the run's ``positions.json``,
    rewritten after every position, so a running, cancelled or failed sweep is readable.
    """
    try:
        part = json.loads(store.artifact_path(run_id, POSITIONS_ARTIFACT).read_text())
    except (StitchError, OSError, ValueError):  # no artifact yet (StoreError), or caught mid-replace
        return {}
    if not isinstance(part, dict) or not part.get("metrics"):
        return {}
    rows = part.get("positions") or []
    out = {
        **curves(rows, part["metrics"]),
        "metrics": list(part["metrics"]),
        "reference": part.get("reference", {}),
        "classes": part.get("classes", []),
        "rows": rows,
        "all_positions": part.get("all_positions") or [r["position"] for r in rows],
    }
    return {**out, "penalty_ci": penalty_ci_along(out)}
