"""Bundles: runs export/import round trips, --with-models, skips and conflicts, and every bad zip refused."""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import stitchcore.experiments  # noqa: F401 - the zoo's namer (store.claims), as the CLI and the app have it
from stitchcore.errors import StitchError, StoreError
from stitchcore.store.bundle import Limits, export_bundle, import_bundle, read_manifest
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"
STITCH = "6d9f490702433fc1"  # zoo:cnn-digits-s0-3a5c8f[block2] -> zoo:cnn-digits-s1-d927a0[block2]
ZOO_CNN = ("3a5c8fd66da321ff", "d927a0202342c09e")
MATRIX = "948efef379ab0882"  # one small blob: cells.json


@pytest.fixture
def src(tmp_path):
    """A copy of the fixture store (never the fixture itself)."""
    copy_store(FIXTURE, tmp_path / "src")
    with Store(tmp_path / "src") as store:
        yield store


@pytest.fixture
def dst(tmp_path):
    with Store(tmp_path / "dst") as store:
        yield store


def norm_series(series: dict) -> dict:
    return {k: [(s, None if math.isnan(v) else v) for s, v in pts] for k, pts in series.items()}


def snapshot(store: Store) -> tuple:
    """Everything a failed import must leave as it was: rows, curves, artifact rows, and every file but SQLite's."""
    runs = store.list_runs()
    files = {p.relative_to(store.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(store.root.rglob("*")) if p.is_file() and not p.name.startswith("stitchlab.sqlite")}
    dirs = sorted(p.relative_to(store.root).as_posix() for p in store.root.rglob("*") if p.is_dir())
    return (runs, [norm_series(store.series(r.id)) for r in runs],
            [[(a["name"], a["sha256"], a["bytes"]) for a in store.artifacts(r.id)] for r in runs], files, dirs)


def test_round_trip_every_run(src, dst, tmp_path):
    ids = [r.id for r in src.list_runs()]
    info = export_bundle(src, ids, tmp_path / "all.zip")
    assert set(info.runs) == set(ids) and info.models == () and info.bytes == (tmp_path / "all.zip").stat().st_size
    manifest = read_manifest(tmp_path / "all.zip")
    assert manifest["bundle_schema"] == 1 and manifest["stitchlab"] and manifest["created"]
    entry = next(r for r in manifest["runs"] if r["id"] == STITCH)
    assert entry["spec"] == src.lookup(STITCH).spec and entry["row"]["kind"] == "stitch"
    assert {m["role"] for m in entry["members"]} == {"series", "artifact"}

    report = import_bundle(dst, tmp_path / "all.zip")
    assert set(report.imported) == set(ids) and report.skipped == ()
    here = dst.list_runs()
    # every row field (spec, summary, status, times, label) but where it came from
    assert [replace(r, imported=None, imported_from=None) for r in here] == src.list_runs()
    assert all(r.imported_from == "all.zip" and time.time() - 60 < r.imported <= time.time() for r in here)
    assert all(r.imported is None for r in src.list_runs())  # computed there: no origin
    for rid in ids:
        assert norm_series(dst.series(rid)) == norm_series(src.series(rid))
        a, b = src.artifacts(rid), dst.artifacts(rid)
        assert [(x["name"], x["sha256"], x["bytes"]) for x in a] == [(x["name"], x["sha256"], x["bytes"]) for x in b]
        for x in a:
            assert dst.artifact_path(rid, x["name"]).read_bytes() == x["path"].read_bytes()
    assert sum(len(dst.series(rid)) for rid in ids) >= 8  # the fixture's curves did come along
    assert dst.integrity_check() == []


def test_imported_model_loads_and_stitch_is_a_cache_hit(src, dst, tmp_path):
    from stitchcore.experiments import run_experiment, spec_from_record
    from stitchcore.models.sources import load_model

    info = export_bundle(src, [STITCH], tmp_path / "s.zip", with_models=True)
    assert set(info.models) == set(ZOO_CNN) and info.runs[0] == STITCH
    assert set(import_bundle(dst, tmp_path / "s.zip").imported) == {STITCH, *ZOO_CNN}
    model = load_model(src.lookup(ZOO_CNN[0]).summary["ref"], store=dst)
    assert model.meta["run_id"] == ZOO_CNN[0]
    rec = dst.lookup(STITCH)
    out = run_experiment("stitch", spec_from_record(rec), dst)
    assert out.cached and out.record == rec


def test_without_models_only_the_runs_named(src, dst, tmp_path):
    info = export_bundle(src, [STITCH], tmp_path / "s.zip")
    assert info.runs == (STITCH,) and info.models == ()
    assert import_bundle(dst, tmp_path / "s.zip").imported == (STITCH,)
    assert [r.id for r in dst.list_runs()] == [STITCH]


def test_zoo_ref_names_a_model(src, tmp_path):
    name = src.lookup(ZOO_CNN[1]).summary["ref"]
    assert export_bundle(src, [name], tmp_path / "m.zip").runs == (ZOO_CNN[1],)


def test_reimport_skips_and_conflict_is_refused(src, dst, tmp_path):
    export_bundle(src, [STITCH], tmp_path / "s.zip", with_models=True)
    import_bundle(dst, tmp_path / "s.zip")
    again = import_bundle(dst, tmp_path / "s.zip")
    assert again.imported == () and set(again.skipped) == {STITCH, *ZOO_CNN}

    dst.finish(STITCH, {**dst.lookup(STITCH).summary, "accuracy": 0.01})  # same id, other content
    before = snapshot(dst)
    with pytest.raises(StoreError, match=f"run {STITCH} is already in .* with different content"):
        import_bundle(dst, tmp_path / "s.zip")
    assert snapshot(dst) == before


def test_export_refuses_unknown_and_unfinished(src, tmp_path):
    with pytest.raises(StoreError, match="unknown run id 'nope'"):
        export_bundle(src, ["nope"], tmp_path / "x.zip")
    src.begin("0123456789abcdef", "zoo", {"x": 1})
    with pytest.raises(StoreError, match="is running"):
        export_bundle(src, ["0123456789abcdef"], tmp_path / "x.zip")
    assert not (tmp_path / "x.zip").exists()


# ----------------------------------------------------------------------------------------- bad bundles


def good_parts(src: Store, tmp_path: Path) -> tuple[dict, dict[str, bytes]]:
    """A one-run bundle (the matrix run and its cells.json) as (manifest, {member: bytes})."""
    path = export_bundle(src, [MATRIX], tmp_path / "good.zip").path
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != "manifest.json"}
        return json.loads(zf.read("manifest.json")), members


def write_zip(path: Path, manifest: dict | bytes | None, members: dict, special: dict | None = None) -> Path:
    """A zip with ``manifest`` (dict, raw bytes, or None for none), ``members``, and ``special``
    members whose mode bits (external_attr) say symlink, device ..."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        if manifest is not None:
            zf.writestr("manifest.json", manifest if isinstance(manifest, bytes) else json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
        for name, (mode, data) in (special or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


def set_member(manifest: dict, data: bytes, **extra) -> dict:
    """The manifest with cells.json declared as ``data`` (right sha256 and size), then ``extra`` on top."""
    m = json.loads(json.dumps(manifest))
    member = next(x for x in m["runs"][0]["members"] if x["role"] == "artifact")
    member.update({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), **extra})
    return m


CELLS = f"runs/{MATRIX}/blobs/cells.json"


def bad_escape(m, ms, p):
    return write_zip(p, m, {**ms, "../../evil.txt": b"x"})


def bad_absolute(m, ms, p):
    return write_zip(p, m, {**ms, "/tmp/evil.txt": b"x"})


def bad_drive(m, ms, p):
    return write_zip(p, m, {**ms, "C:/evil.txt": b"x"})


def bad_backslash(m, ms, p):
    return write_zip(p, m, {**ms, "runs\\..\\evil.txt": b"x"})


def bad_manifest_path(m, ms, p):
    m = json.loads(json.dumps(m))
    m["runs"][0]["members"][0]["path"] = "../series.json"
    return write_zip(p, m, ms)


def bad_symlink(m, ms, p):
    return write_zip(p, m, {k: v for k, v in ms.items() if k != CELLS},
                     {CELLS: (stat.S_IFLNK | 0o777, ms[CELLS])})


def bad_device(m, ms, p):
    return write_zip(p, m, {k: v for k, v in ms.items() if k != CELLS}, {CELLS: (stat.S_IFCHR | 0o666, ms[CELLS])})


def bad_over_declared(m, ms, p):
    return write_zip(p, set_member(m, ms[CELLS], bytes=10), ms)


def bad_total_cap(m, ms, p):
    return write_zip(p, m, ms)


def bad_ratio(m, ms, p):
    zeros = bytes(4 << 20)
    return write_zip(p, set_member(m, zeros), {**ms, CELLS: zeros})


def bad_sha(m, ms, p):
    flipped = bytes([ms[CELLS][0] ^ 1]) + ms[CELLS][1:]
    return write_zip(p, m, {**ms, CELLS: flipped})


def bad_no_manifest(m, ms, p):
    return write_zip(p, None, ms)


def bad_manifest_json(m, ms, p):
    return write_zip(p, b"{not json", ms)


def bad_manifest_shape(m, ms, p):
    return write_zip(p, {**m, "runs": "all of them"}, ms)


def bad_schema(m, ms, p):
    return write_zip(p, {**m, "bundle_schema": 99}, ms)


def bad_id(m, ms, p):
    m = json.loads(json.dumps(m))
    m["runs"][0]["spec"]["seed"] = 12345
    return write_zip(p, m, ms)


def bad_unlisted(m, ms, p):
    return write_zip(p, m, {**ms, f"runs/{MATRIX}/blobs/extra.bin": b"x"})


def bad_missing(m, ms, p):
    return write_zip(p, m, {k: v for k, v in ms.items() if k != CELLS})


def bad_nested_manifest(m, ms, p):
    return write_zip(p, b"[" * 200_000 + b"]" * 200_000, ms)


def bad_series(m, ms, p):
    m = json.loads(json.dumps(m))
    data = b'{"loss": [[0, "high"]]}'
    series = next(x for x in m["runs"][0]["members"] if x["role"] == "series")
    series.update({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    return write_zip(p, m, {**ms, series["path"]: data})


def bad_artifact_name(m, ms, p):
    m = set_member(m, ms[CELLS], name="sub/cells.json", path=f"runs/{MATRIX}/blobs/sub/cells.json")
    moved = {k: v for k, v in ms.items() if k != CELLS} | {f"runs/{MATRIX}/blobs/sub/cells.json": ms[CELLS]}
    return write_zip(p, m, moved)


def bad_truncated(m, ms, p):
    good = write_zip(p, m, ms).read_bytes()
    p.write_bytes(good[: len(good) // 2])
    return p


def bad_not_zip(m, ms, p):
    p.write_bytes(b"name,accuracy\nrun,0.9\n")
    return p


def bad_empty(m, ms, p):
    p.write_bytes(b"")
    return p


def bad_duplicate(m, ms, p):
    """cells.json twice: the manifest's sha256 matches the first copy, an extractor might take the second."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name; writing one is the point
        path = write_zip(p, m, ms)
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr(CELLS, b'{"tampered": true}')
    return path


def bad_bzip2_lying(m, ms, p):
    """cells.json as a bzip2 member of 200 MB of zeros (a few hundred bytes) whose headers say 2 bytes: zipfile
    would inflate the whole block at the first read, whatever size is asked for."""
    data = b"\0" * (200 << 20)
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(set_member(m, b"[]")))
        for name, blob in ms.items():
            if name != CELLS:
                zf.writestr(name, blob)
        zf.writestr(zipfile.ZipInfo(CELLS), data, compress_type=zipfile.ZIP_BZIP2)
        zf.filelist[-1].file_size = 2  # the central directory lies about the size
    return p


_RAW = "@@raw@@"  # stands in a manifest / series for a token json.dumps would not write as given


def with_raw(obj: object, raw: str | None) -> bytes:
    """``obj`` as JSON, its ``_RAW`` string replaced by the text ``raw`` (NaN, -Infinity, 1e999 ...)."""
    text = json.dumps(obj)
    return (text if raw is None else text.replace(json.dumps(_RAW), raw)).encode()


def edit_row(field: str, value: object = None, raw: str | None = None):
    """A builder: the bundled matrix run's row ``field`` (``summary.K`` for a summary field, ``summary`` for the
    whole of it) set to ``value``, or to the literal JSON text ``raw``."""
    def build(m, ms, p):
        m = json.loads(json.dumps(m))
        row = m["runs"][0]["row"]
        where, key = (row["summary"], field[8:]) if field.startswith("summary.") else (row, field)
        where[key] = _RAW if raw is not None else value
        return write_zip(p, with_raw(m, raw), ms)
    return build


def edit_series(points: object = None, raw: str | None = None):
    """A builder: the matrix run's series.json replaced by ``points`` (with ``_RAW`` as the text ``raw``),
    declared with its right sha256 and size, so only its content is wrong."""
    def build(m, ms, p):
        m = json.loads(json.dumps(m))
        data = with_raw(points, raw)
        series = next(x for x in m["runs"][0]["members"] if x["role"] == "series")
        series.update({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
        return write_zip(p, m, {**ms, series["path"]: data})
    return build


def edit_raw(find: str, replace_with: str):
    """A builder: the manifest's text with ``find`` replaced by ``replace_with`` (one place)."""
    def build(m, ms, p):
        text = json.dumps(m)
        assert find in text
        return write_zip(p, text.replace(find, replace_with, 1).encode(), ms)
    return build


_SERIES = f"series of run {MATRIX} is malformed"
# Hostile values in every row field, the summary and the series (issue 45): each imported on the code before it,
# then broke Results (OverflowError on a date), the store (IntegrityError, OverflowError), `runs export`, a run
# view, `runs report` or a handout.
BAD_VALUES = [
    ("created-minus-infinity", edit_row("created", raw="-Infinity"), None, "-Infinity is not a JSON number"),
    ("created-infinity", edit_row("created", raw="Infinity"), None, "Infinity is not a JSON number"),
    ("created-nan", edit_row("created", raw="NaN"), None, "NaN is not a JSON number"),
    ("created-1e999", edit_row("created", raw="1e999"), None, "the number 1e999 is beyond a float"),
    ("created-text", edit_row("created", "yesterday"), None, "its created time is 'yesterday', not a finite"),
    ("created-null", edit_row("created", None), None, "its created time is None, not a finite number"),
    ("created-bool", edit_row("created", True), None, "its created time is True, not a finite number"),
    ("created-zero", edit_row("created", 0), None, "its created time 0 lies before 2000"),
    ("created-far-past", edit_row("created", -1e300), None, "its created time -1e+300 lies before 2000"),
    ("created-2-77", edit_row("created", 2**77), None, "its created time is 151115727451828646838272, not a"),
    ("started-text", edit_row("started", "soon"), None, "its started time is 'soon', not a finite number"),
    ("started-nan", edit_row("started", raw="NaN"), None, "NaN is not a JSON number"),
    ("finished-minus-infinity", edit_row("finished", raw="-Infinity"), None, "-Infinity is not a JSON number"),
    ("finished-far-future", edit_row("finished", 1e18), None, "its finished time lies in the future"),
    ("status-unknown", edit_row("status", "great"), None, "its status 'great' is not one of done"),
    ("status-running", edit_row("status", "running"), None, "its status 'running' is not one of done"),
    ("status-number", edit_row("status", 1), None, "its status 1 is not one of done"),
    ("label-number", edit_row("label", 12345), None, "its label 12345 is not a string of at most 1,000"),
    ("label-huge", edit_row("label", "x" * 5000), None, "is not a string of at most 1,000 characters"),
    ("error-number", edit_row("error", 42), None, "its error 42 is not null or a string"),
    ("kind-not-a-word", edit_row("kind", "Matrix; DROP"), None, "its kind 'Matrix; DROP' is not a run kind"),
    ("id-not-hex", edit_raw(MATRIX, "ZZZZ" + MATRIX[4:]), None, "bad or repeated id 'ZZZZ"),
    ("summary-text", edit_row("summary", "ninety"), None, "summary is 'ninety', not an object"),
    ("summary-accuracy-text", edit_row("summary.accuracy", "ninety"), None,
     "summary field 'accuracy' is 'ninety', not a finite number"),
    ("summary-accuracy-nan", edit_row("summary.accuracy", raw="NaN"), None, "NaN is not a JSON number"),
    ("summary-accuracy-null", edit_row("summary.accuracy", None), None,
     "summary field 'accuracy' is None, not a finite number"),
    ("summary-accuracy-bool", edit_row("summary.accuracy", True), None, "summary field 'accuracy' is True"),
    ("summary-loss-1e999", edit_row("summary.loss", raw="1e999"), None, "the number 1e999 is beyond a float"),
    ("summary-base-text", edit_row("summary.base", {"a": "high", "b": 0.5}), None,
     "summary field 'base'['a'] is 'high', not a finite number"),
    ("summary-base-lm-null", edit_row("summary.base", {"a": {"loss": None}}), None,
     "summary field 'base'['a']['loss'] is None, not a finite number"),
    ("summary-values-text", edit_row("summary.values", [[0.1, "x"]]), None,
     "summary field 'values'[0][1] is 'x', not a number or null"),
    ("summary-penalty-infinity", edit_row("summary.penalty", raw="[[Infinity]]"), None,
     "Infinity is not a JSON number"),
    ("summary-ci-text", edit_row("summary.values_ci", "wide"), None, "summary field 'values_ci' is 'wide'"),
    ("summary-seconds-text", edit_row("summary.seconds", "fast"), None,
     "summary field 'seconds' is 'fast', not a finite number or null"),
    ("summary-count-2-70", edit_row("summary.n_test", 2**70), None, "summary field 'n_test' is 1180591620717411303424"),
    ("summary-seed-mean-text", edit_row("summary.seeds", {"accuracy_mean": "x"}), None,
     "summary field 'seeds'['accuracy_mean'] is 'x'"),
    ("summary-dataset-number", edit_row("summary.dataset", 7), None,
     "summary field 'dataset' is 7, not a string of at most 4,096"),
    ("summary-penalty-base-null", edit_row("summary.penalty_base", None), None,
     "summary field 'penalty_base' is None, not a string"),
    ("summary-huge-int-literal", edit_row("summary.params", raw="1" * 5000), None, "malformed manifest (Exceeds"),
    ("series-infinity", edit_series({"loss": [[0, _RAW]]}, raw="Infinity"), None, "Infinity is not a JSON number"),
    ("series-nan", edit_series({"loss": [[0, _RAW]]}, raw="NaN"), None, "NaN is not a JSON number"),
    ("series-1e999", edit_series({"loss": [[0, _RAW]]}, raw="-1e999"), None, "the number -1e999 is beyond a float"),
    ("series-value-bool", edit_series({"loss": [[0, True]]}), None, "a value of 'loss' is True, not a finite"),
    ("series-step-2-77", edit_series({"loss": [[2**77, 1.0]]}), None,
     "a step of 'loss' is 151115727451828646838272, not a whole number in 0..2**53-1"),
    ("series-step-negative", edit_series({"loss": [[-1, 1.0]]}), None, "a step of 'loss' is -1, not a whole"),
    ("series-step-float", edit_series({"loss": [[1.5, 1.0]]}), None, "a step of 'loss' is 1.5, not a whole"),
    ("series-step-bool", edit_series({"loss": [[True, 1.0]]}), None, "a step of 'loss' is True, not a whole"),
    ("series-curve-number", edit_series({"loss": 5}), None, "curve 'loss' is 5, not a list of [step, value]"),
    ("series-point-short", edit_series({"loss": [[0]]}), None, "a point of 'loss' is [0], not [step, value]"),
    ("series-point-long", edit_series({"loss": [[0, 1.0, 2.0]]}), None, "a point of 'loss' is [0, 1.0, 2.0]"),
    ("series-name-huge", edit_series({"l" * 5000: [[0, 1.0]]}), None, "a curve name of 5,000 characters"),
    ("series-not-object", edit_series([[0, 1.0]]), None, f"{_SERIES} (not an object)"),
]


PLAIN = {"arch": "cnn", "dataset": "digits", "seed": 0, "optimizer": "sgd", "epochs": 20, "lr": None, "batch_size": 64,
         "momentum": 0.9, "weight_decay": None, "image_size": None, "arch_kwargs": {}, "relabel": None,
         "drop_class": None, "l1": 0.0, "l2": 0.0, "prune_every": 0, "prune_fraction": 0.0}  # cnn-digits-s0's
LOCAL = run_id_for("zoo", PLAIN)  # the target's own cnn-digits-s0 (made in it: see made_here)


def made_here(store: Store) -> None:
    """A plain zoo model trained in ``store`` (its row: no weights are read by an import)."""
    store.begin(LOCAL, "zoo", PLAIN, "cnn on digits, seed 0")
    store.finish(LOCAL, {"name": "cnn-digits-s0", "ref": "zoo:cnn-digits-s0", "accuracy": 0.9})


def zoo_runs(*edits: dict, status: str = "done"):
    """A builder: a bundle of zoo runs, one per ``edits`` (fields over cnn-digits-s0's spec), each id the hash
    of its spec (so only the spec is wrong), each summary naming it as a bundle's author chose."""
    def build(m, ms, p):
        template, runs, members = m["runs"][0], [], {}
        for edit in edits:
            spec = {**PLAIN, **edit}
            rid, series = run_id_for("zoo", spec), b"{}"
            seed = spec["seed"] if type(spec["seed"]) is int and 0 <= spec["seed"] < 10 else 0
            name = f"cnn-digits-s{seed}"
            row = {**template["row"], "id": rid, "kind": "zoo", "status": status, "label": f"forged {rid}",
                   "summary": {"name": name, "ref": f"zoo:{name}", "accuracy": 0.99}}
            runs.append({"id": rid, "row": row, "spec": spec, "members": [
                {"role": "series", "path": f"runs/{rid}/series.json", "bytes": len(series),
                 "sha256": hashlib.sha256(series).hexdigest()}]})  # fmt: skip
            members[f"runs/{rid}/series.json"] = series
        return write_zip(p, {**m, "runs": runs}, members)
    return build


_UNREAD = "its spec cannot be read by this StitchLab ("
_HELD = f"is named zoo:cnn-digits-s0, which run {LOCAL} already holds in"
# Zoo runs whose spec names no model, or names one the target already has (issue 45, item 1): each imported on
# the code before it, the first kind answering to no name (its summary's took a name over before that), the
# second kind to the name of a model made in the target.
BAD_NAMES = [
    ("zoo-seed-negative", zoo_runs({"seed": -1}), None, f"{_UNREAD}seed must be at least 0"),
    ("zoo-seed-2-70", zoo_runs({"seed": 2**70}), None, f"{_UNREAD}seed must be a whole number 0 .. 2147483647"),
    ("zoo-seed-float", zoo_runs({"seed": 1.5}), None, f"{_UNREAD}seed must be a whole number"),
    ("zoo-seed-text", zoo_runs({"seed": "3"}), None, f"{_UNREAD}seed must be a finite number (got '3')"),
    ("zoo-data-id-no-sha", zoo_runs({"dataset": "imagefolder:/data/pets", "data_id": {"path": "/data/pets"}}),
     None, f"{_UNREAD}data_id must be the files' identity"),
    ("zoo-data-id-bad-sha", zoo_runs({"dataset": "imagefolder:/data/pets",
                                      "data_id": {"path": "/data/pets", "sha256": "g" * 64}}),
     None, f"{_UNREAD}data_id must be the files' identity"),
    ("zoo-data-id-auto", zoo_runs({"dataset": "imagefolder:/data/pets", "data_id": "auto"}), None,
     f"{_UNREAD}a stored recipe's data_id is the identity its files had"),
    ("zoo-data-id-on-digits", zoo_runs({"data_id": {"path": "/x", "sha256": "0" * 64}}), None,
     f"{_UNREAD}data_id is the identity of files, and 'digits' is not read from files"),
    ("zoo-unknown-field", zoo_runs({"colour": "red"}), None, f"{_UNREAD}unknown ZooRecipe field(s) ['colour']"),
    ("zoo-arch-number", zoo_runs({"arch": 5}), None, f"{_UNREAD}arch must be a name such as cnn (got 5)"),
    ("zoo-dataset-number", zoo_runs({"dataset": 7}), None, f"{_UNREAD}dataset must be a name such as digits (got 7)"),
    ("zoo-optimizer-unknown", zoo_runs({"optimizer": "lion"}), None, f"{_UNREAD}unknown optimizer 'lion'"),
    ("zoo-failed-seed-2-70", zoo_runs({"seed": 2**70}, status="failed"), None, f"{_UNREAD}seed must be a whole"),
    ("zoo-name-held-augment", zoo_runs({"augment": "none"}), None, _HELD),
    ("zoo-name-held-data-id-null", zoo_runs({"data_id": None}), None, _HELD),
    ("zoo-name-held-keep-epochs", zoo_runs({"keep_epochs": []}), None, _HELD),
    ("zoo-name-held-second-run", zoo_runs({"seed": 1}, {"start": None}), None, _HELD),
    ("zoo-name-twice-in-bundle", zoo_runs({"seed": 1}, {"seed": 1, "augment": "none"}), None,
     "both take the name zoo:cnn-digits-s1; a name means one model"),
]


BAD = [  # (name, builder, Limits or None, what the one-line error says)
    ("dotdot", bad_escape, None, "escapes the store"),
    ("absolute", bad_absolute, None, "escapes the store"),
    ("drive-letter", bad_drive, None, "escapes the store"),
    ("backslash", bad_backslash, None, "escapes the store"),
    ("manifest-path", bad_manifest_path, None, "escapes the store"),
    ("symlink", bad_symlink, None, "is a symlink"),
    ("device", bad_device, None, "is a device or special file"),
    ("over-declared-size", bad_over_declared, None, "over its declared size of 10"),
    ("total-cap", bad_total_cap, Limits(total_bytes=100), "over the cap of 100"),
    ("zip-bomb-ratio", bad_ratio, None, "above the cap of 200"),
    ("sha256", bad_sha, None, "sha256 mismatch"),
    ("no-manifest", bad_no_manifest, None, "no manifest.json"),
    ("manifest-not-json", bad_manifest_json, None, "malformed manifest"),
    ("manifest-shape", bad_manifest_shape, None, "malformed manifest (no runs)"),
    ("unknown-schema", bad_schema, None, "bundle schema 99"),
    ("id-not-spec", bad_id, None, "does not match its kind and spec"),
    ("unlisted-member", bad_unlisted, None, "not listed in the manifest"),
    ("missing-member", bad_missing, None, "is missing"),
    ("manifest-nested", bad_nested_manifest, None, "malformed manifest"),
    ("series-malformed", bad_series, None, f"series of run {MATRIX} is malformed"),
    ("artifact-name", bad_artifact_name, None, "malformed manifest (member 'runs/"),
    ("truncated", bad_truncated, None, "not a zip file, or truncated"),
    ("not-zip", bad_not_zip, None, "not a zip file, or truncated"),
    ("empty", bad_empty, None, "the file is empty"),
    ("bzip2-bomb-lying-headers", bad_bzip2_lying, None, "is compressed with method 12"),
    ("duplicate-member", bad_duplicate, None, "a member appears twice"),
    *BAD_VALUES,
    *BAD_NAMES,
]


@pytest.mark.parametrize("name, build, limits, needle", BAD, ids=[b[0] for b in BAD])
def test_bad_bundle_refused_and_nothing_written(name, build, limits, needle, src, tmp_path, capsys):
    from stitchcore.cli.main import main

    manifest, members = good_parts(src, tmp_path)
    bad = build(manifest, members, tmp_path / f"{name}.zip")
    with Store(tmp_path / "target") as target:
        export_bundle(src, [STITCH], tmp_path / "one.zip")
        import_bundle(target, tmp_path / "one.zip")  # a target with a run in it
        made_here(target)  # and a model of its own, cnn-digits-s0
        before = snapshot(target)
        with pytest.raises(StoreError) as err:
            import_bundle(target, bad, **({"limits": limits} if limits else {}))
        assert needle in str(err.value) and "\n" not in str(err.value)
        assert snapshot(target) == before
        if limits is None:  # the CLI: exit 2, one `error: ...` line, nothing written
            assert main(["runs", "import", str(bad), "--store", str(target.root), "--quiet"]) == 2
            out, errtext = capsys.readouterr()
            assert out == "" and errtext.startswith("error: ") and errtext.count("\n") == 1 and needle in errtext
            assert snapshot(target) == before


def test_a_zoo_run_imported_again_is_a_skip_and_one_of_a_free_name_imports(src, tmp_path):
    """The name check refuses only another run holding the name: the same run again is skipped, a zoo run of a
    name no run holds is imported (and answers to it)."""
    from stitchcore.models.sources.zoo import find_zoo_run

    manifest, members = good_parts(src, tmp_path)
    with Store(tmp_path / "target") as target:
        made_here(target)
        mine = export_bundle(target, [LOCAL], tmp_path / "mine.zip").path
        assert import_bundle(target, mine).skipped == (LOCAL,)
        s1 = zoo_runs({"seed": 1})(manifest, members, tmp_path / "s1.zip")
        (rid,) = import_bundle(target, s1).imported
        assert import_bundle(target, s1).skipped == (rid,)
        assert find_zoo_run(target, "cnn-digits-s1").id == rid and find_zoo_run(target, "cnn-digits-s0").id == LOCAL


def test_good_parts_rebuilt_import(src, dst, tmp_path):
    """The table's builder itself makes importable zips: only the mutation is refused."""
    manifest, members = good_parts(src, tmp_path)
    assert import_bundle(dst, write_zip(tmp_path / "ok.zip", manifest, members)).imported == (MATRIX,)


# ----------------------------------------------------------------------------------------------- CLI


def test_cli_export_import_json(src, dst, tmp_path, capsys):
    from stitchcore.cli.main import main

    out_zip = tmp_path / "cli.zip"
    args = ["runs", "export", STITCH, "--with-models", "--out", str(out_zip), "--store", str(src.root), "--json"]
    assert main(args) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["runs"][0] == STITCH and set(obj["models"]) == set(ZOO_CNN) and obj["path"] == str(out_zip)
    assert main(["runs", "import", str(out_zip), "--store", str(dst.root), "--json"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.count("\n") == 1 and set(json.loads(stdout)["imported"]) == {STITCH, *ZOO_CNN}
    assert main(["runs", "import", str(out_zip), "--store", str(dst.root)]) == 0
    assert "imported 0 runs, skipped 3" in capsys.readouterr().out
    assert main(["runs", "export", "nope", "--out", str(tmp_path / "n.zip"), "--store", str(src.root)]) == 2
    assert capsys.readouterr().err.startswith("error: unknown run id 'nope'")
    assert main(["runs", "import", str(tmp_path / "n.zip"), "--store", str(dst.root)]) == 2
    assert "no bundle" in capsys.readouterr().err  # the CLI names a missing file before import_bundle does


# ----------------------------------------------------------------------------------- names and times


def _zoo_bundle(src: Store, tmp_path: Path, edit) -> Path:
    """A bundle of zoo model cnn-digits-s1 (its weights) with ``edit(row)`` applied to its manifest row."""
    path = export_bundle(src, [ZOO_CNN[1]], tmp_path / "zoo.zip").path
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        members = {n: zf.read(n) for n in zf.namelist() if n != "manifest.json"}
    edit(manifest["runs"][0]["row"])
    return write_zip(tmp_path / "edited.zip", manifest, members)


def test_a_bundle_cannot_rename_a_model_or_date_itself_in_the_future(src, tmp_path, capsys):
    from stitchcore.cli.main import main
    from stitchcore.models.sources import load_model

    s0 = "cnn-digits-s0-3a5c8f"  # the name another model of the store answers to

    def shadow(row):  # the summary claims s0's name and ref for s1's weights, "trained" in 2100
        row["summary"].update(name=s0, ref=f"zoo:{s0}")
        row["created"] = row["started"] = row["finished"] = 4102444800.0

    def future(row):
        row["created"] = time.time() + 86400

    with Store(tmp_path / "target") as target:
        export_bundle(src, [ZOO_CNN[0]], tmp_path / "s0.zip")
        import_bundle(target, tmp_path / "s0.zip")
        before = snapshot(target)
        weights = load_model(f"zoo:{s0}", store=target).model.state_dict()
        for edit, needle in ((shadow, f"its summary calls it '{s0}', but its spec makes it 'cnn-digits-s1-d927a0'"),
                             (future, "its created time lies in the future")):
            bad = _zoo_bundle(src, tmp_path, edit)
            with pytest.raises(StoreError, match=re.escape(needle)):
                import_bundle(target, bad)
            assert main(["runs", "import", str(bad), "--store", str(target.root), "--quiet"]) == 2
            assert needle in capsys.readouterr().err and snapshot(target) == before
        again = load_model(f"zoo:{s0}", store=target).model.state_dict()
        assert all(torch.equal(weights[k], again[k]) for k in weights)  # the name still means the same model


def test_an_imported_run_answers_only_to_the_name_its_spec_gives_it(src, tmp_path):
    """Even written past the bundle check (Store.import_runs), a summary's name never resolves for an imported
    run; a run made in the store answers to its summary's name too (older releases named some so)."""
    from stitchcore.models.sources.zoo import find_zoo_run, zoo_names

    rec = src.lookup(ZOO_CNN[1])
    forged = replace(rec, summary={**rec.summary, "name": "cnn-digits-s0-3a5c8f"})
    with Store(tmp_path / "t") as target:
        target.import_runs([(forged, {}, {})], source="forged.zip")
        stored = target.lookup(ZOO_CNN[1])
        assert stored.imported and zoo_names(stored) == {"cnn-digits-s1-d927a0"}
        assert find_zoo_run(target, "cnn-digits-s1-d927a0").id == ZOO_CNN[1]
        with pytest.raises(StitchError, match="zoo:cnn-digits-s0-3a5c8f is not in the store"):
            find_zoo_run(target, "cnn-digits-s0-3a5c8f")
    assert zoo_names(src.lookup(ZOO_CNN[0])) == {"cnn-digits-s0-3a5c8f"}  # made here: spec and summary agree


def test_an_infinite_point_exports_as_null(src, dst, tmp_path, capsys):
    """A curve that diverged to inf (SQLite keeps it) exported as null, as NaN is: `runs export` once raised
    ValueError (JSON has no infinity), and a bundle never carries one."""
    from stitchcore.cli.main import main

    src.log_metrics(MATRIX, 99, {"loss": math.inf, "other": -math.inf})
    assert src.series(MATRIX)["loss"][-1] == (99, math.inf)
    out = tmp_path / "inf.zip"
    assert main(["runs", "export", MATRIX, "--out", str(out), "--store", str(src.root), "--quiet"]) == 0
    assert import_bundle(dst, out).imported == (MATRIX,)
    assert math.isnan(dict(dst.series(MATRIX)["loss"])[99]) and math.isnan(dict(dst.series(MATRIX)["other"])[99])
