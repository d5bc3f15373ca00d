"""The experiment table, the context a running experiment sees, and the one cached runner.

Private to :mod:`stitchcore.experiments` (which re-exports the public names): the
experiment modules register themselves here, so importing them never needs the
package ``__init__`` to be complete.

>>> "stitch" in list_experiments(), list_experiments("lm*")
(True, ['lmdepth', 'lmstitch'])
>>> get_experiment("stich")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
stitchcore.errors.StitchError: unknown experiment kind 'stich'; did you mean 'stitch' or 'lmstitch'? (known: ...)
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from stitchcore.backends import Backend, RunOptions, check_listening, get_backend
from stitchcore.device import pick_device
from stitchcore.errors import Cancelled, RunBusy, StitchError, StoreError, TrainingError
from stitchcore.experiments._data_id import check_spec_files
from stitchcore.experiments._spec import Spec
from stitchcore.models.loaded import LoadedModel
from stitchcore.registry import Registry
from stitchcore.store.disk import full_disk_message
from stitchcore.store.results import RunRecord, Store, run_id_for

__all__ = [
    "EXPERIMENTS",
    "Experiment",
    "ProgressFn",
    "RunContext",
    "RunOutcome",
    "check_spec",
    "get_experiment",
    "list_experiments",
    "new_spec",
    "register_experiment",
    "run_experiment",
    "spec_from_record",
]

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str, dict[str, float]], None]  # (fraction 0..1, message, latest metrics)


@dataclass(frozen=True)
class Experiment:
    """One registered experiment kind."""

    kind: str  # the name runs are stored under ("stitch", "zoo" ...); hashed into every run id
    run: Callable[[Any, RunContext], dict]  # (spec, ctx) -> summary stored with the run
    from_dict: Callable[[dict], Any]  # stored spec dict -> spec object (the inverse of spec.to_dict())
    # (spec, store) -> None, raising StitchError for input that cannot run (a bad cut name, a head that
    # does not fit the data): called before any store row is written, so such a run is never stored
    check: Callable[[Any, Store], None] | None = None
    backends: tuple[str, ...] = ("local",)  # where its units can execute (stitchcore.backends.BACKENDS)
    # (spec, EstimateContext) -> Estimate: how long it takes on this machine (experiments.estimate's helpers)
    estimate: Callable[[Any, Any], Any] | None = None
    # (spec, run id) -> {ref: (cost key, untrained copy)}: the models a run makes, which an estimate of a run
    # queued after it times untrained (the zoo's)
    makes: Callable[[Any, str], dict[str, tuple[str, Callable[[], LoadedModel]]]] | None = None


EXPERIMENTS: Registry[Experiment] = Registry("experiment kind", StitchError)


def register_experiment(
    kind: str, from_dict: Callable[[dict], Any], check: Callable[[Any, Store], None] | None = None,
    backends: tuple[str, ...] = ("local",), estimate: Callable[[Any, Any], Any] | None = None,
    makes: Callable[[Any, str], dict[str, tuple[str, Callable[[], LoadedModel]]]] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: register ``fn(spec, ctx) -> summary`` under ``kind``; a kind is registered once.

    ``check(spec, store)`` validates the spec against its models and data before any row is written;
    ``backends``: where its units can execute (a kind that cuts its work into units names "ray" too);
    ``estimate(spec, ectx)``: its time on this machine (:mod:`stitchcore.experiments.estimate`);
    ``makes(spec, run_id)``: the models it makes, for the estimates of runs queued after it.
    """

    def deco(fn: Callable[[Any, RunContext], dict]) -> Callable[[Any, RunContext], dict]:
        EXPERIMENTS.register(kind)(Experiment(kind, fn, from_dict, check, backends, estimate, makes))
        return fn

    return deco


def check_spec(kind: str, spec: Any, store: Store) -> None:
    """Validate ``spec`` the way its run would, before anything is stored (StitchError naming the fix)."""
    check = get_experiment(kind).check
    if check is not None:
        check(spec, store)


def get_experiment(kind: str) -> Experiment:
    """The experiment registered as ``kind``; StitchError naming the close kinds otherwise."""
    return EXPERIMENTS.get(kind)


def list_experiments(pattern: str = "*") -> list[str]:
    """Registered kinds matching the glob ``pattern``, sorted."""
    return sorted(EXPERIMENTS.list(pattern))


def new_spec(kind: str, fields: dict[str, Any]) -> Any:
    """A new spec of ``kind`` from the fields given, every other field at today's default.

    ``from_dict`` reads a *stored* dict: a field it lacks takes its LEGACY value (what a run stored before
    the field existed computed).  A person writing a spec by hand (a lesson file) means today's defaults.
    StitchError naming the field for anything the spec refuses.

    >>> new_spec("sweep", {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"}).twin_seeds
    'distinct'
    >>> get_experiment("sweep").from_dict({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"}).twin_seeds
    'shared'
    """
    exp = get_experiment(kind)
    cls = getattr(exp.from_dict, "__self__", None)  # the spec class, for a kind registered as Spec.from_dict
    try:
        return cls.new(fields) if isinstance(cls, type) and issubclass(cls, Spec) else exp.from_dict(dict(fields))
    except (TypeError, ValueError, KeyError) as exc:
        raise StitchError(f"a {kind} spec: {exc}") from exc


def spec_from_record(record: RunRecord) -> Any:
    """The spec object of a stored run, rebuilt through its kind's ``from_dict``.

    ``run_id_for(record.kind, spec.to_dict()) == record.id`` for every run the store holds.
    StitchError for a kind no experiment registers (naming the close kinds), or a stored
    spec its kind cannot read.
    """
    if record.kind not in EXPERIMENTS:
        raise StitchError(f"run {record.id}: {EXPERIMENTS.unknown_message(record.kind)}")
    try:
        return EXPERIMENTS.get(record.kind).from_dict(dict(record.spec))
    except StitchError as exc:
        raise type(exc)(f"run {record.id} ({record.kind}): {exc}") from exc
    except (TypeError, ValueError, KeyError) as exc:
        raise StitchError(f"run {record.id} ({record.kind}): its stored spec does not fit: {exc}") from exc


@dataclass
class RunContext:
    """What a running experiment may touch: its store rows, progress, cancel flag, device."""

    run_id: str
    store: Store
    device: torch.device
    cancel: threading.Event
    on_progress: ProgressFn | None = None
    options: RunOptions = field(default_factory=RunOptions)  # where its units execute (never in the run id)
    _fraction: float = 0.0

    def backend(self) -> Backend:
        """The backend ``options`` name (connecting to a Ray cluster the first time it is asked for)."""
        return get_backend(self.options, self.device)

    def check_cancel(self) -> None:
        """Raise :class:`Cancelled` if the user asked to stop (call every step)."""
        if self.cancel.is_set():  # an event may say why (the CLI's Ctrl-C event: "cancelled with Ctrl-C")
            raise Cancelled(getattr(self.cancel, "reason", "cancelled by the user"), getattr(self.cancel, "status", "cancelled"))

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


WAIT_POLL_SECONDS = 0.5


def _wait_for_owner(store: Store, run_id: str, owner: str, cancel: threading.Event,
                    progress: ProgressFn | None) -> RunRecord | None:
    """Poll the store until no other live process has ``run_id`` queued or running; its record then.

    Raises :class:`Cancelled` when ``cancel`` is set meanwhile (the other process's run is left alone).
    """
    log.info("run %s is running in process %s: waiting for it", run_id, owner)
    if progress is not None:
        progress(0.0, f"waiting for process {owner}, which is running it", {})
    while store.live_owner(run_id) is not None:
        if cancel.is_set():
            raise Cancelled(f"stopped while waiting for run {run_id} in process {owner}")
        cancel.wait(WAIT_POLL_SECONDS)
    return store.lookup(run_id)


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
    check: bool = True,
    wait: bool = True,
    options: RunOptions | None = None,
) -> RunOutcome:
    """Look the spec up in the store; on a miss check it, run it and store the summary.

    A run another live process is running (the app, a second shell, another machine on the same
    store) is waited for and its result returned as cached (``wait=False``: :class:`RunBusy` at
    once); if it ends without a result, or its owner stops stamping its heartbeat, it runs here.
    Another process can stop this run (``runs cancel``): it ends ``cancelled``.

    Errors: a spec that fails its kind's check, or whose files (``data_id``) are no longer the ones
    it was made for, raises before any row is written (nothing is stored); :class:`StitchError` subclasses from the run pass through after the run is marked
    failed (or cancelled) with the one-line message; Ctrl-C (KeyboardInterrupt) stores the run
    ``cancelled`` and passes on; other exceptions are stored with their traceback in the log and
    re-raised.  ``check=False``: the caller has just checked.  ``options``: where the run's units
    execute (:class:`~stitchcore.backends.RunOptions`; local by default); they change
    neither the run id nor the result, so a cached result is returned whatever they say.
    """
    experiment = get_experiment(kind)
    fn = experiment.run
    options = options or RunOptions()
    spec_dict = spec.to_dict()
    run_id = run_id_for(kind, spec_dict)
    t0 = time.perf_counter()
    if not rerun:
        hit = store.lookup_done(run_id)
        if hit is not None:
            return RunOutcome(hit, True, time.perf_counter() - t0)
    label = spec.label() if hasattr(spec, "label") else kind
    if options.backend not in experiment.backends:
        raise StitchError(f"{kind} runs on the {' or '.join(experiment.backends)} backend, not {options.backend};"
                          " leave the backend at local")  # fmt: skip
    target = pick_device(device)  # a bad device fails before any row is written
    if options.address:
        check_listening(options.address)  # so does a cluster address nothing answers at
    check_spec_files(spec)  # so does a spec whose files (an image folder) changed since it was made
    if check:
        check_spec(kind, spec, store)  # so does a spec its models or data cannot run
    cancel = cancel or threading.Event()
    while True:
        try:
            began = store.begin(run_id, kind, spec_dict, label=label, keep_done=not rerun)
            if began.status == "done":  # another process finished it since the lookup above
                return RunOutcome(began, True, time.perf_counter() - t0)
            break
        except RunBusy as busy:
            if not wait:
                raise
            rec = _wait_for_owner(store, run_id, busy.owner, cancel, progress)
            if rec is not None and rec.status == "done":
                return RunOutcome(rec, True, time.perf_counter() - t0)
            # it ended without a result, or its owner went silent: run it here (begin takes a stale row over)
    ctx = RunContext(run_id, store, target, cancel, progress, options)
    store.watch_cancel(run_id, cancel.set)  # `runs cancel` from another process
    try:
        summary = fn(spec, ctx)
    except Cancelled as exc:  # stopped by a person, or interrupted (the process that ran it lost its server)
        store.fail(run_id, str(exc), status=exc.status)
        raise
    except KeyboardInterrupt:
        store.fail(run_id, "cancelled with Ctrl-C", status="cancelled")
        raise
    except StitchError as exc:
        store.fail(run_id, str(exc))
        raise
    except torch.cuda.OutOfMemoryError:
        msg = "CUDA out of memory: lower the batch size or max_train, or run on the CPU"
        store.fail(run_id, msg)
        raise TrainingError(msg) from None
    except BaseException as exc:
        full = full_disk_message(store.root, exc) if isinstance(exc, Exception) else None
        if full is not None:  # a blob or a file the run writes: the disk is full (said in one line)
            with contextlib.suppress(StitchError):  # marked failed where the write can still happen
                store.fail(run_id, full)
            raise StoreError(full) from None
        log.error("run %s failed:\n%s", run_id, traceback.format_exc())
        store.fail(run_id, f"{type(exc).__name__}: {exc}")
        raise
    summary = dict(summary)
    summary.setdefault("seconds", round(time.perf_counter() - t0, 3))
    summary["device"] = str(ctx.device)
    record = store.finish(run_id, summary)
    ctx.progress(1.0, "done")
    return RunOutcome(record, False, time.perf_counter() - t0)
