"""A stored run in words: its label, its headline numbers, the facts that say what it was.

Results' table and Compare, and the HTML report all describe runs through these, so a number reads the
same everywhere (accuracy as a percentage; the penalty in points and an LM's loss penalty in percent of the
base loss, both higher = worse: :mod:`stitchcore.plots.penalty`).

>>> from stitchcore.store.results import RunRecord
>>> rec = RunRecord("0" * 16, "stitch", {}, "done", {"accuracy": 0.91, "penalty": 0.02,
...                 "base": {"a": 0.95, "b": 0.93}}, None, 0.0, None, None, "A[fc1] -> B[fc1]")
>>> headline(rec)[:2]
[('Stitched accuracy', '91.0%'), ('Model A', '95.0%')]
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.lm.cross import cross_rows
from stitchcore.measures.intervals import seed_note
from stitchcore.plots.penalty import (
    IMAGE_PENALTY,
    LOSS_PENALTY_AXIS,
    LOSS_PENALTY_COLUMN,
    PENALTY_COLUMN,
    format_pct,
    format_pts,
    interval_words,
    loss_penalty_pct,
    penalty_label,
    penalty_pts,
)
from stitchcore.store.records import RunRecord
from stitchcore.timewords import duration_words

__all__ = ["HEADLINES", "SUMMARY_FIELDS", "TABLE_NUMBERS", "facts", "headline", "preprocess_text", "run_label", "summary_row",
           "table_numbers"]

# Summary fields shown side by side when runs are compared, in this order (nested ones as "base.a").
SUMMARY_FIELDS = {
    "accuracy": "Accuracy",
    "penalty": penalty_label("Penalty", IMAGE_PENALTY),  # "Penalty = B − stitched (pts, higher = worse)"
    "base.a": "Model A",
    "base.b": "Model B",
    "start_accuracy": "Accuracy at start",
    "loss": "Loss",
    "loss_penalty": "L" + LOSS_PENALTY_AXIS[1:],  # "Loss penalty = (L − L_base) / L_base (% of base loss, …)"
    "final_train_loss": "Final train loss",
    "params": "Parameters",
    "flops": "FLOPs / example",
    "seconds": "Time",
    "dataset": "Dataset",
    "device": "Device",
}
_PERCENT = ("accuracy", "base.a", "base.b", "start_accuracy")


def run_label(rec: RunRecord) -> str:
    """Readable label: models and cuts for stitches, the zoo ref for trained models."""
    if rec.kind == "zoo" and rec.summary.get("ref"):
        return str(rec.summary["ref"])
    if rec.label and rec.label != rec.kind:
        return rec.label
    if rec.kind == "zoo":
        with contextlib.suppress(StitchError, TypeError):  # an older or foreign spec: fall back to the kind
            return f"zoo:{spec_from_record(rec).short_name()}"
    return rec.label or rec.kind


def _field(summary: Mapping[str, Any], field: str) -> Any:
    top, _, sub = field.partition(".")
    value = summary.get(top)
    return value.get(sub) if sub and isinstance(value, dict) else value


def _number(field: str, value: Any) -> Any:
    """One summary value as the app writes it (``0.91`` accuracy -> ``"91.0%"``)."""
    if isinstance(value, Mapping) and isinstance(value.get("loss"), (int, float)):  # a language model's base
        return f"loss {value['loss']:.3f}"
    if isinstance(value, (Mapping, list)):  # a matrix's grid, not one number
        return None
    if field in _PERCENT and isinstance(value, (int, float)):
        return f"{value:.1%}"
    if field == "seconds" and isinstance(value, (int, float)):
        return duration_words(value)
    if field == "penalty" and isinstance(value, (int, float)):
        return format_pts(penalty_pts(value))
    if field == "loss_penalty" and isinstance(value, (int, float)):
        return format_pct(loss_penalty_pct(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return value


def summary_row(rec: RunRecord) -> dict[str, Any]:
    """One line of a comparison: the run's label and status, then every :data:`SUMMARY_FIELDS` value it has."""
    row: dict[str, Any] = {"Run": run_label(rec), "Status": rec.status}
    for field, title in SUMMARY_FIELDS.items():
        row[title] = _number(field, _field(rec.summary or {}, field))
    return row


# The Results table's number columns (named with their units), then each one's 95% interval ends
_TABLE_VALUES = ("accuracy_pct", PENALTY_COLUMN, LOSS_PENALTY_COLUMN)
TABLE_NUMBERS = (*_TABLE_VALUES, *(f"{c}_{end}" for c in _TABLE_VALUES for end in ("lo", "hi")))


def table_numbers(rec: RunRecord) -> dict[str, float | None]:
    """A run's numbers for the Results table and its CSV, each column named with its unit: ``accuracy_pct``,
    ``penalty_pts`` (B − stitched, higher = worse) and ``loss_penalty_pct`` (% of the base loss, higher = worse),
    then each one's 95% interval as ``<column>_lo`` / ``<column>_hi`` (:data:`TABLE_NUMBERS`); None where the run
    has none (runs stored before intervals).

    >>> from stitchcore.store.results import RunRecord
    >>> table_numbers(RunRecord("0" * 16, "stitch", {}, "done", {"accuracy": 0.91, "penalty": -0.04,
    ...                         "penalty_ci": [-0.06, -0.02]}, None, 0.0, None, None, "x"))["penalty_pts_lo"]
    -6.0
    """
    s = rec.summary or {}

    def pct(v: Any) -> float | None:
        return round(100.0 * v, 8) if isinstance(v, (int, float)) else None

    def ends(ci: Any, convert: Callable[[Any], float | None]) -> list[float | None]:
        if not (isinstance(ci, (list, tuple)) and len(ci) == 2):
            return [None, None]
        lo, hi = convert(ci[0]), convert(ci[1])
        return sorted((lo, hi)) if lo is not None and hi is not None else [None, None]  # loss penalty flips

    out: dict[str, float | None] = {"accuracy_pct": pct(s.get("accuracy")), PENALTY_COLUMN: penalty_pts(s.get("penalty")),
                                    LOSS_PENALTY_COLUMN: loss_penalty_pct(s.get("loss_penalty"))}  # fmt: skip
    for column, key, convert in (("accuracy_pct", "accuracy_ci", pct), (PENALTY_COLUMN, "penalty_ci", penalty_pts),
                                 (LOSS_PENALTY_COLUMN, "loss_penalty_ci", loss_penalty_pct)):  # fmt: skip
        out[f"{column}_lo"], out[f"{column}_hi"] = ends(s.get(key), convert)
    return out


def _with_ci(text: Any, ci: Any, kind: str) -> Any:
    """``text`` and, where the run stored one, its 95% interval in brackets (``96.0% [94.0–97.6%]``)."""
    words = interval_words(ci, kind)
    return f"{text} [{words}]" if words and text is not None else text


def _stitch_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    base = s.get("penalty_base", "b").upper()
    base_ci = s.get("base_ci") or {}
    return [("Stitched accuracy", _with_ci(_number("accuracy", s.get("accuracy")), s.get("accuracy_ci"), "accuracy")),
            ("Model A", _with_ci(_number("base.a", _field(s, "base.a")), base_ci.get("a"), "accuracy")),
            ("Model B", _with_ci(_number("base.b", _field(s, "base.b")), base_ci.get("b"), "accuracy")),
            (f"Penalty ({base} − stitched)", _with_ci(_number("penalty", s.get("penalty")), s.get("penalty_ci"),
                                                     "penalty")),
            *_seed_numbers(s.get("seeds")),
            ("Adapter parameters", _number("params", s.get("params")))]  # fmt: skip


def _seed_numbers(seeds: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """A stitch trained over several seeds: the mean over them with its Student-t interval (none: [])."""
    if not seeds:
        return []
    n = len(seeds["seed"])
    rows = [(f"Stitched accuracy, mean of {n} seeds", _with_ci(_number("accuracy", seeds["accuracy_mean"]),
                                                              seeds.get("accuracy_ci"), "accuracy")),
            (f"Penalty, mean of {n} seeds", _with_ci(_number("penalty", seeds["penalty_mean"]), seeds.get("penalty_ci"),
                                                    "penalty"))]  # fmt: skip
    note = seed_note(n)
    return rows + ([("Across seeds", note)] if note else [])


def _zoo_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out = [("Test accuracy", _number("accuracy", s.get("accuracy"))), ("Parameters", _number("params", s.get("params")))]
    if s.get("val_loss") is not None:
        out.append(("Validation loss", f"{s['val_loss']:.3f}"))
    return out


def _lm_pair_numbers(joined: str) -> Callable[[Mapping[str, Any]], list[tuple[str, Any]]]:
    """A merge's or an lmstitch's numbers; ``joined`` names the joined model ("merged", "stitched")."""

    def numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
        if s.get("mode") == "cross":  # across tokenizers: bits per byte (stitchcore.experiments.lm.cross)
            words = {"stitched": "Stitched", "b": "B alone", "a": "A alone, its own tokens"}
            return [(f"{words.get(r['role'], 'Control: ' + r['label'])} (bits/byte)", _with_ci(
                f"{r['bits_per_byte']:.3f}", r["ci"], "loss")) for r in cross_rows(s)] + [("Verdict", s.get("verdict"))]
        return [*_lm_base_numbers(s), (f"Loss {joined}", _with_ci(f"{s['loss']:.3f}", s.get("loss_ci"), "loss")),
                (f"Loss penalty (base {str(s.get('penalty_base', 'b')).upper()})",
                 _with_ci(_number("loss_penalty", s.get("loss_penalty")), s.get("loss_penalty_ci"), "loss_penalty")),
                ("Perplexity", f"{s['perplexity']:.2f}")]  # fmt: skip

    return numbers


def _lm_base_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A's and B's validation loss, each with its 95% interval over the windows where the run stored one."""
    base = s.get("base") or {}
    return [(f"Loss {r.upper()}", _with_ci(f"{base[r]['loss']:.3f}", base[r].get("loss_ci"), "loss")) for r in "ab"]


def _lmdepth_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if s.get("mode") == "cross_depth":  # across tokenizers: the best split's bits per byte beside B's
        best = min(s.get("points") or [], key=lambda p: p["bits_per_byte"], default=None)
        return [("B alone (bits/byte)", _with_ci(f"{s['b_bits_per_byte']:.3f}", s.get("b_bits_per_byte_ci"), "loss")),
                ("Best split (bits/byte)", None if best is None else _with_ci(
                    f"{best['bits_per_byte']:.3f} at split {best['split']}", best["bits_per_byte_ci"], "loss")),
                ("Points", str(len(s.get("points") or [])))]  # fmt: skip
    return [*_lm_base_numbers(s), ("Points", str(len(s.get("points") or [])))]


def _transfer_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """One cut pair's (or, along depth, the deepest pair's) three probe accuracies and the ratio."""
    points = sorted(s.get("points") or [], key=lambda p: p["depth_a"])
    if not points:
        return []
    p = points[-1]
    where = f" ({p['cut_a']} → {p['cut_b']})" if len(points) > 1 else ""
    return [(f"Transferred{where}", _with_ci(_number("accuracy", p["transferred"]), p["transferred_ci"], "accuracy")),
            ("Native (fitted on B)", _with_ci(_number("accuracy", p["native"]), p["native_ci"], "accuracy")),
            ("Random adapter", _with_ci(_number("accuracy", p["random_adapter"]), p["random_adapter_ci"], "accuracy")),
            ("Transferred / native", f"{p['ratio']:.3f} [{p['ratio_ci'][0]:.3f}–{p['ratio_ci'][1]:.3f}]")]


def _matrix_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [("Cells", _number("n_cells", s.get("n_cells"))), ("Skipped pairs", str(len(s.get("skipped") or {})))]


def _similarity_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [("Measure", str(s.get("measure"))), ("Examples", _number("n", s.get("n")))]


def _sweep_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [("Cut positions", str(len(s.get("positions") or []))), ("Metrics", ", ".join(s.get("metrics") or []))]


def _assemble_numbers(s: Mapping[str, Any]) -> list[tuple[str, Any]]:
    scored = [c for c in s.get("cells") or [] if c.get("accuracy") is not None and not c.get("same_as")]
    best = max(scored, key=lambda c: c["accuracy"], default=None)
    return [("Networks trained", str(len(scored))), ("On the Pareto front", str(len(s.get("pareto") or []))),
            ("Best accuracy", _number("accuracy", best["accuracy"]) if best else None)]  # fmt: skip


# Each run kind's headline numbers from its summary, as ``(label, text or None)``; :func:`headline` adds the time.
# One entry per registered kind (tests/test_kinds.py checks it against list_experiments()).
HEADLINES: dict[str, Callable[[Mapping[str, Any]], list[tuple[str, Any]]]] = {
    "assemble": _assemble_numbers,
    "lmdepth": _lmdepth_numbers,
    "lmstitch": _lm_pair_numbers("stitched"),
    "matrix": _matrix_numbers,
    "merge": _lm_pair_numbers("merged"),
    "similarity": _similarity_numbers,
    "transfer": _transfer_numbers,
    "stitch": _stitch_numbers,
    "sweep": _sweep_numbers,
    "zoo": _zoo_numbers,
}


def headline(rec: RunRecord) -> list[tuple[str, str]]:
    """The numbers a run's view shows first, as ``(label, text)``; [] for a run without results."""
    s = rec.summary or {}
    if not s:
        return []
    numbers = HEADLINES.get(rec.kind)
    out = numbers(s) if numbers is not None else []  # a kind this version does not know: its time only
    if s.get("seconds") is not None:
        out.append(("Time", duration_words(s["seconds"])))
    return [(k, str(v)) for k, v in out if v is not None]


def _cut(cut: Any) -> str:
    if isinstance(cut, Mapping):
        shape = cut.get("shape")
        return f"{cut.get('name')} {tuple(shape)}" if shape else str(cut.get("name"))
    return str(cut)


def preprocess_text(pre: Mapping[str, Any]) -> str:
    """A model's input preprocessing in words; both models' (``{"a": ..., "b": ...}``) as "A: …; B: …".

    >>> preprocess_text({"channels": 1, "size": None, "mean": [0.3053], "std": [0.3758], "interpolation": "bilinear"})
    '1 channel, native size, mean 0.305, std 0.376, bilinear resize'
    """
    if set(pre) <= {"a", "b"}:
        return "; ".join(f"{k.upper()}: {preprocess_text(v)}" for k, v in pre.items() if isinstance(v, Mapping))
    parts = []
    if pre.get("channels"):
        parts.append(f"{pre['channels']} channel" + ("s" if pre["channels"] != 1 else ""))
    size = pre.get("size")
    parts.append(f"{size} px" if isinstance(size, int) else f"{tuple(size)} px" if size else "native size")
    for key in ("mean", "std"):
        if pre.get(key) is not None:
            values = [f"{v:.3f}" for v in pre[key]]
            parts.append(f"{key} " + (values[0] if len(values) == 1 else "(" + ", ".join(values) + ")"))
    if pre.get("interpolation"):
        parts.append(f"{pre['interpolation']} resize")
    rest = {k: v for k, v in pre.items() if k not in ("channels", "size", "mean", "std", "interpolation")}
    return ", ".join(parts + ([json.dumps(rest, sort_keys=True)] if rest else []))


def facts(rec: RunRecord) -> list[tuple[str, str]]:
    """What the run was, as ``(label, text)``: models, cuts, data, preprocessing, device (those it has)."""
    s, spec = rec.summary or {}, rec.spec or {}
    out: list[tuple[str, str]] = []
    for role in ("a", "b"):
        if spec.get(role):
            out.append((f"Model {role.upper()}", str(spec[role])))
    if rec.kind == "zoo":
        out.append(("Model", str(s.get("ref") or spec.get("arch"))))
    for key, label in (("cut_a", "Cut in A"), ("cut_b", "Cut in B")):
        if s.get(key) or spec.get(key):
            out.append((label, _cut(s.get(key) or spec.get(key))))
    for key, label in (("senders", "Cuts in A (senders)"), ("receivers", "Cuts in B (receivers)"),
                       ("positions", "Cut positions")):  # fmt: skip
        if isinstance(s.get(key) or spec.get(key), list):
            out.append((label, ", ".join(map(str, s.get(key) or spec.get(key)))))
    data = s.get("dataset") or spec.get("dataset") or s.get("text") or spec.get("text")
    if data:
        sizes = " · ".join(f"{s[k]:,} {w}" for k, w in (("n_train", "train"), ("n_test", "test")) if s.get(k))
        out.append(("Data", f"{data}" + (f" ({sizes})" if sizes else "")))
    if s.get("preprocess"):
        out.append(("Preprocessing", preprocess_text(s["preprocess"])))
    if s.get("device"):
        out.append(("Device", str(s["device"])))
    return out
