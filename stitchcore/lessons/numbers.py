"""A computed run's numbers as a lesson says them: each ``{{name}}`` of a step's text, and two runs side by side.

:func:`step_numbers` gives every number's meaning (``measures.meaning``'s names) that a run of that kind has,
written as every page writes it (:mod:`stitchcore.plots.penalty`) with its 95% interval where the run stored
one: ``"+1.1 pts [−0.2 to +3.8 pts]"``.  A kind with many values of one meaning gives their range and where
they were measured:

* ``sweep``: the penalty (B − stitched), the stitched accuracy and each trait metric from the first cut to the
  last, ``"−0.2 to +1.9 pts over the 5 cuts"`` (a lesson asks whether it stays low, or where it rises);
* ``matrix``: accuracy, penalty, debiased accuracy and the fits' R² and CKA over the scored cells;
* ``similarity``: the measure (and its calibrated score) over every pair of layers;
* ``lmdepth``: the loss and loss penalty over every join (each split, mode and head);
* ``assemble``: the accuracy over the networks it trained.

:func:`compare_runs` is the lesson's run beside a student's: the headline numbers (``report.headline``, with
their intervals), and for a sweep the penalty and each trait metric at every cut.

>>> step_numbers("stitch", {"accuracy": 0.969, "accuracy_ci": [0.951, 0.982], "penalty": 0.011,
...                         "penalty_ci": [-0.002, 0.027]})
{'accuracy': '96.9% [95.1–98.2%]', 'penalty': '+1.1 pts [−0.2 to +2.7 pts]'}
>>> step_numbers("sweep", {"positions": ["block1", "fc1"], "stitched": {"accuracy": [0.96, 0.97]},
...                        "reference": {"b": {"metrics": {"accuracy": 0.98}}}})["penalty"]
'+1.0 to +2.0 pts over the 2 cuts'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from stitchcore.experiments.matrix import debiased
from stitchcore.experiments.sweep import penalty_along, penalty_ci_along
from stitchcore.measures.meaning import meaning
from stitchcore.plots.penalty import format_pct, format_pts, interval_words, loss_penalty_pct, penalty_pts
from stitchcore.report.summary import headline
from stitchcore.store.results import RunRecord

__all__ = ["compare_runs", "run_numbers", "step_numbers"]

Numbers = dict[str, str]
_RATES = ("accuracy", "class_acc", "confusion", "blackout", "decor")  # fractions, shown as percentages
_INTERVAL_KIND = {**{r: "accuracy" for r in _RATES}, "penalty": "penalty", "debiased": "penalty", "loss": "loss",
                  "loss_penalty": "loss_penalty"}  # meaning family -> plots.penalty.interval_words' kind


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _family(name: str) -> str:
    return name.partition(":")[0]


def _value(name: str, value: float) -> str:
    """One stored value of meaning ``name`` as pages write it: ``96.9%``, ``+1.1 pts``, ``2.160``, ``0.83``."""
    family = _family(name)
    if family in _RATES:
        return f"{value:.1%}"
    if family in ("penalty", "debiased"):
        return format_pts(penalty_pts(value))
    if family == "loss":
        return f"{value:.3f}"
    if family == "loss_penalty":
        return format_pct(loss_penalty_pct(value))
    return _bare(name, value) + (" null sds" if family == "calibrated" else "")


def _bare(name: str, value: float) -> str:
    """A similarity measure, a fit's R² or CKA (``0.83``), or a calibrated score (``130.0``), without a unit."""
    return f"{value:.1f}" if _family(name) == "calibrated" else f"{value:.2f}"


def _one(name: str, value: Any, ci: Any = None) -> str | None:
    """A single value with its stored 95% interval in brackets, as ``report.headline`` writes it; None when the
    run has no such value."""
    if not _finite(value):
        return None
    words = interval_words(ci, _INTERVAL_KIND[_family(name)]) if _family(name) in _INTERVAL_KIND else ""
    return _value(name, value) + (f" [{words}]" if words else "")


def _span(name: str, values: Iterable[Any], where: str) -> str | None:
    """Many values of one meaning as their range and where they were measured (``where`` says it, with ``{n}``
    for how many); one value as itself, equal ones as that value and where."""
    got = [v for v in values if _finite(v)]
    if not got:
        return None
    lo, hi = min(got), max(got)
    if len(got) == 1:
        return _value(name, lo)
    if lo == hi:
        return _value(name, lo) + " " + where.format(n=len(got))
    kind = _INTERVAL_KIND.get(_family(name))
    if kind is not None:
        ends = interval_words([lo, hi], kind)  # written as a 95% interval is: "+0.9 to +2.2 pts", "61.8–97.8%"
    else:
        ends = f"{_bare(name, lo)} to {_value(name, hi)}"
    return f"{ends} {where.format(n=len(got))}"


def _cells(grid: Any) -> list[Any]:
    """A heat map's cells in one list (a missing grid: none)."""
    return [v for row in grid for v in row] if isinstance(grid, list) else []


def _at(values: Any, i: int) -> Any:
    """``values[i]``, or None past its end or for no list (a run stored before intervals)."""
    return values[i] if isinstance(values, list) and i < len(values) else None


def _per_class(summary: Mapping[str, Any], out: Numbers) -> None:
    """``class_acc:K`` for every class K of a run that stored per-class accuracies (with their intervals)."""
    for k, value in enumerate(summary.get("per_class") or []):
        _put(out, f"class_acc:{k}", _one("class_acc", value, _at(summary.get("per_class_ci"), k)))


def _put(out: Numbers, name: str, text: str | None) -> None:
    if text is not None:
        out.setdefault(name, text)


def _zoo(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    _put(out, "accuracy", _one("accuracy", s.get("accuracy"), s.get("accuracy_ci")))
    _put(out, "loss", _one("loss", s.get("val_loss"), s.get("val_loss_ci")))  # a language model's held-out loss
    _per_class(s, out)
    return out


def _stitch(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    _put(out, "accuracy", _one("accuracy", s.get("accuracy"), s.get("accuracy_ci")))
    _put(out, "penalty", _one("penalty", s.get("penalty"), s.get("penalty_ci")))
    _per_class(s, out)
    return out


def _sweep(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    along = "over the {n} cuts"
    _put(out, "penalty", _span("penalty", penalty_along(dict(s)), along))
    for key, values in (s.get("stitched") or {}).items():
        text = _span(key, values, along)
        _put(out, key, text)  # "class_acc:3", "confusion:3->8"
        _put(out, _family(key), text)  # "confusion": the sweep's first metric of that family
    return out


def _matrix(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    over = "over the {n} cells"
    proxy = s.get("proxy") or {}
    for name, grid in (("accuracy", s.get("values") if s.get("metric", "accuracy") == "accuracy" else None),
                       ("penalty", s.get("penalty")), ("debiased", debiased(s) if s.get("values") else None),
                       ("fit-r2", proxy.get("r2")), ("fit-cka", proxy.get("cka"))):  # fmt: skip
        _put(out, name, _span(name, _cells(grid), over))
    return out


def _similarity(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    measure = str(s.get("measure") or "")
    over = "over the {n} layer pairs"
    if measure:
        _put(out, measure, _span(measure, _cells(s.get("values")), over))
        calibrated = _span("calibrated", _cells(s.get("calibrated")), over)
        _put(out, "calibrated", calibrated)
        _put(out, f"calibrated:{measure}", calibrated)
    return out


def _lm_pair(s: Mapping[str, Any]) -> Numbers:
    out: Numbers = {}
    _put(out, "loss", _one("loss", s.get("loss"), s.get("loss_ci")))
    _put(out, "loss_penalty", _one("loss_penalty", s.get("loss_penalty"), s.get("loss_penalty_ci")))
    _put(out, "accuracy", _one("accuracy", s.get("accuracy")))  # next-token accuracy
    return out


def _lmdepth(s: Mapping[str, Any]) -> Numbers:
    points = [p for p in s.get("points") or [] if isinstance(p, Mapping)]
    curves = {p.get("label") for p in points}
    where = "over the {n} splits" if len(curves) == 1 else f"over the {{n}} joins of {len(curves)} curves"
    out: Numbers = {}
    for name in ("loss_penalty", "loss"):
        _put(out, name, _span(name, (p.get(name) for p in points), where))
    return out


def _assemble(s: Mapping[str, Any]) -> Numbers:
    scored = [c.get("accuracy") for c in s.get("cells") or [] if isinstance(c, Mapping) and not c.get("same_as")]
    out: Numbers = {}
    _put(out, "accuracy", _span("accuracy", scored, "over the {n} networks"))
    return out


# Each kind's numbers from its summary (tests/test_lesson_numbers.py checks one per registered kind).
def _transfer(s: Mapping[str, Any]) -> Numbers:
    """The transferred probe's accuracy on B (one cut pair, or its range over the pairs along depth)."""
    points = [p for p in s.get("points") or [] if isinstance(p, Mapping)]
    out: Numbers = {}
    if len(points) == 1:
        _put(out, "accuracy", _one("accuracy", points[0].get("transferred"), points[0].get("transferred_ci")))
    else:
        _put(out, "accuracy", _span("accuracy", (p.get("transferred") for p in points), "over the {n} cut pairs"))
    return out


READERS: dict[str, Callable[[Mapping[str, Any]], Numbers]] = {
    "assemble": _assemble,
    "lmdepth": _lmdepth,
    "lmstitch": _lm_pair,
    "matrix": _matrix,
    "merge": _lm_pair,
    "similarity": _similarity,
    "stitch": _stitch,
    "sweep": _sweep,
    "transfer": _transfer,
    "zoo": _zoo,
}


def step_numbers(kind: str, summary: Mapping[str, Any] | None) -> dict[str, str]:
    """Every number's meaning name a ``kind`` run's ``summary`` has -> the number in words, with its 95% interval
    where the run stored one (the module says what a kind with many values gives); {} for no summary or a kind
    this version does not read.  A trait metric is given under its key (``class_acc:3``) and its family."""
    reader = READERS.get(kind)
    return reader(summary) if reader is not None and summary else {}


def run_numbers(rec: RunRecord | None) -> dict[str, str]:
    """:func:`step_numbers` of a finished run; {} for none, or one that has not finished (its step's text then
    names each number without a value)."""
    if rec is None or rec.status != "done":
        return {}
    return step_numbers(rec.kind, rec.summary)


def _sweep_rows(s: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """A sweep's A and B alone, then the penalty at every cut, then each other trait metric at every cut."""
    positions: Sequence[str] = s.get("positions") or []
    ref = s.get("reference") or {}
    rows: list[tuple[str, str | None]] = []
    for role in ("a", "b"):
        scores = ref.get(role) or {}
        rows.append((f"Model {role.upper()}", _one("accuracy", (scores.get("metrics") or {}).get("accuracy"),
                                                   (scores.get("metrics_ci") or {}).get("accuracy"))))  # fmt: skip
    penalty = penalty_along(dict(s))
    spans = s.get("penalty_ci") or penalty_ci_along(dict(s))
    for i, cut in enumerate(positions[: len(penalty)]):
        rows.append((f"Penalty at {cut}", _one("penalty", penalty[i], _at(spans, i))))
    labels = s.get("metric_labels") or {}
    cis = s.get("stitched_ci") or {}
    for key, values in (s.get("stitched") or {}).items():
        if key == "accuracy":  # the penalty above is B's accuracy minus it
            continue
        for i, cut in enumerate(positions[: len(values)]):
            label = str(labels.get(key, key))  # "3 predicted as 8"
            rows.append((f"{label[:1].upper()}{label[1:]} at {cut}", _one(key, values[i], _at(cis.get(key), i))))
    return rows


def _reading_rows(kind: str) -> Callable[[Mapping[str, Any]], list[tuple[str, str | None]]]:
    """Rows of a kind whose headline counts (a matrix's cells, a similarity's measure): each number's reading."""

    def rows(s: Mapping[str, Any]) -> list[tuple[str, str | None]]:
        numbers = step_numbers(kind, s)
        return [(meaning(name).title, text) for name, text in numbers.items() if ":" not in name]

    return rows


def _lmdepth_rows(s: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """An LM depth sweep's loss penalty at every join: each curve (mode, head) at each split (across tokenizers:
    the stitch's bits per byte at each split)."""
    if s.get("mode") == "cross_depth":
        return [(f"Stitched bits per byte, split {p['split']}", f"{p['bits_per_byte']:.3f} [{p['bits_per_byte_ci'][0]:.3f}"
                 f"–{p['bits_per_byte_ci'][1]:.3f}]") for p in s.get("points") or []]  # fmt: skip
    return [(f"Loss penalty, {p.get('label')}, split {p.get('split')}",
             _one("loss_penalty", p.get("loss_penalty"), p.get("loss_penalty_ci")))
            for p in s.get("points") or [] if isinstance(p, Mapping)]  # fmt: skip


def _matrix_rows(s: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """A matrix's A and B alone (the penalty is against B), then its numbers' ranges over the cells."""
    base = s.get("base") or {}
    return [(f"Model {r.upper()}", _one("accuracy", base.get(r))) for r in "ab"] + _reading_rows("matrix")(s)


_EXTRA_ROWS: dict[str, Callable[[Mapping[str, Any]], list[tuple[str, str | None]]]] = {
    "lmdepth": _lmdepth_rows,
    "matrix": _matrix_rows,
    "similarity": _reading_rows("similarity"),
    "sweep": _sweep_rows,
}


def _rows(rec: RunRecord) -> dict[str, str]:
    """One run's comparison rows, label -> text: its headline (intervals included), its kind's extra rows, the
    time last."""
    if rec.status != "done" or not rec.summary:
        return {}
    rows = dict(headline(rec))
    time = rows.pop("Time", None)
    extra = _EXTRA_ROWS.get(rec.kind)
    for label, text in extra(rec.summary) if extra is not None else []:
        if text is not None:
            rows.setdefault(label, text)
    if time is not None:
        rows["Time"] = time
    return rows


def compare_runs(own: RunRecord, mine: RunRecord) -> list[tuple[str, str, str]]:
    """The lesson's run and a student's side by side, ``(label, the lesson's run, your run)`` per row: each
    headline number with its 95% interval where the run stored one, written out whole; a sweep adds the
    penalty and each trait metric at every cut, an LM depth sweep the loss penalty at every join, a matrix or
    a similarity run its numbers' ranges.  A number only one run has leaves the other's cell "".

    >>> from stitchcore.store.results import RunRecord
    >>> def rec(acc): return RunRecord("0" * 16, "zoo", {}, "done", {"accuracy": acc}, None, 0.0, None, None, "x")
    >>> compare_runs(rec(0.97), rec(0.95))[0]
    ('Test accuracy', '97.0%', '95.0%')
    """
    left, right = _rows(own), _rows(mine)
    return [(label, left.get(label, ""), right.get(label, "")) for label in _merged(list(left), list(right))]


def _merged(first: list[str], second: list[str]) -> list[str]:
    """``first``'s labels with each label only ``second`` has placed after the one it follows there.

    >>> _merged(["a", "b", "Time"], ["a", "c", "Time"])
    ['a', 'c', 'b', 'Time']
    """
    out = list(first)
    after = -1  # where the last label of ``second`` seen sits in ``out``
    for label in second:
        if label in out:
            after = out.index(label)
        else:
            after += 1
            out.insert(after, label)
    return out
