"""One finding as the findings scripts write it: a claim, its baseline, the paired effect and a computed verdict.

Every ``bench/findings_<area>.py`` prints ``{"findings": [finding(...), ...], ...}``; ``bench/findings_table.py``
turns the committed ``bench/findings_<area>.json`` files into the table of ``docs/DESIGN.md``.  A finding's numbers
are per MODEL seed (one independently trained model pair each): ``ours`` and ``baseline`` are the claim's and its
baseline's values, ``effect`` their paired difference (ours - baseline; the claim says it is > 0, "greater", or
< 0, "less") with a Student t 95% interval over the seeds (none below 3 seeds), and ``verdict`` comes from
:func:`stitchcore.measures.verdicts.verdict` on that interval: never written by hand.

>>> f = finding("a claim", "Paper 2021", [0.30, 0.32, 0.31], "random-init A", [0.05, 0.04, 0.06], side="greater")
>>> f["verdict"], f["ours"]["n_seeds"], f["effect"]["mean"]
('reproduced', 3, 0.26)
>>> finding("x", "P", [0.01, 0.0], "random-init A", [0.0, 0.01], side="greater")["verdict"]
'not testable'
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.measures.intervals import paired_seed_effect, seed_spread
from stitchcore.measures.verdicts import verdict

__all__ = ["finding", "interval"]

KEYS = ("claim", "paper", "ours", "baseline", "effect", "verdict", "why")  # the schema every area keeps


def interval(values: list[float], bounds: tuple[float, float] | None = None) -> dict:
    """``{"mean", "ci": [lo, hi] or None, "n_seeds"}`` of one number over model seeds (t interval, n >= 3)."""
    got = [float(v) for v in values if v is not None]
    mean, ci = seed_spread(got, bounds=bounds) if got else (None, None)
    return {"mean": None if mean is None else round(mean, 4), "ci": None if ci is None else [round(c, 4) for c in ci],
            "n_seeds": len(got)}  # fmt: skip


def finding(claim: str, paper: str, ours: list[float], baseline_name: str, baseline: list[float], *, side: str,
            margin: float | None = None, what: str = "", bounds: tuple[float, float] | None = None,
            note: str = "") -> dict:  # fmt: skip
    """A finding from the claim's per-seed values and its baseline's (same seeds, same order).

    ``side``: "greater" when the claim says ours > baseline, "less" when ours < baseline; ``margin``: for a claim
    of equivalence ("no worse than", "barely changes"), the stated margin the effect's interval must lie inside.  ``what``: the
    quantity in words (e.g. "penalty at fc2"); ``note``: what else a reader must know (appended to ``why``).
    """
    if len(ours) != len(baseline):
        raise ValueError(f"{claim!r}: {len(ours)} claim values against {len(baseline)} baseline values")
    effect = paired_seed_effect(ours, baseline, bounds=bounds)
    effect = {"mean": round(effect["mean"], 4), "ci": None if effect["ci"] is None else [round(c, 4) for c in
              effect["ci"]], "n_seeds": effect["n_seeds"]}  # fmt: skip
    name, why = verdict(effect, side, margin=margin)
    return {"claim": claim, "paper": paper, "what": what, "ours": interval(ours, bounds),
            "baseline": {"name": baseline_name, **interval(baseline, bounds)},
            "effect": effect, "side": side, "margin": margin, "verdict": name, "why": (why + (" " + note if note else "")).strip()}
