"""Stored runs as one table (a pandas DataFrame): the Results page's table and its CSV, and what a notebook
reads.  One row per run: its kind, label, status, headline numbers with their 95% intervals' ends
(``accuracy_pct``, ``accuracy_pct_lo`` ...; NaN where a run has none), when it was made and how long it took.

>>> from stitchcore.store.records import RunRecord
>>> rec = RunRecord("0" * 16, "stitch", {}, "done", {"accuracy": 0.91}, None, 0.0, None, None, "A[fc1] -> B[fc1]")
>>> frame = runs_frame([rec])
>>> frame.loc[0, "kind"], float(frame.loc[0, "accuracy_pct"])
('stitch', 91.0)
>>> len(filter_runs(frame, kinds=["matrix"]))
0
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import pandas as pd

from stitchcore.report.summary import TABLE_NUMBERS, run_label, table_numbers
from stitchcore.store.records import RunRecord
from stitchcore.timewords import duration_words, usable_time

__all__ = ["RUN_COLUMNS", "filter_runs", "runs_frame"]

# duration: in words (a page shows it); duration_s: seconds (the CSV's); error last: mostly empty
RUN_COLUMNS = ("kind", "label", "status", *TABLE_NUMBERS, "created", "duration", "duration_s", "id", "error")


def _when(ts: float | None) -> dt.datetime | None:
    ts = usable_time(ts)  # a row imported before bundles were checked may hold -Infinity
    return dt.datetime.fromtimestamp(ts).astimezone() if ts else None  # the local time zone


def runs_frame(records: Iterable[RunRecord]) -> pd.DataFrame:
    """One row per run, the columns :data:`RUN_COLUMNS`; the numbers as floats (NaN where a run has none)."""
    rows = []
    for rec in records:
        duration = rec.finished - rec.started if rec.started and rec.finished else None
        rows.append({
            "kind": rec.kind, "label": run_label(rec), "status": rec.status, **table_numbers(rec),
            "created": _when(rec.created), "duration": duration_words(duration) if duration is not None else None,
            "duration_s": duration, "error": rec.error or "", "id": rec.id,
        })  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    for col in (*TABLE_NUMBERS, "duration_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    return frame


def filter_runs(frame: pd.DataFrame, *, kinds: Iterable[str] = (), statuses: Iterable[str] = (),
                text: str = "") -> pd.DataFrame:
    """The rows of ``frame`` of one of ``kinds`` and ``statuses`` (empty: any) whose label contains ``text``
    or whose id starts with it (any case), renumbered from 0."""
    kinds, statuses, needle = list(kinds), list(statuses), text.strip().lower()
    if kinds:
        frame = frame[frame["kind"].isin(kinds)]
    if statuses:
        frame = frame[frame["status"].isin(statuses)]
    if needle:
        frame = frame[frame["label"].str.lower().str.contains(needle, regex=False) | frame["id"].str.startswith(needle)]
    return frame.reset_index(drop=True)
