"""Issue 40 for the sweep kind: its fields are declared once (stitchcore.experiments.sweep.fields) and its faces are
generated from the declaration: a spec goes to a link and back, and to a command line and back, with the same run
id (the v1 fixture store's sweep, made by old code, too); today's flag names keep their meaning; the ranges and
choices a form would offer build specs; a lesson's control reads a sweep field by its declaration."""

from __future__ import annotations

from dataclasses import fields

import pytest

from stitchcore.cli._spec_args import spec_argv, spec_values
from stitchcore.cli.main import build_parser
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.params import build_spec, declared, defaults, link_params, read_link, spec_fields
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store
from tests.test_specs import FIXTURE

BASE = {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"}
EVERY_FIELD = {  # every declared sweep field away from its default (the test below checks it stays so)
    **BASE, "positions": ["block1", "fc1"], "metrics": ["accuracy", "class_acc:3,5", "confusion:3->8"],
    "dataset": "digits", "train_data": "digits|drop3",
    "adapter": {"kind": "lowrank", "init": "lstsq", "norm": "none", "resample": "nearest", "rank": 8,
                "cls_token": "receiver", "rescale": "chained"},
    "epochs": 3, "lr": 0.003, "seed": 5, "control": False, "control_seeds": 3, "noise_control": False,
    "simplicity": False, "sharpness_eps": 0.05, "sharpness_draws": 2, "max_train": 500, "max_test": 200,
    "optimizer": "sgd", "weight_decay": 0.01, "batch_size": 32, "twin_seeds": "shared",
    "simplicity_adapter": False, "simplicity_report": False, "objective": "task+0.5*final",
}  # fmt: skip
# the control on and the simplicity measures on, with the rules before issue 25 (with them off the spec sets these)
OLD_RULES = {**BASE, "twin_seeds": "shared", "simplicity_adapter": False, "simplicity_report": False}


def _specs() -> dict[str, SweepSpec]:
    return {"defaults": build_spec("sweep", dict(BASE)), "every field": build_spec("sweep", EVERY_FIELD),
            "old rules": build_spec("sweep", OLD_RULES)}  # fmt: skip


def _value(spec: object, name: str) -> object:
    for part in name.split("."):
        spec = getattr(spec, part)
    return spec


def _command_line(argv: list[str]) -> SweepSpec:
    return build_spec("sweep", spec_values(build_parser().parse_args(["sweep", *argv]), "sweep"))


def _id(spec: SweepSpec) -> str:
    return run_id_for("sweep", spec.to_dict())


def test_the_every_field_spec_changes_every_declared_field():
    spec, own = build_spec("sweep", EVERY_FIELD), defaults("sweep")
    for field in declared("sweep"):
        assert field.name not in own or _value(spec, field.name) != own[field.name], f"{field.name}: change it"
    spec = build_spec("sweep", OLD_RULES)
    assert (spec.twin_seeds, spec.simplicity_adapter, spec.simplicity_report) == ("shared", False, False)


def test_every_person_settable_field_of_the_spec_is_declared():
    names = {f.name.partition(".")[0] for f in declared("sweep")}
    assert {f.name for f in fields(SweepSpec)} - names == {"data_id"}  # measured from the files, not set by hand
    assert {f.name for f in declared("sweep") if f.name.startswith("adapter.")} == {
        f"adapter.{f.name}" for f in fields(AdapterSpec)}


@pytest.mark.parametrize("which", ["defaults", "every field", "old rules"])
def test_spec_to_link_to_form_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    values, notes = read_link("sweep", link_params("sweep", spec))
    assert notes == []
    assert _id(build_spec("sweep", spec_fields("sweep", values))) == _id(spec)


@pytest.mark.parametrize("which", ["defaults", "every field", "old rules"])
def test_spec_to_command_line_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    assert _id(_command_line(spec_argv("sweep", spec))) == _id(spec)


def test_a_list_is_written_comma_separated_and_a_class_set_stays_one_metric():
    spec = build_spec("sweep", EVERY_FIELD)
    link = link_params("sweep", spec)
    assert link["positions"] == "block1,fc1" and link["metrics"] == "accuracy,class_acc:3,5,confusion:3->8"
    assert spec.metrics == ("accuracy", "class_acc:3,5", "confusion:3->8")
    values, notes = read_link("sweep", {"metrics": "accuracy,nope", "positions": ""})
    assert values["metrics"] == ("accuracy",) and len(notes) == 1  # the form's own, and a note that says why
    assert notes[0].startswith("metrics='accuracy,nope': unknown trait metric 'nope'") and notes[0].endswith("using 'accuracy'")
    assert build_spec("sweep", {**BASE, **spec_fields("sweep", values)}).positions is None  # empty: every cut


def test_todays_flag_names_keep_their_meaning_and_flags_left_out_take_todays_defaults():
    """The flags the hand-written parser had (--eps, --draws, --adapter, --init, --no-control ...) make the spec
    that parser made; a command line of --a and --b alone makes today's default sweep."""
    argv = ["--a", BASE["a"], "--b", BASE["b"], "--positions", "block1, fc1", "--metrics", "accuracy,class_acc:3",
            "--dataset", "digits", "--train-data", "digits|drop3", "--adapter", "linear_relu", "--init", "lstsq",
            "--epochs", "3", "--lr", "0.05", "--seed", "4", "--no-control", "--control-seeds", "3",
            "--no-noise-control", "--no-simplicity", "--eps", "0.05", "--draws", "2", "--max-train", "200",
            "--max-test", "100"]  # fmt: skip
    by_hand = SweepSpec(a=BASE["a"], b=BASE["b"], positions=("block1", "fc1"), metrics=("accuracy", "class_acc:3"),
                        dataset="digits", train_data="digits|drop3",
                        adapter=AdapterSpec(kind="linear_relu", init="lstsq"), epochs=3, lr=0.05, seed=4,
                        control=False, control_seeds=3, noise_control=False, simplicity=False, sharpness_eps=0.05,
                        sharpness_draws=2, max_train=200, max_test=100)  # fmt: skip
    assert _id(_command_line(argv)) == _id(by_hand)
    assert _id(_command_line(["--a", BASE["a"], "--b", BASE["b"]])) == _id(SweepSpec(BASE["a"], BASE["b"]))
    args = build_parser().parse_args(["sweep", "--sharpness-eps", "0.2", "--sharpness-draws", "7"])
    assert (args.sharpness_eps, args.sharpness_draws) == (0.2, 7)  # the declared names, beside the old ones


def test_a_stored_sweep_of_old_code_goes_to_a_link_and_a_command_line_with_its_run_id(tmp_path):
    """The v1 fixture's sweep was stored before the noise sender and the rules of issue 25: its link and its
    command line say so and make that very run again."""
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        rec = next(r for r in store.list_runs() if r.kind == "sweep")
    spec = spec_from_record(rec)
    link = link_params("sweep", spec)
    assert link.get("noise_control") == "false" and link.get("positions") == "block1,fc1"
    values, notes = read_link("sweep", link)
    assert notes == []
    assert _id(build_spec("sweep", spec_fields("sweep", values))) == rec.id
    assert _id(_command_line(spec_argv("sweep", spec))) == rec.id


def test_each_end_of_every_offered_range_and_each_choice_builds_a_spec():
    for field in declared("sweep"):
        if field.role or field.type is tuple:  # models, data and lists: the test above gives them
            continue
        offered = ([True, False] if field.type is bool
                   else list(field.choices or field.suggestions or ()) or [field.low, field.high])  # fmt: skip
        for value in offered:
            given = spec_fields("sweep", {field.key: value})
            if field.name == "adapter.rank" and value:
                given["adapter"]["kind"] = "lowrank"
            if field.name == "adapter.init" and value in ("lstsq", "procrustes", "identity"):
                given["adapter"]["kind"] = "linear"
            build_spec("sweep", {**BASE, **given})


def test_a_lesson_control_reads_a_sweep_field_by_its_declaration():
    """A link's "false" for an open bool of a sweep step is false (the declaration's type), not the text."""
    from stitchcore.lessons.lesson import parse_lesson
    from stitchcore.lessons.values import student_values

    step = parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "Sweep", "text": "", "kind": "sweep",
                         "spec": {**BASE, "epochs": 2}, "open": {"control": {"choices": [True, False]},
                                                                 "adapter.init": {"choices": ["random", "lstsq"]}}}]}).step(1)  # fmt: skip
    got = student_values(step, {"control": "false", "adapter.init": "lstsq"})
    assert got.changed == {"control": False, "adapter.init": "lstsq"} and got.notes == ()
