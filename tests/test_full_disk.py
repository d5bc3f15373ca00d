"""A full disk: reading verbs work, a write is refused in one line naming the store and its free space, and a
run that fills the disk midway is marked failed where the write can still happen.  On a 3 MB tmpfs where this
machine may mount one (CI runs as root), else on the same store with the disk's answers stubbed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from stitchcore.cli.main import main
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store import disk, results
from stitchcore.store.results import Store


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 3 MB tmpfs, or None where nothing can be mounted here (or STITCHLAB_TEST_NO_MOUNT is set:
    the stubbed path, tried on a machine that can mount)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.environ.get("STITCHLAB_TEST_NO_MOUNT") or shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)],
                                                       capture_output=True, check=False).returncode != 0:  # fmt: skip
        yield None
        return
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def _fill(folder: Path, leave_kb: int) -> None:
    free = shutil.disk_usage(folder).free // 1024
    with open(folder / "fill", "wb") as f:
        f.write(b"\0" * max(0, (free - leave_kb)) * 1024)


def test_on_a_full_disk_reads_work_and_writes_say_so_in_one_line(small_disk, tmp_path, capsys, monkeypatch):
    folder = small_disk or tmp_path
    store_dir = folder / "store"
    assert main(["zoo", "train", "--epochs", "1", "--store", str(store_dir), "--quiet"]) == 0  # one model stored
    if small_disk is not None:
        _fill(folder, leave_kb=8)
    else:  # no mount here: the disk's answers, stubbed (no space; SQLite cannot open its files for writing)
        monkeypatch.setattr(disk.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(3 << 20, 3 << 20, 0))
        real_connect = sqlite3.connect

        def connect(target, *a, **kw):
            if kw.get("uri"):
                return real_connect(target, *a, **kw)  # the read-only connection
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(results.sqlite3, "connect", connect)
    capsys.readouterr()
    assert main(["runs", "list", "--store", str(store_dir)]) == 0  # reading verbs work
    assert "cnn on digits" in capsys.readouterr().out
    assert main(["zoo", "list", "--store", str(store_dir)]) == 0
    code = main(["zoo", "train", "--epochs", "1", "--seed", "3", "--store", str(store_dir), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: the disk holding store {store_dir} is full")
    assert "bytes free" in err and "Traceback" not in err


def test_a_run_that_fills_the_disk_midway_is_marked_failed_in_one_line(small_disk, capsys):
    if small_disk is None:
        pytest.skip("needs a small filesystem (mount -t tmpfs), which this machine does not allow")
    store_dir = small_disk / "store"
    with Store(store_dir):
        pass
    _fill(small_disk, leave_kb=150)  # room for the row, not for the model's weights
    recipe = ["--epochs", "1", "--seed", "8", "--arch-kwargs", '{"channels": [64, 128]}']
    code = main(["zoo", "train", *recipe, "--store", str(store_dir), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is full" in err and "Traceback" not in err
    with Store(store_dir) as store:
        (rec,) = store.list_runs()
        assert rec.status == "failed" and "is full" in rec.error
    assert ZooRecipe(arch_kwargs={"channels": [64, 128]}, seed=8, epochs=1)  # the recipe itself is fine
