"""Class mode in the app (AppTest, one session per AppTest): the teacher's key makes one session the teacher's
and leaves the URL; every other session is a student's, refused every page but a lesson's student view and
every action that writes, whatever its URL says; a student's variant runs go through the class's caps; outside
class mode nothing changes.  (Real browsers and HTTP: tests/e2e/test_classroom_e2e.py.)"""

from __future__ import annotations

import hashlib

import pytest
from streamlit.testing.v1 import AppTest

import ui
from stitchcore.lessons import get_lesson, step_run
from tests.conftest import ROOT
from ui import classroom, roles

KEY = "test-teacher-key-0123"
PAGES = ["views/home.py", "views/models.py", "views/stitch.py", "views/similarity.py", "views/traits.py",
         "views/assemble.py", "views/language.py", "views/results.py", "views/settings.py"]  # fmt: skip


@pytest.fixture
def class_app(app, monkeypatch):
    monkeypatch.setenv(roles.KEY_ENV, KEY)
    return app


def _fresh() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)


def _page(at: AppTest, page: str, **params) -> AppTest:
    at.query_params.clear()
    at.query_params.update(params)
    return at.run().switch_page(page).run()


def _store_digest() -> str:
    """The store's runs and lesson files, hashed (what no student action may change)."""
    store = ui.get_store()
    rows = sorted((r.id, r.status) for r in store.list_runs())
    lessons = sorted((p.name, p.read_bytes()) for p in (store.root / "lessons").glob("*")) if (
        store.root / "lessons").is_dir() else []  # fmt: skip
    return hashlib.sha256(repr((rows, lessons)).encode()).hexdigest()


@pytest.mark.parametrize("page", PAGES)
def test_a_student_is_refused_every_page_but_the_lessons(class_app, page):
    at = _page(class_app, page, run="x", a="zoo:cnn-digits-s0")
    assert not at.exception
    assert any("students see only the lesson's steps" in w.value for w in at.warning)
    assert not any(b.label in ("Launch", "Save", "Re-run", "Import", "Run the classroom demo") for b in at.button)
    assert len(at.sidebar) == 0


@pytest.mark.parametrize("view, gone", [("edit", "ed-save"), ("presenter", "lesson-edit")])
def test_a_student_link_with_a_teachers_view_is_a_student_view(class_app, view, gone):
    before = _store_digest()
    at = _page(class_app, "views/lessons.py", lesson="two-seeds", step="1", view=view)
    assert not at.exception
    assert any("is for the teacher. Nothing was changed." in w.value for w in at.warning)
    assert not any(b.key == gone for b in at.button)
    assert not any(b.label == "Compute all steps" for b in at.button) and len(at.sidebar) == 0
    assert _store_digest() == before or ui.get_runner().list()  # only the lesson's own step may be queued


def test_the_teacher_key_unlocks_one_session_and_leaves_the_url(class_app):
    at = _page(class_app, "views/lessons.py", lesson="two-seeds", step="1", view="presenter", key=KEY)
    assert not at.exception and "key" not in at.query_params
    assert any(b.label == "Compute all steps" for b in at.button)
    assert all(KEY not in m.value for m in at.markdown) and all(KEY not in c.value for c in at.code)
    at = _page(at, "views/stitch.py")  # the same session: still the teacher's, every page
    assert not any("students see only" in w.value for w in at.warning) and len(at.sidebar) > 0
    other = _page(_fresh(), "views/stitch.py")  # another browser: a student
    assert any("students see only the lesson's steps" in w.value for w in other.warning)


def test_a_wrong_key_says_so_and_stays_a_student(class_app):
    class_app.query_params.update(key="guess")
    at = class_app.run()
    assert "key" not in at.query_params
    assert any("not this server's" in w.value for w in at.warning)
    at = _page(at, "views/lessons.py", lesson="two-seeds", step="1", view="presenter")
    assert not any(b.label == "Compute all steps" for b in at.button)


def test_a_students_runner_refuses_what_writes(class_app):
    at = _page(class_app, "views/lessons.py")  # a student's session: the lessons' list, no Present, no upload
    assert not at.exception
    assert not any(b.label == "Present" for b in at.button) and any(b.label == "Follow as a student" for b in at.button)
    assert not any("Add a lesson file" in e.label for e in at.expander)
    student = roles.StudentRunner(ui.server_runner())
    for call in (lambda: student.cancel("x"), lambda: student.set_options(None), lambda: student.submit("zoo", None)):
        with pytest.raises(roles.Refused, match="for the teacher|students start only"):
            call()
    assert student.list() == ui.server_runner().list()  # reading is the same


def test_a_students_variant_goes_through_the_class_caps(class_app, monkeypatch):
    monkeypatch.setattr(classroom, "STUDENT_LIVE", 1)
    step = get_lesson("two-seeds").step(2)
    at = _page(class_app, "views/lessons.py", lesson="two-seeds", step="2", epochs="0")
    assert not at.exception and not at.error
    mine = step_run(step, {"epochs": "0"})
    quota = classroom.class_quota()
    assert quota.live() + quota.waiting() == 1  # the student's variant: counted against the class's caps
    second = _page(at, "views/lessons.py", lesson="two-seeds", step="2", epochs="1")
    assert not second.exception
    assert quota.waiting() + quota.live() == 2
    assert any("waits for a turn" in i.value for i in second.info)  # said on the page
    third = _page(second, "views/lessons.py", lesson="two-seeds", step="2", epochs="2")
    fourth = _page(third, "views/lessons.py", lesson="two-seeds", step="2", epochs="3")
    assert any("cannot start now" in w.value for w in fourth.warning)  # past the student's waiting line
    assert ui.server_runner().wait(mine.run_id, timeout=180).state == "done"
    assert [v.values for v in classroom.variants("two-seeds", 2)][:2] == [{"epochs": 0}, {"epochs": 1}]


def test_outside_class_mode_nothing_is_refused(app):
    at = _page(app, "views/stitch.py")
    assert not any("students see only" in w.value for w in at.warning) and len(at.sidebar) > 0
    at = _page(app, "views/lessons.py", lesson="two-seeds", step="1", view="presenter")
    assert any(b.label == "Compute all steps" for b in at.button)


def test_the_app_command_prints_the_teachers_link_on_the_network_name(capsys, monkeypatch, tmp_path):
    import socket

    from stitchcore.cli.main import main

    monkeypatch.delenv("STITCHLAB_TEACHER_KEY", raising=False)
    assert main(["app", "--class", "--port", "8611", "--print-only", "--store", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    host = socket.gethostname()
    assert f"Teacher, open once (keep it to yourself): http://{host}:8611/?key=" in err
    assert f"Students: http://{host}:8611/lessons" in err and "localhost" not in err
    assert "--server.address 0.0.0.0 --server.port 8611" in out  # a class listens on the network
    assert main(["app", "--class", "--key", "k3y", "--base-url", "http://lab.school.lan:8611/", "--print-only",
                 "--store", str(tmp_path)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "http://lab.school.lan:8611/?key=k3y" in err and "http://lab.school.lan:8611/lessons" in err
    assert main(["app", "--print-only", "--store", str(tmp_path)]) == 0  # one person: this machine only
    out, err = capsys.readouterr()
    assert "--server.address localhost" in out and "key" not in err
    assert main(["app", "--port", "0", "--print-only", "--store", str(tmp_path)]) == 2
    assert "--port is 1 to 65535" in capsys.readouterr().err


def test_a_variant_found_in_the_store_is_listed_for_the_presenter(app):
    step = get_lesson("two-seeds").step(2)
    mine = step_run(step, {"epochs": "0"})
    first = _page(app, "views/lessons.py", lesson="two-seeds", step="2", epochs="0")
    assert not first.exception and ui.server_runner().wait(mine.run_id, timeout=180).state == "done"
    later = _page(_fresh(), "views/lessons.py", lesson="two-seeds", step="2", epochs="0")  # stored: not launched
    assert not later.exception
    [variant] = classroom.variants("two-seeds", 2)
    assert variant.run_id == mine.run_id and len(variant.owners) == 2  # both students, one run
    teacher = _page(_fresh(), "views/lessons.py", lesson="two-seeds", step="2", view="presenter")
    assert any("1 variant(s) from 2 student(s)" in m.value for m in teacher.markdown)
