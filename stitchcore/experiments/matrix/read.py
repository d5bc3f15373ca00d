"""Reading a matrix run back: its finished cells, laid out as grids, its controls, and one :class:`MatrixState`.

A matrix streams its finished cells into the store as it goes (the ``cells.json`` artifact, rewritten after
every group of cells), so a running, cancelled or crashed matrix is readable: :func:`partial_cells` reads the
cells back and :func:`cell_grid` lays them out.  Once done, the run's summary holds the same grids.

Controls (random sender, random receiver, both random, noise sender): debiased = values - control values, one
matrix per control (``debiased_by_control``): with the random sender, what the trained bottom contributes beyond
the adapter + trained top alone; with the noise sender, what A holds beyond its labels' clusters.  Like with like
only: a control whose adapters were made otherwise than the cells (a task-trained control beside closed-form cells)
has no debiased map, stored or computed, and :func:`debiased_refusal` says why.  ``debiased`` keeps the random
sender's (the only one stored before); :func:`debiased` and :func:`control_tables` read both old and new
summaries, :func:`skipped_pairs` the skipped cells with their reasons.

:func:`matrix_state` reconciles all of that into what a page or a report draws (:class:`MatrixState`).
:func:`similarity_beside` finds the similarity run (CKA, Procrustes ...) launched beside a matrix, whose
measure the matrix's spec does not hold.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments.matrix.spec import (
    CELLS_ARTIFACT,
    CONTROL_NAMES,
    CONTROLS,
    INTO_RANDOM,
    MatrixSpec,
    cell_objective,
    made_alike,
    variant_training,
)
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.measures.intervals import seed_spread
from stitchcore.measures.similarity import list_measures
from stitchcore.store.results import RunRecord, Store, run_id_for

PROXY_METRICS = ("r2", "cka")  # per cell, from the fits' moments (stitching.shared_fits)

__all__ = ["PROXY_METRICS", "ControlTable", "Grid", "MatrixState", "across_seed_grids", "blank_cells_mean",
           "cell_axes", "cell_grid", "control_note", "control_tables", "debiased", "debiased_refusal", "difference",
           "failed_pairs", "matrix_state", "partial_cells", "partial_path", "similarity_beside",
           "skipped_pairs"]  # fmt: skip


def partial_path(store: Store, run_id: str) -> Path:
    """Where a matrix run keeps its finished cells until it succeeds (survives a re-run's reset)."""
    return store.partial_path(run_id)


def partial_cells(store: Store, run_id: str) -> list[dict]:
    """The cells a matrix run has finished so far (all of them once done); [] before the first one.

    One record per cell: ``variant`` (one of :data:`VARIANTS`), ``sender``, ``receiver``,
    ``accuracy``, ``penalty``, ``residual`` (None where not computed) and ``skipped_reason``
    (None unless no adapter can join the two cuts).  Read from the run's ``cells.json``, which
    the run rewrites after every group of cells, so a running or cancelled matrix is readable.
    """
    try:
        cells = json.loads(store.artifact_path(run_id, CELLS_ARTIFACT).read_text())
    except (StitchError, OSError, ValueError):  # no artifact yet (StoreError), or caught mid-replace
        return []
    return cells if isinstance(cells, list) else []


def cell_grid(cells: list[dict], senders: list[str], receivers: list[str], field: str = "accuracy",
              variant: str = "trained") -> list[list]:  # fmt: skip
    """[senders][receivers] of one field of ``variant``'s cells; None where a cell is skipped or not done yet.

    >>> cells = [{"variant": "trained", "sender": "fc1", "receiver": "fc2", "accuracy": 0.9}]
    >>> cell_grid(cells, ["block1", "fc1"], ["fc2"])
    [[None], [0.9]]
    """
    values = {(c["sender"], c["receiver"]): c.get(field) for c in cells if c.get("variant", "trained") == variant}
    return [[values.get((s, r)) for r in receivers] for s in senders]


def cell_axes(cells: list[dict], variant: str = "trained") -> tuple[list[str], list[str]]:
    """The sender and receiver names ``variant``'s cells mention, in the order they first appear."""
    mine = [c for c in cells if c.get("variant", "trained") == variant]
    return list(dict.fromkeys(c["sender"] for c in mine)), list(dict.fromkeys(c["receiver"] for c in mine))


Grid = list[list[float | None]]  # [senders][receivers]; None where a cell is skipped or not done


def difference(values: Sequence[Sequence[float | None]], control: Sequence[Sequence[float | None]]) -> Grid:
    """``values - control`` cell by cell (rounded to 6 places); None where either is None.

    >>> difference([[0.9, None], [0.5, 0.4]], [[0.2, 0.1], [None, 0.5]])
    [[0.7, None], [None, -0.1]]
    """
    return [[None if t is None or c is None else round(t - c, 6) for t, c in zip(row_t, row_c, strict=True)]
            for row_t, row_c in zip(values, control, strict=True)]  # fmt: skip


def _how_made(summary: Mapping[str, Any] | None, spec: MatrixSpec | None) -> tuple[str, str, str]:
    """(mode, objective, control_training) of a run: its spec's, else its summary's (absent: what older runs did)."""
    if spec is not None:
        return spec.mode, spec.objective, spec.control_training
    s = summary or {}
    return s.get("mode") or MatrixSpec.mode, s.get("objective") or "task", s.get("control_training") or "as-matrix"


def _made_words(weights: dict[str, float] | None) -> str:
    if weights is None:
        return "closed-form least-squares fits"
    return "task-trained" if weights == {"task": 1.0} else "trained on " + " + ".join(weights)


def debiased_refusal(summary: Mapping[str, Any] | None, control: str, spec: MatrixSpec | None = None) -> str | None:
    """Why a run has no debiased map against ``control`` (one sentence), or None where it has one: its adapters
    were made otherwise than the matrix's cells, so cell minus control would mix how the two stitches were made
    with what the sender holds.  Read from ``spec`` if given, else from the summary's ``mode``, ``objective``
    and ``control_training``.

    >>> issue_25 = {"mode": "closed-form", "objective": "task", "control_training": "task"}
    >>> why = debiased_refusal(issue_25, "random_sender")
    >>> why.startswith("No debiased map: the matrix's cells are closed-form"), "adapters are task-trained" in why
    (True, True)
    >>> debiased_refusal({"mode": "closed-form", "control_training": "matched"}, "noise_sender") is None
    True
    """
    mode, objective, training = _how_made(summary, spec)
    if made_alike(mode, objective, training, control):
        return None
    cells = variant_training(mode, objective, training, "trained")
    if training == "matched" and control in INTO_RANDOM:  # task-trained on purpose: made as the cells it is chance
        return (f"No debiased map: the matrix's cells are {_made_words(cells)}, and a stitch made that way into a"
                " random receiver only reproduces its activation (chance in every cell), so this control is"
                " task-trained and drawn beside the matrix, never subtracted from it.")  # fmt: skip
    made = _made_words(variant_training(mode, objective, training, control))
    return (f"No debiased map: the matrix's cells are {_made_words(cells)} and this control's adapters are {made},"
            " so cell minus control would mix how the two stitches were made with what the sender holds"
            " (matrices launched now make their controls as their cells).")  # fmt: skip


def debiased(summary: Mapping[str, Any], control: str = "random_sender",
             spec: MatrixSpec | None = None) -> Grid | None:  # fmt: skip
    """Debiased matrix of a finished matrix summary against one control: trained - ``control``, cell by cell.

    Reads ``debiased_by_control`` (runs since all three controls are debiased), else the stored
    ``debiased`` (older runs kept only the random sender's), else computes it from ``values`` and
    ``controls``; None when the run has no such control, or when that control was made otherwise than the
    cells (:func:`debiased_refusal`, from ``spec`` or the summary: never a closed-form cell minus a
    task-trained control).

    >>> s = {"values": [[0.9]], "controls": {"random_receiver": [[0.1]]}, "debiased": [[0.5]]}
    >>> debiased(s, "random_receiver"), debiased(s, "random_sender"), debiased(s, "random_both")
    ([[0.8]], [[0.5]], None)
    >>> debiased({**s, "mode": "closed-form", "control_training": "task"}, "random_sender") is None  # unlike
    True
    """
    if control not in CONTROLS:
        raise StitchError(f"unknown matrix control {control!r}; use one of: {', '.join(CONTROLS)}")
    if debiased_refusal(summary, control, spec) is not None:
        return None
    stored = (summary.get("debiased_by_control") or {}).get(control)
    if stored is not None:
        return stored
    if summary.get("debiased") is not None and (summary.get("debiased_control") or "random_sender") == control:
        return summary["debiased"]
    values, grid = summary.get("values"), (summary.get("controls") or {}).get(control)
    return difference(values, grid) if values is not None and grid is not None else None


def across_seed_grids(cells: list[dict], senders: list[str], receivers: list[str]) -> dict[str, Any] | None:
    """The matrix's own cells across their adapter seeds (a run with ``seeds`` > 1): ``n`` and, for accuracy and
    penalty, the mean grid and the grid of Student-t 95% intervals across the seeds
    (``intervals.seed_spread``, clipped to the metric's range; ``_ci``: [lo, hi], None where a cell has fewer
    than ``intervals.MIN_SEEDS`` seeds); None when no cell has seeds.

    >>> cells = [{"sender": "fc1", "receiver": "fc2", "seeds": {"accuracy": [0.9, 0.92, 0.94], "penalty": [0.05, 0.03, 0.01]}}]
    >>> grids = across_seed_grids(cells, ["fc1"], ["fc2"])
    >>> grids["n"], grids["accuracy"], grids["accuracy_ci"]
    (3, [[0.92]], [[[0.870317, 0.969683]]])
    """
    mine = {(c["sender"], c["receiver"]): c["seeds"] for c in cells
            if c.get("variant", "trained") == "trained" and c.get("seeds")}  # fmt: skip
    if not mine:
        return None
    out: dict[str, Any] = {"n": max(len(v.get("accuracy") or []) for v in mine.values())}
    for field, bounds in (("accuracy", (0.0, 1.0)), ("penalty", (-1.0, 1.0))):
        means: Grid = []
        spans: list[list] = []
        for sender in senders:
            spread = [seed_spread((mine.get((sender, r)) or {}).get(field) or [], bounds=bounds) for r in receivers]
            means.append([m for m, _ in spread])
            spans.append([ci for _, ci in spread])
        out[field], out[f"{field}_ci"] = means, spans
    return out


@dataclass(frozen=True)
class ControlTable:
    """One control of a matrix, ready to draw: its accuracies and the debiased matrix against it."""

    control: str  # one of CONTROLS
    name: str  # in words: "random sender" | "random receiver" | "both random" | "noise sender"
    values: Grid | None  # the control's stitched accuracy [senders][receivers]; None if the summary lacks it
    # trained accuracy - the control's, cell by cell (higher = the trained model adds more); None where the run
    # lacks it or the control was made otherwise than the cells (the note says why: debiased_refusal)
    debiased: Grid | None
    can_differ: bool = True  # False: every cell is at chance by construction (the note says why)
    note: str = ""  # how its adapters were made and whether it can differ from chance, in words ("" unknown)
    overlap: dict[tuple[str, str], str] | None = None  # cells whose 95% interval overlaps the control's: why
    # (None where there is no debiased map: intervals of stitches made two ways are not compared)


def interval_overlap(trained: Grid | None, control: Grid | None, senders: Sequence[str],
                     receivers: Sequence[str]) -> dict[tuple[str, str], str]:  # fmt: skip
    """``(sender, receiver) -> note`` for every cell whose trained accuracy interval [lo, hi] overlaps the
    control's: there the trained bottom is not distinguishable from the control at 95%.

    >>> interval_overlap([[[0.90, 0.95], [0.5, 0.6]]], [[[0.1, 0.2], [0.55, 0.7]]], ["fc1"], ["fc1", "fc2"])
    {('fc1', 'fc2'): "95% intervals overlap the control's: trained 0.500–0.600, control 0.550–0.700"}
    """
    out = {}
    for i, s in enumerate(senders):
        for j, r in enumerate(receivers):
            t = trained[i][j] if trained and i < len(trained) and j < len(trained[i]) else None
            c = control[i][j] if control and i < len(control) and j < len(control[i]) else None
            if t and c and t[0] <= c[1] and c[0] <= t[1]:
                out[(s, r)] = (f"95% intervals overlap the control's: trained {t[0]:.3f}–{t[1]:.3f}, "
                               f"control {c[0]:.3f}–{c[1]:.3f}")
    return out


def _training_words(weights: dict[str, float] | None, spec: MatrixSpec) -> str:
    if weights is None:
        return "closed-form least-squares fits"
    start = {"lstsq": "a least-squares start", "procrustes": "a Procrustes start", "identity": "an identity start"}
    terms = " + ".join(("copy (MSE)" if k == "match" else k) + ("" if w == 1 else f" x{w:g}") for k, w in weights.items())
    return (f"adapters trained {spec.epochs} epoch(s) on the {terms} loss from "
            f"{start.get(spec.adapter.init, 'random weights')}")  # fmt: skip


def control_note(spec: MatrixSpec, control: str) -> tuple[bool, str]:
    """Whether ``control``'s cells can differ from chance, and a sentence saying why and how they were made.

    A random receiver's adapters that never see the task loss (a closed-form fit, or the copy task) only
    reproduce the random net's own activation, so the stitched net predicts what random B predicts: chance.

    >>> old = MatrixSpec.from_dict({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "controls": True})
    >>> control_note(old, "random_receiver")[0], control_note(old, "random_sender")[0]
    (False, True)
    >>> control_note(MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", controls=True), "random_both")[0]
    True
    >>> can, note = control_note(MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", controls=True), "noise_sender")
    >>> can, "closed-form least-squares fits, from class-clustered noise" in note
    (True, True)
    """
    if control not in CONTROLS:
        raise StitchError(f"unknown matrix control {control!r}; use one of: {', '.join(CONTROLS)}")
    weights = cell_objective(spec, control)
    how = _training_words(weights, spec)
    if control in spec.controls_at_chance:
        why = ("each adapter is a least-squares copy of the random receiver's own activation" if weights is None
               else "its adapters are never trained on the task" if "task" not in weights
               else "its adapters are not trained (0 epochs)")  # fmt: skip
        return False, (f"Cannot differ from chance ({how}): {why}, so the stitched network predicts what the "
                       "random B alone predicts, in every cell. Matrices launched now task-train the controls into "
                       "a random receiver.")  # fmt: skip
    if control == "noise_sender":
        note = (f"Can differ from chance: {how}, from class-clustered noise of each sender cut's shape and scale"
                " (nothing of the image but its label), through B's trained top: a cell is evidence about A only"
                " where it beats this one.")  # fmt: skip
    else:
        top = "B's trained top" if control == "random_sender" else "the random receiver's top"
        note = f"Can differ from chance: {how}, through {top}."
    refusal = debiased_refusal(None, control, spec)
    return True, note + (f" {refusal}" if refusal else "")


def control_tables(
    summary: Mapping[str, Any] | None, cells: list[dict], senders: Sequence[str], receivers: Sequence[str], *,
    controls: bool = False, spec: MatrixSpec | None = None,
) -> list[ControlTable]:  # fmt: skip
    """The controls of a matrix run, in :data:`CONTROLS` order: from its summary once done (old summaries
    with only the random sender's ``debiased`` included), else from its finished ``cells`` (a running run).

    ``controls=True`` (the spec asks for them) gives every control the run computes (``spec.variants``; without
    ``spec``, every control) a table before its first cell; ``spec`` (the run's) fills each table's
    ``can_differ`` and ``note`` (:func:`control_note`).  A control made otherwise than the cells gets no debiased
    map and no overlap rings (:func:`debiased_refusal`, said in its note).

    >>> cells = [{"variant": v, "sender": "fc1", "receiver": "fc2", "accuracy": a}
    ...          for v, a in (("trained", 0.9), ("random_sender", 0.3))]
    >>> [(t.name, t.values, t.debiased) for t in control_tables(None, cells, ["fc1"], ["fc2"])]
    [('random sender', [[0.3]], [[0.6]])]
    """
    s = summary or {}
    trained_ci = s.get("values_ci") or cell_grid(cells, list(senders), list(receivers), field="accuracy_ci")

    def table(control: str, values: Grid | None, diff: Grid | None) -> ControlTable:
        can, note = control_note(spec, control) if spec is not None and spec.controls else (True, "")
        refusal = debiased_refusal(summary, control, spec)
        if refusal is not None:  # like with like only: no map, no rings, and the note says why
            return ControlTable(control, CONTROL_NAMES[control], values, None, can, note if spec else refusal)
        control_ci = ((s.get("controls_ci") or {}).get(control)
                      or cell_grid(cells, list(senders), list(receivers), variant=control, field="accuracy_ci"))
        overlap = interval_overlap(trained_ci, control_ci, senders, receivers)
        return ControlTable(control, CONTROL_NAMES[control], values, diff, can, note, overlap=overlap)

    tables = []
    if s.get("controls") or s.get("debiased") is not None:
        for control in CONTROLS:
            values = (s.get("controls") or {}).get(control)
            diff = debiased(s, control, spec)
            if values is not None or diff is not None:
                tables.append(table(control, values, diff))
        return tables
    trained = cell_grid(cells, list(senders), list(receivers))
    seen = {c.get("variant") for c in cells}
    wanted = (spec.variants[1:] if spec is not None and spec.controls else CONTROLS) if controls else ()
    for control in CONTROLS:
        if control in wanted or control in seen:
            values = cell_grid(cells, list(senders), list(receivers), variant=control)
            tables.append(table(control, values, difference(trained, values)))
    return tables


def skipped_pairs(summary: Mapping[str, Any] | None, cells: list[dict]) -> dict[tuple[str, str], str]:
    """``(sender, receiver) -> reason`` of every pair no adapter can join: the summary's ``skipped``
    (``"sender->receiver"`` keys) and any cell with a ``skipped_reason`` (a running run's).

    >>> skipped_pairs({"skipped": {"fc1->block1": "vector into a map"}}, [])
    {('fc1', 'block1'): 'vector into a map'}
    """
    out: dict[tuple[str, str], str] = {}
    for pair, reason in ((summary or {}).get("skipped") or {}).items():
        sender, _, receiver = str(pair).partition("->")
        out[sender, receiver] = str(reason)
    for c in cells:
        if c.get("skipped_reason"):
            out.setdefault((c["sender"], c["receiver"]), str(c["skipped_reason"]))
    return out


def failed_pairs(summary: Mapping[str, Any] | None, cells: list[dict]) -> dict[tuple[str, str], str]:
    """``(sender, receiver) -> reason`` of every trained-variant cell that failed for good (a cluster task
    whose retries were spent); the rest of the matrix completed.

    >>> failed_pairs(None, [{"variant": "trained", "sender": "fc1", "receiver": "fc2", "failed_reason": "node died"}])
    {('fc1', 'fc2'): 'node died'}
    """
    out: dict[tuple[str, str], str] = {}
    for key, reason in ((summary or {}).get("failed") or {}).items():
        variant, _, pair = str(key).partition("|")
        sender, _, receiver = pair.partition("->")
        if variant == "trained":
            out[sender, receiver] = str(reason)
    for c in cells:
        if c.get("failed_reason") and c.get("variant", "trained") == "trained":
            out.setdefault((c["sender"], c["receiver"]), str(c["failed_reason"]))
    return out


def blank_cells_mean(status: str, failed: Mapping[tuple[str, str], str]) -> str | None:
    """What a blank cell of a matrix run in ``status`` means, for the heat maps' hover and legend (None: a
    finished run with every cell computed has none).

    >>> blank_cells_mean("running", {}), blank_cells_mean("done", {("fc1", "fc2"): "node died"})
    ('not computed yet', 'failed on the cluster: Retry the failed parts')
    """
    if status in ("queued", "running"):
        return "not computed yet"
    if failed:
        return "failed on the cluster: Retry the failed parts"
    return None if status == "done" else "not computed (the run ended first)"


@dataclass(frozen=True)
class MatrixState:
    """A matrix run as its page and its report draw it: the axes, the stitching grids, the marks, the controls.

    Built by :func:`matrix_state` from the run's summary (once it has one) and its finished cells (while
    it runs, or when it ended early).
    """

    senders: list[str]  # rows: sender cut names of A, in order; [] when nothing names them yet (nothing to draw)
    receivers: list[str]  # columns: receiver cut names of B, in order
    accuracy: Grid  # stitched accuracy [senders][receivers]: the summary's ``values``, else the finished cells'
    penalty: Grid  # B's accuracy - stitched accuracy [senders][receivers]: the summary's, else the cells'
    skipped: dict[tuple[str, str], str]  # (sender, receiver) -> why no adapter joins them (:func:`skipped_pairs`)
    skipped_listed: dict[str, str]  # the summary's own list: "sender->receiver" -> why (empty while it runs)
    failed: dict[tuple[str, str], str]  # (sender, receiver) -> why the cell failed for good (:func:`failed_pairs`)
    pending: str | None  # what a blank cell means now (:func:`blank_cells_mean`); None: there are none
    controls: list[ControlTable]  # each control beside its debiased matrix, in CONTROLS order (:func:`control_tables`)
    # 95% intervals over the test images [lo, hi] per cell (fractions); None where a cell has none (runs from before them)
    accuracy_ci: list[list] | None = None
    penalty_ci: list[list] | None = None
    # a run with adapter seeds: :func:`across_seed_grids` (mean and t-interval grids across them); else None
    across_seeds: dict[str, Any] | None = None
    # the fits' moments' proxy (closed-form and proxy matrices): {"r2": grid, "cka": grid}; {} when none
    proxy: dict[str, Grid] = dataclasses.field(default_factory=dict)
    scored: bool = True  # False: a proxy matrix, whose cells are not scored (no accuracy, no penalty)

    @property
    def metrics(self) -> list[str]:
        """What the stitching panel can show: accuracy and penalty (a scored matrix), then the proxy's r2 and cka."""
        return (["accuracy", "penalty"] if self.scored else []) + [m for m in PROXY_METRICS
                                                                   if m in self.proxy or not self.scored]

    def grid(self, metric: str, across: bool = False) -> Grid:
        """The stitching panel's grid for ``metric``: "accuracy" or "penalty"; ``across``: the mean over the
        adapter seeds (a run without seeds: the plain grid)."""
        if metric in PROXY_METRICS and metric in self.metrics:  # a proxy matrix's before its first cells: blank
            return self.proxy.get(metric) or [[None] * len(self.receivers) for _ in self.senders]
        if metric not in ("accuracy", "penalty"):
            raise StitchError(f"a matrix's stitching panel shows {' or '.join(self.metrics)}, not {metric!r}")
        if across and self.across_seeds:
            return self.across_seeds[metric]
        return self.accuracy if metric == "accuracy" else self.penalty

    def intervals(self, metric: str, across: bool = False) -> list[list] | None:
        """The grid of ``metric``'s cell intervals ([lo, hi] or None per cell), or None where no cell has one:
        over test images, or (``across``) the t-interval across the adapter seeds."""
        self.grid(metric)  # the same check
        if metric in PROXY_METRICS:
            return None
        if across and self.across_seeds:
            grid = self.across_seeds[f"{metric}_ci"]
        else:
            grid = self.accuracy_ci if metric == "accuracy" else self.penalty_ci
        return grid if grid and any(ci for row in grid for ci in row) else None


def _axes(s: Mapping[str, Any], cells: list[dict], spec: MatrixSpec,
          cut_names: Callable[[str], Sequence[str]] | None) -> tuple[list[str], list[str]]:  # fmt: skip
    """The rows and columns to draw (see :func:`matrix_state`)."""
    if cut_names is None:  # what the run computed: the summary's axes, else the cells'
        senders, receivers = s.get("senders"), s.get("receivers")
        if not senders or not receivers:
            senders, receivers = cell_axes(cells)
        return senders, receivers
    try:  # the full grid from the start, so cells fill in where they belong
        senders = s.get("senders") or list(spec.senders or cut_names(spec.a))
        receivers = s.get("receivers") or list(spec.receivers or cut_names(spec.b))
    except StitchError:  # a model that no longer loads: the cells' axes
        senders, receivers = cell_axes(cells)
    return senders, receivers


def matrix_state(
    store: Store, run_id: str, summary: Mapping[str, Any] | None, spec: MatrixSpec, *, status: str, final: bool,
    cut_names: Callable[[str], Sequence[str]] | None = None,
) -> MatrixState:  # fmt: skip
    """What a matrix run ``run_id`` (of ``spec``, in ``status``) draws now, from ``summary`` and its finished cells.

    ``final``: the run will not change any more, so the control tables come from its summary (a running
    run's come from its cells).  ``cut_names`` (ref -> cut names; the live page passes its cached loader)
    gives the full grid from the start: the summary's axes, else the spec's cuts, else every cut of A and B,
    and the cells' axes if a model cannot be loaded.  Without it (a report), the axes are the summary's, else
    the cells'.  A state with no senders has nothing to draw (its other fields are empty).

    >>> import tempfile
    >>> store = Store(tempfile.mkdtemp())
    >>> s = {"senders": ["fc1"], "receivers": ["fc2"], "values": [[0.9]], "penalty": [[0.05]],
    ...      "skipped": {}, "controls": None, "debiased": None}
    >>> state = matrix_state(store, "no-such-run", s, MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1"),
    ...                   status="done", final=True)
    >>> state.senders, state.grid("accuracy"), state.grid("penalty"), state.pending, state.controls
    (['fc1'], [[0.9]], [[0.05]], None, [])
    """
    s = summary or {}
    cells = partial_cells(store, run_id)
    senders, receivers = _axes(s, cells, spec, cut_names)
    if not senders:
        return MatrixState([], [], [], [], {}, {}, {}, None, [])
    failed = failed_pairs(s, cells)
    return MatrixState(
        senders=senders,
        receivers=receivers,
        accuracy=s.get("values") or cell_grid(cells, senders, receivers, field="accuracy"),
        penalty=s.get("penalty") or cell_grid(cells, senders, receivers, field="penalty"),
        skipped=skipped_pairs(s, cells),
        skipped_listed=dict(s.get("skipped") or {}),
        failed=failed,
        pending=blank_cells_mean(status, failed),
        controls=control_tables(s if final else None, cells, senders, receivers, controls=spec.controls, spec=spec),
        accuracy_ci=s.get("values_ci") or cell_grid(cells, senders, receivers, field="accuracy_ci"),
        penalty_ci=s.get("penalty_ci") or cell_grid(cells, senders, receivers, field="penalty_ci"),
        across_seeds=s.get("across_seeds") or across_seed_grids(cells, senders, receivers),
        proxy=_proxy_grids(s, cells, senders, receivers),
        scored=spec.scores,
    )


def _proxy_grids(s: Mapping[str, Any], cells: list[dict], senders: list[str], receivers: list[str]) -> dict[str, Grid]:
    """The summary's proxy grids, else the finished cells'; only those with a value."""
    stored = s.get("proxy") or {}
    grids = {m: stored.get(m) or cell_grid(cells, senders, receivers, field=m) for m in PROXY_METRICS}
    return {m: g for m, g in grids.items() if any(v is not None for row in g for v in row)}


def similarity_beside(store: Store, spec: MatrixSpec, created: float | None = None) -> RunRecord | None:
    """The similarity run stored beside a matrix: the Similarity page launches one with the matrix (same models,
    cuts and data, under the measure picked there; other settings default), and the matrix's spec does not name
    the measure, so a link or Results finds it here.  Every registered measure is looked up by its run id; of
    several, the one created nearest ``created`` (the matrix's, when it was launched with it), else the newest.
    None when the store holds none."""
    found = []
    for measure in list_measures():
        sim = SimilaritySpec(a=spec.a, b=spec.b, senders=spec.senders, receivers=spec.receivers, measure=measure,
                             dataset=spec.dataset)  # fmt: skip
        for candidate in (replace(sim, **era) for era in SimilaritySpec.ERAS):  # today's defaults, then older
            rec = store.lookup(run_id_for("similarity", candidate.to_dict()))
            if rec is not None:
                found.append(rec)
    if not found:
        return None
    if created is None:
        return max(found, key=lambda r: r.created)
    return min(found, key=lambda r: abs(r.created - created))
