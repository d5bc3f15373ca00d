"""The ``ray`` backend: every unit of a run as a Ray task, on a cluster or on a Ray started here.

Named ``ray_backend`` so that ``import ray`` stays unambiguous; importing this module imports Ray
(0.4 s), so only :func:`~stitchcore.backends.get_backend` does, and only when asked.

* **Connection**: one per process, reused while the address stays the same.  With an address the
  driver ships its own ``stitchcore`` to the workers (``runtime_env={"py_modules": [stitchcore]}``),
  so nodes need the same Python packages but not this checkout.  Without one, a Ray is started on
  this machine (its sockets under a short temp dir: Unix socket paths stop at 107 bytes).
* **Tasks**: units are streaming-generator tasks (``num_returns="streaming"``) with
  ``scheduling_strategy="SPREAD"`` (else tasks that share a large argument pile onto the node that
  holds it), ``max_retries`` re-runs after a dead worker or node, and ``num_cpus`` = the task's
  torch threads, or ``num_gpus`` = a fraction of a GPU with one CPU.  A task picks its device from
  the GPUs Ray gave it (``ray.get_gpu_ids()``), never from what the node has: Ray no longer hides
  the GPUs from CPU tasks.
* **Events**: every event a task yields carries where it ran (node id, host, pid, device).  A
  retried task replays its events and Ray drops the ones the driver already has.
* **A Ray started here** lives as long as this process or until :func:`stop_started_here` (the job runner
  calls it through :func:`~stitchcore.backends.stop_local_ray` once the setting no longer uses it).
* **Stop**: ``ray.cancel`` interrupts each running task at its next Python step
  (KeyboardInterrupt); tasks still running 10 s later are killed (``force=True``).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ray
import torch
from ray.exceptions import RayError, RayTaskError, TaskCancelledError

from stitchcore.backends import RunOptions, Unit, UnitContext, UnitEvent, check_listening
from stitchcore.errors import StitchError

__all__ = ["QUIET_ENV", "RayBackend", "cluster_info", "connect", "connected_address", "disconnect", "local_temp_dir",
           "stop_started_here", "where_here"]

log = logging.getLogger(__name__)

# Set (unless already set) before Ray starts: no usage-stats upload or prompt, no autoscaler tips.
QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_SCHEDULER_EVENTS": "0"}
FORCE_CANCEL_SECONDS = 10.0  # a task still running this long after Stop is killed
WAIT_SECONDS = 0.5  # the driver looks at the cancel flag at least this often

_lock = threading.Lock()
_connected: list[str] = []  # the address this process is connected to ("" = a Ray started here)
_temp_dirs: list[str] = []


def connected_address() -> str | None:
    """The address this process's Ray connection was made with ('' for a Ray started here), None if none."""
    return _connected[0] if _connected and ray.is_initialized() else None


def local_temp_dir() -> str | None:
    """The temp dir of the Ray this process started (its sessions and sockets live there), None if none."""
    return _temp_dirs[-1] if _temp_dirs else None


def connect(address: str | None) -> None:
    """Connect this process to the cluster at ``address`` (None: start a Ray here), reusing a live
    connection to the same address; StitchError naming the fix when it cannot."""
    key = address or ""
    with _lock:
        if connected_address() == key:
            return
        if ray.is_initialized():
            disconnect()
        for name, value in QUIET_ENV.items():
            os.environ.setdefault(name, value)
        quiet = {"logging_level": "warning", "log_to_driver": False}
        if address:
            check_listening(address)
        try:
            if address:
                import stitchcore

                ray.init(address=address, runtime_env={"py_modules": [stitchcore]}, **quiet)
            else:
                temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: AF_UNIX paths stop at 107 bytes
                if not _temp_dirs:
                    atexit.register(disconnect)  # the Ray started here, and its temp dir, end with this process
                _temp_dirs.append(temp)
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=temp, **quiet)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            where = f"the Ray cluster at {address}" if address else "a Ray on this machine"
            hint = (" (is it running? start one with `ray start --head --port=6379`, then use its HOST:PORT,"
                    " or leave the address empty to start one here)") if address else ""  # fmt: skip
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StitchError(f"cannot connect to {where}: {first}{hint}") from None
        _connected[:] = [key]
        log.info("connected to Ray (%s): %s", address or "started here", ray.cluster_resources())


def disconnect() -> None:
    """Leave the cluster (and stop the Ray started here, if any)."""
    ray.shutdown()
    _connected.clear()
    import shutil

    while _temp_dirs:
        shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


def stop_started_here() -> bool:
    """Stop the Ray this process started (:func:`connect` without an address) and remove its temp dir; True if
    one was up.  A connection to a cluster elsewhere is left as it is."""
    with _lock:
        if connected_address() != "":
            return False
        disconnect()
        return True


def where_here(device: torch.device, gpu_ids: list) -> dict[str, Any]:
    """Where this task runs: Ray's node id (unique; IPs are not on one host), host, pid and device."""
    context = ray.get_runtime_context()
    label = f"cuda (GPU {','.join(map(str, gpu_ids))})" if gpu_ids else str(device)
    return {"node": context.get_node_id(), "host": socket.gethostname(), "pid": os.getpid(), "device": label}


def _task_device(threads: int) -> tuple[torch.device, list]:
    torch.set_num_threads(threads)
    gpu_ids = list(ray.get_gpu_ids())
    return torch.device("cuda" if gpu_ids else "cpu"), gpu_ids


@dataclass(frozen=True)
class _Slot:
    """Where an object ref sat inside a unit's arguments (see :func:`_lift`)."""

    index: int


def _lift(value: Any, refs: list) -> Any:
    """``value`` with every object ref inside dicts, lists and tuples replaced by a :class:`_Slot`, the refs
    appended to ``refs``: passed as top-level task arguments, Ray fetches them before the task starts (a
    task that fetches inside lends its CPU back, and Ray starts another worker meanwhile)."""
    if isinstance(value, ray.ObjectRef):
        refs.append(value)
        return _Slot(len(refs) - 1)
    if isinstance(value, dict):
        return {k: _lift(v, refs) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_lift(v, refs) for v in value)
    return value


def _fill(value: Any, fetched: tuple) -> Any:
    """The inverse of :func:`_lift` in the task, with the fetched values."""
    if isinstance(value, _Slot):
        return fetched[value.index]
    if isinstance(value, dict):
        return {k: _fill(v, fetched) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_fill(v, fetched) for v in value)
    return value


def _run_unit(fn: Callable[..., Iterator], threads: int, args: tuple, *fetched: Any,
              ) -> Iterator[tuple[str, Any, dict]]:  # fmt: skip
    """The task: the unit's events, each with where it ran."""
    device, gpu_ids = _task_device(threads)
    where = where_here(device, gpu_ids)
    for kind, payload in fn(*_fill(args, fetched), UnitContext(device)):
        yield kind, payload, where


def _call_unit(fn: Callable[..., Any], threads: int, args: tuple, *fetched: Any) -> Any:
    device, _ = _task_device(threads)
    return fn(*_fill(args, fetched), UnitContext(device))


def _reason(exc: BaseException, retries: int) -> str:
    """One line for a unit that failed for good."""
    if isinstance(exc, RayTaskError):
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        if isinstance(cause, StitchError):
            return str(cause).splitlines()[0]
        return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}".rstrip(": ")
    return f"{type(exc).__name__} after {retries + 1} attempt(s): {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


class RayBackend:
    """Units as Ray tasks; see the module docstring."""

    name = "ray"

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        connect(options.address)
        self._resources = self._task_resources()
        self._run = ray.remote(_run_unit)
        self._call = ray.remote(_call_unit)

    def _task_resources(self) -> dict[str, Any]:
        o = self.options
        if o.gpus_per_task > 0:
            have = ray.cluster_resources().get("GPU", 0)
            if have < o.gpus_per_task:
                raise StitchError(f"tasks ask for {o.gpus_per_task:g} GPU each but the Ray cluster has {have:g}:"
                                  " set GPUs per task to 0 (CPU tasks) or add GPU nodes")  # fmt: skip
            return {"num_gpus": o.gpus_per_task, "num_cpus": 1}
        have = ray.cluster_resources().get("CPU", 0)
        if have < o.task_threads:
            raise StitchError(f"tasks ask for {o.task_threads} CPU(s) each but the largest the Ray cluster offers"
                              f" is {have:g}: lower the task threads")  # fmt: skip
        return {"num_cpus": o.task_threads}

    def share(self, value: Any) -> Any:
        return ray.put(value)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        refs: list = []
        template = _lift(args, refs)
        return self._call.options(max_retries=self.options.max_retries, scheduling_strategy="SPREAD",
                                  name=f"stitchlab {fn.__name__}", **self._resources).remote(
            fn, self.options.task_threads, template, *refs)  # fmt: skip

    def run_units(self, units: Sequence[Unit], cancel: threading.Event,
                  on_progress: Callable[[Unit, float, str], None] | None = None,
                  on_metrics: Callable[[Unit, int, dict[str, float]], None] | None = None) -> Iterator[UnitEvent]:
        """See :meth:`Backend.run_units`; the callbacks are not called (a task reports through its events)."""
        task = {"num_returns": "streaming", "max_retries": self.options.max_retries, "scheduling_strategy": "SPREAD",
                **self._resources}  # fmt: skip
        units_of = {}
        for u in units:
            refs: list = []
            template = _lift(u.args, refs)
            units_of[self._run.options(name=f"stitchlab {u.key}", **task).remote(
                u.fn, self.options.task_threads, template, *refs)] = u  # fmt: skip
        pending = list(units_of)
        stopped_at: float | None = None
        try:
            while pending:
                if cancel.is_set() and stopped_at is None:
                    stopped_at = time.monotonic()
                    for g in pending:
                        ray.cancel(g)
                elif stopped_at is not None and time.monotonic() - stopped_at > FORCE_CANCEL_SECONDS:
                    for g in pending:
                        ray.cancel(g, force=True)
                    stopped_at = float("inf")  # once
                ready, pending = ray.wait(pending, num_returns=1, timeout=WAIT_SECONDS)
                for g in ready:
                    unit = units_of[g]
                    try:
                        kind, payload, where = ray.get(next(g))
                    except StopIteration:
                        yield UnitEvent(unit, "done", None)
                        continue
                    except TaskCancelledError:  # also RayTaskError(TaskCancelledError): Stop reached the task
                        continue
                    except RayError as exc:  # retries spent (a dead worker or node), or the unit raised
                        if stopped_at is None:
                            yield UnitEvent(unit, "failed", _reason(exc, self.options.max_retries))
                        continue
                    pending.append(g)
                    yield UnitEvent(unit, kind, payload, where)
        finally:
            for g in pending:  # the run ended early (an error in the driver): leave nothing running
                ray.cancel(g)

    def describe(self) -> dict[str, Any]:
        return {"name": "ray", "address": self.options.address or "started here", "nodes": cluster_info()["nodes"],
                "task": {k: v for k, v in self._resources.items()}, "max_retries": self.options.max_retries}


def cluster_info() -> dict[str, Any]:
    """The connected cluster: its nodes (id, host, CPUs, GPUs, alive) and its total CPUs and GPUs."""
    total = ray.cluster_resources()
    nodes = [{"node": n["NodeID"], "host": n.get("NodeManagerHostname", ""), "alive": bool(n.get("Alive")),
              "cpus": n.get("Resources", {}).get("CPU", 0), "gpus": n.get("Resources", {}).get("GPU", 0)}
             for n in ray.nodes()]  # fmt: skip
    return {"nodes": nodes, "cpus": total.get("CPU", 0), "gpus": total.get("GPU", 0)}


if __name__ == "__main__":  # the Settings page's "Test": connect, describe the cluster as JSON, leave
    import json
    import sys

    try:
        connect(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None)
        print(json.dumps(cluster_info()))
    except StitchError as exc:
        print(json.dumps({"error": str(exc)}))
    finally:
        disconnect()
