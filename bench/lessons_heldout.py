"""The shipped lessons' promised outcomes at the seeds their texts were written on and at held-out ones.

    STITCHLAB_JOB_THREADS=1 python bench/lessons_heldout.py [--shifts 0 10 20 30 40 50] [--store DIR] > lessons_heldout.json

Each lesson runs whole (``run_lesson``) at every seed shift (``lessons.reseed.reseeded``: shift 0 is the lesson
as shipped, 10 ... 50 move every model it trains that many seeds on, so no model is shared; heads-matter stops at
:data:`LAST_SHIFT`), on one torch thread,
into ``--store`` (default ``.findings/lessons``; cached there, so a second call reads the runs back).  Beside
the lesson's own runs it measures what a rewording needs: the heads-matter stitch with A's head (the step's open
control) and with today's training rule (until converged, best start); for two-seeds the same sweep from an
untrained A (the random-init bottom, :data:`RANDOM_A_SEED`) and the noise sender the sweep draws; for
where-a-trait-lives the same joins from a plain A and a plain B (no quirk), and the special-layer stitch from a
random start (it cannot copy B's special layer, as a least-squares start can); for similar-is-not-the-same a
trained stitch (10 epochs, the stitch kind's default) of the matrix's cells the text points at and the
controls of those cells.  Prints one JSON object: per lesson, per shift, the numbers its text promises; and
over the held-out shifts, each number's mean, range and Student t 95% interval (``measures.intervals.
seed_spread``, clipped to the number's range: :func:`_bounds`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import new_spec, run_experiment
from stitchcore.experiments.sweep import penalty_along
from stitchcore.experiments.trait_presets import zoo_ref
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.lessons import get_lesson, run_lesson, step_run
from stitchcore.lessons.reseed import reseeded
from stitchcore.measures.intervals import seed_spread
from stitchcore.models.refs import random_twin
from stitchcore.store.results import Store

# 0: the seeds the texts were written on; the rest held out (tests/test_lessons_heldout.py asserts at 10, 20, 30).
# heads-matter trains two char-GPTs per shift (~50 s each on one core): it stops at 30, so a fresh store takes
# about 20 minutes on one core (the digit lessons ~75 s a shift, heads-matter ~190 s)
SHIFTS = (0, 10, 20, 30, 40, 50)
LAST_SHIFT = {"heads-matter": 30}
# The untrained A of two-seeds' random-bottom sweep draws its weights from RANDOM_A_SEED + shift: no control twin
# of the lesson's sweep (seeds 0 and 1: adapter seed 0, one control pair) draws it, so it is a network of its own.
RANDOM_A_SEED = 1000


def _two_seeds(lesson, store: Store) -> dict:
    zoo, stitch, sweep = (o.record.summary for o in run_lesson(lesson, store))
    control = sweep["control"]["accuracy"]["mean"]
    stitched = sweep["stitched"]["accuracy"]
    penalty = penalty_along(sweep)
    out = {"a_accuracy": zoo["accuracy"], "stitch_penalty_block2": stitch["penalty"],
           "stitch_penalty_block2_ci": stitch.get("penalty_ci"), "positions": sweep["positions"],
           "sweep_penalty_max": max(penalty), "sweep_penalty": penalty, "stitched_accuracy": stitched,
           "control_gap_min": min(s - c for s, c in zip(stitched, control, strict=True)),
           "control_accuracy": control, "control_accuracy_max": max(control)}  # fmt: skip
    noise = (stitch.get("controls") or {}).get("noise_sender")
    if noise is not None:  # the stitch page shows it beside the stitched accuracy
        out["stitch_noise_sender_block2"] = noise["accuracy"]
    if sweep.get("noise_sender") is not None:  # drawn as a dashed grey line
        out["noise_sender_accuracy"] = ns = sweep["noise_sender"]["accuracy"]
        out["noise_sender_margin_min"] = min(s - n for s, n in zip(stitched, ns, strict=True))
        out["noise_sender_margin_max"] = max(s - n for s, n in zip(stitched, ns, strict=True))
    # the baseline that could break "A's layers carry what B's top expects": an untrained A, the same sweep
    step = lesson.step(3)
    a = random_twin(step.spec["a"], RANDOM_A_SEED + int(lesson.models["A"].seed))
    alone = {"a": a, "control": False, "noise_control": False}
    bottom = run_experiment("sweep", new_spec("sweep", {**step.spec, **alone}), store).record.summary
    out["random_a_penalty"] = rp = penalty_along(bottom)
    # > 0: the trained A does better
    out["random_a_gap"] = gap = [r - p for r, p in zip(rp, penalty, strict=True)]
    out["random_a_gap_first"], out["random_a_gap_last"] = gap[0], gap[-1]
    return out


def _trait(lesson, store: Store) -> dict:
    a, inheritance, special = (o.record.summary for o in run_lesson(lesson, store))
    conf = inheritance["stitched"]["confusion:3->8"]
    positions, sconf = special["positions"], special["stitched"]["confusion:3->8"]
    before = positions.index("fc1") - 1
    control = inheritance.get("control", {}).get("confusion:3->8", {}).get("mean")
    out = {"a_accuracy": a["accuracy"], "positions": inheritance["positions"], "inheritance_confusion": conf,
           "inheritance_control": control, "special_positions": positions, "special_confusion": sconf,
           "special_before": sconf[before], "special_after_max": max(sconf[before + 1:]),
           "special_drop": sconf[before] - max(sconf[before + 1:])}  # fmt: skip
    # the baselines that could break each claim: the same joins, same adapter training, without the quirk
    # (a plain A of A's seed; a plain B of the special B's seed)
    for key, step, role, base in (("inheritance_plain_a", 2, "a", "relabel"),
                                  ("special_plain_b", 3, "b", "finetune_layer")):  # fmt: skip
        spec = lesson.step(step).spec
        made = next(r for r in lesson.step(step).models if getattr(r, base))
        quirk = {base: None, **({"finetune_data": None} if role == "b" else {})}
        plain = ZooRecipe(**{**made.all_fields(), **quirk})
        run_experiment("zoo", plain, store)
        sweep = new_spec("sweep", {**spec, role: zoo_ref(plain), "control": False, "simplicity": False})
        out[key] = run_experiment("sweep", sweep, store).record.summary["stitched"]["confusion:3->8"]
    out["inheritance_first"], out["inheritance_last"] = conf[0], conf[-1]
    out["inheritance_plain_a_last"] = out["inheritance_plain_a"][-1]
    out["inheritance_plain_a_max"] = max(out["inheritance_plain_a"])
    out["inheritance_late_gap"] = min(conf[-2:]) - max(out["inheritance_plain_a"][-2:])
    out["inheritance_last_gap"] = conf[-1] - out["inheritance_plain_a"][-1]
    out["special_before_gap"] = sconf[before] - out["special_plain_b"][before]
    # the special layer's other reading: a stitch started at random cannot copy B's fc1 into the joined network
    # after the cut (a least-squares start fits A's activations to B's there); against a plain B the same way
    spec = lesson.step(3).spec
    random_start = {**spec, "adapter": {**spec["adapter"], "init": "random"}}
    rconf = _confusion(run_experiment("sweep", new_spec("sweep", random_start), store))
    made = next(r for r in lesson.step(3).models if r.finetune_layer)
    plain = ZooRecipe(**{**made.all_fields(), "finetune_layer": None, "finetune_data": None})
    plain_b = {"b": zoo_ref(plain), "control": False, "simplicity": False}
    rplain = _confusion(run_experiment("sweep", new_spec("sweep", {**random_start, **plain_b}), store))
    out.update({"random_start_confusion": rconf, "random_start_before": rconf[before],
                "random_start_after_max": max(rconf[before + 1:]), "random_start_drop": rconf[before] - max(
                    rconf[before + 1:]), "random_start_plain_b": rplain,
                "random_start_before_gap": rconf[before] - rplain[before]})  # fmt: skip
    return out


def _confusion(outcome) -> list[float]:
    """A sweep run's '3 predicted as 8' at each of its cuts."""
    return outcome.record.summary["stitched"]["confusion:3->8"]


def _similar(lesson, store: Store) -> dict:
    cka, cka_random, matrix = (o.record.summary for o in run_lesson(lesson, store))
    at = {name: i for i, name in enumerate(cka["senders"])}
    v, acc, base_b = cka["values"], matrix["values"], matrix["base"]["b"]
    out = {"cuts": cka["senders"], "base_b": base_b, "cka": v, "matrix": acc,
           "cka_block2_block1": v[at["block2"]][at["block1"]], "lstsq_block2_block1": acc[at["block2"]][at["block1"]],
           "cka_fc2_fc2": v[at["fc2"]][at["fc2"]], "lstsq_fc2_fc2": acc[at["fc2"]][at["fc2"]],
           "cka_random_first": cka_random["values"][0][0], "cka_first": v[0][0],
           "controls": {k: c.get("values") if isinstance(c, dict) else c for k, c in matrix["controls"].items()}
           }  # fmt: skip
    out["cka_fc2_below_block2_block1"] = out["cka_block2_block1"] - out["cka_fc2_fc2"]
    for name, values in out["controls"].items():  # the controls of the cells the text points at
        if isinstance(values, list):
            out[f"{name}_block2_block1"] = values[at["block2"]][at["block1"]]
            out[f"{name}_fc2_fc2"] = values[at["fc2"]][at["fc2"]]
    a, b = lesson.step(3).spec["a"], lesson.step(3).spec["b"]
    for cut_a, cut_b in (("block2", "block1"), ("fc2", "fc2")):  # the cells the text points at, trained
        spec = new_spec("stitch", {"a": a, "b": b, "cut_a": cut_a, "cut_b": cut_b})
        s = run_experiment("stitch", spec, store).record.summary
        out[f"trained_{cut_a}_{cut_b}"] = s["accuracy"]
        out[f"trained_{cut_a}_{cut_b}_epochs"] = spec.epochs
    return out


def _heads(lesson, store: Store) -> dict:
    _, _, merge_a, merge_b, stitch_b = (o.record.summary for o in run_lesson(lesson, store))
    out = {"merge_head_a": merge_a["loss_penalty"], "merge_head_b": merge_b["loss_penalty"],
           "stitch_head_b": stitch_b["loss_penalty"]}  # fmt: skip
    step = lesson.step(5)
    other = run_experiment("lmstitch", step_run(step, {"head": "a"}).spec, store)
    out["stitch_head_a"] = other.record.summary["loss_penalty"]
    # today's training rule: until the held-out train loss stops improving, best start
    for head in ("a", "b"):
        spec = new_spec("lmstitch", {**step.spec, "head": head, "until": "converged", "start": "best"})
        out[f"converged_head_{head}"] = run_experiment("lmstitch", spec, store).record.summary["loss_penalty"]
    out["merge_gap"] = out["merge_head_b"] - out["merge_head_a"]
    out["flip"] = out["stitch_head_a"] - out["stitch_head_b"]
    out["flip_converged"] = out["converged_head_a"] - out["converged_head_b"]
    return out


MEASURE = {"two-seeds": _two_seeds, "where-a-trait-lives": _trait, "similar-is-not-the-same": _similar,
           "heads-matter": _heads}  # fmt: skip


def _bounds(key: str) -> tuple[float, float] | None:
    """The range a number of the rows can take, for its interval: an LM loss penalty (L_base − L) / L_base is at
    most 1, a difference of two rates or accuracies lies in [-1, 1], a rate, accuracy or CKA in [0, 1]; None
    for the rest (epoch counts).

    >>> _bounds("merge_head_a"), _bounds("special_drop"), _bounds("cka_first"), _bounds("trained_fc2_fc2_epochs")
    ((-inf, 1.0), (-1.0, 1.0), (0.0, 1.0), None)
    """
    if key in LM_KEYS:
        return (-math.inf, 1.0)
    if key.endswith("epochs"):
        return None
    if any(word in key for word in ("gap", "drop", "penalty", "margin", "below")):
        return (-1.0, 1.0)
    return (0.0, 1.0)


# loss penalties and their differences (heads-matter)
LM_KEYS = {"merge_head_a", "merge_head_b", "stitch_head_a", "stitch_head_b", "converged_head_a", "converged_head_b",
           "merge_gap", "flip", "flip_converged"}  # fmt: skip


def _spread(rows: list[dict]) -> dict:
    """mean, min, max and t-interval (clipped to :func:`_bounds`) over the held-out shifts of every scalar the
    rows share."""
    out = {}
    for key, value in rows[0].items():
        if not all(key in r for r in rows):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            vals = [r[key] for r in rows]
            mean, ci = seed_spread(vals, bounds=_bounds(key))
            out[key] = {"mean": mean, "min": min(vals), "max": max(vals), "ci95": ci}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shifts", type=int, nargs="+", default=list(SHIFTS))
    p.add_argument("--store", default=".findings/lessons")
    p.add_argument("--lessons", nargs="+", default=list(MEASURE))
    args = p.parse_args()
    torch.set_num_threads(1)
    result = {}
    with Store(Path(args.store)) as store:
        for name in args.lessons:
            rows = {}
            for shift in [s for s in args.shifts if s <= LAST_SHIFT.get(name, s)]:
                t0 = time.perf_counter()
                rows[shift] = MEASURE[name](reseeded(get_lesson(name), shift), store)
                # the time of this call (runs read back from the store take none), not kept in the JSON
                print(f"{name} shift {shift}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            held = [row for s, row in rows.items() if s != 0]
            result[name] = {"per_shift": rows, "held_out": _spread(held) if len(held) >= 2 else None}
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
