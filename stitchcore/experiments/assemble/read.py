"""Assemble results read back: the stored cells, their penalties and rows, the Pareto front."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments.assemble.spec import (
    CELLS_ARTIFACT,
)
from stitchcore.measures.intervals import paired_difference_ci, unpack_outcomes
from stitchcore.stitching.evaluate import (
    stitching_penalty,
)
from stitchcore.store.results import Store

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

    >>> import torch
    >>> from stitchcore.measures.intervals import pack_outcomes
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


