"""Issue 42: a plain ``imagefolder:PATH`` in a new spec of a pretrained pair (stitch, matrix, similarity, sweep,
assemble) is read per batch at each model's own transform (``?full``), never squashed; the squash stays as an
explicit ``?size=N``; a stored spec's plain folder keeps its reading (squashed to 32x32), and its link and
command line say so; a zoo recipe trains at the folder's load size as before; a lesson's folder choices and a
student's pick read as the step's own value does."""

from __future__ import annotations

import json
from typing import Any

import pytest

import stitchcore.experiments  # noqa: F401 - registers the kinds
from stitchcore.cli.main import main
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.lessons import parse_lesson, step_run
from stitchcore.params import link_params, read_link
from stitchcore.store.results import Store
from tests.test_zoo_folder_names import SPEC_CLASSES, write_folder

KINDS = tuple(SPEC_CLASSES)


@pytest.fixture()
def pets(tmp_path):
    return write_folder(tmp_path / "pets", {"cat": (200, 10, 10), "dog": (10, 200, 10)})


def _made(kind: str, **fields: Any) -> Any:
    cuts = {"cut_a": "fc1", "cut_b": "fc1"} if kind == "stitch" else {}
    return SPEC_CLASSES[kind](a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", **cuts, **fields)


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_spec_streams_a_plain_folder_and_a_stored_one_keeps_its_squash(kind, pets):
    plain = f"imagefolder:{pets}"
    new = _made(kind, dataset=plain)
    assert new.dataset == f"{plain}?full"  # read per batch at the models' own transform
    assert _made(kind, dataset=f"{plain}?size=32").dataset == f"{plain}?size=32"  # the squash, said
    assert _made(kind, dataset=f"{plain}|drop1").dataset == f"{plain}?full|drop1"
    stored = SPEC_CLASSES[kind].from_dict({**new.to_dict(), "dataset": plain})  # written before issue 42
    assert stored.dataset == plain
    if kind in ("stitch", "matrix", "assemble"):  # a link of the stored run says the squash it computed
        link = link_params(kind, stored)
        assert link["dataset"] == f"{plain}?size=32"
        assert read_link(kind, link)[0]["dataset"] == f"{plain}?size=32"
        assert link_params(kind, new)["dataset"] == f"{plain}?full"


def test_a_zoo_recipe_trains_at_the_folders_load_size(pets):
    assert ZooRecipe(dataset=f"imagefolder:{pets}").dataset == f"imagefolder:{pets}"


def test_the_cli_stitches_a_plain_folder_streamed(pets, tmp_path, capsys):
    with Store(tmp_path / "store") as store:
        code = main(["zoo", "train", "--dataset", f"imagefolder:{pets}?size=8", "--epochs", "1", "--json", "--quiet",
                     "--store", str(store.root)])  # fmt: skip
        ref = json.loads(capsys.readouterr().out)["ref"]
        code = main(["stitch", "--a", ref, "--b", ref, "--cut-a", "fc1", "--cut-b", "fc1", "--dataset",
                     f"imagefolder:{pets}", "--epochs", "1", "--json", "--quiet", "--store", str(store.root)])
        out = json.loads(capsys.readouterr().out)
        assert code in (0, None)
        rec = store.lookup(out["run_id"])
    assert rec.spec["dataset"] == f"imagefolder:{pets}?full" and rec.summary["n_test"] == 4
    assert 0.0 <= rec.summary["accuracy"] <= 1.0


def test_a_lessons_folder_choices_and_a_students_pick_read_as_the_steps_own(pets, tmp_path):
    cars = write_folder(tmp_path / "cars", {"red": (10, 10, 200), "van": (200, 200, 10)})
    a, b = f"imagefolder:{pets}", f"imagefolder:{cars}"
    step = parse_lesson({"format": 1, "name": "folders", "title": "Folders", "summary": "",
                         "steps": [{"title": "Stitch", "text": "", "kind": "stitch",
                                    "spec": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block2",
                                             "cut_b": "block2", "dataset": a},
                                    "open": {"dataset": {"choices": [a, b]}}}]}).steps[0]  # fmt: skip
    assert step.open[0].choices == (f"{a}?full", f"{b}?full")
    assert step_run(step).spec.dataset == f"{a}?full"
    assert step_run(step, {"dataset": b}).spec.dataset == f"{b}?full"  # the student's pick, as the choices read
