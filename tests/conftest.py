"""Shared fixtures: a results store with two small digit CNNs trained once per session."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import torch

# Tiny ops are faster (and timings steadier) on one thread than on two contended ones.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the app's pages import ui from the repo root
    sys.path.insert(0, str(ROOT))

# CLI commands run in-process (and the app servers the browser tests start) keep the suite's one thread.
os.environ.setdefault("STITCHLAB_JOB_THREADS", "1")
# Tests never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def big_job_threads() -> int:
    """Threads for a job big enough that two pay (as a user's shell gives them): two, but one when pytest-xdist
    runs another worker beside this one (two threads on a busy core thrash: 256 s instead of 40 s seen)."""
    return 1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, os.cpu_count() or 1)


@pytest.fixture(scope="session")
def _trained(tmp_path_factory):
    """The two digit CNNs trained once per session, and a copy of the store made right after (other tests add
    models to the session store; under pytest-xdist which ones ran first on this worker varies)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(tmp_path_factory.mktemp("store"))
    refs = []
    for seed in (0, 1):
        out = run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=seed), store)
        refs.append(out.record.summary["ref"])
    pristine = tmp_path_factory.mktemp("pristine") / "store"
    copy_store(store.root, pristine)
    return store, refs, pristine


@pytest.fixture
def trained_copy(_trained, tmp_path) -> Path:
    """A store directory holding a copy of the two digit CNNs as first trained (a test may add runs to it)."""
    root = tmp_path / "store"
    copy_store(_trained[2], root)
    return root


@pytest.fixture(scope="session")
def trained_store(_trained):
    """A store holding zoo:cnn-digits-s0 and zoo:cnn-digits-s1 (default recipes, ~1 s each)."""
    store, refs, _ = _trained
    return store, refs


@pytest.fixture(scope="session")
def family_store(tmp_path_factory, worker_id):
    """The two digit CNNs, a ViT and a Swin trained on digits with their architectures' recipe defaults
    (AdamW, 40 epochs: what ``zoo train --arch vit --dataset digits`` trains; ~25 s and ~15 s on one thread).
    Trained once per test session: under pytest-xdist the first worker to ask trains them in the session's
    shared temp dir (the others wait on a lock) and each worker gets a copy (it was ~55 s on each worker).

    Returns (store, {"cnn": ref, "cnn1": ref, "vit": ref, "swin": ref}, {family: test accuracy})."""
    from stitchcore.store.results import Store

    here = tmp_path_factory.mktemp("family") / "store"
    if worker_id == "master":  # one process: nothing to share
        refs, accuracy = _train_family(here)
        return Store(here), refs, accuracy
    shared = tmp_path_factory.getbasetemp().parent  # pytest-N/, above every worker's popen-gwK/
    with open(shared / "family.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "family.json"
        if not done.exists():
            refs, accuracy = _train_family(shared / "family-store")
            done.write_text(json.dumps({"refs": refs, "accuracy": accuracy}))
        made = json.loads(done.read_text())
    copy_store(shared / "family-store", here)
    return Store(here), made["refs"], made["accuracy"]


def _train_family(root: Path) -> tuple[dict[str, str], dict[str, float]]:
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.models.archs import arch_recipe_defaults
    from stitchcore.store.results import Store

    refs, accuracy = {}, {}
    threads = torch.get_num_threads()
    # Always one thread, with or without pytest-xdist: the thread count changes the order of float sums, so
    # the trained weights (and every accuracy tests read off them) would differ between a run with -n 2 and
    # one without (seen: ViT 0.9356 on one thread, 0.9378 on two); on one thread they are the same every time.
    torch.set_num_threads(1)
    try:
        with Store(root) as store:
            recipes = {"cnn": ZooRecipe(seed=0), "cnn1": ZooRecipe(seed=1)}
            recipes.update({arch: ZooRecipe(arch=arch, dataset="digits", **arch_recipe_defaults(arch))
                            for arch in ("vit", "swin")})  # fmt: skip
            for family, recipe in recipes.items():
                out = run_experiment("zoo", recipe, store)
                refs[family], accuracy[family] = out.record.summary["ref"], out.record.summary["accuracy"]
    finally:
        torch.set_num_threads(threads)
    return refs, accuracy


def copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of a store directory: SQLite's backup API for the database, files for blobs.

    Connections are closed explicitly: a leftover connection in the test process to the
    session store would otherwise outlive the copy.
    """
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.sqlite", "*.sqlite-wal", "*.sqlite-shm"))
    with contextlib.closing(sqlite3.connect(src / "stitchlab.sqlite")) as a, contextlib.closing(
        sqlite3.connect(dst / "stitchlab.sqlite")
    ) as b:
        a.backup(b)


@pytest.fixture
def no_background_calibration() -> None:
    """Wait for background estimate calibrations that app tests earlier on this worker queued: they build and
    train models in another thread, drawing from torch's global RNG between a test's seed and what it draws
    (seen in full runs: bn_before.weight of a wholly different draw; two equal seeds giving other weights)."""
    import time

    from stitchcore.experiments.estimate import calibrating

    deadline = time.monotonic() + 180
    while calibrating() and time.monotonic() < deadline:
        time.sleep(0.1)


def run_cli(argv: list[str], store_root: Path, capsys) -> tuple[int, str, str]:
    """``stitchcore.cli.main.main(argv)`` in-process over store ``store_root`` (``--quiet``): (exit code, stdout,
    stderr); argparse's refusals exit through SystemExit."""
    from stitchcore.cli.main import main

    capsys.readouterr()
    try:
        code = main([*argv, "--store", str(store_root), "--quiet"])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def store_hash(root: Path) -> dict[str, str]:
    """sha256 of every file under the store by relative path; the database by its content (SQLite's dump, read
    through its write-ahead log: opening the store creates the -wal and -shm files, which hold no change)."""
    import hashlib

    files = {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith("stitchlab.sqlite")}  # fmt: skip
    with contextlib.closing(sqlite3.connect(root / "stitchlab.sqlite")) as db:
        files["stitchlab.sqlite"] = hashlib.sha256("\n".join(db.iterdump()).encode()).hexdigest()
    return files


@pytest.fixture
def fresh_app_state(monkeypatch):
    """The app gets its own store and runner (``st.cache_resource`` cleared) and leaves no worker threads
    behind; viewer mode off.  Point ``STITCHLAB_STORE`` at the store to serve before the app runs."""
    import streamlit as st

    import ui

    monkeypatch.delenv("STITCHLAB_VIEWER", raising=False)
    monkeypatch.setenv("STITCHLAB_WARM_WORKER", "0")  # an app test that runs no job starts no worker process
    st.cache_resource.clear()
    yield
    ui.get_runner().shutdown()
    ui.get_store().close()
    st.cache_resource.clear()


@pytest.fixture
def app(tmp_path, monkeypatch, _trained, fresh_app_state):
    """An AppTest of app.py over a copy of the session store as first trained (two digit CNNs, nothing other
    tests added); runner shut down after."""
    from streamlit.testing.v1 import AppTest

    copy = tmp_path / "store"
    copy_store(_trained[2], copy)
    monkeypatch.setenv("STITCHLAB_STORE", str(copy))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)


_SLOW = frozenset(line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
                  if line.strip() and not line.startswith("#"))  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the browser tests and the measured slow ones (tests/slow_tests.txt) ``slow``: ``-m "not slow"`` is
    the inner loop while editing; the README's command runs everything."""
    for item in items:
        if item.nodeid in _SLOW or item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)
