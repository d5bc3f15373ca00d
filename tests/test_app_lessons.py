"""The Lessons page in the app (AppTest): two students opening one step start one job; a student's view has no
sidebar and no Stop; viewer mode shows what the teacher computed and launches nothing; Results' "Add to a
lesson" and the editor (text, open controls, order, Save checked whole, the offline HTML); stored runs of every
kind become steps whose run is that run (old fixture store included)."""

from __future__ import annotations

import json

import pytest

import ui
from stitchcore.experiments import run_experiment
from stitchcore.lessons import (
    get_lesson,
    lesson_report,
    move_step,
    parse_lesson,
    remove_step,
    save_lesson,
    step_from_run,
    step_run,
)
from stitchcore.store.results import Store
from tests.conftest import ROOT, copy_store


def _lesson_page(at, **params):
    at.query_params.update(params)
    return at.run().switch_page("views/lessons.py").run()


def test_two_students_on_one_step_start_one_job(app):
    step = get_lesson("two-seeds").step(2)
    own = step_run(step).run_id
    first = _lesson_page(app, lesson="two-seeds", step="2")
    assert not first.exception and not first.error
    jobs = [s for s in ui.get_runner().list() if s.id == own]
    assert len(jobs) == 1  # queued (after its two models) by the first student
    from streamlit.testing.v1 import AppTest

    second = _lesson_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120), lesson="two-seeds", step="2")
    assert not second.exception and not second.error
    assert [s.id for s in ui.get_runner().list()].count(own) == 1  # the same job, not a second one
    assert ui.get_runner().wait(own, timeout=180).state == "done"
    second.run()
    assert any(m.label == "Stitched accuracy" for m in second.metric)
    assert len(second.sidebar) == 0  # the student's view: no job monitor, no page list
    assert not any(b.label == "Stop" and not b.disabled for b in second.button)
    assert [s.label for s in second.slider] == ["Adapter training epochs"]
    assert [s.label for s in second.selectbox] == ["Cut in A"]


def test_a_student_changes_an_open_control_and_sees_both_runs(app):
    at = _lesson_page(app, lesson="two-seeds", step="2")
    at.slider[0].set_value(0)
    at.button(key="FormSubmitter:lesson-two-seeds-2-form-Run with these values").click().run()
    assert not at.exception and not at.error
    assert at.query_params["epochs"] == ["0"] or at.query_params["epochs"] == "0"
    mine = step_run(get_lesson("two-seeds").step(2), {"epochs": "0"})
    assert ui.get_runner().wait(mine.run_id, timeout=180).state == "done"
    assert ui.get_runner().wait(step_run(mine.step).run_id, timeout=180).state == "done"
    at.run()
    assert any(m.value == "##### Your run (Adapter training epochs = 0)" for m in at.markdown)
    assert len(at.table) == 1  # the two runs' numbers in one table
    assert sum(m.label == "Stitched accuracy" for m in at.metric) == 2


def test_viewer_mode_shows_what_was_computed_and_launches_nothing(app, monkeypatch):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = _lesson_page(app, lesson="similar-is-not-the-same", step="1")
    assert not at.exception and not at.error
    assert any("has not been computed on this server" in i.value for i in at.info)
    assert ui.get_runner().list() == []
    assert at.button(key="FormSubmitter:lesson-similar-is-not-the-same-1-form-Run with these values").disabled


def test_viewer_mode_shows_a_lesson_the_teacher_computed(app, monkeypatch):
    from stitchcore.lessons import run_lesson

    run_lesson(get_lesson("two-seeds"), ui.get_store(), steps=[2])  # the teacher, before class
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = _lesson_page(app, lesson="two-seeds", step="2")
    assert not at.exception and not at.error
    assert any(m.label == "Stitched accuracy" for m in at.metric)
    assert ui.get_runner().list() == []  # nothing launched


def test_a_lesson_link_with_a_bad_step_or_name_says_so(app):
    at = _lesson_page(app, lesson="two-seeds", step="9")
    assert any("has steps 1 to 3, not '9'" in w.value for w in at.warning)
    at = _lesson_page(app, lesson="two-seed", step="1")
    assert any("no lesson 'two-seed'; did you mean 'two-seeds'?" in e.value for e in at.error)


def test_add_a_run_to_a_new_lesson_then_edit_save_and_export_it(app, trained_store):
    _, refs = trained_store
    at = app.run()
    store = ui.get_store()
    from stitchcore.experiments.stitch import StitchSpec

    rec = run_experiment("stitch", StitchSpec(refs[0], refs[1], "block1", "block1", epochs=1), store).record
    at.query_params.update({"run": rec.id})
    at.switch_page("views/results.py").run()
    at.text_input(key="results-lesson-name").set_value("my-lesson")
    at.text_input(key="results-lesson-title").set_value("My lesson")
    at.button(key="results-lesson-add").click().run()
    assert not at.exception and not at.error
    lesson = get_lesson("my-lesson", store)
    assert step_run(lesson.step(1)).run_id == rec.id  # the step shows that very run
    at.query_params.clear()
    edit = _lesson_page(at, lesson="my-lesson", view="edit")
    assert not edit.exception and not edit.error
    edit.text_area(key="ed-my-lesson-0-0-text").set_value("Look at the {{penalty}}.")
    edit.multiselect(key="ed-my-lesson-0-0-open").set_value(["epochs"]).run()
    edit.number_input(key="ed-my-lesson-0-0-epochs-max").set_value(3).run()
    edit.button(key="ed-save").click().run()
    assert not edit.exception and not edit.error
    saved = get_lesson("my-lesson", store).step(1)
    assert saved.meanings == ("penalty",) and saved.control("epochs").high == 3
    edit.number_input(key="ed-my-lesson-0-0-epochs-max").set_value(0.5).run()  # below the step's own 1 epoch
    edit.button(key="ed-save").click().run()
    assert any("field 'open.epochs'" in e.value for e in edit.error)  # refused, naming the step and field
    assert get_lesson("my-lesson", store).step(1).control("epochs").high == 3  # the saved file is untouched
    html = lesson_report(get_lesson("my-lesson", store), store)
    assert "<h2>Step 1. " in html and "<strong>Stitching penalty (" in html and rec.id in html  # its number


def test_the_editor_offers_a_declared_fields_own_choices_nested_ones_too(app):
    """Issue 40: the editor reads the kind's declaration, not the value's Python type: the sweep step's adapter
    start (nested) can be opened and is offered the starts its declaration lists, an on/off field true and
    false; the lesson saves with them."""
    edit = _lesson_page(app, lesson="two-seeds", view="edit")
    assert not edit.exception and not edit.error
    edit.multiselect(key="ed-two-seeds-0-2-open").set_value(["epochs", "adapter.init", "control"]).run()
    assert edit.text_input(key="ed-two-seeds-0-2-adapter.init-ch").value == "random, identity, lstsq, procrustes"
    assert edit.text_input(key="ed-two-seeds-0-2-control-ch").value == "true, false"
    edit.button(key="ed-save").click().run()
    assert not edit.exception and not edit.error
    saved = get_lesson("two-seeds", ui.get_store()).step(3)
    assert saved.control("adapter.init").choices == ("random", "identity", "lstsq", "procrustes")
    assert saved.control("control").choices == (True, False)


@pytest.mark.parametrize("name", ["two-seeds", "where-a-trait-lives", "similar-is-not-the-same", "heads-matter"])
def test_the_editor_saves_a_lesson_it_did_not_change_as_it_was(app, name):
    edit = _lesson_page(app, lesson=name, view="edit")
    assert not edit.exception and not edit.error
    edit.button(key="ed-save").click().run()
    assert not edit.exception and not edit.error
    assert get_lesson(name, ui.get_store()).to_dict() == get_lesson(name).to_dict()  # the store's copy, unchanged


def test_steps_move_and_go_with_their_beside():
    data = get_lesson("similar-is-not-the-same").to_dict()
    moved = move_step(data, 0, 2)  # the CKA step last: the matrix's beside follows it
    assert [s["title"] for s in moved["steps"]][2] == data["steps"][0]["title"]
    assert moved["steps"][1]["beside"] == 3 and parse_lesson(moved).step(2).beside == 3
    gone = remove_step(data, 0)
    assert "beside" not in gone["steps"][1] and parse_lesson(gone).step(2).beside is None
    assert data["steps"][2]["beside"] == 1  # the original is untouched


@pytest.mark.parametrize("run_id", ["3a5c8fd66da321ff", "6d9f490702433fc1", "948efef379ab0882", "85d6995881b3ee60",
                                    "2daff2acaae2878b", "7b32b03feebed0fd", "70492b7db4bce988"])  # fmt: skip
def test_a_step_from_an_old_stored_run_is_that_run(tmp_path, run_id):
    copy_store(ROOT / "tests" / "fixtures" / "store_v1", tmp_path / "store")
    store = Store(tmp_path / "store")
    rec = store.lookup(run_id)
    data = {"name": "old", "title": "Old runs", "steps": [step_from_run(rec)]}
    lesson = save_lesson(json.loads(json.dumps(data)), store)
    assert step_run(lesson.step(1)).run_id == rec.id  # LEGACY fields written out: the same run, not a new one
