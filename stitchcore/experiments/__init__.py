"""Experiments: pure functions spec -> result, run through one cached runner.

Each experiment is registered by kind (``stitch``, ``zoo`` ...) and has the
signature ``fn(spec, ctx: RunContext) -> dict`` (the summary).  Call
:func:`run_experiment` to get caching, store bookkeeping, progress and
cancellation for free; the CLI and the app's job runner both use it.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from stitchcore.device import pick_device
from stitchcore.errors import Cancelled, StitchError, TrainingError
from stitchcore.store.results import RunRecord, Store, run_id_for

__all__ = ["RunContext", "RunOutcome", "register_experiment", "run_experiment", "list_experiments"]

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str, dict[str, float]], None]  # (fraction 0..1, message, latest metrics)

_EXPERIMENTS: dict[str, tuple[Callable[[Any, RunContext], dict], Callable[[dict], Any]]] = {}


def register_experiment(kind: str, from_dict: Callable[[dict], Any]):
    """Decorator: register ``fn(spec, ctx) -> summary`` under ``kind``."""

    def deco(fn):
        if kind in _EXPERIMENTS:
            raise ValueError(f"experiment {kind!r} registered twice")
        _EXPERIMENTS[kind] = (fn, from_dict)
        return fn

    return deco


def list_experiments() -> list[str]:
    _load_builtin()
    return sorted(_EXPERIMENTS)


def _load_builtin() -> None:
    # Import for the registration side effect (kept out of import time of this package).
    from stitchcore.experiments import matrix, merge, similarity, stitch, sweep, zoo  # noqa: F401


@dataclass
class RunContext:
    """What a running experiment may touch: its store rows, progress, cancel flag, device."""

    run_id: str
    store: Store
    device: torch.device
    cancel: threading.Event
    on_progress: ProgressFn | None = None
    _fraction: float = 0.0

    def check_cancel(self) -> None:
        """Raise :class:`Cancelled` if the user asked to stop (call every step)."""
        if self.cancel.is_set():
            raise Cancelled("cancelled by the user")

    def progress(self, fraction: float, message: str = "", metrics: dict[str, float] | None = None) -> None:
        self._fraction = max(0.0, min(1.0, fraction))
        if self.on_progress is not None:
            self.on_progress(self._fraction, message, metrics or {})

    def log(self, step: int, metrics: dict[str, float], epoch: int | None = None) -> None:
        """Persist a metric point (store series) and forward it to the progress callback."""
        for name, value in metrics.items():
            if value != value or value in (float("inf"), float("-inf")):
                raise TrainingError(
                    f"{name} became {value} at step {step}: training diverged; lower the learning rate"
                    " or use --init lstsq"
                )
        self.store.log_metrics(self.run_id, step, metrics, epoch=epoch)
        if self.on_progress is not None:
            self.on_progress(self._fraction, "", metrics)


@dataclass(frozen=True)
class RunOutcome:
    """A finished (or cached) run: the stored record and whether it came from the cache."""

    record: RunRecord
    cached: bool
    seconds: float


def run_experiment(
    kind: str,
    spec: Any,
    store: Store,
    *,
    rerun: bool = False,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    device: str | None = None,
) -> RunOutcome:
    """Look the spec up in the store; on a miss run it and store the summary.

    Errors: :class:`StitchError` subclasses pass through after the run is
    marked failed (or cancelled) with the one-line message; other exceptions
    are stored with their traceback in the log and re-raised.
    """
    _load_builtin()
    if kind not in _EXPERIMENTS:
        raise StitchError(f"unknown experiment kind {kind!r}; known: {', '.join(sorted(_EXPERIMENTS))}")
    fn, _ = _EXPERIMENTS[kind]
    spec_dict = spec.to_dict()
    run_id = run_id_for(kind, spec_dict)
    t0 = time.perf_counter()
    if not rerun:
        hit = store.lookup_done(run_id)
        if hit is not None:
            return RunOutcome(hit, True, time.perf_counter() - t0)
    label = spec.label() if hasattr(spec, "label") else kind
    target = pick_device(device)  # a bad device fails before any row is written
    store.begin(run_id, kind, spec_dict, label=label)
    ctx = RunContext(run_id, store, target, cancel or threading.Event(), progress)
    try:
        summary = fn(spec, ctx)
    except Cancelled as exc:
        store.fail(run_id, str(exc), status="cancelled")
        raise
    except StitchError as exc:
        store.fail(run_id, str(exc))
        raise
    except torch.cuda.OutOfMemoryError:
        msg = "CUDA out of memory: lower the batch size or max_train, or run on the CPU"
        store.fail(run_id, msg)
        raise TrainingError(msg) from None
    except BaseException as exc:
        log.error("run %s failed:\n%s", run_id, traceback.format_exc())
        store.fail(run_id, f"{type(exc).__name__}: {exc}")
        raise
    summary = dict(summary)
    summary.setdefault("seconds", round(time.perf_counter() - t0, 3))
    summary["device"] = str(ctx.device)
    record = store.finish(run_id, summary)
    ctx.progress(1.0, "done")
    return RunOutcome(record, False, time.perf_counter() - t0)
