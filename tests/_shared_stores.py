"""Stores shared by several test modules of one session, so a model or run two modules need is computed once.

Under pytest-xdist the store lives in the session's shared temp dir (above every worker's own), so one worker
computes a run and the others find it: :func:`~stitchcore.experiments.run_experiment` looks a spec up first and
waits for a run another live process is computing (the same store on two processes, as the app and a shell
share one).  Runs are named by their spec, so a module reads the same summary whichever module ran it first.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from stitchcore.store.results import Store
from tests.conftest import copy_store


def _session_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The temp dir every worker of this session sees: pytest-N/ under xdist, this run's basetemp without it."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def shared_store(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, seed: Path | None = None) -> Store:
    """The session's store ``name``, made once (a copy of the store at ``seed`` when given) under a lock."""
    shared = _session_dir(tmp_path_factory, worker_id)
    root = shared / f"shared-{name}"
    with open(shared / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not root.exists():
            made = shared / f"shared-{name}.making"
            if seed is not None:
                copy_store(seed, made)
            Store(made).close()
            made.rename(root)
    return Store(root)


def presets(tmp_path_factory: pytest.TempPathFactory, worker_id: str, trained: tuple) -> Store:
    """The Traits presets' runs for the session, one store for every module (tests/test_sweep.py and the shipped
    lesson that runs two presets' sweeps, tests/test_lessons_shipped.py): it starts as a copy of the session's two
    digit CNNs (``trained``: conftest's ``_trained``; zoo:cnn-digits-s0 and -s1, which most presets train with the
    same recipe).  A module's fixture opens it: ``with presets(...) as store: yield store``."""
    return shared_store(tmp_path_factory, worker_id, "presets", seed=trained[2])
