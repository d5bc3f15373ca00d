"""The lesson format: parsing and its messages (each names the step and the field), students' values held inside
what a step opens, a step's plan and run id, the library (shipped, the store's own) and the CLI verbs."""

from __future__ import annotations

import copy
import json

import pytest

from stitchcore.cli.main import main
from stitchcore.errors import StitchError
from stitchcore.experiments import get_experiment, new_spec
from stitchcore.lessons import (
    LessonError,
    catalog,
    get_lesson,
    lesson_json,
    lesson_progress,
    missing_models,
    parse_lesson,
    read_lesson,
    run_numbers,
    save_lesson,
    shipped_lessons,
    step_run,
    student_values,
)
from stitchcore.lessons.library import SHIPPED_ORDER
from stitchcore.store.results import Store, run_id_for

GOOD = {
    "format": 1, "name": "demo", "title": "Demo", "summary": "Two **seeds**.",
    "models": {"A": {"arch": "cnn", "seed": 0}, "B": {"arch": "cnn", "seed": 1}},
    "steps": [
        {"title": "Train A", "text": "A's accuracy.", "kind": "zoo", "spec": {"seed": 0},
         "open": {"seed": {"choices": [0, 1, 2]}}},
        {"title": "Stitch", "text": "The penalty.", "kind": "stitch",
         "spec": {"a": "@A", "b": "@B", "cut_a": "block2", "cut_b": "block2", "epochs": 2},
         "open": {"epochs": {"min": 0, "max": 5}, "cut_a": {"choices": ["block1", "block2"]},
                  "lr": {"min": 0.001, "max": 0.1}, "adapter.init": {"choices": ["lstsq", "random"]}}},
        {"title": "CKA", "text": "", "kind": "similarity", "spec": {"a": "@A", "b": "@B?init=random"}},
        {"title": "Matrix", "text": "", "kind": "matrix", "spec": {"a": "@A", "b": "@B"}, "beside": 3},
    ],
}  # fmt: skip


def _with(path: str, value, data=GOOD):
    """A copy of ``data`` with the value at ``path`` (keys and list indexes, "/"-separated) set; None deletes it."""
    out = copy.deepcopy(data)
    *head, last = path.split("/")
    node = out
    for part in head:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if value is None:
        del node[key]
    else:
        node[key] = value
    return out


def test_a_good_lesson_parses_with_models_resolved_and_todays_defaults():
    lesson = parse_lesson(GOOD)
    assert [s.kind for s in lesson.steps] == ["zoo", "stitch", "similarity", "matrix"]
    stitch = lesson.step(2)
    assert stitch.spec["a"] == "zoo:cnn-digits-s0" and stitch.spec["b"] == "zoo:cnn-digits-s1"
    assert [r.seed for r in stitch.models] == [0, 1]  # the lesson's models this step uses, trained first
    assert lesson.step(3).spec["b"] == "zoo:cnn-digits-s1?init=random" and len(lesson.step(3).models) == 2
    assert lesson.step(1).models == ()
    # fields left out take today's defaults, not a stored run's LEGACY ones
    sim = lesson.step(3).spec
    assert sim["random_null"] is True and sim["null_permutations"] == 20
    assert get_experiment("similarity").from_dict({"a": "zoo:x", "b": "zoo:y"}).random_null is False
    assert [c.field for c in stitch.open] == ["epochs", "cut_a", "lr", "adapter.init"]
    epochs = stitch.control("epochs")
    assert epochs.integer and (epochs.low, epochs.high) == (0, 5) and not stitch.control("lr").integer
    assert lesson.step(4).beside == 3
    assert parse_lesson(_with("steps/1/text", "The {{ penalty }}, {{accuracy}} and {{penalty}}.")).step(2).meanings == (
        "penalty", "accuracy")  # the numbers the page explains under the text, once each
    again = parse_lesson(json.loads(lesson_json(lesson)))  # the file round-trips
    assert again.to_dict() == lesson.to_dict() and again.step(2).spec == stitch.spec


@pytest.mark.parametrize(("path", "value", "says"), [
    ("steps/1/kind", "stich", "step 2 ('Stitch'), field 'kind': unknown experiment kind 'stich'; did you mean 'stitch'"),
    ("steps/1/kind", None, "step 2 ('Stitch'), field 'kind': missing"),
    ("steps/1/title", None, "step 2, field 'title': missing"),
    ("steps/1/text", 3, "step 2 ('Stitch'), field 'text': must be a string"),
    ("steps/1/spec", None, "step 2 ('Stitch'), field 'spec': missing"),
    ("steps/1/spec/cut_a", None, "step 2 ('Stitch'), field 'spec'"),
    ("steps/1/spec/epochs", -1, "step 2 ('Stitch'), field 'spec': epochs"),
    ("steps/1/spec/epoch", 3, "step 2 ('Stitch'), field 'spec': unknown StitchSpec field(s) ['epoch']"),
    ("steps/1/spec/a", "@C", "step 2 ('Stitch'), field 'spec.a': '@C' names no model of the lesson (its models: @A, @B)"),
    ("steps/1/open/epochs", {"min": 3, "max": 5}, "field 'open.epochs': the step's own value 2 is outside 3 to 5"),
    ("steps/1/open/epochs", {"min": 0.5, "max": 5}, "field 'open.epochs': epochs takes whole numbers"),
    ("steps/1/open/epochs", {"min": 5, "max": 0}, "field 'open.epochs': min and max are numbers with min < max"),
    ("steps/1/open/epochs", {"choices": [2]}, "field 'open.epochs': choices is a list of at least two values"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "choices": [1, 2]}, "give either \"choices\" or \"min\" and \"max\""),
    ("steps/1/open/adapter.init", {"choices": ["lstsq", "magic"]}, "field 'open.adapter.init': unknown adapter init 'magic'"),
    ("steps/1/open/cut_a", {"choices": ["block1", "fc1"]}, "the step's own value 'block2' is not among the choices"),
    ("steps/1/open/a", {"min": 0, "max": 1}, "field 'open.a': a range needs a numeric field"),
    ("steps/1/open/nope", {"min": 0, "max": 1}, "field 'open.nope': the stitch spec has no field 'nope'"),
    ("steps/1/open/step", {"min": 0, "max": 1}, "field 'open.step': 'step' is the page's own link parameter"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "colour": "red"}, "field 'open.epochs': unknown key(s) ['colour']"),
    ("steps/1/preset", "inheritance", "field 'preset': give \"kind\" and \"spec\", or \"preset\""),
    ("steps/3/beside", 4, "step 4 ('Matrix'), field 'beside': names another step of this lesson, 1 to 4"),
    ("steps/3/beside", 2, "step 4 ('Matrix'), field 'beside': beside joins a matrix step to a similarity step"),
    ("steps/1/colour", "red", "step 2 ('Stitch'): unknown key(s) ['colour']"),
    ("steps/1/text", "The {{penalty}} and {{penality}}.", "step 2 ('Stitch'), field 'text': {{penality}} names no"),
    ("models/A", {"arch": "cnn", "seeds": 0}, "field 'models.A': unknown ZooRecipe field(s) ['seeds']"),
    ("models/A", "cnn", "field 'models.A': must be a zoo recipe"),
    ("name", "Demo Lesson", "field 'name': a lesson's name is lower-case letters"),
    ("format", 2, "field 'format': this StitchLab reads lesson format 1, not 2"),
    ("title", None, "lesson 'demo', field 'title': missing"),
    ("steps", [], "lesson 'demo', field 'steps': missing; give a list of 1 to 10 steps"),
    ("colour", "red", "lesson 'demo': unknown key(s) ['colour']"),
    # -- issue 45: every field with a wrong type, a non-finite or huge number, a huge string, an unknown key
    ("steps/1/spec/adapter", [1], "field 'spec.adapter': adapter takes a JSON object of its fields, not [1]"),
    ("steps/1/spec/adapter", "linear", "field 'spec.adapter': adapter takes a JSON object of its fields"),
    ("steps/1/spec/adapter", {"kind": "linear", "init": 3}, "field 'spec.adapter.init': adapter.init takes text, not 3"),
    ("steps/1/spec/a", 5, "field 'spec.a': a takes text, not 5"),
    ("steps/1/spec/a", ["@A"], "field 'spec.a': a takes text, not ['zoo:cnn-digits-s0']"),
    ("steps/1/spec/seed", 2**40, "seed must be a whole number 0 .. 2147483647 (got 1099511627776)"),
    ("steps/1/spec/seed", 2**70, "field 'spec.seed': 1180591620717411303424 is too large; a lesson's whole numbers"),
    ("steps/1/spec/lr", float("nan"), "field 'spec.lr': nan is not a number a lesson can hold; write a finite number"),
    ("steps/1/spec/lr", float("-inf"), "field 'spec.lr': -inf is not a number a lesson can hold"),
    ("steps/1/spec/cut_a", json.loads("[" * 20 + "]" * 20), "nests lists and objects more than 16 deep"),
    ("steps/1/spec/" + "k" * 200, 1, "is a key of 200 characters; keys are field names, at most 100"),
    ("steps/1/spec", [1], "step 2 ('Stitch'), field 'spec': a list; give the stitch spec's fields as a JSON object"),
    ("steps/1/kind", ["stitch"], "field 'kind': ['stitch'] is not a run kind; name a run kind"),
    ("steps/1/kind", "k" * 10_000, "field 'kind': unknown experiment kind 'kkkk"),
    ("steps/1/title", ["Stitch"], "step 2, field 'title': must be a string, not list"),
    ("steps/1/title", "x" * 201, "field 'title': is 201 characters; at most 200: shorten it"),
    ("steps/1/title", "Stitch\x1b[2J", "field 'title': holds the control character '\\x1b'; write plain text"),
    ("steps/1/title", "Stitch\nor not", "field 'title': holds a line break; write plain text"),
    ("steps/1/text", {"md": "x"}, "field 'text': must be a string, not dict"),
    ("steps/1/text", "a\x00b", "field 'text': holds the control character '\\x00'; write text"),
    ("steps/1/beside", "3", "field 'beside': names another step of this lesson"),
    ("steps/1", [1], "step 2: a step is a JSON object with title, text, kind and spec"),
    ("steps/1/open", [1], "field 'open': must map a spec field to {\"choices\": [...]}"),
    ("steps/1/open/epochs", {"min": 2, "max": 2}, "field 'open.epochs': min and max are numbers with min < max (got 2, 2)"),
    ("steps/1/open/epochs", {"min": 0, "max": 1e30}, "min and max lie within -9,007,199,254,740,991 and 9,007,"),
    ("steps/1/open/lr", {"min": 0.001, "max": 1e16}, "field 'open.lr': min and max lie within"),
    ("steps/1/open/epochs", {"min": 0, "max": float("inf")}, "field 'open.epochs.max': inf is not a number"),
    ("steps/1/open/epochs", {"min": "0", "max": 5}, "min and max are numbers with min < max (got '0', 5)"),
    ("steps/1/open/epochs", {"min": False, "max": 5}, "min and max are numbers with min < max (got False, 5)"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "label": [1]}, "field 'open.epochs.label': must be a string"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "label": "L" * 1000}, "field 'open.epochs.label': is 1,000 characters"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "help": "h" * 5000}, "field 'open.epochs.help': is 5,000 characters; at most 500"),
    ("steps/1/open/epochs", {"min": 0, "max": 5, "help": "a\nb"}, "field 'open.epochs.help': holds a line break"),
    ("steps/1/open/cut_a", {"choices": ["block2", [1]]}, "each choice is one value (text, a number, true, false or null), not [1]"),
    ("steps/1/open/cut_a", {"choices": ["block2", "block2"]}, "the choice 'block2' is given twice"),
    ("steps/0/open/seed", {"choices": [0, "0", 1]}, "field 'open.seed': the choice 0 is given twice (or as another value that reads the same in a link)"),
    ("steps/0/open/seed", {"choices": list(range(51))}, "field 'open.seed': choices offers at most 50 values (got 51)"),
    ("steps/1/open/adapter", {"choices": ["x", "y"]}, "field 'open.adapter.init': opens 'adapter' and a field inside it"),
    ("models/A/seed", 2**70, "field 'models.A.seed': 1180591620717411303424 is too large"),
    ("models/A/seed", 2**40, "field 'models.A': seed must be a whole number 0 .. 2147483647 (got 1099511627776)"),
    ("models", [1], "field 'models': must map a name to a zoo recipe"),
    ("models", {f"M{i}": {"seed": i} for i in range(21)}, "field 'models': a lesson trains at most 20 models (got 21)"),
    ("format", True, "field 'format': this StitchLab reads lesson format 1, not True"),
    ("format", "1", "field 'format': this StitchLab reads lesson format 1, not '1'"),
    ("name", 5, "lesson '?', field 'name': a lesson's name is lower-case letters"),
    ("name", "a" * 100_000, "field 'name': a lesson's name is lower-case letters"),
    ("title", "x" * 100_000, "lesson 'demo', field 'title': is 100,000 characters; at most 200"),
    ("title", "Demo\u202egnp.exe", "field 'title': holds the control character '\\u202e'"),
    ("summary", ["x"], "field 'summary': must be a string, not list"),
    ("summary", "a\x1bb", "field 'summary': holds the control character '\\x1b'; write text"),
    ("summary", "\ud800", "field 'summary': holds '\\ud800', half of a character (a lone surrogate)"),
    ("steps", {"1": {}}, "field 'steps': must be a list, not an object; give a list of 1 to 10 steps"),
    ("steps", [{}] * 100_000, "field 'steps': a lesson has at most 10 steps (got 100000); split it in two"),
    ("k" * 1000, 1, "lesson 'demo', field 'kkkkkkkkkkkkkkkkkkkk...': is a key of 1,000 characters"),
    ("colour" + "s" * 90, "red", "lesson 'demo': unknown key(s) ['colourssssss"),
    ("colour" + "s" * 90, "red", "...]; known: ['format', 'models', 'name', 'steps', 'summary', 'title']"),
])  # fmt: skip
def test_a_bad_lesson_is_refused_naming_the_step_and_the_field(path, value, says):
    with pytest.raises(LessonError) as exc:
        parse_lesson(_with(path, value))
    assert says in str(exc.value)
    assert isinstance(exc.value, StitchError)  # the CLI prints it on one line and exits 2
    assert "\n" not in str(exc.value) and len(str(exc.value)) <= 600  # one line, never a whole huge value


@pytest.mark.parametrize(("path", "says"), [
    ("steps/1/spec/epochs", r"step 2 \('Stitch'\), field 'spec(\.epochs)?': epochs (takes|must be) a whole number"),
    ("steps/1/open/epochs", r"step 2 \('Stitch'\), field 'open\.epochs': epochs (takes|must be) a whole number"),
    ("models/A/epochs", r"lesson 'demo', field 'models\.A': epochs (takes|must be) a whole number"),
])  # fmt: skip
def test_a_whole_number_field_refuses_a_fraction(path, says):
    """``"epochs": 2.5`` (a TypeError when it ran): refused by the spec's own check or by the lesson's types."""
    value = {"choices": [2, 2.5]} if path.endswith("open/epochs") else 2.5
    with pytest.raises(LessonError, match=says):
        parse_lesson(_with(path, value))


def test_what_is_not_a_lesson_object_is_one_line():
    for value, says in (([1, 2], "not a list"), ("lesson", "not text"), (None, "not null"), (3, "not a number")):
        with pytest.raises(LessonError, match=f"a lesson file holds one JSON object .*, {says}$"):
            parse_lesson(value)


def test_presets_and_limits():
    too_many = {**GOOD, "steps": [GOOD["steps"][0]] * 11}
    with pytest.raises(LessonError, match="at most 10 steps"):
        parse_lesson(too_many)
    with pytest.raises(LessonError, match=r"step 1 \('T'\), field 'preset': unknown preset 'inheritence'; did you mean"):
        parse_lesson({**GOOD, "steps": [{"title": "T", "text": "", "preset": "inheritence"}]})
    with pytest.raises(LessonError, match=r"field 'sweep': preset 'inheritance' has sweeps 1 to 3"):
        parse_lesson({**GOOD, "steps": [{"title": "T", "text": "", "preset": "inheritance", "sweep": 4}]})
    step = parse_lesson({**GOOD, "steps": [{"title": "T", "text": "", "preset": "inheritance",
                                            "spec": {"max_test": 100}}]}).step(1)  # fmt: skip
    assert step.kind == "sweep" and step.spec["max_test"] == 100
    from stitchcore.experiments.trait_presets import get_preset

    for name in ("where-a-trait-lives",):  # a shipped preset step is the Traits page's very run
        for s in get_lesson(name).steps:
            if "preset" in s.source:
                preset = get_preset(s.source["preset"])
                assert step_run(s).run_id == run_id_for("sweep", preset.sweeps[s.source.get("sweep", 1) - 1].to_dict())
    assert [r.relabel for r in step.models] == [(3, 8), None]  # the preset's recipes come with it
    for raw, says in (({"preset": ["inheritance"]}, r"field 'preset': names a Traits preset, e\.g\. \"inheritance\""),
                      ({"preset": "inheritance", "sweep": True}, r"field 'sweep': preset 'inheritance' has sweeps 1"),
                      ({"preset": "inheritance", "spec": [1]}, r"field 'spec': the fields of the preset's sweep")):
        with pytest.raises(LessonError, match=says):  # a TypeError ([1] is not a mapping) before
            parse_lesson({**GOOD, "steps": [{"title": "T", "text": "", **raw}]})
    for bad in ("[1, 2]", "not json", b"\xff\xfe"):
        with pytest.raises(LessonError, match="a lesson file holds one JSON object|is not JSON"):
            read_lesson(bad)


def test_student_values_are_held_inside_what_the_step_opens():
    step = parse_lesson(GOOD).step(2)
    v = student_values(step, {"epochs": "50", "cut_a": "block1", "lr": "abc", "adapter.init": "magic", "seed": "3",
                              "lesson": "demo", "step": "2"})  # fmt: skip
    assert v.changed == {"epochs": 5, "cut_a": "block1"}
    assert v.values == {"epochs": 5, "cut_a": "block1", "lr": 0.01, "adapter.init": "lstsq"}
    assert v.notes == ("Adapter training epochs 50 is outside 0 to 5: using 5",  # each control by its label
                       "Learning rate 'abc' is not a number: using 0.01",
                       "Adapter start 'magic' is not one this step offers (lstsq, random): using 'lstsq'",
                       "seed is not open in this step: ignored")  # fmt: skip
    assert student_values(step, {"epochs": "-3.7"}).changed == {"epochs": 0}
    assert student_values(step, {"epochs": "2"}).changed == {}  # the lesson's own value: no variant
    assert student_values(step, {"lr": "1e9"}).changed == {"lr": 0.1}
    assert student_values(step, {"lr": "nan"}).notes == ("Learning rate nan is not a finite number: using 0.01",)
    spec = student_values(step, {"adapter.init": "random"}).spec(step)
    assert spec["adapter"]["init"] == "random" and step.spec["adapter"]["init"] == "lstsq"  # the step is untouched


def test_a_step_run_is_one_run_id_for_every_student_and_another_for_changed_values():
    step = parse_lesson(GOOD).step(2)
    own = step_run(step)
    assert own.is_lessons_own and [k for k, _ in own.plan()] == ["zoo", "zoo", "stitch"]
    assert own.run_id == run_id_for("stitch", new_spec("stitch", {
        "a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block2", "cut_b": "block2", "epochs": 2,
    }).to_dict())  # fmt: skip
    assert step_run(step, {"epochs": "2", "view": "presenter"}).run_id == own.run_id
    mine = step_run(step, {"epochs": "3"})
    assert mine.run_id != own.run_id and mine.spec.epochs == 3 and mine.changed == {"epochs": 3}


def test_models_the_store_lacks_are_named_by_step_and_field(tmp_path, trained_store):
    store, refs = trained_store
    lesson = parse_lesson(GOOD)
    assert missing_models(lesson, Store(tmp_path / "empty")) == []  # the lesson trains A and B itself
    strange = _with("steps/2/spec/a", "zoo:cnn-digits-s7")
    problems = missing_models(parse_lesson(strange), Store(tmp_path / "empty"))
    assert len(problems) == 1 and problems[0].startswith(
        "lesson 'demo', step 3 ('CKA'), field 'a': zoo:cnn-digits-s7 is not in the store")
    assert "zoo train --arch cnn --dataset digits --seed 7" in problems[0]
    in_store = parse_lesson({**GOOD, "models": {}, "steps": [
        {"title": "S", "text": "", "kind": "stitch", "spec": {"a": refs[0], "b": refs[1], "cut_a": "block1",
                                                               "cut_b": "block1"}}]})  # fmt: skip
    assert missing_models(in_store, store) == [] and in_store.step(1).models == ()


def test_the_library_ships_four_lessons_and_keeps_a_stores_own(tmp_path):
    shipped = shipped_lessons()
    assert tuple(lesson.name for lesson in shipped) == SHIPPED_ORDER
    for lesson in shipped:
        assert 3 <= len(lesson.steps) <= 10, lesson.name
        assert lesson.summary and all(s.title and s.text for s in lesson.steps), lesson.name
    store = Store(tmp_path / "store")
    mine = save_lesson(_with("title", "My demo"), store)
    assert (tmp_path / "store" / "lessons" / "demo.json").is_file() and mine.title == "My demo"
    replaced = save_lesson({**get_lesson("two-seeds").to_dict(), "title": "Seeds, my way"}, store)
    (tmp_path / "store" / "lessons" / "broken.json").write_text('{"name": "broken", "title": "B", "steps": 3}')
    lessons, problems = catalog(store)
    assert [lesson.name for lesson in lessons] == [*SHIPPED_ORDER, "demo"]
    assert lessons[0].title == replaced.title == "Seeds, my way"  # a store lesson replaces a shipped one in place
    assert len(problems) == 1 and "broken.json" in problems[0] and "field 'steps'" in problems[0]
    with pytest.raises(LessonError, match="field 'steps'"):
        get_lesson("broken", store)
    with pytest.raises(LessonError, match=r"no lesson 'dmeo'; did you mean 'demo'\?"):
        get_lesson("dmeo", store)
    assert lesson_progress(get_lesson("demo", store), store) == [None] * 4


def test_cli_lists_checks_and_runs_a_lesson(tmp_path, capsys, trained_store):
    from tests.conftest import copy_store

    copy_store(trained_store[0].root, tmp_path / "store")
    store_arg = ["--store", str(tmp_path / "store")]
    assert main(["lessons", "list", "--json", *store_arg]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed["lessons"]] == list(SHIPPED_ORDER) and listed["problems"] == []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_with("steps/1/spec/a", "zoo:cnn-digits-s7")))
    assert main(["lessons", "check", str(bad), *store_arg]) == 2
    assert "error: lesson 'demo', step 2 ('Stitch'), field 'a': zoo:cnn-digits-s7 is not in the store" in \
        capsys.readouterr().err
    assert main(["lessons", "check", "two-seeds", *store_arg]) == 0
    assert capsys.readouterr().out.startswith("ok: lesson 'two-seeds', 3 steps")
    assert main(["lessons", "run", "two-seeds", "--steps", "1,2", "--json", "--quiet", *store_arg]) == 0
    ran = json.loads(capsys.readouterr().out)
    lesson = get_lesson("two-seeds")
    assert [r["run_id"] for r in ran["steps"]] == [step_run(lesson.step(n)).run_id for n in (1, 2)]
    assert ran["steps"][0]["cached"]  # zoo:cnn-digits-s0 was in the store already
    assert lesson_progress(lesson, Store(tmp_path / "store"))[:2] == ["done", "done"]
    out = tmp_path / "handout" / "two-seeds.html"
    assert main(["lessons", "report", "two-seeds", "--out", str(out), "--json", *store_arg]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] == out.stat().st_size
    html = out.read_text()
    assert "<h2>Step 1. Two networks, two seeds</h2>" in html and "<h2>Step 2. Join A&#x27;s bottom" in html
    stitch = Store(tmp_path / "store").lookup(ran["steps"][1]["run_id"])
    assert f"<strong>Stitching penalty ({run_numbers(stitch)['penalty']})</strong>" in html  # the computed number
    assert "Not computed when this file was made, so not in it: step(s) 3." in html  # step 3 was not run
    assert main(["lessons", "report", "two-seeds", "--out", str(tmp_path), *store_arg]) == 2
    assert "is a folder" in capsys.readouterr().err
