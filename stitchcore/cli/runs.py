"""CLI verbs over the results store: ``runs list``, ``show``, ``check``, ``cancel``, ``export``, ``import``, ``report``.

    python -m stitchcore runs list --kind stitch --limit 10
    python -m stitchcore runs show RUN_ID --json
    python -m stitchcore runs check          # exit 1 when a row or blob is damaged
    python -m stitchcore runs cancel RUN_ID   # stop it in whichever process runs it (app, shell)
    python -m stitchcore runs export RUN_ID zoo:cnn-digits-s0 --out runs.zip --with-models
    python -m stitchcore runs import runs.zip   # checked whole first; same runs skipped
    python -m stitchcore runs report RUN_ID OTHER_ID --out report.html   # one file, opens offline
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import bounded, in_file, number, out_path, safe
from stitchcore.cli._common import Command, ProgressBar, emit
from stitchcore.errors import StitchError
from stitchcore.store.results import MAX_LIST, STATUSES

if TYPE_CHECKING:
    from stitchcore.store.results import RunRecord, Store

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``runs`` (``list``, ``show``, ``check``, ``cancel``, ``export``, ``import``, ``report``) to the CLI."""
    runs = verbs.add_parser("runs", help="browse the results store").add_subparsers(dest="runs_verb", required=True)
    rl = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rl.add_argument("--kind", default=None, type=_kind)
    rl.add_argument("--status", default=None, choices=STATUSES)
    rl.add_argument("--limit", type=bounded(1, MAX_LIST), default=50, metavar="N", help="at most N runs (default 50)")
    rs = runs.add_parser("show", parents=[common], help="show one run with its curves and artifacts")
    rs.add_argument("run_id")
    runs.add_parser("check", parents=[common], help="check the store: database pages, rows, and every blob's sha256")
    rc = runs.add_parser("cancel", parents=[common], help="stop queued or running runs, in whichever process runs them")
    rc.add_argument("run_ids", nargs="+", metavar="ID")
    rc.add_argument("--timeout", type=_timeout, default=60.0, metavar="S",
                    help="seconds to wait for the owner to stop (default 60, at most a day; 0 or --no-wait: ask and "
                         "return)")
    re_ = runs.add_parser("export", parents=[common], help="write runs (with their curves and blobs) as a bundle zip")
    re_.add_argument("run_ids", nargs="+", metavar="ID", help="run ids, or zoo:NAME for a trained zoo model")
    re_.add_argument("--out", type=out_path, required=True, metavar="FILE.zip", help="the bundle to write")
    re_.add_argument("--with-models", action="store_true",
                     help="add the zoo models (checkpoints) the runs use, so they reproduce elsewhere")
    ri = runs.add_parser("import", parents=[common], help="check a bundle zip whole, then add its runs to the store")
    ri.add_argument("file", metavar="FILE.zip")
    rr = runs.add_parser("report", parents=[common],
                         help="write runs as one HTML file that opens offline: facts, numbers, interactive figures")
    rr.add_argument("run_ids", nargs="+", metavar="ID", help="run ids, or zoo:NAME for a trained zoo model")
    rr.add_argument("--out", type=out_path, required=True, metavar="FILE.html", help="the report to write")


def _timeout(text: str) -> float:
    """``--timeout``: seconds, 0 .. 86400 (a day), finite.

    >>> _timeout("2.5")
    2.5
    >>> _timeout("nan")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be 0 to 86400 seconds, not nan
    """
    value = number(text)
    if not 0 <= value <= 86400:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be 0 to 86400 seconds, not {value:g}")
    return value


def _kind(text: str) -> str:
    """``--kind``: a registered experiment kind (argparse says which when not)."""
    from stitchcore.experiments import list_experiments

    if text not in list_experiments():
        raise argparse.ArgumentTypeError(f"unknown kind '{safe(text)}'; use one of: {', '.join(list_experiments())}")
    return text


def _record_row(r: RunRecord) -> dict[str, Any]:
    """One run as a flat row: id, kind, status, label, created, metric (accuracy if any), error."""
    metric = r.summary.get("accuracy") if r.summary else None
    return {"id": r.id, "kind": r.kind, "status": r.status, "label": r.label, "created": r.created,
            "metric": metric, "error": r.error}


def _cmd_runs_list(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Runs, newest first, filtered by --kind / --status."""
    rows = [_record_row(r) for r in store.list_runs(kind=args.kind, status=args.status, limit=args.limit)]
    lines = [f"{safe(r['id'])}  {safe(r['kind']):7s} {safe(r['status']):11s} {safe(str(r['label']))}"
             for r in rows] or ["(no runs)"]  # a label (a bundle's) may hold ESC codes or newlines: shown escaped
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


def _cmd_runs_cancel(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Ask each run's owner to stop (it stores ``cancelled`` at its next step); a run nobody runs any more is
    marked ``cancelled`` at once.  Waits up to --timeout for the owners unless --no-wait."""
    for run_id in args.run_ids:  # every id checked before any is touched
        rec = store.lookup(run_id)
        if rec is None:
            raise StitchError(f"no run {run_id!r} in {store.root}; list runs with: python -m stitchcore runs list")
        if rec.status not in ("queued", "running"):
            raise StitchError(f"run {run_id} is {rec.status}, not queued or running: nothing to cancel")
    how = {run_id: store.request_cancel(run_id) for run_id in args.run_ids}
    deadline = time.monotonic() + (0.0 if args.no_wait else max(0.0, args.timeout))
    status = {run_id: store.lookup(run_id).status for run_id in how}  # type: ignore[union-attr]
    while any(s in ("queued", "running") for s in status.values()) and time.monotonic() < deadline:
        time.sleep(0.25)
        status = {run_id: store.lookup(run_id).status for run_id in how}  # type: ignore[union-attr]
    lines = []
    for run_id, asked in how.items():
        if status[run_id] in ("queued", "running"):
            lines.append(f"{run_id}: asked its process to stop; it stops at its next step")
        else:
            lines.append(f"{run_id}: {status[run_id]}" + ("" if asked == "asked" else " (no process was running it)"))
    emit(args, {"runs": [{"id": r, "status": status[r], "asked": how[r] == "asked"} for r in how]}, "\n".join(lines))


def _cmd_runs_export(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """A bundle of the runs (and with --with-models the zoo models they use)."""
    from stitchcore.store.bundle import export_bundle

    info = export_bundle(store, args.run_ids, args.out, with_models=args.with_models)
    obj = {"path": str(info.path), "runs": list(info.runs), "models": list(info.models), "members": info.members,
           "bytes": info.bytes}
    emit(args, obj, f"wrote {info.path}: {len(info.runs)} runs ({len(info.models)} models), {info.bytes} bytes")


def _cmd_runs_import(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """The bundle's runs, added in one transaction once every member checks out (and no summary claims a name
    its spec does not give: the experiments register how their kinds name runs, so they are imported first)."""
    import stitchcore.experiments  # noqa: F401 - registers the zoo's namer (store.claims) before the check
    from stitchcore.store.bundle import import_bundle

    path = in_file(args.file, "bundle", "give the path of a .zip made by `runs export`")  # never read a FIFO
    rep = import_bundle(store, path)
    obj = {"path": str(rep.path), "imported": list(rep.imported), "skipped": list(rep.skipped)}
    emit(args, obj, f"imported {len(rep.imported)} runs, skipped {len(rep.skipped)} already in {store.root}")


def _cmd_runs_report(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """One self-contained HTML report of the runs (several: with a comparison section first)."""
    from stitchcore.report import write_report

    info = write_report(store, args.run_ids, args.out)
    obj = {"path": str(info.path), "runs": info.runs, "figures": info.figures, "bytes": info.bytes}
    runs = f"{info.runs} run" + ("" if info.runs == 1 else "s")
    emit(args, obj, f"wrote {info.path}: {runs}, {info.figures} figures, {info.bytes:,} bytes")


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("runs", "list"): _cmd_runs_list,
    ("runs", "show"): _cmd_runs_show,
    ("runs", "check"): _cmd_runs_check,
    ("runs", "cancel"): _cmd_runs_cancel,
    ("runs", "export"): _cmd_runs_export,
    ("runs", "import"): _cmd_runs_import,
    ("runs", "report"): _cmd_runs_report,
}
