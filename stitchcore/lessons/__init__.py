"""Lessons: a teacher's sequence of stitching runs, one link a whole class can follow.

- :mod:`~stitchcore.lessons.lesson`: the file format (JSON), parsed and checked step by step
- :mod:`~stitchcore.lessons.values`: a student's values held inside what a step opens
- :mod:`~stitchcore.lessons.plan`: what a step runs (its models first), which steps are computed, a whole
  lesson run here (the CLI, the tests)
- :mod:`~stitchcore.lessons.library`: the shipped lessons and a store's own (load, save)
- :mod:`~stitchcore.lessons.editing`: a lesson's file edited (a step from a stored run, moved, removed)
- :mod:`~stitchcore.lessons.numbers`: a computed run's numbers for a step's ``{{name}}``, two runs side by side
- :mod:`~stitchcore.lessons.export`: a lesson as one offline HTML file

>>> lesson = get_lesson("two-seeds")
>>> 3 <= len(lesson.steps) <= 10, lesson.steps[0].kind
(True, 'zoo')
"""

from stitchcore.lessons.editing import add_run, add_step, move_step, new_lesson, remove_step, step_from_run
from stitchcore.lessons.export import lesson_report
from stitchcore.lessons.lesson import Control, Lesson, LessonError, Step, parse_lesson
from stitchcore.lessons.library import (
    catalog,
    get_lesson,
    lesson_json,
    read_lesson,
    read_lesson_file,
    save_lesson,
    shipped_lessons,
)
from stitchcore.lessons.numbers import compare_runs, run_numbers, step_numbers
from stitchcore.lessons.plan import StepRun, lesson_progress, missing_models, run_lesson, step_run
from stitchcore.lessons.values import StudentValues, student_values

__all__ = ["Control", "Lesson", "LessonError", "Step", "StepRun", "StudentValues", "add_run", "add_step", "catalog",
           "compare_runs", "get_lesson", "lesson_json", "lesson_progress", "lesson_report", "missing_models",
           "move_step", "new_lesson", "parse_lesson", "read_lesson", "read_lesson_file", "remove_step", "run_lesson",
           "run_numbers", "save_lesson", "shipped_lessons", "step_from_run", "step_numbers", "step_run",
           "student_values"]
