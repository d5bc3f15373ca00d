"""What a bundled row may hold, by type and range: the rules :mod:`stitchcore.store.bundle_check` checks every
run of a bundle against before anything is written (a bundle with one bad value is refused whole).

A row's kind, status, label and error are bounded strings, its times finite and between :data:`EARLIEST` and now
(plus :data:`CLOCK_SKEW`); a summary's headline numbers (:data:`HEADLINE_NUMBERS`) are finite numbers, its other
numbers (:data:`NUMBERS`, :data:`NUMBER_TABLES`) numbers or ``null``, its words (:data:`WORDS`) bounded strings.

>>> summary_problem({"accuracy": 0.91, "base": {"a": 0.95, "b": 0.93}, "ref": "zoo:x"}) is None
True
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from stitchcore.store.results import STATUSES

__all__ = ["CLOCK_SKEW", "EARLIEST", "HEADLINE_NUMBERS", "MAX_ERROR", "MAX_LABEL", "MAX_STEP", "MAX_WORD", "NUMBERS",
           "NUMBER_TABLES", "WORDS", "summary_problem"]

_FINAL = tuple(s for s in STATUSES if s not in ("queued", "running"))  # the statuses a bundled run may have
CLOCK_SKEW = 600.0  # seconds a bundled run's times may lie ahead of this machine's clock (another machine's)
EARLIEST = 946_684_800.0  # 2000-01-01 UTC: a run time before it is no time StitchLab wrote (and -inf breaks dates)
MAX_STEP = 2**53  # a series step is a whole number 0 <= step < 2**53: exact as a float, within SQLite's INTEGER
MAX_LABEL = 1_000  # characters of a row's label (lists and plots show it)
MAX_ERROR = 10_000  # characters of a failed run's error message
MAX_WORD = 4_096  # characters of a summary's word (ref, dataset, device ...) and of a series name
_ID_RE = re.compile(r"[0-9a-f]{16}")  # a run id: run_id_for's 16 hex digits
_KIND_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # a run kind: an experiment's registered name

# Summary fields at the top of a summary (and inside ``base``) that readers format as numbers without a guard
# (``f"{s['accuracy']:.1%}"``): a finite number, never null, never text.
HEADLINE_NUMBERS = frozenset({"accuracy", "start_accuracy", "loss", "loss_penalty", "perplexity"})
# Numbers readers format where present: a finite number or null (a run without one stores null).
NUMBERS = frozenset({"val_loss", "val_accuracy", "final_train_loss", "sparsity", "seconds", "params", "flops",
                     "n", "n_train", "n_test", "n_val", "n_cells", "eval_tokens", "steps", "lstsq_residual",
                     "kept_epoch", "accuracy_mean", "penalty_mean"})  # fmt: skip
# Tables of numbers (a matrix's grids, per-class bars, intervals): a number, or lists / objects of numbers and
# nulls at any depth (a skipped cell is null).  Every ``*_ci`` field is one too.
NUMBER_TABLES = frozenset({"penalty", "per_class", "per_class_base", "values", "residual", "baseline", "base_ci",
                           "across_seeds"})  # fmt: skip
# Words readers print or call string methods on: a string of at most MAX_WORD characters (or null, but not for
# penalty_base, which is upper-cased).
WORDS = frozenset({"ref", "name", "arch", "dataset", "device", "mode", "measure", "metric", "input_kind",
                   "backend", "penalty_base"})  # fmt: skip


def _is_number(value: Any) -> bool:
    """A finite float, or an int within 64 bits (not a bool: ``True`` formats as ``100.0%``; 2**1100 overflows
    a float where a reader formats it).

    >>> [_is_number(v) for v in (0.5, 3, True, 2**64, "1")]
    [True, True, False, False, False]
    """
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is int and -(2**63) <= value < 2**63


def _show(value: Any) -> str:
    return f"{value!r:.40}"


def _table_problem(value: Any, where: str, depth: int = 0) -> str | None:
    """Why ``value`` is not a number or a (nested) list / object of numbers and nulls, or None."""
    if value is None or _is_number(value):
        return None
    if isinstance(value, (list, dict)) and depth < 8:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return next((p for k, v in items if (p := _table_problem(v, f"{where}[{k!r}]", depth + 1))), None)
    return f"summary field {where} is {_show(value)}, not a number or null"


def summary_problem(summary: Any, where: str = "") -> str | None:
    """Why a bundled summary would break a reader (Results, a run view, ``runs report``, a handout), or None:
    each field of :data:`HEADLINE_NUMBERS` a finite number, of :data:`NUMBERS` one or null, of
    :data:`NUMBER_TABLES` (and every ``*_ci``) numbers and nulls, of :data:`WORDS` a bounded string; ``base``
    null or an object of numbers and of objects held to these same rules.

    >>> summary_problem({"stitched": "anything", "seeds": {"accuracy_mean": 0.9}}) is None
    True
    >>> summary_problem({"base": {"a": {"loss": None}}})
    "summary field 'base'['a']['loss'] is None, not a finite number"
    """
    if not isinstance(summary, dict):
        return f"summary{where} is {_show(summary)}, not an object"
    for key, value in summary.items():
        at = f"{where}[{key!r}]" if where else repr(key)
        if key in HEADLINE_NUMBERS and not _is_number(value):
            return f"summary field {at} is {_show(value)}, not a finite number"
        if key in NUMBERS and value is not None and not _is_number(value):
            return f"summary field {at} is {_show(value)}, not a finite number or null"
        if (key in NUMBER_TABLES or str(key).endswith("_ci")) and (problem := _table_problem(value, at)):
            return problem
        if key in WORDS and not (isinstance(value, str) and len(value) <= MAX_WORD
                                 or (value is None and key != "penalty_base")):
            return f"summary field {at} is {_show(value)}, not a string of at most {MAX_WORD:,} characters"
        if key == "seeds" and value is not None:  # across adapter seeds: means (NUMBERS) and lists of numbers
            if not isinstance(value, dict):
                return f"summary field {at} is {_show(value)}, not an object"
            problem = summary_problem({k: v for k, v in value.items() if k in NUMBERS}, at) or next(
                (p for k, v in value.items() if k not in NUMBERS and (p := _table_problem(v, f"{at}[{k!r}]"))), None)
            if problem:
                return problem
        if key == "base" and value is not None and not where:  # each model's own numbers (a: 0.95, or a: {...})
            if not isinstance(value, dict):
                return f"summary field {at} is {_show(value)}, not an object"
            for role, score in value.items():
                problem = (summary_problem(score, f"{at}[{role!r}]") if isinstance(score, dict) else
                           None if _is_number(score) else
                           f"summary field {at}[{role!r}] is {_show(score)}, not a finite number")
                if problem:
                    return problem
    return None


def _time_problem(value: Any, name: str, optional: bool) -> str | None:
    """Why a row time is unusable: not a finite number, before :data:`EARLIEST`, or in the future; or None."""
    if value is None and optional:
        return None
    if not _is_number(value):
        return f"its {name} time is {_show(value)}, not a finite number of seconds"
    if value < EARLIEST:
        return f"its {name} time {value!r:.30} lies before 2000"
    if value > time.time() + CLOCK_SKEW:  # "newest" decides which run a name resolves to: the future would win
        return f"its {name} time lies in the future"
    return None


def _row_problem(row: dict) -> str | None:
    """Why a bundled row cannot be stored and read back (type and range of every field but its times), or None."""
    if not isinstance(row.get("kind"), str) or not _KIND_RE.fullmatch(row["kind"]):
        return f"its kind {_show(row.get('kind'))} is not a run kind (a short lowercase word)"
    if row.get("status") not in _FINAL:
        return f"its status {_show(row.get('status'))} is not one of {', '.join(_FINAL)}"
    if not isinstance(row.get("label"), str) or len(row["label"]) > MAX_LABEL:
        return f"its label {_show(row.get('label'))} is not a string of at most {MAX_LABEL:,} characters"
    error = row.get("error")
    if error is not None and (not isinstance(error, str) or len(error) > MAX_ERROR):
        return f"its error {_show(error)} is not null or a string of at most {MAX_ERROR:,} characters"
    return summary_problem(row.get("summary"))
