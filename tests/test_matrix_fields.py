"""Issue 40 for the ``matrix`` kind: its fields are declared once (stitchcore.experiments.matrix.fields) and the
faces are generated from the declaration: a spec goes to a link and back, and to a command line and back, with the
same run id (today's defaults, a spec with every field changed, the v1 fixture's run stored by old code); what the
form offers builds specs; what a mode means is asked of the spec (MatrixSpec.unused / fixed), not of its name."""

from __future__ import annotations

import pytest

from stitchcore.cli._spec_args import spec_argv
from stitchcore.cli.main import build_parser
from stitchcore.cli.matrix import matrix_fields
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.matrix import MATRIX_PRESETS, MODES, MatrixSpec, preset_fields
from stitchcore.params import build_spec, declared, defaults, link_params, read_link, spec_fields
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store
from tests.test_specs import FIXTURE

KIND = "matrix"
BASE = {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"}
EVERY_FIELD = {  # every declared matrix field away from its default (the test below checks it stays so)
    **BASE, "senders": ("block1", "fc1"), "receivers": ("fc2",), "dataset": "digits|drop3", "mode": "trained",
    "adapter": {"kind": "lowrank", "norm": "none", "resample": "nearest", "init": "random", "rank": 8,
                "cls_token": "receiver", "rescale": "oneshot"},
    "objective": "task+0.5*match", "epochs": 2, "controls": True, "max_train": 500, "seeds": 3, "max_test": 200,
    "seed": 5, "optimizer": "sgd", "lr": 0.003, "weight_decay": 0.01, "batch_size": 32, "precision": "bf16",
    "noise_sender": False, "control_training": "task", "twin_seeds": "shared",
}  # fmt: skip


def _specs() -> dict[str, MatrixSpec]:
    return {
        "defaults": build_spec(KIND, dict(BASE)),
        "every field": build_spec(KIND, EVERY_FIELD),
        "controls": build_spec(KIND, {**BASE, "controls": True}),
        "proxy": build_spec(KIND, {**BASE, "mode": "proxy", "epochs": 7, "receivers": ("fc1", "fc2")}),
        **{f"preset {name}": build_spec(KIND, {**BASE, **MATRIX_PRESETS[name], "controls": True})
           for name in MATRIX_PRESETS},
    }  # fmt: skip


def _value(spec: object, name: str) -> object:
    for part in name.split("."):
        spec = getattr(spec, part)
    return spec


def _from_command_line(spec: MatrixSpec) -> MatrixSpec:
    """The spec the ``matrix`` verb makes of ``spec``'s command line (its own ``matrix_fields``; the cut names
    are canonical already, so no model is loaded to resolve them)."""
    args = build_parser().parse_args(["matrix", *spec_argv(KIND, spec)])
    return build_spec(KIND, matrix_fields(args))


def test_the_every_field_spec_changes_every_declared_field():
    spec, own = build_spec(KIND, EVERY_FIELD), defaults(KIND)
    for field in declared(KIND):
        assert _value(spec, field.name) != own.get(field.name, "<required>"), f"{field.name} is at its default"


def test_every_person_settable_field_is_declared():
    """Every MatrixSpec field a person sets is declared (its adapter's fields too); data_id is measured."""
    from dataclasses import fields

    from stitchcore.stitching.adapters import AdapterSpec

    names = {f.name for f in declared(KIND)}
    assert {f.name for f in fields(MatrixSpec)} - {"adapter", "data_id"} <= names
    assert {f"adapter.{f.name}" for f in fields(AdapterSpec)} <= names


@pytest.mark.parametrize("which", list(_specs()))
def test_spec_to_link_to_form_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    values, notes = read_link(KIND, link_params(KIND, spec))
    assert notes == []
    again = build_spec(KIND, spec_fields(KIND, values))
    assert run_id_for(KIND, again.to_dict()) == run_id_for(KIND, spec.to_dict())


@pytest.mark.parametrize("which", list(_specs()))
def test_spec_to_command_line_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    assert run_id_for(KIND, _from_command_line(spec).to_dict()) == run_id_for(KIND, spec.to_dict())


def test_a_default_matrix_says_only_its_models_and_fields_it_holds_are_left_out():
    """Without controls the spec holds their training, noise sender and twins' seeds whatever is given: a link
    and a command line leave them out rather than spell out values that change nothing."""
    spec = build_spec(KIND, dict(BASE))
    assert link_params(KIND, spec) == BASE
    assert spec_argv(KIND, spec) == ["--a", BASE["a"], "--b", BASE["b"]]
    trained = build_spec(KIND, {**BASE, **MATRIX_PRESETS["hernandez"], "controls": True})
    assert "control_training" not in link_params(KIND, trained)  # task-trained cells: controls made alike anyway


def test_flags_left_out_take_todays_defaults():
    """The command line's spec is today's (Spec.new), not a stored dict's legacy values."""
    args = build_parser().parse_args(["matrix", "--a", BASE["a"], "--b", BASE["b"], "--controls"])
    spec = build_spec(KIND, matrix_fields(args))
    assert spec == MatrixSpec(**BASE, controls=True) == MatrixSpec.new({**BASE, "controls": True})
    assert (spec.twin_seeds, spec.control_training, spec.noise_sender, spec.seed, spec.seeds) == (
        "distinct", "matched", True, 0, 1)  # fmt: skip


def test_every_flag_of_before_keeps_its_meaning():
    """The flags the hand-written parser had, each with a value: the same spec as the keyword arguments."""
    argv = ["--senders", "block1,fc1", "--receivers", "fc2", "--dataset", "digits", "--mode", "trained",
            "--adapter", "lowrank", "--norm", "none", "--resample", "nearest", "--init", "random", "--rank", "4",
            "--objective", "match", "--epochs", "2", "--controls", "--no-noise-sender", "--max-train", "300",
            "--max-test", "100", "--seed", "3", "--seeds", "2", "--precision", "bf16"]  # fmt: skip
    args = build_parser().parse_args(["matrix", "--a", BASE["a"], "--b", BASE["b"], *argv])
    assert (args.rerun, args.preset, args.recommend) == (False, None, None)  # the flags that are not fields
    spec = build_spec(KIND, matrix_fields(args))
    want = MatrixSpec(**BASE, senders=("block1", "fc1"), receivers=("fc2",), dataset="digits", mode="trained",
                      adapter={"kind": "lowrank", "norm": "none", "resample": "nearest", "init": "random", "rank": 4,
                               "rescale": "chained"},  # a flag left out: today's default
                      objective="match", epochs=2, controls=True, noise_sender=False, max_train=300, max_test=100,
                      seed=3, seeds=2, precision="bf16")  # fmt: skip
    assert run_id_for(KIND, spec.to_dict()) == run_id_for(KIND, want.to_dict())


def test_a_preset_and_the_flags_given_over_it():
    args = build_parser().parse_args(["matrix", "--a", BASE["a"], "--b", BASE["b"], "--preset", "hernandez",
                                      "--resample", "bilinear", "--epochs", "1"])  # fmt: skip
    spec = build_spec(KIND, matrix_fields(args))
    fields = preset_fields("hernandez")
    assert spec == MatrixSpec(**BASE, **{**fields, "adapter": {**fields["adapter"].to_dict(), "resample": "bilinear"},
                                          "epochs": 1})  # fmt: skip


def test_a_stored_run_of_old_code_goes_to_a_link_and_a_command_line_with_its_run_id(tmp_path):
    """The v1 fixture's matrix was stored before twin seeds, control training and the noise sender: it has no
    controls, so the spec holds those and its link names its models and cuts, and its one-shot rescale (new
    specs chain a gap of more than 2x)."""
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        rec = next(r for r in store.list_runs() if r.kind == KIND)
    spec = spec_from_record(rec)
    link = link_params(KIND, spec)
    assert link == {"a": spec.a, "b": spec.b, "senders": "block1,block2", "receivers": "block2,fc1",
                    "rescale": "oneshot"}
    values, notes = read_link(KIND, link)
    assert notes == [] and run_id_for(KIND, build_spec(KIND, spec_fields(KIND, values)).to_dict()) == rec.id
    assert run_id_for(KIND, _from_command_line(spec).to_dict()) == rec.id


def test_each_end_of_every_offered_range_and_each_choice_builds_a_spec():
    """What the form offers is what the spec takes, given the mode that uses it (an objective, a random start,
    several seeds train: mode trained) and the adapter kind that has it (a rank: lowrank)."""
    for field in declared(KIND):
        if field.role:
            continue
        offered = list(field.choices or field.suggestions or ()) or [field.low, field.high]
        if field.type is bool:
            offered = [True, False]
        for value in offered:
            fields = spec_fields(KIND, {field.key: value})
            if field.name in ("adapter.kind", "adapter.init", "objective", "seeds"):
                fields["mode"] = "trained"
            if field.name == "adapter.kind":
                fields["adapter"]["init"] = "random"  # not every kind has a closed-form fit
            if field.name == "adapter.rank" and value:
                fields["adapter"]["kind"] = "lowrank"
            build_spec(KIND, {**BASE, **fields})


@pytest.mark.parametrize("mode", MODES)
def test_what_a_mode_fixes_is_what_the_spec_refuses_otherwise(mode):
    """The page disables a field a mode does not use (MatrixSpec.unused) and gives the value the mode fixes
    (MatrixSpec.fixed): one rule, the spec's, which refuses any other value of a fixed field."""
    unused = MatrixSpec.unused(mode, controls=False)
    fixed = MatrixSpec.fixed(mode)
    assert set(fixed) <= unused
    MatrixSpec(**BASE, mode=mode, **fixed)
    other = {"objective": "match", "seeds": 2, "controls": True}
    for name in fixed:
        with pytest.raises(StitchError):
            MatrixSpec(**BASE, **{**fixed, "mode": mode, name: other[name]})
    for name in {"objective", "seeds", "controls"} - set(fixed):  # used: any offered value is taken
        MatrixSpec(**BASE, mode=mode, **{name: other[name]})
    for controls in (False, True):
        if controls and "controls" in fixed:
            continue
        spec = MatrixSpec(**BASE, mode=mode, controls=controls)
        assert set(spec.held_fields()) <= MatrixSpec.unused(mode, controls) | {"control_training"}
        assert (spec.trains, spec.scores) == (mode == "trained", mode != "proxy")
