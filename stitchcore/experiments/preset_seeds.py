"""A preset over several model seeds: is its finding a property of the recipe, or of one training run?

Seed k of a preset (k = 0, 1, ..., n-1) trains every model of the preset from its own seeds
(``get_preset(name, seed=k * SEED_STEP)``: a preset's recipes use seed, seed+1, seed+2 ..., so steps of
``SEED_STEP`` never share a model) and trains its adapters from their own seed too; seed 0 is the preset
as the Traits page runs it, so its runs are the ones already stored.  Each sweep's number at each cut is
then read across the seeds that have finished: the mean and a Student-t 95% interval
(``intervals.seed_spread``), the spread that training adds on top of the test images' (each seed's own
interval over the test images).

>>> model_seeds(3)
[0, 10, 20]
>>> {s.seed for s in seeded_preset("kernel-size", 2).sweeps}  # the adapters train from their own seed too
{2}
>>> seeded_preset("kernel-size", 0) == get_preset("kernel-size")  # seed 0: the page's preset, its runs
True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments.sweep import penalty_along
from stitchcore.experiments.trait_presets import Preset, get_preset
from stitchcore.measures.intervals import seed_spread
from stitchcore.store.results import Store, run_id_for

__all__ = ["MAX_SEEDS", "SEED_STEP", "across_model_seeds", "across_rows", "model_seeds", "seed_lines",
           "seeded_preset"]

SEED_STEP = 10  # a preset's recipes take seed .. seed+2 (its random-init bottoms seed + RANDOM_BOTTOM_SEED)
MAX_SEEDS = 5  # each seed trains the preset's models again: minutes apiece on a laptop CPU


def model_seeds(n: int) -> list[int]:
    """The preset seeds of ``n`` model seeds: 0, SEED_STEP, 2 * SEED_STEP, ..."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SEEDS:
        raise StitchError(f"model seeds must be 1 to {MAX_SEEDS}, got {n}: each seed trains the preset's models again")
    return [k * SEED_STEP for k in range(n)]


def seeded_preset(name: str, k: int, protocol: str | None = None, dataset: str | None = None) -> Preset:
    """Seed ``k`` of preset ``name`` (at ``dataset``, ``get_preset``'s): its models from ``k * SEED_STEP`` on and
    its adapters from seed ``k`` (k = 0: the preset itself, unchanged)."""
    preset = get_preset(name, seed=k * SEED_STEP, protocol=protocol, dataset=dataset)
    if k == 0:
        return preset
    return replace(preset, sweeps=tuple(replace(s, seed=s.seed + k) for s in preset.sweeps))


RATE = (0.0, 1.0)  # every trait metric is a proportion of test images (measures.traits)
PENALTY = (-1.0, 1.0)  # accuracy(B) − accuracy(C): a difference of two proportions


def _at(per_seed_lists: list[list | None], i: int, bounds: tuple[float, float]) -> dict[str, Any]:
    """The spread of position ``i`` over the seeds' value lists (None: that seed has not finished); the interval
    clipped to ``bounds``, the number's range."""
    per_seed = [v[i] if v is not None and i < len(v) else None for v in per_seed_lists]
    mean, ci = seed_spread(per_seed, bounds=bounds)
    return {"values": per_seed, "mean": mean, "ci": ci}


def across_model_seeds(name: str, store: Store, n: int, protocol: str | None = None,
                       dataset: str | None = None) -> list[dict[str, Any]]:
    """Each sweep of the preset read across its ``n`` model seeds, from the store (finished sweeps only).

    One dict per sweep, in the preset's order: ``title`` (seed 0's), ``positions``, ``seeds`` (the
    preset seeds), ``done`` (those whose sweep has finished), ``metrics`` {metric: [per position
    {"values": one per seed (None where not finished), "mean", "ci": [lo, hi] within [0, 1], None under
    ``intervals.MIN_SEEDS`` finished seeds}]} and ``penalty`` (B's accuracy − stitched, the same way, within
    [-1, 1]; [] without the accuracy metric).
    """
    seeds = model_seeds(n)
    presets = [seeded_preset(name, k, protocol, dataset) for k in range(len(seeds))]
    out = []
    for j, title in enumerate(presets[0].sweep_titles):
        summaries = []
        for preset in presets:
            rec = store.lookup(run_id_for("sweep", preset.sweeps[j].to_dict()))
            summaries.append(rec.summary if rec is not None and rec.status == "done" else None)
        finished = [s for s in summaries if s is not None]
        positions = list(finished[0]["positions"]) if finished else []
        metrics = list(finished[0]["metrics"]) if finished else list(presets[0].sweeps[j].metrics)

        stitched = {m: [s["stitched"].get(m) if s is not None else None for s in summaries] for m in metrics}
        penalties = [(penalty_along(s) or None) if s is not None else None for s in summaries]
        out.append({
            "title": title, "positions": positions, "seeds": seeds,
            "done": [seed for seed, s in zip(seeds, summaries, strict=True) if s is not None],
            "metrics": {m: [_at(stitched[m], i, RATE) for i in range(len(positions))] for m in metrics},
            "penalty": [_at(penalties, i, PENALTY) for i in range(len(positions))] if any(penalties) else [],
        })  # fmt: skip
    return out


def seed_lines(preset: Preset, panel_index: int, across: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One figure of a preset across model seeds, in the shape :func:`~stitchcore.experiments.trait_presets.
    panel_lines` gives: per sweep of the panel, the mean penalty across the finished seeds (``penalty``) with its
    t-interval (``penalty_ci``), and for a trait-metric panel that metric's mean and t-interval (``metric``,
    ``values``, ``values_ci``), titled with seed 0's title and how many seeds it rests on."""
    panel = preset.panels[panel_index]
    lines = []
    for k in panel.sweeps:
        sweep = across[k]
        line = {"title": f"{sweep['title']} ({len(sweep['done'])} of {len(sweep['seeds'])} seeds)",
                "positions": sweep["positions"], "reference": k in panel.references,
                "penalty": [c["mean"] for c in sweep["penalty"]], "penalty_ci": [c["ci"] for c in sweep["penalty"]]}
        if panel.metric is not None:
            cells = sweep["metrics"].get(panel.metric) or []
            line.update(metric=panel.metric, values=[c["mean"] for c in cells], values_ci=[c["ci"] for c in cells])
        lines.append(line)
    return lines


def across_rows(sweep: dict[str, Any]) -> list[dict[str, str]]:
    """One sweep across model seeds as table rows: ``cut``, then per metric (and ``penalty``) ``mean [lo, hi]``.

    >>> across_rows({"positions": ["fc1"], "penalty": [],
    ...              "metrics": {"accuracy": [{"values": [0.9, 0.92], "mean": 0.91, "ci": [0.783, 1.037]}]}})
    [{'cut': 'fc1', 'accuracy': '0.910 [0.783, 1.037]'}]
    """
    cols = {**sweep["metrics"], **({"penalty": sweep["penalty"]} if sweep["penalty"] else {})}

    def cell(c: dict[str, Any]) -> str:
        if c["mean"] is None:
            return "-"
        return f"{c['mean']:.3f}" + (f" [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]" if c["ci"] else "")

    return [{"cut": pos, **{name: cell(values[i]) for name, values in cols.items()}}
            for i, pos in enumerate(sweep["positions"])]  # fmt: skip
