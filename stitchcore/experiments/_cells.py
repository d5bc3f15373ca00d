"""Cell bookkeeping for the kinds whose units send cells back in any order (matrix, assemble): the resume
file of a stopped run, and :class:`CellBook`, which keeps, orders, saves and finishes the cells.
Private to :mod:`stitchcore.experiments`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stitchcore.backends import Backend, cells_per_node
from stitchcore.store.canonical_json import write_atomic

__all__ = ["CellBook", "read_resume"]

log = logging.getLogger(__name__)


def read_resume(path: Path, run_id: str, *, key: Callable[[dict], str]) -> dict[str, dict]:
    """The cells a run of ``run_id`` finished before it stopped, by ``key(cell)``; {} when there is no
    resume file, or one of another run, or an unreadable one (logged): the cells are then computed again."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable resume file %s (%s)", path, exc)
        return {}
    if not isinstance(data, dict) or data.get("run_id") != run_id or not isinstance(data.get("cells"), list):
        return {}
    return {key(c): c for c in data["cells"]}


class CellBook:
    """The cells of a run whose units send them back in any order (matrix, assemble): the ones a stopped run
    of the same id finished (failed ones are tried again), each cell kept as it arrives with its metric point,
    and written -- in plan order -- to the resume file and the run's cells artifact.

    ``key(cell)`` names a cell; ``plan``: every key in plan order; ``metric(cell)``: the metric point's name.
    """

    def __init__(self, ctx: Any, artifact: str, key: Callable[[dict], str], plan: list[str],
                 metric: Callable[[dict], str]) -> None:  # fmt: skip
        self.ctx, self.artifact, self.key, self.metric = ctx, artifact, key, metric
        self.order = {k: i for i, k in enumerate(plan)}
        self.resume = ctx.store.partial_path(ctx.run_id)
        done = read_resume(self.resume, ctx.run_id, key=key)
        self.done = {k: c for k, c in done.items() if not c.get("failed_reason")}
        self.kept: dict[str, dict] = {}

    def __len__(self) -> int:
        return len(self.kept)

    def __contains__(self, key: str) -> bool:
        return key in self.kept

    def keep(self, cell: dict) -> None:
        """Keep ``cell`` (replacing an earlier one of its key) and log its accuracy as a metric point."""
        self.kept[self.key(cell)] = cell
        if cell.get("accuracy") is not None:
            self.ctx.log(len(self.kept) - 1, {self.metric(cell): cell["accuracy"]})

    def cells(self) -> list[dict]:
        """The kept cells in plan order."""
        return sorted(self.kept.values(), key=lambda c: self.order[self.key(c)])

    def save(self) -> None:
        """Write the kept cells: the resume file (a re-run picks them up) and the artifact (views read it)."""
        cells = self.cells()
        write_atomic(self.resume, json.dumps({"run_id": self.ctx.run_id, "cells": cells}))
        self.ctx.store.put_artifact(self.ctx.run_id, self.artifact, json.dumps(cells, indent=1).encode())

    def finish(self, summary: dict[str, Any], backend: Backend,
               label: Callable[[dict], str] | None = None) -> dict[str, Any]:  # fmt: skip
        """``summary`` with ``failed`` (``label(cell)``, default its key, -> reason) when a cluster task failed for good -- the resume
        file then stays, so a re-run computes only those -- else the resume file removed; and where a cluster
        computed the cells (``backend``, ``nodes``)."""
        cells = self.cells()
        failed = {(label or self.key)(c): c["failed_reason"] for c in cells if c.get("failed_reason")}
        if failed:
            summary["failed"] = failed
        else:
            self.resume.unlink(missing_ok=True)  # the run is about to be stored as done; the artifact stays
        if backend.name != "local":
            summary["backend"] = backend.describe()
            summary["nodes"] = cells_per_node(cells)
        return summary
