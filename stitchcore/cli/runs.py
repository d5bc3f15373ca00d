"""CLI verbs to browse the results store: ``runs list`` and ``runs show``.

    python -m stitchcore runs list --kind stitch --limit 10
    python -m stitchcore runs show RUN_ID --json
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from stitchcore.cli._common import Command, ProgressBar, emit
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.results import RunRecord, Store

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``runs`` (``list``, ``show``) to the CLI's sub-parsers."""
    runs = verbs.add_parser("runs", help="browse the results store").add_subparsers(dest="runs_verb", required=True)
    rl = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rl.add_argument("--kind", default=None)
    rl.add_argument("--status", default=None)
    rl.add_argument("--limit", type=int, default=50)
    rs = runs.add_parser("show", parents=[common], help="show one run with its curves and artifacts")
    rs.add_argument("run_id")


def _record_row(r: RunRecord) -> dict[str, Any]:
    """One run as a flat row: id, kind, status, label, created, metric (accuracy if any), error."""
    metric = r.summary.get("accuracy") if r.summary else None
    return {"id": r.id, "kind": r.kind, "status": r.status, "label": r.label, "created": r.created,
            "metric": metric, "error": r.error}


def _cmd_runs_list(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Runs, newest first, filtered by --kind / --status."""
    rows = [_record_row(r) for r in store.list_runs(kind=args.kind, status=args.status, limit=args.limit)]
    lines = [f"{r['id']}  {r['kind']:7s} {r['status']:11s} {r['label']}" for r in rows] or ["(no runs)"]
    emit(args, {"runs": rows}, "\n".join(lines))


def _cmd_runs_show(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """One run with its spec, summary, curves and artifacts."""
    r = store.lookup(args.run_id)
    if r is None:
        raise StitchError(f"no run {args.run_id!r} in {store.root}; list runs with: python -m stitchcore runs list")
    obj = {
        "run": {**_record_row(r), "spec": r.spec, "summary": r.summary, "started": r.started, "finished": r.finished},
        "series": {k: [list(p) for p in v] for k, v in store.series(r.id).items()},
        "artifacts": [{k: str(v) for k, v in a.items()} for a in store.artifacts(r.id)],
    }
    emit(args, obj, json.dumps(obj["run"], indent=2, default=str))


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("runs", "list"): _cmd_runs_list,
    ("runs", "show"): _cmd_runs_show,
}
