"""Reading a sweep back: its per-position records as plot-ready curves, the stitching penalty along the cut with
its paired intervals, the noise-sender control's curves (:func:`noise_sender_along`, in words
:func:`noise_sender_words`), and a running sweep's finished positions (:func:`partial_positions`).

:mod:`stitchcore.experiments.sweep.run` writes what these read (and the package re-exports them: the experiment
that writes a result exports its reader).  Nothing here imports the rest of the package.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from stitchcore.errors import StitchError
from stitchcore.experiments.stitch_words import NOISE_SENDER_WORDS
from stitchcore.measures.intervals import paired_difference_ci, unpack_outcomes
from stitchcore.measures.simplicity import REPORT_KEYS
from stitchcore.store.results import Store

__all__ = ["POSITIONS_ARTIFACT", "SIMPLICITY_KEYS", "curves", "noise_sender_along",
           "noise_sender_words", "partial_positions", "penalty_along", "penalty_ci_along"]

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


def _accuracy(packed: Any) -> tuple[torch.Tensor | None, float | None]:
    """Which test images a model got right (float [N] of 0/1, from its packed ``outcomes``) and its accuracy."""
    got = unpack_outcomes(packed)
    return (None, None) if got is None or not len(got) else (got, round(float(got.mean()), 6))


def noise_sender_along(data: dict[str, Any]) -> dict[str, Any] | None:
    """The noise-sender control at every finished position of a sweep summary or :func:`partial_positions`
    result; None for a sweep without it (``noise_control`` off, or stored before it).

    Returns {"accuracy": [v], "accuracy_ci": [[lo, hi]], "metrics": {metric: [v]}, "metrics_ci": {metric:
    [[lo, hi]]}, "penalty": [B − noise], "penalty_ci": [[lo, hi]], "margin": [stitched − noise], "margin_ci":
    [[lo, hi]]}, one entry per finished position (None where a position has no value).  ``penalty`` is read
    as the stitch's (higher = worse); ``margin`` > 0: the stitch does better than the noise sender.  Both
    intervals are paired: the two models scored on the same test images, resampled together.

    >>> import torch
    >>> from stitchcore.measures.intervals import pack_outcomes
    >>> right = lambda k: pack_outcomes(torch.tensor([1] * k + [0] * (40 - k)))
    >>> row = {"outcomes": right(38), "noise_sender": {"metrics": {"accuracy": 0.75}, "outcomes": right(30),
    ...                                                "accuracy": 0.75, "accuracy_ci": [0.588, 0.873]}}
    >>> ns = noise_sender_along({"metrics": ["accuracy"], "rows": [row], "reference": {"b": {"outcomes": right(40)}}})
    >>> ns["accuracy"], ns["penalty"], ns["margin"], ns["margin_ci"][0][0] > 0
    ([0.75], [0.25], [0.2], True)
    >>> noise_sender_along({"metrics": ["accuracy"], "rows": [{"outcomes": right(38)}]}) is None
    True
    """
    rows = data.get("rows") or []
    noise = [r.get("noise_sender") for r in rows]
    if not any(noise):
        return None
    metrics = list(data.get("metrics") or [])
    base, base_acc = _accuracy(((data.get("reference") or {}).get("b") or {}).get("outcomes"))
    out: dict[str, Any] = {
        "accuracy": [n.get("accuracy") if n else None for n in noise],
        "accuracy_ci": [n.get("accuracy_ci") if n else None for n in noise],
        "metrics": {k: [(n["metrics"].get(k) if n else None) for n in noise] for k in metrics},
        "metrics_ci": {k: [((n.get("metrics_ci") or {}).get(k) if n else None) for n in noise] for k in metrics},
        "penalty": [], "penalty_ci": [], "margin": [], "margin_ci": [],
    }  # fmt: skip
    for row, n in zip(rows, noise, strict=True):
        got, acc = _accuracy((n or {}).get("outcomes"))
        stitched, stitched_acc = _accuracy(row.get("outcomes"))
        for key, ref, ref_acc in (("penalty", base, base_acc), ("margin", stitched, stitched_acc)):
            paired = got is not None and ref is not None and ref.shape == got.shape
            out[key].append(round(ref_acc - acc, 6) if paired else None)
            out[f"{key}_ci"].append(list(paired_difference_ci(ref, got)) if paired else None)
    return out


def noise_sender_words(data: dict[str, Any]) -> str | None:
    """The noise-sender control in words, with where the stitch beats it (the paired 95% interval of stitched −
    noise above 0); None for a sweep without it.

    >>> noise_sender_words({"positions": ["fc1", "fc2"], "noise_sender": {"margin": [0.2, 0.0],
    ...                     "margin_ci": [[0.1, 0.3], [-0.02, 0.03]]}}).split(": ", 1)[1]  # doctest: +ELLIPSIS
    "... The stitch beats it (paired 95% interval of stitched − noise accuracy above 0) at fc1; not at fc2."
    """
    noise = data.get("noise_sender")
    if not noise:
        return None
    positions = data.get("positions") or []
    spans = noise.get("margin_ci") or []
    beats = [p for p, ci in zip(positions, spans) if ci is not None and ci[0] > 0]
    not_beats = [p for p, ci in zip(positions, spans) if ci is not None and ci[0] <= 0]
    words = f"Noise sender (dashed grey): {NOISE_SENDER_WORDS}."
    if beats or not_beats:
        words += (" The stitch beats it (paired 95% interval of stitched − noise accuracy above 0) at "
                  f"{', '.join(beats) or 'no position'}" + (f"; not at {', '.join(not_beats)}." if not_beats else "."))
    return words


def partial_positions(store: Store, run_id: str) -> dict[str, Any]:
    """What a sweep run has finished so far, in the shape of its summary; {} before the first position.

    Keys: those of :func:`curves` (``positions``, ``depths``, ``stitched``, ``control``, ``per_class``,
    ``simplicity``) over the finished positions, plus ``penalty_ci`` (:func:`penalty_ci_along`),
    ``noise_sender`` (:func:`noise_sender_along`), ``metrics``,
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
    return {**out, "penalty_ci": penalty_ci_along(out), "noise_sender": noise_sender_along(out)}
