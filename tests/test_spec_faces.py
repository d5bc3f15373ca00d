"""Issue 40: a kind's fields are declared once (stitchcore.params) and every face is generated from the
declaration: a spec goes to a link and back, and to a command line and back, with the same run id; a stored
run's spec (the v1 fixture store, made by old code) does too; the page's ranges and choices build specs."""

from __future__ import annotations

import pytest

from stitchcore.cli._spec_args import spec_argv, spec_values
from stitchcore.cli.main import build_parser
from stitchcore.experiments import spec_from_record
from stitchcore.params import build_spec, declared, defaults, hold, link_params, read_link, spec_fields
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store
from tests.test_specs import FIXTURE

BASE = {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block2", "cut_b": "block2"}
EVERY_FIELD = {  # every declared stitch field away from its default (the test below checks it stays so)
    **BASE, "adapter": {"kind": "lowrank", "norm": "none", "resample": "nearest", "init": "random", "rank": 8,
                        "cls_token": "receiver", "rescale": "oneshot"},
    "objective": "task+0.5*kd", "optimizer": "sgd", "lr": 0.003, "epochs": 7, "batch_size": 32, "seed": 5,
    "max_train": 500, "max_test": 200, "head": "a", "head_cut": "fc1", "precision": "bf16", "val_fraction": 0.2,
    "split_seed": 3, "keep": "best", "seeds": 3, "noise_control": False, "weight_decay": 0.01,
    "kd_temperature": 4.0, "dataset": "digits|drop3",
}  # fmt: skip


def _specs() -> dict[str, object]:
    return {"defaults": build_spec("stitch", dict(BASE)), "every field": build_spec("stitch", EVERY_FIELD)}


def _stored(tmp_path) -> object:
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        rec = next(r for r in store.list_runs() if r.kind == "stitch")
    return rec


def test_the_every_field_spec_changes_every_declared_field():
    spec, own = build_spec("stitch", EVERY_FIELD), defaults("stitch")
    for field in declared("stitch"):
        value = spec
        for part in field.name.split("."):
            value = getattr(value, part)
        assert field.name not in own or value != own[field.name], f"{field.name} is at its default: change it"


@pytest.mark.parametrize("which", ["defaults", "every field"])
def test_spec_to_link_to_form_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    values, notes = read_link("stitch", link_params("stitch", spec))
    assert notes == []
    again = build_spec("stitch", spec_fields("stitch", values))
    assert run_id_for("stitch", again.to_dict()) == run_id_for("stitch", spec.to_dict())


@pytest.mark.parametrize("which", ["defaults", "every field"])
def test_spec_to_command_line_to_spec_keeps_the_run_id(which):
    spec = _specs()[which]
    args = build_parser().parse_args(["stitch", *spec_argv("stitch", spec)])
    again = build_spec("stitch", spec_values(args, "stitch"))
    assert run_id_for("stitch", again.to_dict()) == run_id_for("stitch", spec.to_dict())


def test_a_stored_run_of_old_code_goes_to_a_link_and_a_command_line_with_its_run_id(tmp_path):
    """The v1 fixture's stitch was stored before validation splits and the noise sender: its link and its
    command line say so (val_fraction=0.0, noise_control off) and make that very run again."""
    rec = _stored(tmp_path)
    spec = spec_from_record(rec)
    link = link_params("stitch", spec)
    assert link.get("val_fraction") == "0.0" and link.get("noise_control") == "false"
    values, _ = read_link("stitch", link)
    assert run_id_for("stitch", build_spec("stitch", spec_fields("stitch", values)).to_dict()) == rec.id
    args = build_parser().parse_args(["stitch", *spec_argv("stitch", spec)])
    assert run_id_for("stitch", build_spec("stitch", spec_values(args, "stitch")).to_dict()) == rec.id


def test_each_end_of_every_offered_range_and_each_choice_builds_a_spec():
    """What the form offers is what the spec takes: no widget value the spec refuses (except combinations the
    spec refuses by their own rule, said on the page: an lstsq start of a kind it cannot fit)."""
    for field in declared("stitch"):
        if field.role:
            continue
        offered = list(field.choices or field.suggestions or ()) or [field.low, field.high]
        if field.type is bool:
            offered = [True, False]
        for value in offered:
            fields = spec_fields("stitch", {field.key: value})
            if field.name == "adapter.kind":
                fields["adapter"]["init"] = "random"  # not every kind has a closed-form start
            if field.name == "adapter.rank" and value:
                fields["adapter"]["kind"] = "lowrank"
            if field.key == "keep":
                fields["val_fraction"] = 0.1
            if field.key == "head" and value == "a":
                fields["head_cut"] = "fc1"
            build_spec("stitch", {**BASE, **fields})


def test_a_value_is_held_by_one_rule_on_the_page_and_in_a_lesson():
    """The page's link and a lesson's control read a value by the same rule (stitchcore.params.hold); the
    lesson's range is the declaration narrowed."""
    from stitchcore.lessons.lesson import parse_lesson
    from stitchcore.lessons.values import student_values

    epochs = next(f for f in declared("stitch") if f.key == "epochs")
    assert hold(epochs, "7.6").value == 8 and hold(epochs, "-1").value == 0 and hold(epochs, "1e9").value == 500
    step = parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "Stitch", "text": "", "kind": "stitch",
                         "spec": {**BASE, "epochs": 2}, "open": {"epochs": {"min": 0, "max": 5}}}]}).step(1)  # fmt: skip
    assert student_values(step, {"epochs": "7.6"}).values["epochs"] == 5
    assert student_values(step, {"epochs": "3.4"}).values["epochs"] == 3


ZOO_EVERY_FIELD = dict(arch="mlp", dataset="digits|subset500s0", seed=3, optimizer="adamw", epochs=5, lr=0.001,
                       batch_size=32, momentum=0.8, weight_decay=0.01, image_size=16, arch_kwargs={"width": 32},
                       relabel=(3, 8), drop_class=5, l1=1e-4, l2=1e-4, prune_every=2, prune_fraction=0.2,
                       augment="crop-flip", start="zoo:mlp-digits-s0", keep_epochs=(0, 2), finetune_layer="fc2",
                       finetune_epochs=3, finetune_data="digits|relabel3to8", finetune_lr=0.01)  # fmt: skip


def test_every_zoo_field_is_a_flag_and_a_recipe_goes_to_a_command_line_and_back():
    """``zoo train``'s flags are the recipe's declared fields: a recipe with every field changed (and the
    defaults, and the v1 fixture's recipe, stored by old code) gives its command line, which makes it again."""
    recipe = build_spec("zoo", ZOO_EVERY_FIELD)
    own = defaults("zoo")
    unchanged = [f.name for f in declared("zoo") if getattr(recipe, f.name) == own[f.name]]
    assert unchanged == ["tokenizer"], "change every field (an image recipe has no tokenizer: the GPT's below)"
    gpt = build_spec("zoo", {"arch": "gpt", "dataset": "pydoc", "tokenizer": "bpe:512"})
    for spec in (recipe, build_spec("zoo", {}), gpt):
        args = build_parser().parse_args(["zoo", "train", *spec_argv("zoo", spec)])
        again = build_spec("zoo", spec_values(args, "zoo"))
        assert run_id_for("zoo", again.to_dict()) == run_id_for("zoo", spec.to_dict())


def test_the_fixtures_zoo_recipe_goes_to_a_command_line_with_its_run_id(tmp_path):
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        rec = next(r for r in store.list_runs() if r.kind == "zoo")
    args = build_parser().parse_args(["zoo", "train", *spec_argv("zoo", spec_from_record(rec))])
    assert run_id_for("zoo", build_spec("zoo", spec_values(args, "zoo")).to_dict()) == rec.id


ASSEMBLE_EVERY_FIELD = dict(a="zoo:cnn-digits-s0", b="zoo:vit-digits-s0", senders=("block1", "block2"),
                            receivers=("blocks.1",), kinds=("linear", "bottleneck"), norms=("none", "both"),
                            resamples=("bilinear",), rescale="oneshot", cls_token="receiver",
                            finetune_baseline=True, epochs=3, lr=0.005, dataset="digits|subset500s0", max_train=300,
                            max_test=100, seed=4, optimizer="sgd", weight_decay=0.01, batch_size=32,
                            finetune_epochs=2, finetune_lr=1e-3)  # fmt: skip


def test_every_assemble_field_is_a_flag_and_an_assembly_goes_to_a_command_line_and_back():
    spec = build_spec("assemble", ASSEMBLE_EVERY_FIELD)
    own = defaults("assemble")
    assert all(getattr(spec, f.name) != own[f.name] for f in declared("assemble") if f.name in own)
    for one in (spec, build_spec("assemble", {"a": "zoo:cnn-digits-s0", "b": "zoo:vit-digits-s0"})):
        args = build_parser().parse_args(["assemble", *spec_argv("assemble", one)])
        again = build_spec("assemble", spec_values(args, "assemble"))
        assert run_id_for("assemble", again.to_dict()) == run_id_for("assemble", one.to_dict())
        values, notes = read_link("assemble", link_params("assemble", one))
        assert notes == [] and run_id_for("assemble", build_spec("assemble", spec_fields("assemble", values))
                                          .to_dict()) == run_id_for("assemble", one.to_dict())  # fmt: skip


SIMILARITY_EVERY_FIELD = dict(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", senders=("block1",), receivers=("fc1",),
                              dataset="digits|subset500s0", measure="rsa", token_mode="tokens", split="train",
                              max_samples=300, batch_size=128, baseline=False, seed=3, null_permutations=5,
                              random_null=False, random_null_seeds=7)  # fmt: skip


def test_every_similarity_field_is_a_flag_and_a_run_goes_to_a_command_line_and_back():
    spec, own = build_spec("similarity", SIMILARITY_EVERY_FIELD), defaults("similarity")
    assert all(getattr(spec, f.name) != own[f.name] for f in declared("similarity") if f.name in own)
    for one in (spec, build_spec("similarity", {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"})):
        args = build_parser().parse_args(["similarity", *spec_argv("similarity", one)])
        again = build_spec("similarity", spec_values(args, "similarity"))
        assert run_id_for("similarity", again.to_dict()) == run_id_for("similarity", one.to_dict())


def test_the_merge_verbs_training_flags_are_the_lm_declaration_and_left_out_ones_take_todays_defaults():
    """``merge`` says which LM kind a command line makes in its own flags; the adapter's training and the
    scoring flags are generated from the lmstitch declaration (--weight-decay new), and those left out are the
    spec's defaults."""
    from stitchcore.cli.lm import _specs
    from stitchcore.experiments.lm import LMStitchSpec

    base = ["merge", "--a", "zoo:gpt-x", "--b", "zoo:gpt-y", "--split", "2", "--mode", "stitch"]
    kind, spec = _specs(build_parser().parse_args(base), None)
    assert kind == "lmstitch" and spec == LMStitchSpec(a="zoo:gpt-x", b="zoo:gpt-y", cut_a=2)
    kind, spec = _specs(build_parser().parse_args([*base, "--steps", "7", "--weight-decay", "0.01", "--until",
                                                   "steps", "--seed", "3"]), None)  # fmt: skip
    assert (spec.steps, spec.weight_decay, spec.until, spec.seed) == (7, 0.01, "steps", 3)


def test_a_list_field_with_items_holds_each_item_and_its_form_makes_todays_assembly():
    """Assemble's kinds, norms and resamplings offer fixed items (a multiselect): a link's item outside them
    is left out with a note, none left takes the form's own; the form at its defaults (lists, as multiselects
    give them) makes the spec the Assemble page made before its form was generated (the same run id)."""
    from stitchcore.experiments.assemble import AssembleSpec
    from stitchcore.params import declared_field, form_defaults
    from ui.spec_form import spec_from_form

    kinds = declared_field("assemble", "kinds")
    assert hold(kinds, ["linear", "bottleneck"]).value == ("linear", "bottleneck") and not hold(kinds, "linear").note
    held = hold(kinds, "linear,identity", who="adapters=")
    assert held.value == ("linear",) and "'identity', not one the form offers" in held.note
    assert hold(kinds, "nope", own=("linear",)).value == ("linear",) and hold(kinds, "", own=("x",)).note
    assert hold(kinds, "linear,linear").value == ("linear",) and "twice" in hold(kinds, "linear,linear").note
    values, notes = read_link("assemble", {"adapters": "nope", "resample": "no_downsample"})
    assert values == {"adapters": AssembleSpec.__dataclass_fields__["kinds"].default, "resample": ("no_downsample",)}
    assert len(notes) == 1 and notes[0].startswith("adapters='nope' names none the form offers")
    parts = dict(a="zoo:cnn-digits-s0", b="zoo:vit-digits-s0", senders=("block1", "block2"), receivers=("blocks.1",))
    own = form_defaults("assemble")
    form = {f.key: list(own[f.key]) if f.items else own[f.key] for f in declared("assemble") if not f.role}
    before = AssembleSpec(**parts, kinds=("linear", "linear_relu", "conv3x3_relu", "bottleneck"), norms=("both",),
                          resamples=("bilinear", "strided"), cls_token="adapter", epochs=10, rescale="chained",
                          finetune_baseline=False, max_train=None, dataset=None)  # the page's call before issue 40
    made = spec_from_form("assemble", form, **parts, dataset=None)
    assert made == before and run_id_for("assemble", made.to_dict()) == run_id_for("assemble", before.to_dict())
