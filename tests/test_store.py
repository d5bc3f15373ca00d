"""Tests for stitchcore.store: ids, rows, series, artifacts, crashes, integrity, threads."""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from stitchcore.errors import StoreError
from stitchcore.store import records
from stitchcore.store import results as store_mod
from stitchcore.store.results import SCHEMA_VERSION, Store, resolve_store_dir, run_id_for

SPEC = {"arch": "cnn", "dataset": "digits", "seed": 0, "optim": {"lr": 0.1, "name": "sgd"}}


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


def _new_run(store: Store, spec: dict | None = None, kind: str = "zoo") -> str:
    spec = SPEC if spec is None else spec
    rid = run_id_for(kind, spec)
    store.begin(rid, kind, spec, label="cnn seed 0")
    return rid


# -- run ids ------------------------------------------------------------------------------------


def test_run_id_deterministic_and_key_order_free():
    a = run_id_for("zoo", SPEC)
    shuffled = {"optim": {"name": "sgd", "lr": 0.1}, "seed": 0, "dataset": "digits", "arch": "cnn"}
    b = run_id_for("zoo", shuffled)
    assert a == b and len(a) == 16 and int(a, 16) >= 0
    assert run_id_for("zoo", SPEC) == a  # stable across calls


def test_run_id_sensitive_to_kind_spec_and_schema(monkeypatch):
    base = run_id_for("zoo", SPEC)
    assert run_id_for("stitch", SPEC) != base
    assert run_id_for("zoo", {**SPEC, "seed": 1}) != base
    assert run_id_for("zoo", {**SPEC, "optim": {"lr": 0.01, "name": "sgd"}}) != base
    monkeypatch.setattr(records, "SCHEMA_VERSION", SCHEMA_VERSION + 1)  # where run_id_for reads it
    assert store_mod.run_id_for("zoo", SPEC) != base


def test_run_id_matches_documented_recipe():
    import hashlib
    import json

    text = json.dumps({"kind": "zoo", "spec": SPEC, "schema": SCHEMA_VERSION},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert run_id_for("zoo", SPEC) == hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("bad, key", [({"a": {"fn": object()}}, "'fn'"), ({"lr": float("nan")}, "'lr'"),
                                      ({"xs": [1, {2}]}, "[1]"), ({"m": {3: 1}}, "3")])
def test_spec_must_be_json(store, bad, key):
    with pytest.raises(StoreError, match=key.replace("[", r"\[").replace("]", r"\]")):
        run_id_for("zoo", bad)
    with pytest.raises(StoreError):
        store.begin("abcd", "zoo", bad)
    assert store.lookup("abcd") is None  # nothing half-written


# -- runs ---------------------------------------------------------------------------------------


def test_roundtrip_begin_finish(store):
    rid = _new_run(store)
    rec = store.lookup(rid)
    assert rec.status == "running" and rec.spec == SPEC and rec.kind == "zoo" and rec.label == "cnn seed 0"
    assert rec.started is not None and rec.finished is None and rec.summary == {}
    assert store.lookup_done(rid) is None
    done = store.finish(rid, {"accuracy": 0.93, "loss": float("nan"), "per_class": [1.0, float("inf")]})
    assert done.status == "done" and done.finished >= done.started
    assert done.summary == {"accuracy": 0.93, "loss": None, "per_class": [1.0, None]}
    assert store.lookup_done(rid) == done
    # the JSON columns hold canonical text
    raw = sqlite3.connect(store.db_path).execute("SELECT spec FROM runs WHERE id = ?", (rid,)).fetchone()[0]
    assert raw == '{"arch":"cnn","dataset":"digits","optim":{"lr":0.1,"name":"sgd"},"seed":0}'


def test_lookup_done_only_done(store):
    rid = _new_run(store)
    for status in ("failed", "cancelled", "interrupted", "queued", "running"):
        store.set_status(rid, status, error="x" if status == "failed" else None)
        assert store.lookup(rid).status == status
        assert store.lookup_done(rid) is None
    store.fail(rid, "loss became nan: lower the learning rate")
    assert store.lookup(rid).error.startswith("loss became nan")
    with pytest.raises(StoreError, match="finish"):
        store.set_status(rid, "done")
    with pytest.raises(StoreError, match="bad status"):
        store.set_status(rid, "exploded")
    assert store.lookup("0" * 16) is None


def test_rerun_clears_old_series_and_artifacts(store):
    rid = _new_run(store)
    store.log_metrics(rid, 1, {"loss": 1.0})
    store.put_artifact(rid, "w.bin", b"old")
    store.finish(rid, {"accuracy": 0.5})
    store.begin(rid, "zoo", SPEC)  # explicit re-run
    rec = store.lookup(rid)
    assert rec.status == "running" and rec.summary == {} and rec.label == "cnn seed 0"
    assert store.series(rid) == {} and store.artifacts(rid) == []
    assert not (store.blobs / rid / "w.bin").exists()


def test_list_runs_newest_first_and_filters(store):
    ids = [_new_run(store, {**SPEC, "seed": s}) for s in range(4)]
    other = _new_run(store, {"a": "x"}, kind="stitch")
    store.finish(ids[1], {"accuracy": 1.0})
    assert [r.id for r in store.list_runs()] == [other, *reversed(ids)]
    assert [r.id for r in store.list_runs(kind="zoo", limit=2)] == [ids[3], ids[2]]
    assert [r.id for r in store.list_runs(status="done")] == [ids[1]]
    assert len(store.list_runs(kind="zoo", status=["done", "running"])) == 4


def test_unknown_run_errors(store):
    with pytest.raises(StoreError, match="unknown run"):
        store.finish("0" * 16, {})
    with pytest.raises(StoreError, match="unknown run"):
        store.log_metrics("0" * 16, 0, {"loss": 1.0})
    with pytest.raises(StoreError, match="unknown run"):
        store.put_artifact("0" * 16, "a.bin", b"x")
    with pytest.raises(StoreError, match="unknown run"):
        store.delete_run("0" * 16)


# -- series -------------------------------------------------------------------------------------


def test_series_order_filter_and_nan(store):
    rid = _new_run(store)
    for step in (5, 1, 3, 2, 4):
        store.log_metrics(rid, step, {"loss": 10.0 - step, "acc": step / 10}, epoch=step // 2)
    store.log_metrics(rid, 6, {"loss": float("nan")})
    s = store.series(rid)
    assert [p[0] for p in s["acc"]] == [1, 2, 3, 4, 5]
    assert s["loss"][:5] == [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 5.0)]
    assert s["loss"][5][0] == 6 and math.isnan(s["loss"][5][1])
    assert list(store.series(rid, names=["acc"])) == ["acc"]
    store.log_metrics(rid, 1, {"acc": 0.99})  # same step again replaces
    assert store.series(rid, ["acc"])["acc"][0] == (1, 0.99)


# -- artifacts ----------------------------------------------------------------------------------


def test_artifacts_atomic_and_sha(store, tmp_path):
    import hashlib

    rid = _new_run(store)
    data = os.urandom(4096)
    path = store.put_artifact(rid, "adapter.safetensors", data)
    assert path == store.blobs / rid / "adapter.safetensors" and path.read_bytes() == data
    src = tmp_path / "matrix.npz.tmp"
    src.write_bytes(b"npz-bytes")
    moved = store.put_artifact_file(rid, "matrix.npz", src)
    assert not src.exists() and moved.read_bytes() == b"npz-bytes"
    kept = tmp_path / "curve.parquet"
    kept.write_bytes(b"pq")
    store.put_artifact_file(rid, "curve.parquet", kept, move=False)
    assert kept.exists()
    arts = {a["name"]: a for a in store.artifacts(rid)}
    assert arts["adapter.safetensors"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert arts["adapter.safetensors"]["bytes"] == 4096 and arts["matrix.npz"]["bytes"] == 9
    assert store.artifact_path(rid, "matrix.npz") == moved
    assert not [p for p in (store.blobs / rid).iterdir() if p.name.startswith(".tmp")]
    with pytest.raises(StoreError, match="no artifact"):
        store.artifact_path(rid, "nope.bin")
    moved.unlink()
    with pytest.raises(StoreError, match="missing"):
        store.artifact_path(rid, "matrix.npz")


def test_artifact_write_failure_leaves_nothing(store, monkeypatch):
    rid = _new_run(store)
    store.put_artifact(rid, "w.bin", b"v1")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(store_mod.os, "replace", boom)
    with pytest.raises(OSError):
        store.put_artifact(rid, "w.bin", b"v2-partial")
    monkeypatch.undo()
    assert store.artifact_path(rid, "w.bin").read_bytes() == b"v1"  # old version intact
    assert [p.name for p in (store.blobs / rid).iterdir()] == ["w.bin"]  # no temp left
    assert store.integrity_check() == []


@pytest.mark.parametrize("name", ["../evil", "a/b", "/etc/passwd", "..", ".", "", ".hidden", "a\\b",
                                  "x" * 200, "nul\x00"])
def test_bad_artifact_names(store, name):
    rid = _new_run(store)
    with pytest.raises(StoreError, match="bad artifact name"):
        store.put_artifact(rid, name, b"x")
    with pytest.raises(StoreError, match="bad run id"):
        store.put_artifact("../" + rid, "ok.bin", b"x")


def test_delete_run(store):
    rid = _new_run(store)
    keep = _new_run(store, {"other": 1})
    store.log_metrics(rid, 0, {"loss": 1.0})
    store.put_artifact(rid, "a.bin", b"x")
    store.put_artifact(keep, "a.bin", b"y")
    store.partial_path(rid).parent.mkdir(parents=True, exist_ok=True)
    store.partial_path(rid).write_text("{}")  # a cancelled matrix's resume file
    store.delete_run(rid)
    assert store.lookup(rid) is None and store.series(rid) == {} and store.artifacts(rid) == []
    assert not (store.blobs / rid).exists() and not store.partial_path(rid).exists()
    assert store.artifact_path(keep, "a.bin").read_bytes() == b"y"
    assert store.integrity_check() == []


# -- crashes and integrity ---------------------------------------------------------------------


def test_interrupted_after_simulated_crash(tmp_path):
    crashed = Store(tmp_path / "s")
    rid = _new_run(crashed)
    crashed.log_metrics(rid, 0, {"loss": 2.0})
    crashed.log_metrics(rid, 1, {"loss": 1.5})
    crashed.put_artifact(rid, "ckpt.bin", b"partial-run-checkpoint")
    queued = run_id_for("zoo", {"q": 1})
    crashed.enqueue(queued, "zoo", {"q": 1})
    # "crash": no finish/fail/close; a new process opens the same store
    fresh = Store(tmp_path / "s")
    assert fresh.mark_interrupted() == 2
    rec = fresh.lookup(rid)
    assert rec.status == "interrupted" and "re-run" in rec.error and rec.finished is not None
    assert fresh.lookup(queued).status == "interrupted"
    assert fresh.series(rid)["loss"] == [(0, 2.0), (1, 1.5)]  # nothing stored is lost
    assert fresh.integrity_check() == []
    assert fresh.mark_interrupted() == 0
    fresh.close()
    crashed.close()


def test_mark_interrupted_spares_other_live_process(store):
    rid = _new_run(store)
    owner = f"{store_mod._HOST}:{os.getppid()}"  # the parent process: alive, not us
    with store._tx() as conn:
        conn.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, rid))
    assert store.mark_interrupted() == 0
    with pytest.raises(StoreError, match="is running in process"):
        store.begin(rid, "zoo", SPEC)
    assert store.mark_interrupted(force=True) == 1


def test_integrity_check_detects_tampering(store):
    rid = _new_run(store)
    path = store.put_artifact(rid, "w.bin", b"weights" * 100)
    store.finish(rid, {"accuracy": 0.9})
    assert store.integrity_check() == []
    path.write_bytes(b"weightz" * 100)  # same size, other bytes
    problems = store.integrity_check()
    assert len(problems) == 1 and "w.bin" in problems[0] and "sha256" in problems[0]
    path.unlink()
    assert "missing" in store.integrity_check()[0]
    (store.blobs / "deadbeefdeadbeef").mkdir()
    with store._tx() as conn:
        conn.execute("UPDATE runs SET summary = NULL WHERE id = ?", (rid,))
    text = "\n".join(store.integrity_check())
    assert "deadbeefdeadbeef" in text and "without summary" in text


# -- configuration and schema -------------------------------------------------------------------


def test_store_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHLAB_STORE", raising=False)
    assert resolve_store_dir() == Path(store_mod.__file__).resolve().parents[2] / "cache"
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "env"))
    assert resolve_store_dir() == (tmp_path / "env").resolve()
    assert resolve_store_dir(tmp_path / "cli") == (tmp_path / "cli").resolve()  # --store wins
    with Store() as s:
        assert s.root == (tmp_path / "env").resolve() and (tmp_path / "env" / "stitchlab.sqlite").is_file()
        assert (tmp_path / "env" / "blobs").is_dir()
        assert s._query("PRAGMA journal_mode")[0][0] == "wal"


def test_migrations_versioned_and_idempotent(tmp_path):
    with Store(tmp_path / "s") as s:
        rows = s._query("SELECT version FROM schema_migrations")
    assert rows == [(v,) for v in range(1, len(store_mod.MIGRATIONS) + 1)]
    with Store(tmp_path / "s") as s:  # reopening applies nothing twice
        assert s._query("SELECT COUNT(*) FROM schema_migrations")[0][0] == len(store_mod.MIGRATIONS)
        with s._tx() as conn:
            conn.execute("INSERT INTO schema_migrations VALUES (999, 0)")
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "s")


def test_not_a_database_and_closed(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "stitchlab.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="move it aside"):
        Store(tmp_path / "bad")
    s = Store(tmp_path / "ok")
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.list_runs()


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_writers_and_reader(store):
    rids = [_new_run(store, {"w": i}) for i in range(4)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(rid: str) -> None:
        try:
            for step in range(150):
                store.log_metrics(rid, step, {"loss": 1.0 / (step + 1), "acc": step / 150})
            store.put_artifact(rid, "final.bin", rid.encode())
            store.finish(rid, {"steps": 150})
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                for rid in rids:
                    store.series(rid)
                store.list_runs()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    # a second Store on the same directory (another process's view) writes too
    other = Store(store.root)
    extra = _new_run(other, {"w": "other"})
    threads = [threading.Thread(target=writer, args=(r,)) for r in rids]
    threads.append(
        threading.Thread(target=lambda: [other.log_metrics(extra, i, {"x": i}) for i in range(150)])
    )
    read = threading.Thread(target=reader)
    read.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop.set()
    read.join(timeout=60)
    other.close()
    assert errors == []
    for rid in rids:
        assert len(store.series(rid)["loss"]) == 150 and store.lookup_done(rid) is not None
    assert len(store.series(extra)["x"]) == 150
    assert store.integrity_check() == []


def test_canonical_json_doctests():
    import doctest

    import stitchcore.store.canonical_json as canonical_json_mod

    assert doctest.testmod(canonical_json_mod).failed == 0
