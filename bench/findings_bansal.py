"""Bansal, Nakkiran & Barak's claims, from the Traits presets over independently trained models (issue 39).

    STITCHLAB_JOB_THREADS=1 python bench/findings_bansal.py [--seeds 0 10 20] [--store DIR] [--presets NAME ...]

Each preset runs whole at every model seed (``bench/_preset_findings.run_seeds``: the Traits page's "Model
seeds", each seed's models trained from their own seed; default 0, 10, 20, so every interval rests on three
independent model sets), on the digits test split, into ``--store`` (default ``.findings/traits``, shared with
``findings_traits.py``; cached).  Each finding compares the claim's sweep with the one that could break it (the
preset's ``baselines``: a random-init A of A's architecture, a clean A, B stitched into itself) at one cut, per
seed, and ``_findings.finding`` computes the paired effect's Student t 95% interval and the verdict.  Equivalence
claims state their margin, EQUIVALENCE, chosen on validation data (``bench/settings_chosen.py``).  Nothing is tuned here: the presets' settings are their own (chosen on the
validation split ``digits|val300s0``).  Prints ``{"findings": [...], "seconds": {...}}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _findings import finding  # bench/ is the script's folder
from _preset_findings import at, check_title, main, mean_over


PAPER = "Bansal, Nakkiran & Barak 2021"
# The margin of "no penalty" and "gains nothing": what reseeding the same stitch moves a penalty by (95% of such
# null effects), measured on validation images at validation model seeds (bench/settings_chosen.py, "equivalence";
# tests/test_selection.py checks this constant against bench/settings_chosen.json).
EQUIVALENCE = 0.015
PENALTY = (-1.0, 1.0)
FIRST, LAST = 0, -1  # the first cut (block1) and the last (fc2)


def _values(runs: list[list[dict]], sweep: int, what: str, position: int | str) -> list[float | None]:
    return [at(seed[sweep], what, position) for seed in runs]


def connectivity(runs: list[list[dict]]) -> list[dict]:
    check_title("connectivity", 3, "random-init A")
    positions = list(runs[0][0]["positions"])
    pairs = [[mean_over([at(seed[j], "penalty", i) for j in (0, 1, 2)]) for seed in runs] for i in range(len(positions))]
    worst = max(range(len(positions)), key=lambda i: abs(sum(pairs[i]) / len(pairs[i])))
    return [
        finding("Seeds are stitching connected: trained pairs stitch at no penalty at every cut", PAPER, pairs[worst],
                "no penalty (0)", [0.0] * len(runs), side="less", margin=EQUIVALENCE, bounds=PENALTY,
                what=f"penalty of three seed pairs, their worst cut ({positions[worst]})"),
        finding("A random-init bottom stitches with a large penalty at the last cut", PAPER,
                _values(runs, 3, "penalty", LAST), "trained pairs at the same cut",
                [mean_over([at(seed[j], "penalty", LAST) for j in (0, 1, 2)]) for seed in runs], side="greater",
                bounds=PENALTY, what=f"penalty at {positions[LAST]}"),
    ]


def label_noise(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((0, "50% noisy labels, 100"), (1, "clean A"), (2, "10% noisy labels, 40"),
                     (3, "100% wrong labels, 40"), (4, "10% noisy labels, 100"), (6, "100% wrong labels, 100"),
                     (7, "random-init A")):  # fmt: skip
        check_title("label-noise", k, words)
    first, last = runs[0][0]["positions"][FIRST], runs[0][0]["positions"][LAST]
    return [
        finding("Noisy-label models have good early layers (50% noise, 100 epochs)", PAPER,
                _values(runs, 0, "penalty", FIRST), "random-init A, same stitch", _values(runs, 7, "penalty", FIRST),
                side="less", bounds=PENALTY, what=f"penalty at {first}"),
        finding("Noisy-label models have poor late layers (50% noise, 100 epochs)", PAPER,
                _values(runs, 0, "penalty", LAST), "clean A, same stitch", _values(runs, 1, "penalty", LAST),
                side="greater", bounds=PENALTY, what=f"penalty at {last}"),
        finding("More noise, worse late layers: 100% vs 10% at equal epochs (40)", PAPER,
                _values(runs, 3, "penalty", LAST), "10% noise, 40 epochs", _values(runs, 2, "penalty", LAST),
                side="greater", bounds=PENALTY, what=f"penalty at {last}"),
        finding("More noise, worse late layers: 100% vs 10% at equal epochs (100)", PAPER,
                _values(runs, 6, "penalty", LAST), "10% noise, 100 epochs", _values(runs, 4, "penalty", LAST),
                side="greater", bounds=PENALTY, what=f"penalty at {last}"),
    ]


def coarse_labels(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((0, "0-4 vs 5-9"), (1, "10-class A"), (2, "random-init A")):
        check_title("coarse-labels", k, words)
    first, last = runs[0][0]["positions"][FIRST], runs[0][0]["positions"][LAST]
    return [
        finding("A coarse-task model still has good early layers", PAPER, _values(runs, 0, "penalty", FIRST),
                "random-init A, same stitch", _values(runs, 2, "penalty", FIRST), side="less", bounds=PENALTY,
                what=f"penalty at {first}"),
        finding("A coarse-task model's late layers lose the fine classes", PAPER, _values(runs, 0, "penalty", LAST),
                "10-class A, same stitch", _values(runs, 1, "penalty", LAST), side="greater", bounds=PENALTY,
                what=f"penalty at {last}"),
    ]


def kernel_size(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((0, "1x1"), (1, "3x3"), (2, "5x5"), (3, "random-init A")):
        check_title("kernel-size", k, words)
    found = []
    for cut in runs[0][0]["positions"]:
        found.append(finding(f"A 1x1 stitching layer suffices: 3x3 gains nothing at {cut}", PAPER,
                             _values(runs, 0, "penalty", cut), "3x3 stitching layer", _values(runs, 1, "penalty", cut),
                             side="less", margin=EQUIVALENCE, bounds=PENALTY, what=f"penalty at {cut}"))  # fmt: skip
    for cut in runs[0][0]["positions"][1:]:  # every conv cut after the first (digits: block2; mnist5k: 2 and 3)
        found.append(finding(f"The 1x1 stitch tells a trained bottom from a random one at {cut}", PAPER,
                             _values(runs, 0, "penalty", cut), "random-init A, 1x1", _values(runs, 3, "penalty", cut),
                             side="less", bounds=PENALTY, what=f"penalty at {cut}",
                             note="Without this gap no kernel comparison at this cut could mean anything."))  # fmt: skip
    return found


def early_convergence(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((1, "epoch 1"), (3, "epoch 5"), (4, "random-init A")):
        check_title("early-convergence", k, words)
    first, last = runs[0][0]["positions"][FIRST], runs[0][0]["positions"][LAST]
    return [
        finding("Early layers converge first: an epoch-1 bottom already stitches at the first cut", PAPER,
                _values(runs, 1, "penalty", FIRST), "random-init A, same stitch", _values(runs, 4, "penalty", FIRST),
                side="less", bounds=PENALTY, what=f"penalty at {first}"),
        finding("Late layers converge later: the epoch-1 bottom is worse than the epoch-5 one at the last cut",
                PAPER, _values(runs, 1, "penalty", LAST), "epoch-5 bottom", _values(runs, 3, "penalty", LAST),
                side="greater", bounds=PENALTY, what=f"penalty at {last}"),
    ]


def more_is_better(runs: list[list[dict]]) -> list[dict]:
    found = []
    last = runs[0][0]["positions"][LAST]
    for better, itself, what in ((0, 1, "data"), (2, 3, "width"), (4, 5, "time")):
        check_title("more-is-better", better, f"{what}: better A")
        check_title("more-is-better", itself, f"{what}: weak B -> itself")
        found.append(finding(f"More {what} in A beats B: a better A lowers the penalty", PAPER,
                             _values(runs, better, "penalty", LAST), "B stitched into itself (the adapter alone)",
                             _values(runs, itself, "penalty", LAST), side="less", bounds=PENALTY,
                             what=f"penalty at {last}"))  # fmt: skip
    return found


# in the order of docs/DESIGN.md; --presets picks some
READERS = {"connectivity": connectivity, "label-noise": label_noise, "coarse-labels": coarse_labels,
           "kernel-size": kernel_size, "early-convergence": early_convergence, "more-is-better": more_is_better}


if __name__ == "__main__":
    main(__doc__.splitlines()[0], READERS)
