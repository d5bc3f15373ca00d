"""Which cut pairs to train first: every cell of a matrix ranked by a score that needs no training.

A closed-form or proxy matrix stores, per cell, the held-out ridge R² and the linear CKA of its fit's
moments (:mod:`stitchcore.stitching.shared_fits`); a closed-form matrix also its accuracy.  Any of them
ranks the sender x receiver pairs before anything is trained (:func:`recommend`); :func:`agreement` says
how well a ranking predicted a trained matrix of the same pairs (Spearman's rho over the cells, and
whether a best trained cell is among the top 5), which ``bench/matrix_scaling.py`` measures on zoo pairs.

>>> summary = {"senders": ["a1", "a2"], "receivers": ["b1", "b2"],
...            "proxy": {"r2": [[0.9, 0.2], [0.4, 0.8]], "cka": [[0.7, 0.1], [0.3, 0.6]]}}
>>> [(c["sender"], c["receiver"]) for c in recommend(summary, by="r2", top=2)]
[('a1', 'b1'), ('a2', 'b2')]
>>> agreement(recommend(summary, by="r2"), [[0.95, 0.3], [0.5, 0.9]], ["a1", "a2"], ["b1", "b2"])
{'spearman': 1.0, 'best_in_top': True, 'cells': 4}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments.matrix.spec import MODE_RULES, MatrixSpec
from stitchcore.store.results import RunRecord, Store, run_id_for

__all__ = ["RANKINGS", "RANKING_HELP", "RANKING_WORDS", "RECOMMEND_WORDS", "TOP", "agreement", "cell_words", "depth_grid", "proxy_run", "proxy_spec",
           "ranked", "ranking_choices", "recommend", "spearman"]  # fmt: skip

TOP = 5  # "train these first": how many pairs a page lists
# the probes' agreement (KLAS-style: a linear probe at each cut, the symmetric KL of their predictions; the default
# since issue 42, chosen on five zoo pairs and reported on twelve held-out ones by bench/matrix_scaling.py) |
# held-out ridge R² | linear CKA | the closed-form fit's test accuracy | the relative-depth baseline (pairs at the
# same fraction of their models' depth first: what a user picks with no measurement at all)
RANKINGS = ("probe_kl", "r2", "cka", "accuracy", "depth")
RANKING_WORDS = {"probe_kl": "probe KL (linear probes' predictions, lower = alike)",
                 "r2": "held-out R² of the linear fit", "cka": "linear CKA", "accuracy": "closed-form accuracy",
                 "depth": "relative depth (the baseline)"}  # fmt: skip
_SHORT = {"probe_kl": "probe KL", "r2": "held-out R²", "cka": "linear CKA", "accuracy": "closed-form accuracy"}
# what a page says beside a ranking (bench/matrix_recommender_cpu_2026-12-07.json measured the figures)
RECOMMEND_WORDS = ("Ranked without training: a guide to which pairs to train first, not a substitute for training. "
                   "On twelve zoo pairs held out of choosing it (other seeds, a ViT and a Swin, mnist5k), the "
                   "default ranking (linear probes) had a Spearman ρ of 0.68 [0.58, 0.76] with the trained matrix, "
                   "against 0.32 [0.18, 0.45] for pairing cuts at the same relative depth.")
RANKING_HELP = ("computed without training any adapter: probe KL (a logistic probe at each cut, on the training "
                "images but every 5th; how differently the two cuts' probes predict those, lower = alike), the "
                "least-squares fit's held-out R² (how much of B's activation the linear map predicts on training "
                "images it did not see), the linear CKA of the same samples, the closed-form matrix's test "
                "accuracy, or relative depth (the baseline: cuts at the same fraction of their models' depth). "
                "bench/matrix_scaling.py measures how well each predicts a trained matrix.")


def depth_grid(sender_depths: Sequence[float], receiver_depths: Sequence[float]) -> list[list[float]]:
    """The relative-depth baseline's scores [senders][receivers]: minus the gap between the two cuts' fractions of
    their models' depth (0 = the same fraction, the best).

    >>> depth_grid([0.5, 1.0], [0.5, 1.0])
    [[0.0, -0.5], [-0.5, 0.0]]
    """
    return [[-round(abs(s - r), 6) or 0.0 for r in receiver_depths] for s in sender_depths]  # no -0.0


def _grid(summary: Mapping[str, Any], by: str) -> list[list[float | None]] | None:
    rules = MODE_RULES.get(summary.get("mode", MatrixSpec.mode))
    if rules is None or rules.trains:  # a trained matrix: trained already
        return None
    if by == "accuracy":
        return summary.get("values") if rules.scores else None
    if by == "depth":  # matrices stored before the cuts' depths were kept have none
        depths = summary.get("sender_depths"), summary.get("receiver_depths")
        return depth_grid(*depths) if all(depths) else None
    if by == "probe_kl":  # lower KL = more alike: ranked by minus it (none in matrices stored before it)
        kl = summary.get("probe_kl")
        return [[None if v is None else -v for v in row] for row in kl] if kl else None
    return (summary.get("proxy") or {}).get(by)


def ranking_choices(summary: Mapping[str, Any]) -> list[str]:
    """The scores this matrix's summary can rank by: a closed-form or proxy matrix's (a closed-form matrix from
    before the proxy: accuracy alone); none for a trained matrix, whose cells are trained already."""
    return [by for by in RANKINGS if _grid(summary, by) and any(v is not None for row in _grid(summary, by) for v in row)]


def recommend(summary: Mapping[str, Any], by: str | None = None, top: int | None = None) -> list[dict[str, Any]]:
    """Every cell with a score, best first: ``{"sender", "receiver", "score", "probe_kl", "r2", "cka",
    "accuracy"}`` (those None where the summary has none); ``by``: a ranking of :data:`RANKINGS` (None: the first
    the summary has, :func:`ranking_choices`); ``top``: the first so many."""
    by = by if by is not None else next(iter(ranking_choices(summary)), "r2")
    if by not in RANKINGS:
        raise StitchError(f"rank by one of {', '.join(RANKINGS)}, not {by!r}")
    grid = _grid(summary, by)
    if not grid:
        raise StitchError(f"this matrix has no {RANKING_WORDS[by]} per cell: rank it by one of "
                          f"{', '.join(ranking_choices(summary)) or 'nothing (run a proxy or closed-form matrix)'}")  # fmt: skip
    others = {what: _grid(summary, what) for what in RANKINGS if what not in ("depth", "probe_kl")}
    others["probe_kl"] = summary.get("probe_kl") if _grid(summary, "probe_kl") else None  # shown as the KL itself
    cells = ranked(grid, summary["senders"], summary["receivers"], others)
    return cells[:top] if top is not None else cells


def ranked(grid: Sequence[Sequence[float | None]], senders: Sequence[str], receivers: Sequence[str],
           others: Mapping[str, Sequence[Sequence[float | None]] | None] | None = None) -> list[dict[str, Any]]:
    """Every cell of ``grid`` [senders][receivers] with a score, highest first, as :func:`recommend` gives them
    (``others``: more grids whose values each cell carries by name).

    >>> [c["sender"] for c in ranked([[0.1, None], [0.7, 0.3]], ["s1", "s2"], ["r1", "r2"])]
    ['s2', 's2', 's1']
    """
    cells = []
    for i, sender in enumerate(senders):
        for j, receiver in enumerate(receivers):
            if grid[i][j] is None:
                continue
            cell = {"sender": sender, "receiver": receiver, "score": grid[i][j]}
            cell.update({what: g[i][j] if g else None for what, g in (others or {}).items()})
            cells.append(cell)
    cells.sort(key=lambda c: -c["score"])  # stable: ties keep execution order
    return cells


def cell_words(cell: Mapping[str, Any]) -> str:
    """A ranked cell's scores in words, those it has.

    >>> cell_words({"r2": 0.8754, "cka": 0.7, "accuracy": None, "probe_kl": 0.0251})
    'probe KL 0.025, held-out R² 0.875, linear CKA 0.700'
    """
    return ", ".join(f"{_SHORT[m]} {cell[m]:.3f}" for m in _SHORT if cell.get(m) is not None)


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda k: values[k])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties at their mean rank); None with fewer than 3 pairs or a constant side.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 25])
    0.8
    """
    if len(x) != len(y):
        raise StitchError("spearman needs two sequences of the same length")
    if len(x) < 3:
        return None
    rx, ry = _ranks(list(x)), _ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return round(sxy / (sxx * syy) ** 0.5, 6) if sxx > 0 and syy > 0 else None


def agreement(ranked: list[dict[str, Any]], trained: list[list[float | None]], senders: Sequence[str],
              receivers: Sequence[str], top: int = TOP) -> dict[str, Any]:  # fmt: skip
    """How well ``ranked`` (:func:`recommend`) predicts ``trained`` [senders][receivers] (accuracy per cell):
    ``spearman`` over the cells both have, ``best_in_top`` whether a cell with the best trained accuracy is among
    the first ``top``, and ``cells``."""
    where = {(s, r): trained[i][j] for i, s in enumerate(senders) for j, r in enumerate(receivers)}
    both = [(c["score"], where[c["sender"], c["receiver"]]) for c in ranked
            if where.get((c["sender"], c["receiver"])) is not None]  # fmt: skip
    if not both:
        return {"spearman": None, "best_in_top": None, "cells": 0}
    best = max(t for _, t in both)
    firsts = [where.get((c["sender"], c["receiver"])) for c in ranked[:top]]
    return {"spearman": spearman([s for s, _ in both], [t for _, t in both]),
            "best_in_top": any(t is not None and t >= best for t in firsts), "cells": len(both)}  # fmt: skip


def proxy_run(store: Store, a: str, b: str, dataset: str | None = None) -> RunRecord | None:
    """The newest finished matrix of models ``a`` x ``b`` (on ``dataset``, None: B's own) that can rank its
    cells without training: a proxy matrix of every cut (the default), else any closed-form or proxy matrix of
    the pair in the store.  None when there is none."""
    for mode in ("proxy", "closed-form"):  # the all-cuts matrices by their run ids first: no scan
        rec = store.lookup_done(run_id_for("matrix", MatrixSpec(a, b, mode=mode, dataset=dataset).to_dict()))
        if rec is not None and ranking_choices(rec.summary):
            return rec
    a, b = MatrixSpec(a, b).a, MatrixSpec(a, b).b  # canonical spellings
    for rec in store.list_runs("matrix", status="done"):
        spec = rec.spec
        if spec.get("a") == a and spec.get("b") == b and spec.get("dataset") == dataset and ranking_choices(rec.summary or {}):
            return rec
    return None


def proxy_spec(a: str, b: str, dataset: str | None = None) -> MatrixSpec:
    """The matrix that ranks every cut pair of ``a`` x ``b`` without training (seconds to minutes)."""
    return MatrixSpec(a, b, dataset=dataset, mode="proxy")
