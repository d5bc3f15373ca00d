"""A zoo model trained on files is named for them (issue 45, item 1): two image folders, two text files,
or one folder before and after an edit never share a name, a run or a stitch's cache entry; stored runs keep
their ids and names; a recipe whose files are not (or no longer) the ones it names is refused in one line.

Tiny synthetic folders (2 classes, 3 train and 2 test 8x8 PNGs each): a plain CNN recipe (20 epochs of one
step) trains in well under a second.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import stitchcore.experiments  # noqa: F401  (registers the zoo namer)
from stitchcore.cli.main import main
from stitchcore.data import imagefolder, images
from stitchcore.data.fingerprint import data_identity, fingerprint
from stitchcore.data.images import load_dataset
from stitchcore.errors import DataError, StitchError
from stitchcore.experiments import get_experiment, run_experiment, spec_from_record
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.zoo import ZooRecipe, zoo_name
from stitchcore.models.sources import load_model
from stitchcore.models.sources.zoo import find_zoo_run, zoo_names
from stitchcore.store.bundle import resolve_runs
from stitchcore.store.claims import spec_name
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"
SPEC_CLASSES: dict[str, Any] = {"stitch": StitchSpec, "matrix": MatrixSpec, "similarity": SimilaritySpec,
                                "sweep": SweepSpec, "assemble": AssembleSpec}  # fmt: skip


def write_folder(root: Path, colors: dict[str, tuple[int, int, int]]) -> Path:
    """``root/{train,test}/<class>/<j>.png``: 3 train and 2 test 8x8 images per class, each its own shade."""
    for split, n in (("train", 3), ("test", 2)):
        for cls, rgb in colors.items():
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            for j in range(n):
                shade = tuple((v + 25 * j) % 256 for v in rgb)
                Image.new("RGB", (8, 8), shade).save(root / split / cls / f"{j}.png")
    return root


def rows(store: Store) -> str:
    """A hash of the store's rows and of the files beside them (the database's own files aside)."""
    runs = sorted((r.id, r.status, json.dumps(r.summary, sort_keys=True), r.error)
                  for r in store.list_runs(limit=10_000))  # fmt: skip
    files = sorted((str(p.relative_to(store.root)), p.stat().st_size) for p in store.root.rglob("*")
                   if p.is_file() and ".sqlite" not in p.name)  # fmt: skip
    return hashlib.sha256(json.dumps([runs, files]).encode()).hexdigest()


def cli(argv: list[str], store: Store, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--store", str(store.root)])
    out, err = capsys.readouterr()
    return code, out, err


def train(dataset: str, store: Store, capsys, *extra: str) -> dict:
    code, out, err = cli(["zoo", "train", "--dataset", dataset, "--json", "--quiet", *extra], store, capsys)
    assert code in (0, None), err
    return json.loads(out)


@pytest.fixture()
def folders(tmp_path) -> dict[str, Path]:
    (tmp_path / "poems.txt").write_text("roses are red\n" * 20)
    return {"a": write_folder(tmp_path / "pets", {"cat": (200, 10, 10), "dog": (10, 200, 10)}),
            "b": write_folder(tmp_path / "cars", {"red": (10, 10, 200), "van": (200, 200, 10)}),
            "text": tmp_path / "poems.txt"}


# ---------------------------------------------------------------------------- names


def test_two_folders_never_share_a_name_and_a_stitch_on_a_is_no_cache_hit_for_b(folders, tmp_path, capsys):
    """Before: both plain recipes were ``cnn-imagefolder-s0``, and the stitch on A came back ``cached: true``
    for B's weights."""
    with Store(tmp_path / "store") as store:
        a = train(f"imagefolder:{folders['a']}?size=8", store, capsys)
        cuts = ["--cut-a", "fc1", "--cut-b", "fc1", "--epochs", "1", "--json", "--quiet"]
        code, out, err = cli(["stitch", "--a", a["ref"], "--b", a["ref"], *cuts], store, capsys)
        assert code in (0, None), err
        b = train(f"imagefolder:{folders['b']}?size=8", store, capsys)
        assert a["cached"] is False and b["cached"] is False and a["run_id"] != b["run_id"]
        assert re.fullmatch(r"cnn-imagefolder-pets-[0-9a-f]{6}-s0", a["name"]), a["name"]
        assert re.fullmatch(r"cnn-imagefolder-cars-[0-9a-f]{6}-s0", b["name"]), b["name"]
        code, out, err = cli(["stitch", "--a", b["ref"], "--b", b["ref"], *cuts], store, capsys)
        assert code in (0, None) and json.loads(out)["cached"] is False, err
        for made in (a, b):  # each name opens its own run
            assert load_model(made["ref"], store=store).meta["run_id"] == made["run_id"]
            assert find_zoo_run(store, made["name"]).summary["classes"] == made["classes"]


def test_a_changed_folder_gives_a_new_name_and_run_and_the_old_name_still_opens(folders, tmp_path, capsys):
    """The same path with other files is other data: a new recipe (named for them), trained on them as they
    are now (not on the copy this process loaded before), while the earlier model still opens by its name."""
    dataset = f"imagefolder:{folders['a']}?size=8"
    with Store(tmp_path / "store") as store:
        first = train(dataset, store, capsys)
        write_folder(folders["a"], {"fox": (10, 10, 10)})  # a third class
        second = train(dataset, store, capsys)
        assert second["cached"] is False and second["name"] != first["name"]
        assert second["name"].startswith("cnn-imagefolder-pets-")
        assert second["classes"] == ["cat", "dog", "fox"]  # read again, not the 2-class copy loaded before
        old = load_model(first["ref"], store=store)
        assert old.num_classes == 2 and old.meta["run_id"] == first["run_id"]
        assert train(dataset, store, capsys)["cached"] is True  # unchanged since: the same recipe and run


def test_a_size_preserving_edit_and_the_options_change_the_name(folders):
    """mtime is in the fingerprint: rewriting a file with the same size is still other data; the dataset's
    options (another size) are part of the name too."""
    dataset = f"imagefolder:{folders['a']}"
    before = ZooRecipe(dataset=dataset)
    png = folders["a"] / "train" / "cat" / "0.png"
    data, stat = png.read_bytes(), png.stat()
    png.write_bytes(data)  # the same bytes, a later time
    os.utime(png, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    after = ZooRecipe(dataset=dataset)
    assert before.short_name() != after.short_name() and before.data_id["path"] == str(folders["a"].resolve())
    for other in (f"{dataset}?size=16", f"{dataset}|drop1"):
        assert ZooRecipe(dataset=other, data_id=after.data_id).short_name() != after.short_name()


def test_two_text_files_never_share_a_name(tmp_path):
    """``zoo train --arch gpt --dataset file:PATH``: before, every text file gave ``gpt-file-s0-adamw``."""
    one, two = tmp_path / "poems.txt", tmp_path / "laws.txt"
    one.write_text("roses are red\n" * 20)
    two.write_text("thou shalt not\n" * 20)
    names = {ZooRecipe(arch="gpt", dataset=f"file:{p}", optimizer="adamw").short_name() for p in (one, two)}
    assert len(names) == 2
    assert all(re.fullmatch(r"gpt-file-(poems|laws)-[0-9a-f]{6}-s0-adamw", n) for n in names), names
    before = ZooRecipe(arch="gpt", dataset=f"file:{one}", optimizer="adamw")
    one.write_text("violets are blue\n" * 20)
    assert ZooRecipe(arch="gpt", dataset=f"file:{one}", optimizer="adamw").short_name() != before.short_name()


def test_a_char_gpt_on_a_text_file_trains_under_its_files_name(tmp_path, capsys):
    text = tmp_path / "tiny.txt"
    text.write_text("abcabcabd " * 60)
    with Store(tmp_path / "store") as store:
        out = train(f"file:{text}", store, capsys, "--arch", "gpt", "--epochs", "1", "--batch-size", "4",
                    "--arch-kwargs", '{"n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 8}')  # fmt: skip
        assert out["cached"] is False and out["name"].startswith("gpt-file-tiny-")
        assert find_zoo_run(store, out["name"]).id == out["run_id"]


def test_fingerprint_reads_no_image_and_survives_links_loops_and_odd_files(folders, tmp_path):
    root = folders["a"]
    (root / "train" / "cat" / "loop").symlink_to(root / "train")  # a link back up the tree
    (root / "train" / "dog" / "gone.png").symlink_to(tmp_path / "nowhere.png")  # a dangling link
    os.mkfifo(root / "train" / "dog" / "pipe.png")  # opened, it would block: only its name is read
    (root / "train" / "cat" / "0.png").chmod(0)  # unreadable: stat still works
    first = fingerprint("imagefolder", root)
    assert first == fingerprint("imagefolder", root) and len(first) == 64
    assert data_identity(f"imagefolder:{root}|drop1", f"imagefolder:{root}?size=8") == {
        "path": str(root.resolve()), "sha256": first}  # fmt: skip
    (root / "train" / "dog" / "pipe.png").unlink()
    assert fingerprint("imagefolder", root) != first


# ---------------------------------------------------------------------------- one cache, current files


def test_a_loaded_folder_is_never_served_stale_and_an_unchanged_one_is_not_read_again(folders, monkeypatch):
    """load_dataset (what a stitch, a matrix and the app read through) keyed its in-process copy by the name
    alone: files added, removed or edited after a first load were never seen by the process.  Now the copy
    is kept with the folder's fingerprint (stat only): changed files are read again, unchanged ones never."""
    opened = []
    real_open = imagefolder.open_image
    monkeypatch.setattr(imagefolder, "open_image", lambda p, name: opened.append(p) or real_open(p, name))
    name = f"imagefolder:{folders['a']}?size=8"
    first = load_dataset(name)
    assert first.classes == ("cat", "dog") and len(opened) == 10
    assert load_dataset(f"{name}|drop1") is not first and len(opened) == 10  # unchanged: the copy, no file read
    write_folder(folders["a"], {"fox": (10, 10, 10)})  # a class added
    assert load_dataset(name).classes == ("cat", "dog", "fox") and len(opened) == 25
    png = folders["a"] / "train" / "cat" / "0.png"
    Image.new("RGB", (8, 8), (0, 0, 255)).save(png)  # the same size on disk, other pixels, a later time
    os.utime(png, ns=(png.stat().st_atime_ns, png.stat().st_mtime_ns + 10**9))
    assert load_dataset(name).x_train[0, :, 0, 0].tolist() == [0, 0, 255]
    (folders["a"] / "test" / "fox" / "1.png").unlink()  # a file removed
    assert len(load_dataset(name).labels("test")) == 5


def test_files_changed_while_a_folder_is_read_are_refused_and_not_kept(folders, monkeypatch):
    name = f"imagefolder:{folders['a']}?size=8"
    real_load = images._load_imagefolder

    def load_while_written(*args, **kwargs):
        ds = real_load(*args, **kwargs)
        write_folder(folders["a"], {"fox": (10, 10, 10)})  # a writer adds a class meanwhile
        return ds

    monkeypatch.setattr(images, "_load_imagefolder", load_while_written)
    with pytest.raises(DataError, match=r"its files changed while they were read; wait until nothing writes to"):
        load_dataset(name)
    monkeypatch.setattr(images, "_load_imagefolder", real_load)
    assert load_dataset(name).classes == ("cat", "dog", "fox")  # nothing half-read was kept


# ---------------------------------------------------------------------------- stored runs keep their reading


def test_stored_runs_keep_their_ids_and_names(tmp_path):
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        zoo = store.list_runs(kind="zoo")
        assert len(zoo) == 4
        for rec in zoo:
            recipe = ZooRecipe.from_dict(rec.spec)
            assert recipe.data_id is None and recipe.to_dict() == rec.spec
            assert run_id_for("zoo", recipe.to_dict()) == rec.id
            assert zoo_names(rec) == {rec.summary["name"]} == {zoo_name(recipe, rec.id)}
    legacy = {**ZooRecipe().to_dict(), "dataset": "imagefolder:/data/pets?size=8"}  # as stored before data_id
    recipe = ZooRecipe.from_dict(legacy)
    assert recipe.to_dict() == legacy and "data_id" not in legacy
    assert spec_name("zoo", legacy, run_id_for("zoo", legacy)) == "cnn-imagefolder-s0"


def test_a_recipe_on_files_made_anew_measures_them_and_a_stored_one_never_does(folders):
    claimed = {"path": "/x", "sha256": "0" * 64}
    spec = ZooRecipe.new({"dataset": f"imagefolder:{folders['a']}", "data_id": claimed})
    assert spec.data_id == data_identity(f"imagefolder:{folders['a']}")  # measured, not taken as written
    stored = ZooRecipe.from_dict(spec.to_dict())
    assert stored == spec and stored.to_dict()["data_id"] == spec.data_id
    write_folder(folders["a"], {"fox": (1, 2, 3)})
    assert ZooRecipe.from_dict(spec.to_dict()).short_name() == spec.short_name()  # read as stored


# ---------------------------------------------------------------------------- a bundle cannot take a name


def test_an_imported_run_whose_spec_cannot_be_read_answers_to_no_name(trained_store, tmp_path):
    """Its summary's name was honoured when no name came from its spec (a seed of -1 or 2**70, a data_id of
    the wrong shape): a run imported later, newer, took ``cnn-digits-s0`` over."""
    src, _refs = trained_store
    local = find_zoo_run(src, "cnn-digits-s0")
    copy_store(src.root, tmp_path / "t")
    with Store(tmp_path / "t") as target:
        unreadable = ({"seed": -1}, {"seed": 2**70}, {"data_id": {"path": "/x", "sha256": "0" * 64}})
        for i, bad in enumerate(unreadable):
            spec = {**local.spec, **bad}
            forged = replace(local, id=run_id_for("zoo", spec), spec=spec, created=local.created + 100 + i)
            target.import_runs([(forged, {}, {})], source="forged.zip")
            assert target.lookup(forged.id).imported and zoo_names(target.lookup(forged.id)) == set()
        assert find_zoo_run(target, "cnn-digits-s0").id == local.id


def test_a_newer_import_never_takes_a_name_from_a_run_made_here(tmp_path):
    """Two folders' runs stored before data_id share ``cnn-imagefolder-s0``: a bundle's, imported later and
    dated after the local one, took the name over (newest first)."""
    specs = [{**ZooRecipe().to_dict(), "dataset": f"imagefolder:/data/{d}?size=8"} for d in ("pets", "cars")]
    ids = [run_id_for("zoo", spec) for spec in specs]
    with Store(tmp_path / "store") as store:
        store.begin(ids[0], "zoo", specs[0], "train cnn on pets")
        store.finish(ids[0], {"name": "cnn-imagefolder-s0", "ref": "zoo:cnn-imagefolder-s0"})
        local = store.lookup(ids[0])
        bundled = replace(local, id=ids[1], spec=specs[1], created=local.created + 60)
        store.import_runs([(bundled, {}, {})], source="cars.zip")
        assert zoo_names(store.lookup(ids[1])) == {"cnn-imagefolder-s0"}  # its spec does give it that name
        assert find_zoo_run(store, "cnn-imagefolder-s0").id == ids[0]
        # `runs export zoo:NAME` (and --with-models) bundles the model the name opens, not the newest import
        assert [r.id for r in resolve_runs(store, ["zoo:cnn-imagefolder-s0"])] == [ids[0]]


# ---------------------------------------------------------------------------- refused in one line

HUGE = [str(2**70), "9223372036854775808", str(2**31)]  # past MAX_SEED; 2**63 overflowed torch's int64
ZOO = ["zoo", "train"]


def bad_recipes(folders: dict[str, Path]) -> list:
    """(id, what: CLI argv | a stored spec's fields for ZooRecipe.from_dict | ("run", fields): that stored
    recipe run again, the one line's regex)."""
    a, text = f"imagefolder:{folders['a']}", f"file:{folders.get('text')}"
    sha = {"path": str(folders["a"]), "sha256": "0" * 64}
    return [
        *[(f"cli-seed-{s[:6]}", [*ZOO, "--seed", s], r"seed must be a whole number 0 \.\. 2147483647")
          for s in HUGE],
        ("cli-folder-nul", [*ZOO, "--dataset", "imagefolder:/tmp/a\x00b"],
         r"path '/tmp/a\\x00b' is not usable .*give the path of a folder of images"),
        ("cli-text-nul", [*ZOO, "--arch", "gpt", "--dataset", "file:/tmp/a\x00b.txt"],
         r"is not usable .*give the path of a text file"),
        ("spec-seed-huge", {"seed": 2**70}, r"seed must be a whole number"),
        ("spec-seed-float", {"seed": 1.5}, r"seed must be a whole number"),
        ("spec-seed-text", {"seed": "3"}, r"seed must be a finite number"),
        ("spec-seed-bool", {"seed": True}, r"seed must be a finite number \(got True\)"),
        ("spec-data-id-auto", {"dataset": a, "data_id": "auto"}, r"data_id is the identity its files had"),
        ("spec-data-id-list", {"dataset": a, "data_id": ["/x"]}, r"data_id must be the files' identity"),
        ("spec-data-id-no-sha", {"dataset": a, "data_id": {"path": "/x"}}, r"data_id must be the files'"),
        ("spec-data-id-bad-sha", {"dataset": a, "data_id": {**sha, "sha256": "g" * 64}}, r"64 hex digits"),
        ("spec-data-id-path-int", {"dataset": a, "data_id": {**sha, "path": 5}}, r"data_id must be the"),
        ("spec-data-id-extra", {"dataset": a, "data_id": {**sha, "x": 1}}, r"data_id must be the files'"),
        ("spec-data-id-short-sha", {"dataset": a, "data_id": {**sha, "sha256": "0" * 63}}, r"64 hex digits"),
        ("spec-data-id-upper-sha", {"dataset": a, "data_id": {**sha, "sha256": "A" * 64}}, r"64 hex digits"),
        ("spec-data-id-empty-path", {"dataset": a, "data_id": {**sha, "path": ""}}, r"data_id must be the"),
        ("spec-data-id-on-digits", {"data_id": sha}, r"'digits' is not read from files .*leave it out"),
        ("run-legacy-folder-recipe", ("run", {"dataset": a}),
         r"does not record its files' identity .*make the recipe again"),
        ("run-folder-changed", ("run", {"dataset": a, "data_id": sha}),
         r"not the ones this recipe was made for \(then .* 000000, now .*\): make the recipe again"),
        ("run-legacy-text-recipe", ("run", {"arch": "gpt", "dataset": text}),
         r"does not record its files' identity"),
        ("run-text-changed", ("run", {"arch": "gpt", "dataset": text, "data_id": sha}),
         r"the files of file:.*poems\.txt are not the ones this recipe was made for"),
    ]


BAD = [c[0] for c in bad_recipes({"a": Path("/x")})]


@pytest.mark.parametrize("name", BAD)
def test_a_bad_recipe_is_one_line_naming_the_fix_and_stores_nothing(folders, tmp_path, capsys, name):
    _, what, fix = next(c for c in bad_recipes(folders) if c[0] == name)
    with Store(tmp_path / "store") as store:
        before = rows(store)
        if isinstance(what, list):
            code, out, err = cli(what, store, capsys)
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, err
            assert lines[0].startswith("error: ") and re.search(fix, lines[0]), lines[0]
        elif isinstance(what, tuple):  # a stored recipe run again: refused before its row is written
            with pytest.raises(DataError, match=fix) as caught:
                run_experiment("zoo", ZooRecipe.from_dict({**ZooRecipe().to_dict(), **what[1]}), store)
            assert "\n" not in str(caught.value)
        else:
            with pytest.raises(StitchError, match=fix) as caught:
                ZooRecipe.from_dict({**ZooRecipe().to_dict(), **what})
            assert "\n" not in str(caught.value)
        assert rows(store) == before


def test_the_table_is_large():
    assert len(BAD) == len(set(BAD)) >= 23


def test_a_lesson_step_whose_student_picks_another_folder_is_named_for_that_folder(folders):
    """A zoo step opening ``dataset``: the student's folder is measured (its own data_id and name), not refused
    for the lesson's folder's identity and never trained under the lesson folder's name."""
    from stitchcore.lessons import parse_lesson, step_run

    a, b = f"imagefolder:{folders['a']}", f"imagefolder:{folders['b']}"
    lesson = parse_lesson({"format": 1, "name": "folders", "title": "Folders", "summary": "",
                           "steps": [{"title": "Train", "text": "", "kind": "zoo",
                                      "spec": {"dataset": a, "epochs": 1, "image_size": 8},
                                      "open": {"dataset": {"choices": [a, b]}}}]})  # fmt: skip
    own, picked = step_run(lesson.steps[0]), step_run(lesson.steps[0], {"dataset": b})
    assert own.spec.data_id["path"] == str(folders["a"].resolve())
    assert picked.spec.data_id["path"] == str(folders["b"].resolve()) and picked.spec.dataset == b
    assert picked.run_id != own.run_id and picked.spec.short_name() != own.spec.short_name()
    stitch = parse_lesson({"format": 1, "name": "folders", "title": "Folders", "summary": "",
                           "steps": [{"title": "Stitch", "text": "", "kind": "stitch",
                                      "spec": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block2",
                                               "cut_b": "block2", "dataset": a},
                                      "open": {"dataset": {"choices": [a, b]}}}]}).steps[0]  # fmt: skip
    mine = step_run(stitch, {"dataset": b}).spec
    assert mine.data_id["path"] == str(folders["b"].resolve()) and step_run(stitch).spec.data_id["path"] == str(
        folders["a"].resolve())


# ---------------------------------------------------------------------------- every kind on a folder (data_id)
# The same flaw for every kind whose spec names a dataset: a stitch, matrix, similarity, sweep or assemble on
# ``imagefolder:PATH`` kept its run id when the folder's files changed, so the store answered ``cached: true``
# with numbers measured on other images.

KINDS = ("stitch", "matrix", "similarity", "sweep", "assemble")


def made(kind: str, **fields) -> Any:
    """A ``kind`` spec being made (its constructor: the files measured), on two made-up zoo refs."""
    cuts = {"cut_a": "fc1", "cut_b": "fc1"} if kind == "stitch" else {}
    return SPEC_CLASSES[kind](a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", **cuts, **fields)


def touch(folder: Path) -> None:
    """Rewrite one image with the same bytes (the same size), a second later: other files by their identity."""
    png = folder / "train" / "cat" / "0.png"
    data, st = png.read_bytes(), png.stat()
    png.write_bytes(data)
    os.utime(png, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_a_stitch_on_a_changed_folder_is_a_new_run_and_the_old_run_still_opens(folders, tmp_path, capsys):
    """Before: the same stitch command after a class image was added came back ``cached: true`` (the run id
    named only ``imagefolder:PATH``), its numbers measured on the folder as it was."""
    dataset = f"imagefolder:{folders['a']}?size=8"
    with Store(tmp_path / "store") as store:
        model = train(dataset, store, capsys)
        argv = ["stitch", "--a", model["ref"], "--b", model["ref"], "--cut-a", "fc1", "--cut-b", "fc1",
                "--dataset", dataset, "--epochs", "1", "--json", "--quiet"]  # fmt: skip
        code, out, err = cli(argv, store, capsys)
        assert code in (0, None), err
        first = json.loads(out)
        Image.new("RGB", (8, 8), (90, 0, 0)).save(folders["a"] / "train" / "cat" / "9.png")  # one more cat
        code, out, err = cli(argv, store, capsys)
        assert code in (0, None), err
        second = json.loads(out)
        assert second["cached"] is False and second["run_id"] != first["run_id"]
        touch(folders["a"])  # a size-preserving edit: other files again
        code, out, err = cli(argv, store, capsys)
        third = json.loads(out)
        assert third["cached"] is False and third["run_id"] not in (first["run_id"], second["run_id"]), err
        code, out, err = cli(argv, store, capsys)
        assert json.loads(out)["cached"] is True and json.loads(out)["run_id"] == third["run_id"]  # unchanged
        old = store.lookup(first["run_id"])  # the earlier run opens, read as stored (never measured again)
        spec = spec_from_record(old)
        assert old.status == "done" and run_id_for("stitch", spec.to_dict()) == first["run_id"]
        assert spec.data_id == old.spec["data_id"] != data_identity(dataset)
        assert spec.data_id["path"] == str(folders["a"].resolve())
        code, out, err = cli(["runs", "show", first["run_id"]], store, capsys)
        assert code in (0, None) and first["run_id"] in out, err


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_on_a_folder_measures_it_and_on_digits_keeps_its_run_id(folders, kind):
    """A spec on built-in data has no data_id and the dict (run id) it always had; one on a folder measures
    it, so another folder, or the same one edited, is another run id; a stored one is read as stored."""
    digits = made(kind, dataset="digits")
    legacy = {k: v for k, v in digits.all_fields().items() if k != "data_id"}
    assert digits.data_id is None and digits.to_dict() == SPEC_CLASSES[kind].from_dict(legacy).to_dict()
    assert "data_id" not in digits.to_dict() and "data_id" not in made(kind).to_dict()  # dataset=None too
    assert SPEC_CLASSES[kind].new({"a": digits.a, "b": digits.b, **({"cut_a": "fc1", "cut_b": "fc1"}
                                  if kind == "stitch" else {})}).data_id is None  # fmt: skip
    a = f"imagefolder:{folders['a']}"
    before = made(kind, dataset=a)
    assert before.data_id == data_identity(a) and before.to_dict()["data_id"] == before.data_id
    assert made(kind, dataset=f"imagefolder:{folders['b']}").to_dict() != before.to_dict()
    touch(folders["a"])
    after = made(kind, dataset=a)
    assert run_id_for(kind, after.to_dict()) != run_id_for(kind, before.to_dict())
    stored = SPEC_CLASSES[kind].from_dict(before.to_dict())  # read as stored: the identity it was made with
    assert stored == before and run_id_for(kind, stored.to_dict()) == run_id_for(kind, before.to_dict())
    news = SPEC_CLASSES[kind].new({**before.all_fields(), "data_id": {"path": "/x", "sha256": "0" * 64}})
    assert news.data_id == after.data_id  # a spec written by hand: measured, never taken as written


def test_a_sweep_trained_on_a_folder_names_its_training_files_too(folders):
    """``train_data`` on a folder (the evaluation data built in) is read from disk as well."""
    spec = made("sweep", dataset="digits", train_data=f"imagefolder:{folders['a']}")
    assert spec.data_id == data_identity(f"imagefolder:{folders['a']}")
    touch(folders["a"])
    assert made("sweep", dataset="digits", train_data=f"imagefolder:{folders['a']}").to_dict() != spec.to_dict()


def test_stored_specs_of_every_kind_keep_their_ids(tmp_path):
    """The fixture store's runs of every kind read back to the dicts (run ids) they were stored under."""
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        seen = set()
        for rec in store.list_runs(limit=10_000):
            if rec.kind in KINDS:
                spec = spec_from_record(rec)
                assert spec.data_id is None and run_id_for(rec.kind, spec.to_dict()) == rec.id
                seen.add(rec.kind)
    assert seen, "the fixture store holds runs of these kinds"


def bad_specs(folders: dict[str, Path]) -> list:
    """(id, kind, stored fields | ("run", stored fields), the one line's regex) for every kind on files."""
    a = f"imagefolder:{folders['a']}"
    sha = {"path": str(folders["a"]), "sha256": "0" * 64}
    rows = []
    for kind in KINDS:
        rows += [
            (f"{kind}-data-id-auto", kind, {"dataset": a, "data_id": "auto"}, r"data_id is the identity its files had"),
            (f"{kind}-data-id-list", kind, {"dataset": a, "data_id": ["/x"]}, r"data_id must be the files' identity"),
            (f"{kind}-data-id-bad-sha", kind, {"dataset": a, "data_id": {**sha, "sha256": "g" * 64}}, r"64 hex"),
            (f"{kind}-data-id-on-digits", kind, {"dataset": "digits", "data_id": sha},
             r"'digits' is not read from files .*leave it out"),
            (f"{kind}-run-legacy-folder", kind, ("run", {"dataset": a}),
             r"does not record its files' identity .*run the same command \(or the app's page\) again"),
            (f"{kind}-run-folder-changed", kind, ("run", {"dataset": a, "data_id": sha}),
             (rf"the files of {re.escape(a)} are not the ones this run was made for \(then .* 000000, now .*\): "
              r"run the same command")),
        ]  # fmt: skip
    return rows


BAD_SPECS = [c[0] for c in bad_specs({"a": Path("/x")})]
assert len(BAD_SPECS) == len(set(BAD_SPECS)) == 30  # 6 rows for each of the 5 kinds


@pytest.mark.parametrize("name", BAD_SPECS)
def test_a_bad_stored_spec_on_files_is_one_line_naming_the_fix_and_stores_nothing(folders, tmp_path, name):
    """A stored spec is read as it says (never measured here); one whose files are not (or no longer) the ones
    it names is refused before its row is written: made again, it is another run named for them."""
    _, kind, what, fix = next(c for c in bad_specs(folders) if c[0] == name)
    base = made(kind, dataset="digits").to_dict()
    with Store(tmp_path / "store") as store:
        before = rows(store)
        if isinstance(what, tuple):
            spec = get_experiment(kind).from_dict({**base, **what[1]})
            with pytest.raises(DataError, match=fix) as caught:
                run_experiment(kind, spec, store)
        else:
            with pytest.raises(StitchError, match=fix) as caught:
                get_experiment(kind).from_dict({**base, **what})
        assert "\n" not in str(caught.value)
        assert rows(store) == before
