"""What a lesson's page says of a computed run: each ``{{name}}`` as the number (with its interval), two runs side by
side, open controls named in words, the editor's first range for a value of 0, distinguishing step titles, and no
training-curve chart for a run that never trained.

The summaries are the shipped lessons' own (tests/fixtures/lesson_summaries.json, keys as the runs store them), so
the numbers are read from what the kinds really write.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from stitchcore import params
from stitchcore.experiments import get_experiment, list_experiments
from stitchcore.experiments.field_words import field_words, known_fields
from stitchcore.lessons import (
    add_run,
    compare_runs,
    get_lesson,
    new_lesson,
    parse_lesson,
    run_numbers,
    shipped_lessons,
    step_numbers,
    student_values,
)
from stitchcore.lessons.editing import (
    choice_values,
    choices_text,
    control_words,
    default_choices,
    default_range,
    openable_fields,
)
from stitchcore.lessons.export import step_words
from stitchcore.lessons.numbers import READERS
from stitchcore.measures.meaning import meaning
from stitchcore.plots.runs import has_training_curve
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import RunRecord
from tests.conftest import ROOT

SUMMARIES = json.loads((ROOT / "tests" / "fixtures" / "lesson_summaries.json").read_text())


def _rec(kind: str, summary: dict, spec: dict | None = None, status: str = "done", label: str = "x") -> RunRecord:
    return RunRecord("0" * 16, kind, spec or {}, status, summary, None, 0.0, None, None, label)


def _step_summary(lesson: str, number: int) -> tuple[str, dict]:
    entry = SUMMARIES[lesson][number - 1]
    return entry["kind"], entry["summary"]


# ------------------------------------------------------------------------------------------------ {{name}}


@pytest.mark.parametrize("lesson", [lesson.name for lesson in shipped_lessons()])
def test_every_number_a_shipped_step_names_is_its_runs_number(lesson):
    for step in get_lesson(lesson).steps:
        kind, summary = _step_summary(lesson, step.number)
        assert kind == step.kind
        numbers = step_numbers(kind, summary)
        for name in step.meanings:
            assert name in numbers, (lesson, step.number, name, numbers)
            assert f"**{meaning(name).title} ({numbers[name]})**" in step.markdown(numbers)
            assert f"**{meaning(name).title}**" in step.markdown()  # not computed yet: the name alone
        assert "{{" not in step.markdown(numbers)


def test_numbers_are_written_as_every_page_writes_them_with_their_intervals():
    stitch = step_numbers(*_step_summary("two-seeds", 2))
    assert (stitch["accuracy"], stitch["penalty"]) == ("96.9% [95.1–98.2%]", "+1.1 pts [−0.2 to +2.7 pts]")
    per_class = step_numbers("stitch", {"per_class": [1.0, 0.934783], "per_class_ci": [[1.0, 1.0], [0.8478, 1.0]]})
    assert per_class["class_acc:1"] == "93.5% [84.8–100.0%]"  # {{class_acc:1}}: one class's accuracy
    assert step_numbers(*_step_summary("two-seeds", 1))["accuracy"] == "97.1%"  # a zoo run stores no interval
    merge = step_numbers(*_step_summary("heads-matter", 3))
    assert merge["loss_penalty"] == "+13.8 % [+12.7 to +15.1 %]"  # stored −0.138: 13.8% above A's loss
    assert merge["loss"] == "2.460 [2.326–2.581]"
    assert step_numbers(*_step_summary("heads-matter", 1))["loss"] == "2.161"  # a GPT's held-out loss
    assert step_numbers("zoo", {}) == {} and step_numbers("no-such-kind", {"accuracy": 0.5}) == {}
    assert run_numbers(_rec("stitch", {"accuracy": 0.9}, status="running")) == {} and run_numbers(None) == {}


def test_a_kind_with_many_values_gives_their_range_and_where():
    sweep = step_numbers(*_step_summary("two-seeds", 3))
    assert sweep["penalty"] == "+0.9 to +2.2 pts over the 5 cuts"
    trait = step_numbers(*_step_summary("where-a-trait-lives", 2))
    assert trait["confusion"] == trait["confusion:3->8"] == "0.0–100.0% over the 5 cuts"
    assert trait["class_acc:3"].endswith("over the 5 cuts")
    cka = step_numbers(*_step_summary("similar-is-not-the-same", 1))
    assert cka["cka-linear"] == "0.62 to 0.94 over the 25 layer pairs"
    assert cka["calibrated"].endswith(" null sds over the 25 layer pairs")
    matrix = step_numbers(*_step_summary("similar-is-not-the-same", 3))
    assert matrix["accuracy"] == "61.8–97.8% over the 19 cells"  # 6 of 25 pairs cannot be joined
    assert {"penalty", "fit-r2", "fit-cka"} <= set(matrix)
    # its closed-form cells had task-trained controls (issue 25): no debiased number mixes the two (issue 39)
    assert "debiased" not in matrix
    depth = step_numbers(*_step_summary("lmdepth", 1))
    assert depth["loss_penalty"].endswith("over the 8 joins of 4 curves")
    assert step_numbers("sweep", {"positions": ["fc1"], "stitched": {"accuracy": [0.9]},
                                  "reference": {"b": {"metrics": {"accuracy": 0.95}}}})["penalty"] == "+5.0 pts"


def test_every_registered_kind_has_a_reader():
    assert sorted(READERS) == list_experiments()


def test_the_handout_shows_a_computed_steps_numbers():
    step = get_lesson("two-seeds").step(2)
    numbers = run_numbers(_rec("stitch", _step_summary("two-seeds", 2)[1]))
    words = step_words(step, numbers)
    assert "**Stitching penalty (+1.1 pts [−0.2 to +2.7 pts])**" in words
    assert "*Stitching penalty: base accuracy − stitched accuracy" in words  # what it means, after the text
    assert "**Stitching penalty**" in step_words(step)


# ------------------------------------------------------------------------------------------ two runs


def test_two_stitches_side_by_side_with_intervals():
    own = _rec("stitch", _step_summary("two-seeds", 2)[1])
    mine = _rec("stitch", _step_summary("stitch-0-epochs", 1)[1])
    rows = compare_runs(own, mine)
    assert rows[0] == ("Stitched accuracy", "96.9% [95.1–98.2%]", "89.3% [86.4–92.0%]")
    assert ("Penalty (B − stitched)", "+1.1 pts [−0.2 to +2.7 pts]", "+8.7 pts [+6.0 to +11.6 pts]") in rows
    assert rows[-1][0] == "Time"


def test_a_sweep_compares_the_penalty_and_each_trait_at_every_cut():
    own = _rec("sweep", _step_summary("where-a-trait-lives", 2)[1])
    fewer = copy.deepcopy(own.summary)  # a variant that reached only its first three cuts
    for key in ("accuracy", "class_acc:3", "confusion:3->8"):
        fewer["stitched"][key] = fewer["stitched"][key][:3]
        fewer["stitched_ci"][key] = fewer["stitched_ci"][key][:3]
    rows = {label: (a, b) for label, a, b in compare_runs(own, _rec("sweep", fewer))}
    cuts = own.summary["positions"]
    assert [label for label in rows if label.startswith("Penalty at ")] == [f"Penalty at {c}" for c in cuts]
    assert rows["Penalty at block1"] == ("−0.2 pts [−1.6 to +1.1 pts]",) * 2
    assert rows["Penalty at fc2"][1] == ""  # never reached by the variant
    assert rows["3 predicted as 8 at fc1"][0] == "93.5% [87.0–100.0%]"
    assert rows["Model B"][0] == "97.1% [95.6–98.5%]"
    assert all(b != "…" and "..." not in a + b for a, b in rows.values())  # whole values, never cut short


def test_runs_of_other_kinds_compare_too():
    for lesson, number in (("similar-is-not-the-same", 1), ("similar-is-not-the-same", 3), ("heads-matter", 5),
                           ("lmdepth", 1), ("heads-matter", 1)):  # fmt: skip
        kind, summary = _step_summary(lesson, number)
        rows = compare_runs(_rec(kind, summary), _rec(kind, summary))
        assert rows and all(a == b != "" for _, a, b in rows), (lesson, number, rows)
    merge_a, merge_b = (_rec("merge", _step_summary("heads-matter", n)[1]) for n in (3, 4))
    rows = {label: (a, b) for label, a, b in compare_runs(merge_a, merge_b)}
    assert rows["Loss merged"] == ("2.460 [2.326–2.581]", "3.869 [3.782–3.956]")
    assert rows["Loss penalty (base A)"][1] == "" and rows["Loss penalty (base B)"][0] == ""
    assert list(rows)[-1] == "Time"


# ---------------------------------------------------------------------------------------- field words

OPENABLE_KINDS = ("stitch", "sweep", "matrix", "similarity", "merge", "lmstitch", "lmdepth", "zoo")


def _fields(kind: str) -> list[str]:
    """Every field of a kind's spec, the adapter's dotted (``adapter.init``)."""
    out = []
    for f in dataclasses.fields(get_experiment(kind).from_dict.__self__):
        out += [f"adapter.{g.name}" for g in dataclasses.fields(AdapterSpec)] if f.name == "adapter" else [f.name]
    return out


@pytest.mark.parametrize("kind", OPENABLE_KINDS)
def test_every_field_a_lesson_can_open_has_a_label_and_a_help_line(kind):
    for field in _fields(kind):
        assert field in known_fields(kind), (kind, field)
        words = field_words(kind, field)
        assert words.label and words.label != field and words.help, (kind, field, words)


def test_a_control_without_label_or_help_takes_its_fields_and_notes_say_it():
    data = {"name": "demo", "title": "Demo", "models": {"A": {"seed": 0}, "B": {"seed": 1}}, "steps": [
        {"title": "Stitch", "text": "", "kind": "stitch",
         "spec": {"a": "@A", "b": "@B", "cut_a": "block2", "cut_b": "block2", "epochs": 2},
         "open": {"epochs": {"min": 0, "max": 5}, "keep": {"choices": ["last", "best"], "label": "Which adapter"},
                  "split_seed": {"min": 0, "max": 3}, "adapter.init": {"choices": ["lstsq", "random"]}}}]}  # fmt: skip
    step = parse_lesson(data).step(1)
    assert [c.label for c in step.open] == ["Adapter training epochs", "Which adapter", "Split seed", "Adapter start"]
    assert step.control("epochs").help.startswith("passes over the training images; 0 keeps")
    assert step.control("keep").help == field_words("stitch", "keep").help  # a label alone keeps the field's help
    assert parse_lesson(data).to_dict() == {**data, "format": 1, "summary": ""}  # the defaults are not written in
    notes = student_values(step, {"epochs": "50", "adapter.init": "magic", "lr": "1"}).notes
    assert notes == ("Adapter training epochs 50 is outside 0 to 5: using 5",
                     "Adapter start 'magic' is not one this step offers (lstsq, random): using 'lstsq'",
                     "lr is not open in this step: ignored")  # fmt: skip
    assert field_words("zoo", "epochs").label == "Training epochs" != field_words("stitch", "epochs").label


def test_the_editor_keeps_only_the_labels_and_help_the_teacher_gave():
    assert control_words("stitch", "epochs", {}, "Adapter training epochs", field_words("stitch", "epochs").help) == {}
    assert control_words("stitch", "epochs", {}, "Epochs", "") == {"label": "Epochs"}
    assert control_words("merge", "head", {"label": "Whose head"}, "Whose head", "") == {"label": "Whose head"}


# --------------------------------------------------------------------------------------------- the editor


@pytest.mark.parametrize(("kind", "field", "value", "expected"), [
    ("stitch", "epochs", 0, (0, 10)),  # a closed-form start: 0 to the default 10 epochs
    ("zoo", "epochs", 0, (0, 20)),
    ("lmstitch", "steps", 0, (0, 2000)),
    ("stitch", "seed", 0, (0, 10)),  # default 0: 0 to 10 for a whole number
    ("lmstitch", "weight_decay", 0.0, (0, 1.0)),  # default 0.0: 0 to 1
    ("stitch", "val_fraction", 0.0, (0, 0.1)),
    ("stitch", "epochs", 5, (0, 10)),
    ("stitch", "epochs", 1, (0, 2)),
    ("stitch", "lr", 0.01, (1e-05, 0.11)),  # held in the declared 1e-05 to 1: a learning rate of 0 is refused
    ("stitch", "epochs", 400, (0, 500)),  # held in the declared 0 to 500 epochs (the form's)
    ("stitch", "adapter.rank", 0, (0, 10)),  # a nested field: its declared default (None) says nothing
    ("zoo", "momentum", -0.5, (-1.0, 0)),
])  # fmt: skip
def test_a_number_opened_in_the_editor_is_offered_a_range_that_holds_more_than_its_value(kind, field, value, expected):
    low, high = default_range(kind, field, value)
    assert (low, high) == pytest.approx(expected) and low <= value <= high and low < high


def _one_step(kind: str, spec: dict) -> object:
    return parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "T", "text": "", "kind": kind,
                         "spec": spec}]}).step(1)  # fmt: skip


def test_the_editor_opens_what_a_kinds_declaration_says_and_guesses_the_rest(monkeypatch):
    """Issue 40: where the kind declares a field, its declaration decides (nested adapter fields open too, a
    list does not, a number the step leaves empty is choices); a kind that declares nothing keeps the guess."""
    models = {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"}
    sweep = openable_fields(_one_step("sweep", {**models, "positions": ["block1", "fc1"]}))
    assert sweep["epochs"] == sweep["sharpness_draws"] == "range"
    assert sweep["adapter.init"] == sweep["adapter.kind"] == sweep["control"] == sweep["twin_seeds"] == "choices"
    assert sweep["max_train"] == sweep["adapter.rank"] == "choices"  # None: all images, a quarter of the channels
    assert "positions" not in sweep and "metrics" not in sweep and "adapter" not in sweep
    step = _one_step("sweep", {**models, "epochs": 3})
    monkeypatch.delitem(params._DECLARED, "sweep")  # a kind that declares nothing: top-level values, guessed
    guessed = openable_fields(step)
    assert guessed["epochs"] == "range" and guessed["control"] == "choices" and "max_train" not in guessed
    assert not any("." in f for f in guessed)


def test_the_editor_first_offers_the_declared_choices_the_step_takes(monkeypatch):
    stitch = _one_step("stitch", {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block1",
                                  "cut_b": "block1", "adapter": {"kind": "conv3x3_relu", "init": "random"}})  # fmt: skip
    assert default_choices(stitch, "adapter.init") == ["random", "identity"]  # no least-squares fit of a conv
    assert default_choices(stitch, "keep") == ["last", "best"] and default_choices(stitch, "seed") == [0]
    assert default_choices(stitch, "noise_control") == [True, False]
    monkeypatch.delitem(params._DECLARED, "stitch")
    assert default_choices(stitch, "adapter.init") == ["random"]  # undeclared: the step's own value alone
    for values in ([True, False], [None, 500], ["lstsq", "random"], [0, 1.5]):
        assert choice_values(choices_text(values)) == values  # what the text box shows reads back the same


def _stitch_run(epochs: int, label: str = "zoo:cnn-digits-s0[block2] -> zoo:cnn-digits-s1[block2] (linear, lstsq)",
                cut: str = "block2") -> RunRecord:  # fmt: skip
    spec = {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": cut, "cut_b": cut, "epochs": epochs}
    return _rec("stitch", {}, spec=spec, label=label)


def test_steps_of_one_kind_differing_in_one_field_say_which():
    draft = add_run(new_lesson("demo", "Demo"), _stitch_run(5))
    base = draft["steps"][0]["title"]
    assert base == "zoo:cnn-digits-s0[block2] -> zoo:cnn-digits-s1[block2] (linear, lstsq)"  # alone: the run's label
    draft = add_run(draft, _stitch_run(0))
    assert [s["title"] for s in draft["steps"]] == [f"{base} (epochs 5)", f"{base} (epochs 0)"]
    draft["steps"][0]["title"] = "Trained"  # the teacher's own title stays
    draft = add_run(draft, _stitch_run(3))
    assert [s["title"] for s in draft["steps"]] == ["Trained", f"{base} (epochs 0)", f"{base} (epochs 3)"]
    other = add_run(draft, _stitch_run(3, label="A[block1] -> B[block1]", cut="block1"))
    assert other["steps"][-1]["title"] == "A[block1] -> B[block1]"  # another default title: not a sibling
    zoo = add_run(draft, _rec("zoo", {}, spec={"arch": "cnn", "dataset": "digits", "seed": 0}, label="train cnn"))
    assert zoo["steps"][-1]["title"] == "train cnn"
    assert parse_lesson({**draft, "models": {}}).step(2).spec["epochs"] == 0  # still a lesson that parses
    far = add_run(add_run(new_lesson("demo", "Demo"), _stitch_run(5)),
                  _rec("stitch", {}, spec={**_stitch_run(0).spec, "lr": 0.1, "seed": 2},
                       label=_stitch_run(0).label))  # fmt: skip
    assert [s["title"] for s in far["steps"]] == [base] * 2  # three fields apart: the teacher says what differs


# -------------------------------------------------------------------------------------------- no empty chart


def test_a_run_that_never_trained_draws_no_training_curve():
    assert not has_training_curve({"val_accuracy": [(0, 0.940741)]})  # a 0-epoch stitch's whole series
    assert not has_training_curve({}) and not has_training_curve({"loss": []})
    assert has_training_curve({"loss": [(1, 2.3)]}) and has_training_curve({"val_accuracy": [(0, 0.9), (19, 0.95)]})
