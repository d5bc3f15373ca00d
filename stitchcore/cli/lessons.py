"""CLI verbs over lessons: ``lessons list``, ``check``, ``run``, ``report``.

    python -m stitchcore lessons list                    # shipped and the store's own, with steps computed
    python -m stitchcore lessons check my-lesson.json    # exit 2 naming the step and field of what is wrong
    python -m stitchcore lessons run two-seeds           # compute every step before class (viewer mode then shows it)
    python -m stitchcore lessons report two-seeds --out two-seeds.html   # one file that opens offline
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stitchcore.cli._args import out_path, safe
from stitchcore.cli._common import CTRL_C, Command, ProgressBar, check_device, emit, set_threads, took

if TYPE_CHECKING:
    from stitchcore.lessons import Lesson, Step
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "step_numbers"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``lessons`` (``list``, ``check``, ``run``, ``report``) to the CLI."""
    lessons = verbs.add_parser("lessons", help="lessons: sequences of runs a class follows by link")
    sub = lessons.add_subparsers(dest="lessons_verb", required=True)
    sub.add_parser("list", parents=[common], help="every lesson (shipped and the store's own) and its steps computed")
    lc = sub.add_parser("check", parents=[common], help="check a lesson file or name: every step, field and model")
    lc.add_argument("lesson", help="a lesson's name, or a lesson file (.json)")
    lr = sub.add_parser("run", parents=[common], help="compute a lesson's steps with its own settings (cached)")
    lr.add_argument("lesson", help="a lesson's name, or a lesson file (.json)")
    lr.add_argument("--steps", default=None, help="comma-separated step numbers (default: every step)")
    lp = sub.add_parser("report", parents=[common], help="write a lesson and its computed steps as one offline HTML file")
    lp.add_argument("lesson", help="a lesson's name, or a lesson file (.json)")
    lp.add_argument("--out", required=True, type=out_path, metavar="FILE.html", help="the file to write")


def _lesson(text: str, store: Store) -> Lesson:
    """A lesson by name, or read from a file (a ``.json`` name, a path, or a file that is there); a device, a FIFO
    or a folder given as the file is one line, never read."""
    from stitchcore.lessons import get_lesson, read_lesson_file

    if text.endswith(".json") or "/" in text or os.path.lexists(text) and not os.path.isdir(text):
        return read_lesson_file(Path(text))
    return get_lesson(text, store)


def step_numbers(text: str, count: int) -> list[int]:
    """``--steps``: comma-separated step numbers of a lesson of ``count`` steps, each once, in ASCII digits.

    >>> step_numbers("1,3", 3)
    [1, 3]
    >>> step_numbers("1,,2", 3)
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: --steps takes step numbers 1 to 3 separated by commas, e.g. --steps 1,2 (got '1,,2')
    """
    from stitchcore.errors import StitchError

    shown = repr(text) if len(text) <= 40 else repr(text[:37]) + "..."
    parts = text.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise StitchError(f"--steps takes step numbers 1 to {count} separated by commas, e.g. --steps 1,2 "
                          f"(got {shown})")  # fmt: skip
    numbers = [int(p) for p in parts]
    if bad := [n for n in numbers if not 1 <= n <= count]:
        said = str(bad[0]) if len(str(bad[0])) <= 20 else str(bad[0])[:17] + "..."
        raise StitchError(f"--steps: this lesson has steps 1 to {count}, not {said}")
    if len(set(numbers)) < len(numbers):
        raise StitchError(f"--steps names a step twice (got {shown}); give each once")
    return numbers


def _cmd_list(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    from stitchcore.lessons import catalog, lesson_progress

    lessons, problems = catalog(store)
    rows = [{"name": lesson.name, "title": lesson.title, "steps": len(lesson.steps),
             "computed": sum(s == "done" for s in lesson_progress(lesson, store))} for lesson in lessons]  # fmt: skip
    lines = [f"{safe(r['name']):28s} {r['computed']}/{r['steps']} computed  {safe(r['title'])}" for r in rows]
    lines += [f"unreadable: {safe(p)}" for p in problems]
    emit(args, {"lessons": rows, "problems": problems}, "\n".join(lines) or "(no lessons)")


def _cmd_check(args: argparse.Namespace, store: Store, bar: ProgressBar) -> int | None:
    from stitchcore.lessons import LessonError, missing_models, step_run

    lesson = _lesson(args.lesson, store)
    problems = missing_models(lesson, store)
    if problems:
        raise LessonError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    rows = [{"step": s.number, "title": s.title, "kind": s.kind, "run_id": step_run(s).run_id,
             "open": {c.field: c.describe() for c in s.open}} for s in lesson.steps]  # fmt: skip
    lines = [f"ok: lesson {lesson.name!r}, {len(rows)} steps"]
    lines += [f"  {r['step']}. {r['kind']:10s} {r['title']}" + (f"  (open: {', '.join(r['open'])})" if r["open"] else "")
              for r in rows]  # fmt: skip
    emit(args, {"lesson": lesson.name, "ok": True, "steps": rows}, "\n".join(lines))
    return None


def _cmd_run(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    from stitchcore.lessons import run_lesson

    check_device(args)
    set_threads(args)
    lesson = _lesson(args.lesson, store)
    steps = step_numbers(args.steps, len(lesson.steps)) if args.steps is not None else None
    def said(step: Step) -> None:
        bar.close()
        if not args.quiet:
            print(f"step {step.number}/{len(lesson.steps)}: {step.title}", file=sys.stderr)

    outcomes = run_lesson(lesson, store, steps=steps, progress=bar, device=args.device, cancel=CTRL_C, on_step=said)
    bar.close()
    numbers = steps or list(range(1, len(lesson.steps) + 1))
    rows = [{"step": n, "run_id": o.record.id, "kind": o.record.kind, "cached": o.cached,
             "elapsed": round(o.seconds, 3)} for n, o in zip(numbers, outcomes, strict=True)]  # fmt: skip
    lines = [f"{r['step']}. {r['kind']:10s} {r['run_id']}  {took(r['cached'], r['elapsed'])}" for r in rows]
    emit(args, {"lesson": lesson.name, "steps": rows}, "\n".join(lines))


def _cmd_report(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    from stitchcore.lessons.export import write_lesson_report
    from stitchcore.store.disk import out_file

    out_file(args.out)  # a bad --out is named even when no step is computed yet
    lesson = _lesson(args.lesson, store)
    info = write_lesson_report(lesson, store, args.out)
    emit(args, {"lesson": lesson.name, "out": str(info.path), "bytes": info.bytes},
         f"wrote {info.path} ({info.bytes / 1e6:.1f} MB)")  # fmt: skip


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("lessons", "list"): _cmd_list,
    ("lessons", "check"): _cmd_check,
    ("lessons", "run"): _cmd_run,
    ("lessons", "report"): _cmd_report,
}
