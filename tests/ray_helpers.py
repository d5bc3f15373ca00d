"""Ray for the tests: quiet, no token file in the home directory, and never ``ray stop`` (it kills every
Ray process on the machine, a user's own cluster included).  Each test module holds at most one Ray
connection (a process holds one), so the local-Ray and two-node tests live in separate modules."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Loopback clusters only: without this Ray 2.60 turns token auth on and writes ~/.ray/auth_token.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_SCHEDULER_EVENTS": "0"}


@contextmanager
def ray_env() -> Iterator[None]:
    """:data:`RAY_ENV` in this process's environment (the drivers and the Rays they start read it), then back."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unit_pids(prefix: str, temp_dir: str) -> list[int]:
    """Pids of the workers of the Ray whose temp dir is ``temp_dir`` running a unit whose task title starts
    with ``prefix`` (Ray titles a busy worker ``ray::<task name>``).  Only this test's Ray: another Ray on
    the machine (a parallel test, a user's) may run a unit of the same name."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    pids = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[2].startswith(prefix):
            try:  # a worker's parent is its node's raylet, whose command line names the temp dir
                parent = Path(f"/proc/{parts[1]}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if f"{temp_dir.rstrip('/')}/session_" in parent:
                pids.append(int(parts[0]))
    return pids


def descendants(pid: int) -> list[str]:
    """The command lines of every process below ``pid`` (children, their children ...), from ``ps``."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()]
    children: dict[int, list[tuple[int, str]]] = {}
    for row in rows:
        if len(row) == 3:
            children.setdefault(int(row[1]), []).append((int(row[0]), row[2]))
    found, todo = [], [pid]
    while todo:
        for child, args in children.get(todo.pop(), []):
            found.append(args)
            todo.append(child)
    return found


def ray_nodes_below(pid: int) -> list[str]:
    """The Ray node processes (raylet, GCS server) a driver process ``pid`` started: [] once it stopped them."""
    return [a for a in descendants(pid) if "raylet" in a.split(None, 1)[0] or "gcs_server" in a.split(None, 1)[0]]


@contextmanager
def two_node_cluster() -> Iterator[tuple[str, str]]:
    """A head node and a worker node, each a ``ray start --block`` process with one CPU; yields the
    address and the temp dir once both are alive.  Stopped by signalling those two processes (1-2 s, nothing left over)."""
    import ray

    port, temp = free_port(), tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: socket paths stop at 107 bytes
    env = {**os.environ, **RAY_ENV}
    cli = [sys.executable, "-m", "ray.scripts.scripts", "start", "--num-cpus=1", "--num-gpus=0",
           "--disable-usage-stats", "--block"]  # fmt: skip
    log = open(Path(temp) / "nodes.log", "w")  # noqa: SIM115 - closed in the finally below
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> None:  # its own process group: a Ctrl-C of pytest does not reach it
        procs.append(subprocess.Popen([*cli, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip

    address = f"127.0.0.1:{port}"
    try:
        start("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}")
        start(f"--address={address}")
        deadline = time.time() + 90
        while True:  # the head first, then both nodes alive
            try:
                if not ray.is_initialized():
                    ray.init(address=address, logging_level="error", log_to_driver=False)
                if sum(n["Alive"] for n in ray.nodes()) == 2:
                    break
            except (ConnectionError, RuntimeError):
                pass
            assert time.time() < deadline, (Path(temp) / "nodes.log").read_text()[-3000:]
            time.sleep(0.3)
        ray.shutdown()  # the run connects by itself, shipping stitchcore to the workers
        yield address, temp
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in procs:
            p.send_signal(signal.SIGTERM)  # `ray start --block` stops exactly what it started
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
