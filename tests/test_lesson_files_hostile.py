"""Hostile lesson files (issue 45): whatever sits in ``<store>/lessons/`` or is given to ``lessons check``, every
reader answers in one line (a LessonError), never a traceback, never a read that blocks or fills the memory;
the good lessons are still listed beside a broken one; nothing the readers refuse changes a file.  A save never
replaces a good lesson file with one the app could not read back, and ``lessons run --steps`` takes only the
lesson's step numbers.

Nothing here trains: every case is refused before a run starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
from pathlib import Path

import pytest

from stitchcore.cli.main import main
from stitchcore.errors import StitchError
from stitchcore.lessons import LessonError, add_run, catalog, get_lesson, read_lesson, save_lesson
from stitchcore.lessons.library import MAX_BYTES, SHIPPED_ORDER, lessons_dir, read_lesson_file
from stitchcore.store.results import RunRecord, Store

GOOD = {"format": 1, "name": "good", "title": "Good", "summary": "", "models": {},
        "steps": [{"title": "Train", "text": "A's accuracy.", "kind": "zoo", "spec": {"seed": 0}}]}  # fmt: skip


def _lesson_text(**changes: object) -> str:
    """GOOD as a file, named ``bad``, with ``changes`` (a top-level key each)."""
    return json.dumps({**GOOD, "name": "bad", **changes})


def _nested(depth: int) -> str:
    return _lesson_text(summary="@").replace('"@"', "[" * depth + "]" * depth)


def _plant(kind: str, value: object, path: Path) -> None:
    """Put one entry at ``path``: a file of text or bytes, a link, a FIFO, a socket, a folder or a link loop."""
    if kind == "text":
        path.write_text(str(value), encoding="utf-8")
    elif kind == "bytes":
        path.write_bytes(value)  # type: ignore[arg-type]
    elif kind == "link":
        os.symlink(str(value), path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(path.parent)  # a short name: a socket's path is at most 107 bytes
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.bind(path.name)
        finally:
            os.chdir(here)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        os.symlink(path.name, path)  # itself
    else:
        raise AssertionError(kind)


# (id, what is planted as <store>/lessons/bad.json, its value, what the one line must say: a regex)
# fmt: off
ENTRIES: list = [
    ("dev-zero-link", "link", "/dev/zero", r"bad\.json is a device, not a lesson file: remove it"),
    ("dev-null-link", "link", "/dev/null", r"bad\.json is a device, not a lesson file"),
    ("fifo", "fifo", None, r"bad\.json is a FIFO, not a lesson file"),
    ("socket", "socket", None, r"bad\.json is a socket, not a lesson file"),
    ("folder", "folder", None, r"bad\.json is a folder, not a lesson file"),
    ("link-loop", "loop", None, r"bad\.json cannot be read \(Too many levels of symbolic links\)"),
    ("link-to-nothing", "link", "/nonexistent/lesson.json", r"bad\.json is a link to a file that is not there"),
    ("nested-1200-brackets", "text", "[" * 1200, r"nests lists and objects 1,200 deep; .*at most 16 deep"),
    ("nested-100000-brackets", "text", "[" * 100_000 + "]" * 100_000, r"nests lists and objects 100,000 deep"),
    ("nested-in-summary", "text", _nested(900), r"nests lists and objects 901 deep"),
    ("nested-20-in-summary", "text", _nested(20), r"nests lists and objects 21 deep; a lesson is flat"),
    ("oversize", "text", _lesson_text(summary="x" * MAX_BYTES), r"is more than 256,000 bytes; .*split it in two"),
    ("not-utf8", "bytes", b'{"name": "bad", "title": "\xff\xfe"}', r"is not UTF-8 text \(byte 0xff at \d+\): save it as UTF-8"),
    ("empty", "text", "", r"is not JSON: Expecting value"),
    ("not-json", "text", "name: bad", r"is not JSON"),
    ("a-list", "text", "[1, 2]", r"holds one JSON object with name, title, summary and steps, not a list"),
    ("a-string", "text", '"lesson"', r"holds one JSON object .* not text"),
    ("null", "text", "null", r"holds one JSON object .* not null"),
    ("nan-token", "text", _lesson_text().replace('"seed": 0', '"seed": NaN'),
     r"step 1 \('Train'\), field 'spec\.seed': nan is not a number a lesson can hold"),
    ("infinity-token", "text", _lesson_text().replace('"seed": 0', '"seed": -Infinity'), r"-inf is not a number"),
    ("overflowing-float", "text", _lesson_text().replace('"seed": 0', '"seed": 1e400'), r"inf is not a number"),
    ("5000-digit-number", "text", _lesson_text().replace('"seed": 0', '"seed": ' + "9" * 5000),
     r"holds a number of 5,000 digits \(999999999999\.\.\.\); a lesson's whole numbers are at most"),
    ("2**70", "text", _lesson_text().replace('"seed": 0', f'"seed": {2**70}'), r"holds a number of 22 digits"),
    ("2**60", "text", _lesson_text().replace('"seed": 0', f'"seed": {2**60}'),
     r"step 1 \('Train'\), field 'spec\.seed': 1152921504606846976 is too large; a lesson's whole numbers are at most"),
    ("seed-2**40", "text", _lesson_text().replace('"seed": 0', f'"seed": {2**40}'),
     r"field 'spec(\.seed)?': seed must be a whole number 0 \.\. 2147483647 \(got 1099511627776\)"),
    ("duplicate-key", "text", _lesson_text().replace('"title": "Good"', '"title": "Good", "title": "Other"'),
     r"gives the key 'title' twice in one object; keep one"),
    ("lone-surrogate", "text", _lesson_text(title="\ud800"), r"half of a character \(a lone surrogate\)"),
    ("escape-in-title", "text", _lesson_text(title="Good\u001b[2J"), r"field 'title': holds the control character"),
    ("line-break-in-title", "text", _lesson_text(title="Good\nBad"), r"field 'title': holds a line break"),
    ("huge-title", "text", _lesson_text(title="x" * 100_000), r"field 'title': is 100,000 characters; at most 200"),
    ("huge-key", "text", _lesson_text(**{"k" * 5000: 1}), r"is a key of 5,000 characters; keys are field names"),
    ("100000-steps", "text", _lesson_text(steps=[0] * 100_000), r"is more than 256,000 bytes"),
]
# fmt: on


def folder_hash(folder: Path, skip: str = "\0") -> str:
    """What a folder holds, hashed without opening anything but regular files (a FIFO or a device is never
    read): each entry's name, kind, a link's target and a file's bytes (names starting with ``skip`` left out)."""
    digest = hashlib.sha256()
    if not folder.exists():
        return "absent"
    for path in sorted(folder.rglob("*")):
        if path.name.startswith(skip):
            continue
        mode = os.lstat(path).st_mode
        digest.update(f"{path.relative_to(folder)}\0{stat.S_IFMT(mode)}\0".encode())
        if stat.S_ISLNK(mode):
            digest.update(os.readlink(path).encode())
        elif stat.S_ISREG(mode):
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def store(tmp_path) -> Store:
    """An empty store holding one good lesson of its own."""
    opened = Store(tmp_path / "store")
    save_lesson(GOOD, opened)
    yield opened
    opened.close()


def store_state(root: Path) -> tuple[list, str]:
    """A store's rows and every file but its database (whose -wal and -shm files come and go as it is opened)."""
    with Store(root) as store:
        rows = sorted((r.id, r.status) for r in store.list_runs(limit=10_000))
    return rows, folder_hash(root, skip="stitchlab.sqlite")


def one_line(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message and len(message) <= 600, message


@pytest.mark.timeout(60)  # a FIFO read would wait forever: this fails instead
@pytest.mark.parametrize(("kind", "value", "says"), [e[1:] for e in ENTRIES], ids=[e[0] for e in ENTRIES])
def test_a_hostile_lesson_file_is_one_line_and_the_good_lessons_are_still_listed(store, capsys, kind, value, says):
    folder = lessons_dir(store)
    bad = folder / "bad.json"
    _plant(kind, value, bad)
    before = folder_hash(folder)
    lessons, problems = catalog(store)
    assert [lesson.name for lesson in lessons] == [*SHIPPED_ORDER, "good"]  # the good ones, listed as ever
    assert len(problems) == 1 and problems[0].startswith(str(bad)), problems
    assert re.search(says, problems[0]), problems[0]
    one_line(problems[0])
    with pytest.raises(LessonError) as exc:  # the page's link to it (lessons?lesson=bad) says the same line
        get_lesson("bad", store)
    assert str(exc.value) == problems[0]
    with pytest.raises(LessonError) as exc:  # `lessons check FILE` and the upload read it the same way
        read_lesson_file(bad)
    one_line(str(exc.value))
    if kind in ("text", "bytes"):
        with pytest.raises(LessonError) as exc:  # an upload of the same bytes
            read_lesson(bad.read_bytes(), where="upload.json")
        one_line(str(exc.value))
    assert main(["lessons", "list", "--json", "--store", str(store.root)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed["lessons"]] == [*SHIPPED_ORDER, "good"] and listed["problems"] == problems
    assert main(["lessons", "check", str(bad), "--store", str(store.root)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: "), captured.err
    assert folder_hash(folder) == before, "a refused lesson file must stay as it was"


def test_the_cli_says_one_line_for_a_hostile_file_given_to_check(store, capsys, tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    (tmp_path / "deep.json").write_text("[" * 1200)
    cases = {str(tmp_path / "fifo.json"): "is a FIFO, not a lesson file",
             str(tmp_path / "zero.json"): "is a device, not a lesson file",
             "/dev/zero": "/dev/zero is a device, not a lesson file",
             str(tmp_path / "deep.json"): "nests lists and objects 1,200 deep",
             str(tmp_path / "missing.json"): "no such lesson file; give a lesson's name"}  # fmt: skip
    for arg, says in cases.items():
        assert main(["lessons", "check", arg, "--store", str(store.root)]) == 2, arg
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: "), arg
        assert says in captured.err, captured.err


def test_a_file_name_with_a_line_break_is_listed_on_one_line(store):
    (lessons_dir(store) / "two\nlines.json").write_text("[")
    _, problems = catalog(store)
    assert len(problems) == 1 and "two lines.json" in problems[0] and "is not JSON" in problems[0]
    one_line(problems[0])


def test_a_bom_and_utf16_files_are_read(store):
    folder = lessons_dir(store)
    (folder / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({**GOOD, "name": "bom"}).encode())
    (folder / "wide.json").write_bytes(json.dumps({**GOOD, "name": "wide"}).encode("utf-16"))
    lessons, problems = catalog(store)
    assert problems == [] and [lesson.name for lesson in lessons][-3:] == ["bom", "good", "wide"]
    assert read_lesson("\ufeff" + json.dumps(GOOD)).name == "good"


# ---------------------------------------------------------------------------------------- a save never loses


def _record(label: str) -> RunRecord:
    return RunRecord("0" * 16, "zoo", {"seed": 1}, "done", {"accuracy": 0.9}, None, 0.0, None, None, label)


@pytest.mark.parametrize(("change", "says"), [
    ({"summary": "x" * 300_000}, r"would be 300,\d{3} bytes as a file; a lesson file is at most 256,000"),
    ({"summary": "\n" * 200_000}, r"would be 400,\d{3} bytes as a file"),  # each line break is 2 bytes in JSON
    ({"summary": "\u20ac" * 100_000}, r"would be 300,\d{3} bytes as a file"),  # 3 bytes each in UTF-8
    ({"steps": [{**GOOD["steps"][0], "text": "y" * 260_000}]}, r"would be 260,\d{3} bytes"),
    ({"title": "x" * 300_000}, r"field 'title': is 300,000 characters; at most 200"),
    ({"summary": float("nan")}, r"field 'summary': nan is not a number"),
    ({"summary": "\ud800"}, r"lone surrogate"),
])  # fmt: skip
def test_a_save_the_app_could_not_read_back_leaves_the_good_file_as_it_was(store, change, says):
    folder = lessons_dir(store)
    before, bytes_before = folder_hash(folder), (folder / "good.json").read_bytes()
    with pytest.raises(LessonError, match=says) as exc:
        save_lesson({**GOOD, **change}, store)
    one_line(str(exc.value))
    assert (folder / "good.json").read_bytes() == bytes_before and folder_hash(folder) == before
    assert get_lesson("good", store).title == "Good"  # the app still reads it


def test_adding_a_run_with_a_huge_label_keeps_the_lesson_readable(store):
    draft = get_lesson("good", store).to_dict()
    saved = save_lesson(add_run(draft, _record("L" * 300_000 + "\x1b[2J")), store)
    assert len(saved.steps) == 2 and len(saved.steps[1].title) == 200 and saved.steps[1].title.endswith("...")
    assert get_lesson("good", store).to_dict() == saved.to_dict()  # read back as saved
    assert catalog(store)[1] == []


def test_a_save_into_a_folder_it_cannot_write_is_one_line_and_changes_nothing(tmp_path):
    store = Store(tmp_path / "store")
    (tmp_path / "store" / "lessons").mkdir()
    (tmp_path / "store" / "lessons" / "good.json").mkdir()  # a folder where the file goes
    before = folder_hash(tmp_path / "store")
    with pytest.raises(LessonError, match=r"good\.json is a folder: move it away to save lesson 'good'"):
        save_lesson(GOOD, store)
    assert folder_hash(tmp_path / "store") == before  # no temporary file left behind
    other = Store(tmp_path / "other")
    (tmp_path / "other" / "lessons").write_text("a file where the folder goes")
    with pytest.raises(LessonError, match=r"cannot save lesson 'good' into .*lessons \(File exists"):
        save_lesson(GOOD, other)
    store.close()
    other.close()


# ---------------------------------------------------------------------------------------- lessons run --steps


# fmt: off
STEPS: list = [
    ("letters", "abc", r"--steps takes step numbers 1 to 3 separated by commas, e\.g\. --steps 1,2 \(got 'abc'\)"),
    ("empty-part", "1,,2", r"--steps takes step numbers 1 to 3 .*\(got '1,,2'\)"),
    ("superscript-two", "\u00b2", r"--steps takes step numbers .*\(got '\u00b2'\)"),
    ("arabic-indic-three", "\u0663", r"--steps takes step numbers"),
    ("empty", "", r"--steps takes step numbers .*\(got ''\)"),
    ("zero", "0", r"--steps: this lesson has steps 1 to 3, not 0"),
    ("negative", "-1", r"--steps takes step numbers .*\(got '-1'\)"),
    ("thirty-nines", "9" * 30, r"--steps: this lesson has steps 1 to 3, not 99999999999999999\.\.\."),
    ("past-the-end-after-a-good-one", "1,4", r"--steps: this lesson has steps 1 to 3, not 4"),
    ("twice", "2,2", r"--steps names a step twice \(got '2,2'\); give each once"),
    ("float", "1.5", r"--steps takes step numbers"),
    ("huge-text", "1," * 10_000, r"--steps takes step numbers .*\(got '1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1'\.\.\.\)$"),
]
# fmt: on


@pytest.mark.parametrize(("steps", "says"), [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_lessons_run_takes_only_the_lessons_step_numbers(tmp_path, capsys, steps, says):
    root = tmp_path / "store"
    Store(root).close()
    before = store_state(root)
    code = main(["lessons", "run", "two-seeds", "--steps", steps, "--quiet", "--store", str(root)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: "), captured.err
    assert re.search(says, captured.err), captured.err
    assert store_state(root) == before, "nothing may run (or be stored) before --steps is read"


def test_the_tables_are_large():
    assert len(ENTRIES) >= 30 and len(STEPS) >= 10
    assert isinstance(LessonError("x"), StitchError)


# ---------------------------------------------------------------------------------------- the app


@pytest.mark.timeout(300)
def test_the_lessons_page_lists_the_good_lessons_beside_each_broken_file(app):
    """1,200 nested brackets, a /dev/zero link, a FIFO and a link loop in the store's lessons: the catalog and a
    link to one of them each say one line in a red box; nothing is read forever, nothing raises."""
    folder = Path(os.environ["STITCHLAB_STORE"]) / "lessons"
    folder.mkdir()
    (folder / "deep.json").write_text("[" * 1200)
    _plant("link", "/dev/zero", folder / "zero.json")
    _plant("fifo", None, folder / "fifo.json")
    _plant("loop", None, folder / "loop.json")
    before = folder_hash(folder)
    at = app.run().switch_page("views/lessons.py").run()
    assert not at.exception
    said = [e.value for e in at.error]
    for name, says in (("deep", "nests lists and objects 1,200 deep"), ("zero", "is a device"),
                       ("fifo", "is a FIFO"), ("loop", "Too many levels of symbolic links")):  # fmt: skip
        assert sum(f"{name}.json" in e and says in e for e in said) == 1, (name, said)
    assert all("\n" not in e for e in said)
    at.query_params.update({"lesson": "deep"})
    at.run()
    assert not at.exception and any("nests lists and objects 1,200 deep" in e.value for e in at.error)
    assert folder_hash(folder) == before
