"""Where lessons live: the ones the project ships (``stitchcore/lessons/shipped/``) and a store's own
(``<store>/lessons/NAME.json``, what the app's editor saves; a store lesson of a shipped name replaces it there).

>>> [lesson.name for lesson in shipped_lessons()]
['two-seeds', 'where-a-trait-lives', 'similar-is-not-the-same', 'heads-matter']
>>> get_lesson("two-seed")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
stitchcore.lessons.lesson.LessonError: no lesson 'two-seed'; did you mean 'two-seeds'? (known: ...)
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from stitchcore.lessons.lesson import Lesson, LessonError, parse_lesson
from stitchcore.store.results import Store

__all__ = ["SHIPPED", "SHIPPED_ORDER", "catalog", "get_lesson", "lesson_json", "lessons_dir", "read_lesson",
           "save_lesson", "shipped_lessons"]

SHIPPED = Path(__file__).resolve().parent / "shipped"
# The order a class meets them: stitching works, where a trait lives, similarity is not stitching, heads matter.
SHIPPED_ORDER = ("two-seeds", "where-a-trait-lives", "similar-is-not-the-same", "heads-matter")
MAX_BYTES = 256_000  # a lesson file is text and settings; anything larger is not one


def lessons_dir(store: Store) -> Path:
    """The folder of a store's own lessons (made on the first save)."""
    return Path(store.root) / "lessons"


def read_lesson(data: str | bytes, where: str = "the lesson file") -> Lesson:
    """A lesson from a file's text; LessonError naming ``where`` for what is not a lesson."""
    if len(data) > MAX_BYTES:
        raise LessonError(f"{where} is {len(data):,} bytes; a lesson file is at most {MAX_BYTES:,}")
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LessonError(f"{where} is not JSON: {exc}") from exc
    return parse_lesson(value)


def _read_file(path: Path) -> Lesson:
    """The lesson in ``path``; LessonError starting with the path (the page and the CLI list such files)."""
    try:
        lesson = read_lesson(path.read_bytes(), where=str(path))
    except LessonError as exc:
        raise LessonError(exc if str(exc).startswith(str(path)) else f"{path}: {exc}") from exc
    if lesson.name != path.stem:
        raise LessonError(f"{path}: the lesson inside is named {lesson.name!r}; name the file {lesson.name}.json")
    return lesson


def shipped_lessons() -> list[Lesson]:
    """The lessons the project ships, in :data:`SHIPPED_ORDER` (then any other shipped file by name)."""
    paths = sorted(SHIPPED.glob("*.json"), key=lambda p: (p.stem not in SHIPPED_ORDER,
                                                          SHIPPED_ORDER.index(p.stem) if p.stem in SHIPPED_ORDER else 0,
                                                          p.stem))  # fmt: skip
    return [_read_file(p) for p in paths]


def catalog(store: Store | None = None) -> tuple[list[Lesson], list[str]]:
    """Every lesson (shipped first, in order; a store's own next, by name; a store lesson replaces a shipped one
    of its name) and one message per store file that does not read (the page lists them, never hides them)."""
    found: dict[str, Lesson] = {lesson.name: lesson for lesson in shipped_lessons()}
    problems = []
    if store is not None and lessons_dir(store).is_dir():
        for path in sorted(lessons_dir(store).glob("*.json")):
            try:
                lesson = _read_file(path)
            except (LessonError, OSError) as exc:
                problems.append(str(exc))
                continue
            found[lesson.name] = lesson  # dict order: a replaced shipped lesson keeps its place
    return list(found.values()), problems


def get_lesson(name: str, store: Store | None = None) -> Lesson:
    """The lesson called ``name`` (a store's own first); LessonError naming the close names otherwise."""
    lessons, problems = catalog(store)
    for lesson in lessons:
        if lesson.name == name:
            return lesson
    for problem in problems:
        if Path(problem.split(":")[0]).stem == name:
            raise LessonError(problem)
    names = [lesson.name for lesson in lessons]
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise LessonError(f"no lesson {name!r}{guess} (known: {', '.join(names)})")


def lesson_json(lesson: Lesson | dict[str, Any]) -> str:
    """A lesson's file text (indented JSON, the key order as written)."""
    data = lesson.to_dict() if isinstance(lesson, Lesson) else lesson
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def save_lesson(data: dict[str, Any] | Lesson, store: Store) -> Lesson:
    """Check and write a lesson into the store's own lessons (replacing one of its name); returns it parsed."""
    lesson = data if isinstance(data, Lesson) else parse_lesson(data)
    folder = lessons_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(lesson_json(lesson))
    os.replace(tmp, folder / f"{lesson.name}.json")
    return lesson
