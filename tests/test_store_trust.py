"""A store a user did not expect (issue 12, items 5, 7, 8, 10): read-only, damaged, someone else's
database, a swapped blob; each read where it can be, refused in one line naming the fix where not."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from stitchcore.cli.main import main
from stitchcore.errors import StoreError
from stitchcore.models.sources import load_model
from stitchcore.store import results
from stitchcore.store.results import Store
from tests.conftest import ROOT, copy_store

FIXTURE = ROOT / "tests" / "fixtures" / "store_v1"
S0, S1 = "3a5c8fd66da321ff", "d927a0202342c09e"  # the fixture's two digit CNNs (seed 0, seed 1)


@pytest.fixture
def store_dir(tmp_path) -> Path:
    dst = tmp_path / "store"
    copy_store(FIXTURE, dst)
    return dst


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_a_read_only_store_is_read_and_never_written(store_dir, monkeypatch, capsys):
    _read_only(store_dir)
    if os.access(store_dir, os.W_OK):  # root ignores file modes: stand in for the read-only mount
        monkeypatch.setattr(results, "_writable", lambda root, db: False)
    before = sorted(p.name for p in store_dir.iterdir())
    store = Store(store_dir)
    assert store.read_only and len(store.list_runs()) == 10
    assert store.mark_interrupted() == 0
    m = load_model(f"zoo:cnn-digits-s0-{S0[:6]}", store=store)  # blobs read (and checked) as usual
    assert m.num_classes == 10
    with pytest.raises(StoreError, match="read-only: results can be viewed, not written"):
        store.begin("x1", "zoo", {"a": 1})
    store.close()
    code, out, err = _cli(capsys, "runs", "list", "--store", str(store_dir))
    assert code == 0 and S0 in out and not err
    assert sorted(p.name for p in store_dir.iterdir()) == before  # no -wal / -shm left behind


def test_another_programs_database_is_named_as_such(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    with sqlite3.connect(tmp_path / "s" / "stitchlab.sqlite") as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    code, out, err = _cli(capsys, "runs", "list", "--store", str(tmp_path / "s"))
    assert code == 2 and "another program's SQLite database (tables: runs)" in err
    assert "already exists" not in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_damaged_pages_give_one_line(store_dir, capsys):
    db = store_dir / "stitchlab.sqlite"
    data = bytearray(db.read_bytes())
    data[8192:8192 + 4 * 4096] = b"\xab" * len(data[8192:8192 + 4 * 4096])  # pages 3-6 overwritten
    db.write_bytes(bytes(data))
    for argv in (["runs", "list"], ["runs", "check"], ["stitch", "--a", "zoo:x", "--b", "zoo:y", "--cut-a", "fc1", "--cut-b", "fc1"]):
        code, out, err = _cli(capsys, *argv, "--store", str(store_dir))
        assert code == 2 and "is damaged (database disk image is malformed): restore a backup" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_swapped_weight_file_is_refused_with_the_run_id(store_dir, capsys):
    code, out, _ = _cli(capsys, "runs", "check", "--store", str(store_dir))
    assert code == 0 and "every blob matches its sha256" in out
    blob = store_dir / "blobs" / S0 / "model.safetensors"
    blob.write_bytes((store_dir / "blobs" / S1 / "model.safetensors").read_bytes())  # seed 1's weights as seed 0's
    store = Store(store_dir)
    with pytest.raises(StoreError, match=f"of run {S0} does not match the sha256 recorded"):
        load_model(f"zoo:cnn-digits-s0-{S0[:6]}", store=store)
    store.close()
    code, out, _ = _cli(capsys, "runs", "check", "--store", str(store_dir))
    assert code == 1 and f"run {S0}: artifact model.safetensors does not match" in out
    code, out, err = _cli(capsys, "stitch", "--a", f"zoo:cnn-digits-s0-{S0[:6]}", "--b", f"zoo:cnn-digits-s1-{S1[:6]}",
                          "--cut-a", "fc1", "--cut-b", "fc1", "--epochs", "0", "--store", str(store_dir))
    assert code == 2 and f"run {S0} does not match the sha256" in err and "Traceback" not in err


@pytest.mark.parametrize("flag, value", [("--status", "bogus"), ("--kind", "stich")])
def test_runs_list_filters_are_checked(store_dir, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["runs", "list", flag, value, "--store", str(store_dir)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and ("invalid choice: 'bogus'" in err or "unknown kind 'stich'" in err), err
    assert "(no runs)" not in err


def test_a_read_only_reader_sees_what_a_live_writer_has_committed(tmp_path, monkeypatch):
    """A class reads a store that a running server writes: the reader's read-only connection reads the writer's
    WAL (an immutable one would show the store as of its last checkpoint: runs finished since, missing)."""
    writer = Store(tmp_path / "s")
    writer.begin("r1", "stitch", {"a": 1})
    writer.finish("r1", {"accuracy": 0.5})
    wal = writer.db_path.with_name(writer.db_path.name + "-wal")
    assert wal.stat().st_size > 0  # the commit sits in the WAL while the writer is open
    monkeypatch.setattr(results, "_writable", lambda root, db: False)  # stands in for a read-only mount
    reader = Store(tmp_path / "s")
    assert reader.read_only and reader.lookup("r1").summary == {"accuracy": 0.5} and reader.stale is None
    writer.begin("r2", "stitch", {"a": 2})  # and what the writer commits later, the reader sees next time
    writer.finish("r2", {"accuracy": 0.7})
    assert [r.id for r in reader.list_runs()] == ["r2", "r1"]
    reader.close()
    writer.close()
