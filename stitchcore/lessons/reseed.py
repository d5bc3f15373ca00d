"""A lesson at other model seeds: does what its text promises hold for the recipe, or only for one training run?

:func:`reseeded` gives the same lesson with every model it trains moved ``shift`` seeds on: the lesson's own
models (``"models"``), each zoo step's recipe, and a Traits preset's step (its models from
``get_preset(name, seed=shift)``, as ``experiments.preset_seeds`` moves a preset), written out as a sweep step
over models of the lesson.  Everything else is the lesson's: the steps' specs, their adapter seeds, the open
controls (but a ``seed`` control, whose choices are the seeds the text was written on).  The held-out test
(``tests/test_lessons_heldout.py``) runs each shipped lesson's promised outcome at shifts 10, 20 and 30, seeds
no text was written on.

>>> from stitchcore.lessons.library import get_lesson
>>> lesson = reseeded(get_lesson("two-seeds"), 10)
>>> lesson.name, lesson.steps[0].spec["seed"], lesson.steps[1].spec["a"], lesson.steps[1].spec["b"]
('two-seeds-s10', 10, 'zoo:cnn-digits-s10', 'zoo:cnn-digits-s11')
>>> trait = reseeded(get_lesson("where-a-trait-lives"), 10)
>>> sorted({r.seed for step in trait.steps for r in step.models})  # the presets' models too
[10, 11]
>>> reseeded(get_lesson("two-seeds"), 0) == get_lesson("two-seeds")
True
>>> reseeded(get_lesson("heads-matter"), 10).step(5).spec["until"]  # a step's own settings are kept
'steps'
>>> reseeded(get_lesson("two-seeds"), MAX_SEED)
Traceback (most recent call last):
...
stitchcore.lessons.lesson.LessonError: lesson 'two-seeds': shift 2147483647 takes a model past seed 2147483647; \
use a smaller one
"""

from __future__ import annotations

from typing import Any

from stitchcore.experiments.trait_presets import get_preset, zoo_ref
from stitchcore.lessons.lesson import Lesson, LessonError, parse_lesson
from stitchcore.models.refs import MAX_SEED

__all__ = ["reseeded"]


def _moved(recipe: dict[str, Any], shift: int) -> dict[str, Any]:
    """A zoo recipe dict with its seed ``shift`` on (a recipe without one has seed 0)."""
    return {**recipe, "seed": int(recipe.get("seed", 0)) + shift}


def _refs_to_aliases(value: Any, aliases: dict[str, str]) -> Any:
    """``value`` with every zoo ref of ``aliases`` written ``@alias`` (a ``?init=random`` tail kept)."""
    if isinstance(value, str):
        ref, q, query = value.partition("?")
        return "@" + aliases[ref] + q + query if ref in aliases else value
    if isinstance(value, list):
        return [_refs_to_aliases(v, aliases) for v in value]
    if isinstance(value, dict):
        return {k: _refs_to_aliases(v, aliases) for k, v in value.items()}
    return value


def reseeded(lesson: Lesson, shift: int) -> Lesson:
    """``lesson`` with every model it trains ``shift`` seeds on (0: the lesson itself), named ``NAME-sSHIFT``;
    LessonError when a seed would pass the largest one."""
    if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
        raise LessonError(f"lesson {lesson.name!r}: a seed shift is a whole number >= 0, not {shift!r}")
    if shift == 0:
        return lesson
    data = lesson.to_dict()
    models = {alias: _moved(recipe, shift) for alias, recipe in data["models"].items()}
    steps = []
    for number, raw in enumerate(data["steps"], start=1):
        step = dict(raw)
        if "preset" in step:  # the preset's sweep at other seeds, its models named in the lesson
            preset = get_preset(step.pop("preset"), seed=shift)
            sweep = preset.sweeps[step.pop("sweep", 1) - 1]
            aliases = {}
            for k, recipe in enumerate(preset.recipes, start=1):
                aliases[zoo_ref(recipe)] = alias = f"P{number}_{k}"
                models[alias] = recipe.all_fields()
            step["kind"] = "sweep"
            step["spec"] = {**_refs_to_aliases(sweep.all_fields(), aliases), **(step.get("spec") or {})}
        elif step.get("kind") == "zoo":
            step["spec"] = _moved(step["spec"], shift)
        if isinstance(step.get("open"), dict) and "seed" in step["open"]:
            step["open"] = {k: v for k, v in step["open"].items() if k != "seed"} or None
            if step["open"] is None:
                del step["open"]
        steps.append(step)
    seeds = [int(r.get("seed", 0)) for r in models.values()] + [int(s["spec"].get("seed", 0)) for s in steps
                                                                 if s.get("kind") == "zoo"]  # fmt: skip
    if seeds and max(seeds) > MAX_SEED:
        raise LessonError(f"lesson {lesson.name!r}: shift {shift} takes a model past seed {MAX_SEED}; use a "
                          "smaller one")  # fmt: skip
    name = f"{lesson.name[:40]}-s{shift}"
    return parse_lesson({**data, "name": name, "models": models, "steps": steps})
