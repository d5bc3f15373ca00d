"""Where the independent pieces of a run execute: in this process (``local``) or on a Ray cluster (``ray``).

A matrix, an assembly, a sweep or an LM depth sweep cuts its work into :class:`Unit` s -- one per
receiver group, per sender, per position -- each a module-level generator function that yields
events: ``("progress", (fraction, message))`` and ``("cells", [cell dicts])``.  A backend runs the
units and hands the events back to the run, which alone writes the store (one writer: workers never
open it).  The choice is a :class:`RunOptions`, given beside the spec and never hashed into the run
id, so a result computed on a cluster is the same stored run as one computed here.

``local`` runs the units one after another in this process, as runs always did; an exception ends
the run.  ``ray`` (:mod:`.ray_backend`) submits them all as Ray tasks: a unit whose worker dies is
retried, a unit that still fails yields a ``("failed", reason)`` event (its cells are stored with the
reason, the rest complete), and Stop cancels what is left.

A unit's event sequence must depend only on its arguments (never on the clock): a retried Ray task
replays its events, and the driver drops the ones it already has by position.

>>> RunOptions().backend, RunOptions("ray", "127.0.0.1:6379").describe()
('local', 'ray cluster at 127.0.0.1:6379')
>>> RunOptions("slurm")
Traceback (most recent call last):
...
stitchcore.errors.StitchError: unknown backend 'slurm'; use one of: local, ray
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch

from stitchcore.errors import Cancelled, StitchError

__all__ = [
    "ADDRESS_ENV", "BACKENDS", "BACKEND_ENV", "Backend", "RunOptions", "Unit", "UnitContext", "UnitEvent",
    "cells_per_node", "check_listening", "get_backend", "local_ray_up", "options_from_env", "probe_cluster", "ran_where",
    "stop_local_ray",
]  # fmt: skip

BACKENDS = ("local", "ray")
BACKEND_ENV = "STITCHLAB_BACKEND"  # the default backend of the CLI and the app: local | ray
ADDRESS_ENV = "STITCHLAB_RAY_ADDRESS"  # the default cluster address (else a Ray started on this machine)


@dataclass(frozen=True)
class RunOptions:
    """How a run executes, not what it computes: never part of the spec or its run id."""

    backend: str = "local"  # local | ray
    address: str | None = None  # ray: "HOST:PORT" of a running cluster, "auto", "ray://HOST:10001"; None = start one here
    task_threads: int = 1  # ray: torch CPU threads (and Ray CPUs) per task
    gpus_per_task: float = 0.0  # ray: 0 = CPU tasks; a fraction (0.25) packs small models onto one GPU
    max_retries: int = 2  # ray: re-runs of a task whose worker process or node died

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise StitchError(f"unknown backend {self.backend!r}; use one of: {', '.join(BACKENDS)}")
        address = (self.address or "").strip() or None
        object.__setattr__(self, "address", address)
        if address is not None and self.backend != "ray":
            raise StitchError("--address names a Ray cluster: use it with --backend ray")
        if int(self.task_threads) < 1:
            raise StitchError(f"task threads must be at least 1, not {self.task_threads}")
        if not 0 <= float(self.gpus_per_task) <= 8:
            raise StitchError(f"GPUs per task must be between 0 (CPU tasks) and 8, not {self.gpus_per_task}")
        if int(self.max_retries) < 0:
            raise StitchError(f"max retries must be 0 or more, not {self.max_retries}")

    @property
    def local_ray(self) -> bool:
        """Whether runs with these options start a Ray on this machine (``ray`` without an address).

        >>> RunOptions("ray").local_ray, RunOptions("ray", "10.0.0.5:6379").local_ray, RunOptions().local_ray
        (True, False, False)
        """
        return self.backend == "ray" and not self.address

    def describe(self) -> str:
        """In words: 'this process', 'a Ray started on this machine', 'ray cluster at HOST:PORT'."""
        if self.backend == "local":
            return "this process"
        return f"ray cluster at {self.address}" if self.address else "a Ray started on this machine"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> RunOptions:
        known = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


def options_from_env(env: dict[str, str] | None = None) -> RunOptions:
    """The default options: ``$STITCHLAB_BACKEND`` (local) and ``$STITCHLAB_RAY_ADDRESS``.

    >>> options_from_env({"STITCHLAB_BACKEND": "ray", "STITCHLAB_RAY_ADDRESS": "10.0.0.5:6379"}).address
    '10.0.0.5:6379'
    """
    env = os.environ if env is None else env
    backend = (env.get(BACKEND_ENV) or "local").strip().lower()
    address = env.get(ADDRESS_ENV) if backend == "ray" else None
    try:
        return RunOptions(backend, address)
    except StitchError as exc:
        raise StitchError(f"${BACKEND_ENV}: {exc}") from None


@dataclass(frozen=True)
class UnitContext:
    """What a unit sees while it runs: the device it computes on and a cancel check to call every step."""

    device: torch.device
    cancel: threading.Event = field(default_factory=threading.Event)  # local: the run's; ray: never set
    on_progress: Callable[[float, str], None] | None = None  # local: progress inside a long step; ray: None
    on_metrics: Callable[[int, dict[str, float]], None] | None = None  # local: metric points as they come

    def report(self, fraction: float, message: str) -> None:
        """Progress within the unit (0..1) where the backend can show it live (locally); else nothing."""
        if self.on_progress is not None:
            self.on_progress(fraction, message)

    def metrics(self, step: int, values: dict[str, float]) -> bool:
        """Deliver a metric point now where the backend can (locally: True); False: the unit yields it later."""
        if self.on_metrics is None:
            return False
        self.on_metrics(step, values)
        return True

    def check_cancel(self) -> None:
        """Raise :class:`Cancelled` once the run is stopped (on Ray the task is interrupted instead)."""
        if self.cancel.is_set():
            raise Cancelled(getattr(self.cancel, "reason", "cancelled by the user"), getattr(self.cancel, "status", "cancelled"))


UnitFn = Callable[..., Iterator[tuple[str, Any]]]  # fn(*args, UnitContext) -> events


@dataclass(frozen=True)
class Unit:
    """One independent piece of a run: ``fn(*args, unit_context)`` yields its events."""

    key: str  # names the unit in progress lines and failures: "trained|fc1"
    fn: UnitFn  # a module-level generator function (Ray pickles it by reference)
    args: tuple  # picklable; shared values from Backend.share are passed as they are
    cells: int = 1  # how many cells it produces (weights the overall progress)


@dataclass(frozen=True)
class UnitEvent:
    """An event of one unit, as the run sees it."""

    unit: Unit
    kind: str  # "progress" (fraction, message) | "cells" [dicts] | "failed" reason | "done" None
    payload: Any
    where: dict[str, Any] | None = None  # ray: node id, host, pid and device of the task; None locally

    @property
    def where_words(self) -> str:
        """`` on HOST (DEVICE)`` for a progress line when the event came from a cluster task, else ''.

        >>> UnitEvent(Unit("u", print, ()), "progress", None, {"node": "ab", "host": "h", "device": "cpu"}).where_words
        ' on h (cpu)'
        """
        return f" on {self.where['host']} ({self.where['device']})" if self.where else ""

    def stamp(self, cell: dict[str, Any]) -> dict[str, Any]:
        """``cell`` with where it was computed (``node``, ``host``, ``device``) when that was a cluster task.

        >>> e = UnitEvent(Unit("u", print, ()), "cells", [], {"node": "ab", "host": "h", "pid": 1, "device": "cpu"})
        >>> e.stamp({"accuracy": 0.9})
        {'accuracy': 0.9, 'node': 'ab', 'host': 'h', 'device': 'cpu'}
        """
        if self.where is None:
            return cell
        return {**cell, "node": self.where["node"], "host": self.where["host"], "device": self.where["device"]}


def cells_per_node(cells: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """node id -> host, devices and number of cells it computed, for cells stamped on a cluster.

    >>> cells_per_node([{"node": "ab", "host": "h1", "device": "cpu"}, {"node": "ab", "host": "h1", "device": "cpu"}])
    {'ab': {'host': 'h1', 'devices': ['cpu'], 'cells': 2}}
    """
    out: dict[str, dict[str, Any]] = {}
    for c in cells:
        if c.get("node"):
            node = out.setdefault(c["node"], {"host": c.get("host", ""), "devices": [], "cells": 0})
            node["cells"] += 1
            if c.get("device") and c["device"] not in node["devices"]:
                node["devices"].append(c["device"])
    return out


class Backend(Protocol):
    """Runs units and hands their events back in the driver, one at a time."""

    name: str

    def share(self, value: Any) -> Any:
        """A handle every unit may take as an argument: the value itself locally, an object-store ref on Ray."""
        ...

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args, unit_context)`` as one task; a handle to its result that units may take as an argument."""
        ...

    def run_units(self, units: Sequence[Unit], cancel: threading.Event,
                  on_progress: Callable[[Unit, float, str], None] | None = None,
                  on_metrics: Callable[[Unit, int, dict[str, float]], None] | None = None) -> Iterator[UnitEvent]:
        """Run every unit; stop early (and cancel what is running) once ``cancel`` is set.

        ``on_progress(unit, fraction, message)`` and ``on_metrics(unit, step, values)``: what a unit reports
        inside a long step, where the backend can deliver it while the step runs (locally).
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Where the run executed, stored in its summary ("backend", nodes...)."""
        ...


def ran_where(summary: dict[str, Any] | None) -> str | None:
    """In words, where a run's units ran when that was a cluster (None for a local run).

    >>> ran_where({"backend": {"name": "ray", "address": "10.0.0.5:6379"},
    ...            "nodes": {"a1": {"host": "gpu1", "cells": 12}, "b2": {"host": "gpu2", "cells": 13}}})
    'computed on the Ray cluster at 10.0.0.5:6379: 2 nodes (gpu1: 12 cells, gpu2: 13 cells)'
    """
    backend = (summary or {}).get("backend") or {}
    if backend.get("name") != "ray":
        return None
    nodes = (summary or {}).get("nodes") or {}
    where = "a Ray started on the server" if backend.get("address") in (None, "started here") else (
        f"the Ray cluster at {backend['address']}")  # fmt: skip
    parts = ", ".join(f"{n.get('host', '?')}: {n.get('cells', 0)} cells" for n in nodes.values())
    return f"computed on {where}: {len(nodes)} node{'s' if len(nodes) != 1 else ''}" + (f" ({parts})" if parts else "")


def probe_cluster(address: str | None, timeout: float = 90.0) -> dict[str, Any]:
    """Connect to the Ray cluster at ``address`` (None: start one here) from a short-lived process and
    describe it: ``{"nodes": [...], "cpus": N, "gpus": N}``; StitchError saying why it cannot.

    A separate process, so the caller (the web server) never becomes a Ray driver itself.
    """
    cmd = [sys.executable, "-m", "stitchcore.backends.ray_backend", address or ""]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise StitchError(f"no answer from the Ray cluster at {address} within {timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StitchError(f"testing the Ray connection failed: {tail}")
    info = json.loads(lines[-1])
    if "error" in info:
        raise StitchError(info["error"])
    return info


_RAY_MODULE = "stitchcore.backends.ray_backend"  # looked up in sys.modules: these helpers never import Ray


def local_ray_up() -> bool:
    """Whether this process started a Ray on this machine that is still up (a run with ``RunOptions("ray")``
    starts one and keeps it for the next run).  False, without importing Ray, when no run here used it."""
    ray_backend = sys.modules.get(_RAY_MODULE)
    return ray_backend is not None and ray_backend.connected_address() == ""


def stop_local_ray() -> bool:
    """Stop the Ray this process started on this machine (its raylet, object store and workers, about 2 GB,
    and its temp dir); True if one was up.  A connection to a cluster elsewhere is left as it is.  Call it
    only while no run of this process uses Ray (its tasks would fail)."""
    ray_backend = sys.modules.get(_RAY_MODULE)
    return ray_backend is not None and ray_backend.stop_started_here()


def check_listening(address: str) -> None:
    """A Ray HOST:PORT nothing listens on: StitchError in a second (before a run is stored, and instead of
    Ray's 20 s of retries); "auto" and "ray://HOST:PORT" are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise StitchError(f"cannot connect to the Ray cluster at {address}: nothing answers there ({exc.strerror or exc});"
                          " start one with `ray start --head --port=6379`, then use its HOST:PORT, or leave the"
                          " address empty to start Ray on this machine") from None


def get_backend(options: RunOptions | None, device: torch.device) -> Backend:
    """The backend ``options`` name; ``device`` is where local units compute.

    >>> get_backend(None, torch.device("cpu")).name
    'local'
    """
    options = options or RunOptions()
    if options.backend == "ray":
        from stitchcore.backends.ray_backend import RayBackend  # imports ray (0.4 s) only when asked

        return RayBackend(options)
    from stitchcore.backends.local import LocalBackend

    return LocalBackend(device)
