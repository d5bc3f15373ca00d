"""CLI verbs to browse the results store: ``runs list``, ``runs show`` and ``runs check``.

    python -m stitchcore runs list --kind stitch --limit 10
    python -m stitchcore runs show RUN_ID --json
    python -m stitchcore runs check          # exit 1 when a row or blob is damaged
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from stitchcore.cli._common import Command, ProgressBar, emit
from stitchcore.errors import StitchError
from stitchcore.store.results import STATUSES

if TYPE_CHECKING:
    from stitchcore.store.results import RunRecord, Store

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``runs`` (``list``, ``show``) to the CLI's sub-parsers."""
    runs = verbs.add_parser("runs", help="browse the results store").add_subparsers(dest="runs_verb", required=True)
    rl = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rl.add_argument("--kind", default=None, type=_kind)
    rl.add_argument("--status", default=None, choices=STATUSES)
    rl.add_argument("--limit", type=int, default=50)
    rs = runs.add_parser("show", parents=[common], help="show one run with its curves and artifacts")
    rs.add_argument("run_id")
    runs.add_parser("check", parents=[common], help="check the store: database pages, rows, and every blob's sha256")


def _kind(text: str) -> str:
    """``--kind``: a registered experiment kind (argparse says which when not)."""
    from stitchcore.experiments import list_experiments

    if text not in list_experiments():
        raise argparse.ArgumentTypeError(f"unknown kind {text!r}; use one of: {', '.join(list_experiments())}")
    return text


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


def _cmd_runs_check(args: argparse.Namespace, store: Store, bar: ProgressBar) -> int:
    """Integrity of the store: SQLite pages, rows, and each blob against its recorded sha256; exit 1 on a problem."""
    problems = store.integrity_check()
    runs = len(store.list_runs())
    text = "\n".join(problems) if problems else f"ok: {runs} runs, every blob matches its sha256"
    emit(args, {"ok": not problems, "runs": runs, "problems": problems}, text)
    return 1 if problems else 0


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("runs", "list"): _cmd_runs_list,
    ("runs", "show"): _cmd_runs_show,
    ("runs", "check"): _cmd_runs_check,
}
