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

from stitchcore.errors import StitchError, StoreError
from stitchcore.store.bundle import Limits, export_bundle, import_bundle, read_manifest
from stitchcore.store.results import Store
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
]


@pytest.mark.parametrize("name, build, limits, needle", BAD, ids=[b[0] for b in BAD])
def test_bad_bundle_refused_and_nothing_written(name, build, limits, needle, src, tmp_path, capsys):
    from stitchcore.cli.main import main

    manifest, members = good_parts(src, tmp_path)
    bad = build(manifest, members, tmp_path / f"{name}.zip")
    with Store(tmp_path / "target") as target:
        export_bundle(src, [STITCH], tmp_path / "one.zip")
        import_bundle(target, tmp_path / "one.zip")  # a target with a run in it
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
    assert "no bundle file" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- names and times


def _zoo_bundle(src: Store, tmp_path: Path, edit) -> Path:
    """A bundle of zoo model cnn-digits-s1 (its weights) with ``edit(row)`` applied to its manifest row."""
    import stitchcore.experiments  # noqa: F401 - the zoo's namer (store.claims), as the CLI and the app have it

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
    import stitchcore.experiments  # noqa: F401
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
