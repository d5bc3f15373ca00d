"""A stored run in an experiment tracker: ``mlflow:DIR`` (a local MLflow file store, or ``mlflow:http://...`` a
tracking server) or ``tensorboard:DIR`` (event files under ``DIR/<run id>``).

What goes there: the spec as parameters (nested fields dotted: ``adapter.init``), every stored curve as step
metrics, the summary's numbers with their 95% intervals (``accuracy``, ``accuracy_ci_lo``, ``accuracy_ci_hi``) as
final metrics, and the run's offline HTML report and each figure (plotly JSON and its numbers as CSV) as
artifacts.  A run is logged once per tracker: logging it again returns the first entry (MLflow: found by its
``stitchlab.run_id`` tag; TensorBoard: its folder).  Both packages are optional: a missing one is a one-line
StitchError naming the install.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.records import RunRecord
    from stitchcore.store.results import Store

__all__ = ["TRACKERS", "final_metrics", "log_run", "need_package", "parse_target", "spec_params"]

TRACKERS = ("mlflow", "tensorboard")
EXPERIMENT = "stitchlab"  # the MLflow experiment every run goes into
INSTALL = "pip install 'stitchlab[trackers]'"


def parse_target(target: str) -> tuple[str, str]:
    """``"mlflow:DIR"`` -> ``("mlflow", DIR)``; StitchError naming the form for anything else.

    >>> parse_target("tensorboard:runs/tb")
    ('tensorboard', 'runs/tb')
    >>> parse_target("wandb:x")
    Traceback (most recent call last):
    stitchcore.errors.StitchError: log to mlflow:DIR or tensorboard:DIR (a folder; mlflow also takes a tracking server's http:// address), not 'wandb:x'
    """
    tracker, _, where = str(target).partition(":")
    if tracker not in TRACKERS or not where.strip():
        raise StitchError("log to mlflow:DIR or tensorboard:DIR (a folder; mlflow also takes a tracking server's "
                          f"http:// address), not {str(target)[:80]!r}")
    return tracker, where.strip()


def spec_params(spec: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A stored spec as flat parameters: nested fields dotted, lists and None as JSON text.

    >>> spec_params({"a": "zoo:x", "adapter": {"init": "lstsq"}, "senders": ["b1", "b2"], "max_train": None})
    {'a': 'zoo:x', 'adapter.init': 'lstsq', 'senders': '["b1", "b2"]', 'max_train': 'null'}
    """
    out: dict[str, str] = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            out.update(spec_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, str) else json.dumps(value)
    return out


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def final_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The summary's top-level numbers, each 95% interval (``x_ci: [lo, hi]``) as ``x_ci_lo`` / ``x_ci_hi``, and a
    nested ``base`` score (``base.a.accuracy``).

    >>> final_metrics({"accuracy": 0.91, "accuracy_ci": [0.89, 0.93], "ref": "zoo:x", "base": {"b": {"accuracy": 0.97}}})
    {'accuracy': 0.91, 'accuracy_ci_lo': 0.89, 'accuracy_ci_hi': 0.93, 'base.b.accuracy': 0.97}
    """
    out: dict[str, float] = {}
    for key, value in summary.items():
        number = _number(value)
        if number is not None:
            out[key] = number
        elif key.endswith("_ci") and isinstance(value, (list, tuple)) and len(value) == 2:
            lo, hi = (_number(v) for v in value)
            if lo is not None and hi is not None:
                out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
        elif key == "base" and isinstance(value, dict):
            for model, scores in value.items():
                if isinstance(scores, dict):
                    out.update({f"base.{model}.{k}": n for k, v in scores.items() if (n := _number(v)) is not None})
    return out


def _metric_name(name: str) -> str:
    """A name MLflow and TensorBoard both take (letters, digits, _ - . / and spaces)."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", name)[:250] or "_"


def _artifacts(record: RunRecord, store: Store, folder: Path) -> Path:
    """The run's report and figures written under ``folder``; returns it."""
    from stitchcore.report.figures import run_figures
    from stitchcore.report.html import report_html

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"stitchlab-{record.id}.html").write_text(report_html(store, [record.id]), encoding="utf-8")
    figures = folder / "figures"
    figures.mkdir(exist_ok=True)
    for fig in run_figures(record, store):
        stem = re.sub(r"[^A-Za-z0-9_.-]", "-", fig.name)
        (figures / f"{stem}.json").write_text(fig.figure.to_json(), encoding="utf-8")
        (figures / f"{stem}.csv").write_text(fig.csv, encoding="utf-8")
    return folder


def need_package(tracker: str) -> None:
    """StitchError naming the install when ``tracker``'s package is missing."""
    import importlib

    try:
        importlib.import_module(tracker)
    except ImportError:
        raise StitchError(f"logging to {tracker} needs the {tracker} package: {INSTALL}") from None


def _log_mlflow(record: RunRecord, store: Store, where: str) -> str:
    uri = where if re.match(r"^[a-z][a-z0-9+.-]*://", where) else Path(where).expanduser().resolve().as_uri()
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks a local folder store be chosen
    need_package("mlflow")
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(EXPERIMENT)
    found = client.search_runs([experiment_id], filter_string=f"tags.`stitchlab.run_id` = '{record.id}'")
    if found:
        return f"{uri} run {found[0].info.run_id}"
    run = client.create_run(experiment_id, run_name=record.label[:250],
                            tags={"stitchlab.run_id": record.id, "stitchlab.kind": record.kind,
                                  "stitchlab.status": record.status})  # fmt: skip
    rid = run.info.run_id
    params = [Param(k[:250], v[:6000]) for k, v in spec_params(record.spec).items()]
    now = int((record.finished or record.created) * 1000)
    metrics = [Metric(_metric_name(name), value, now, step) for name, points in store.series(record.id).items()
               for step, value in points if math.isfinite(value)]  # fmt: skip
    metrics += [Metric(_metric_name(name), value, now, 0) for name, value in final_metrics(record.summary).items()]
    client.log_batch(rid, tags=[RunTag("stitchlab.label", record.label[:5000])])
    for start in range(0, len(params), 100):  # MLflow's batch limits: 100 parameters, 1,000 metrics
        client.log_batch(rid, params=params[start:start + 100])
    for start in range(0, len(metrics), 1000):
        client.log_batch(rid, metrics=metrics[start:start + 1000])
    with tempfile.TemporaryDirectory() as tmp:
        client.log_artifacts(rid, str(_artifacts(record, store, Path(tmp) / "stitchlab")))
    client.set_terminated(rid, status="FINISHED" if record.status == "done" else "FAILED")
    return f"{uri} run {rid}"


def _log_tensorboard(record: RunRecord, store: Store, where: str) -> str:
    need_package("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    folder = Path(where).expanduser().resolve() / record.id
    if folder.is_dir() and any(folder.glob("events.out.tfevents.*")):
        return str(folder)
    writer = SummaryWriter(log_dir=str(folder))
    try:
        writer.add_text("spec", f"```\n{json.dumps(record.spec, indent=2)}\n```")
        writer.add_text("run", f"{record.kind} run {record.id}: {record.label} ({record.status})")
        for name, points in store.series(record.id).items():
            for step, value in points:
                if math.isfinite(value):
                    writer.add_scalar(_metric_name(name), value, step)
        for name, value in final_metrics(record.summary).items():
            writer.add_scalar(f"final/{_metric_name(name)}", value, 0)
    finally:
        writer.close()
    _artifacts(record, store, folder / "artifacts")
    return str(folder)


def log_run(record: RunRecord, store: Store, target: str) -> str:
    """Log the stored run ``record`` to ``target`` (``mlflow:DIR`` or ``tensorboard:DIR``), once; where it went."""
    tracker, where = parse_target(target)
    return (_log_mlflow if tracker == "mlflow" else _log_tensorboard)(record, store, where)
