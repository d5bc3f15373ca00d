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

import contextlib
import difflib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.lessons.checks import MAX_DEPTH, MAX_NUMBER, shown
from stitchcore.lessons.lesson import Lesson, LessonError, one_line, parse_lesson
from stitchcore.store.disk import full_disk_message
from stitchcore.store.results import Store

__all__ = ["MAX_BYTES", "SHIPPED", "SHIPPED_ORDER", "catalog", "get_lesson", "lesson_json", "lessons_dir",
           "read_lesson", "read_lesson_file", "save_lesson", "shipped_lessons"]

SHIPPED = Path(__file__).resolve().parent / "shipped"
# The order a class meets them: stitching works, where a trait lives, similarity is not stitching, heads matter.
SHIPPED_ORDER = ("two-seeds", "where-a-trait-lives", "similar-is-not-the-same", "heads-matter")
MAX_BYTES = 256_000  # a lesson file is text and settings; anything larger is not one


def lessons_dir(store: Store) -> Path:
    """The folder of a store's own lessons (made on the first save)."""
    return Path(store.root) / "lessons"


def read_lesson(data: str | bytes, where: str = "the lesson file") -> Lesson:
    """A lesson from a file's text (UTF-8, a byte-order mark allowed; or UTF-16/32 as JSON allows); LessonError
    naming ``where`` for what is not a lesson: too large, not text, not JSON, nested past reason, or a lesson
    :func:`~stitchcore.lessons.parse_lesson` refuses.

    >>> read_lesson("[" * 100_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.lessons.lesson.LessonError: the lesson file nests lists and objects 100,000 deep; a lesson is flat ...
    """
    size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    if size > MAX_BYTES:
        raise LessonError(f"{where} is {size:,} bytes; a lesson file is at most {MAX_BYTES:,}: shorten its text "
                          "or split it in two")  # fmt: skip
    if isinstance(data, bytes):
        try:
            data = data.decode(json.detect_encoding(data))
        except UnicodeDecodeError as exc:
            raise LessonError(f"{where} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start:,}): "
                              "save it as UTF-8") from None  # fmt: skip
    data = data.removeprefix("\ufeff")  # a byte-order mark some editors write first
    if (depth := _depth(data)) > MAX_DEPTH:
        raise LessonError(f"{where} nests lists and objects {depth:,} deep; a lesson is flat settings and text, "
                          f"at most {MAX_DEPTH} deep")  # fmt: skip
    try:
        value = json.loads(data, object_pairs_hook=_object, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise LessonError(f"{where} is not JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # a key given twice (said whole), a number past reason
        raise LessonError(f"{where} {exc}" if isinstance(exc, _Refused) else f"{where} is not JSON: {exc}") from None
    return parse_lesson(value)


class _Refused(ValueError):
    """What :func:`read_lesson`'s JSON hooks refuse, said after the file's name."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (JSON keeps the last silently: a step's second "open" would
    hide its first)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"gives the key {shown(key)} twice in one object; keep one")
        out[key] = value
    return out


def _int(text: str) -> int:
    if len(text) > 20:  # past MAX_NUMBER's 16 digits: said before Python's own 4,300-digit limit
        raise _Refused(f"holds a number of {len(text):,} digits ({text[:12]}...); a lesson's whole numbers are at "
                       f"most {MAX_NUMBER:,}")  # fmt: skip
    return int(text)


def _depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest in JSON ``text`` (outside strings): known before ``json.loads`` recurses.

    >>> _depth('{"a": [1, "[[["]}')
    2
    """
    depth = most = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            most = max(most, depth)
        elif ch in "]}":
            depth -= 1
    return most


def read_lesson_file(path: str | Path) -> Lesson:
    """The lesson in the file ``path`` (a regular file, or a link to one): a device, a FIFO, a folder, a link
    loop or a file past :data:`MAX_BYTES` is a LessonError naming it, found before anything is read (a FIFO
    never blocks, ``/dev/zero`` is never read)."""
    path = Path(path)
    return read_lesson(_read_bytes(path), where=str(path))


def _read_bytes(path: Path) -> bytes:
    """The bytes of the regular file ``path``, at most :data:`MAX_BYTES` of them; LessonError otherwise."""
    try:
        mode = os.stat(path).st_mode  # follows a link: what a read would open
        if not stat.S_ISREG(mode):
            raise LessonError(f"{path} is {_what(mode)}, not a lesson file: remove it, or put a lesson's JSON there")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise LessonError(f"{path} is a link to a file that is not there: remove it") from None
        raise LessonError(f"{path}: no such lesson file; give a lesson's name (lessons list) or a .json file") from None
    except OSError as exc:
        raise LessonError(f"{path} cannot be read ({exc.strerror or exc}): fix or remove it") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced between the look and the open
            raise LessonError(f"{path} is not a regular file: remove it, or put a lesson's JSON there")
        try:
            data = fh.read(MAX_BYTES + 1)
        except OSError as exc:
            raise LessonError(f"{path} cannot be read ({exc.strerror or exc}): fix or remove it") from None
    if len(data) > MAX_BYTES:
        raise LessonError(f"{path} is more than {MAX_BYTES:,} bytes; a lesson file is at most {MAX_BYTES:,}: "
                          "shorten its text or split it in two")  # fmt: skip
    return data


def _what(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")  # fmt: skip


def _read_file(path: Path) -> Lesson:
    """The lesson in ``path``; LessonError starting with the path (the page and the CLI list such files)."""
    try:
        lesson = read_lesson_file(path)
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
    lessons, problems = _catalog(store)
    return lessons, list(problems.values())


def _catalog(store: Store | None) -> tuple[list[Lesson], dict[str, str]]:
    """:func:`catalog`, each problem under its file's name (``bad`` for ``bad.json``)."""
    found: dict[str, Lesson] = {lesson.name: lesson for lesson in shipped_lessons()}
    problems: dict[str, str] = {}
    if store is not None and lessons_dir(store).is_dir():
        for path in sorted(lessons_dir(store).glob("*.json")):
            try:
                lesson = _read_file(path)
            except StitchError as exc:  # any file: the good ones are listed whatever the others hold
                problems[path.stem] = one_line(str(exc))  # a file name may hold a line break
                continue
            found[lesson.name] = lesson  # dict order: a replaced shipped lesson keeps its place
    return list(found.values()), problems


def get_lesson(name: str, store: Store | None = None) -> Lesson:
    """The lesson called ``name`` (a store's own first); LessonError naming the close names otherwise."""
    lessons, problems = _catalog(store)
    for lesson in lessons:
        if lesson.name == name:
            return lesson
    if name in problems:
        raise LessonError(problems[name])
    names = [lesson.name for lesson in lessons]
    close = difflib.get_close_matches(name[:100], names, n=2, cutoff=0.6)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise LessonError(f"no lesson {shown(name, 60)}{guess} (known: {', '.join(names)})")


def lesson_json(lesson: Lesson | dict[str, Any]) -> str:
    """A lesson's file text (indented JSON, the key order as written)."""
    data = lesson.to_dict() if isinstance(lesson, Lesson) else lesson
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def save_lesson(data: dict[str, Any] | Lesson, store: Store) -> Lesson:
    """Check and write a lesson into the store's own lessons (replacing one of its name); returns it parsed.

    The file's text is read back first, as the app reads it (:func:`read_lesson`, :data:`MAX_BYTES`): a lesson
    the app could not open again is a LessonError and the file of its name stays as it was, byte for byte
    (written whole to a temporary file, then renamed over it).
    """
    lesson = data if isinstance(data, Lesson) else parse_lesson(data)
    text = lesson_json(lesson).encode("utf-8")
    if len(text) > MAX_BYTES:
        raise LessonError(f"lesson {lesson.name!r} would be {len(text):,} bytes as a file; a lesson file is at most "
                          f"{MAX_BYTES:,}: shorten its text or split it in two (nothing was saved)")  # fmt: skip
    again = read_lesson(text, where=f"lesson {lesson.name!r} as a file")
    if lesson_json(again).encode("utf-8") != text:  # the file would mean another lesson
        raise LessonError(f"lesson {lesson.name!r} does not read back as it was written: nothing was saved")
    folder = lessons_dir(store)
    target = folder / f"{lesson.name}.json"
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            raise LessonError(f"{target} is a folder: move it away to save lesson {lesson.name!r}")
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{lesson.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        said = full_disk_message(Path(store.root), exc) or f"{exc.strerror or exc}: check the store's folder"
        raise LessonError(f"cannot save lesson {lesson.name!r} into {folder} ({said})") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return lesson
