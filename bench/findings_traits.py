"""The Oxford stitching report's trait claims, from the Traits presets over independently trained models (issue 39).

    STITCHLAB_JOB_THREADS=1 python bench/findings_traits.py [--seeds 0 10 20] [--store DIR] [--presets NAME ...]

Each preset runs with the report's protocol (a task-trained stitch; ``trait_presets.TASK_EPOCHS`` epochs, chosen on
the validation split ``digits|val300s0``, never on the test images) at every model seed
(``bench/_preset_findings.run_seeds``, the Traits page's "Model seeds"; default 0, 10, 20: three independent model
sets), into ``--store`` (default ``.findings/traits``, shared with ``findings_bansal.py``; cached).  Each finding
compares the claim's sweep with the one that could break it, per seed: a plain A (A's architecture and seed, no
trait, the same stitch: what the protocol alone does to the trait) and a random-init A (A's architecture,
untrained).  The special layer is read from a stitch whose start cannot copy B's layer (random start) and, as a
second reading, from the least-squares start the report used.  ``_findings.finding`` computes the paired effect's
Student t 95% interval and the verdict.  Prints ``{"findings": [...], "seconds": {...}}``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _findings import finding  # bench/ is the script's folder
from _preset_findings import at, check_title, main


PAPER = "Oxford stitching report"
RATE = (0.0, 1.0)
CONFUSION = "confusion:3->8"
LAST = -1


def _values(runs: list[list[dict]], sweep: int, what: str, position: int | str) -> list[float | None]:
    return [at(seed[sweep], what, position) for seed in runs]


def inheritance(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((0, "A calls 3s 8s"), (1, "random-init A"), (2, "plain A")):
        check_title("inheritance", k, words)
    last = runs[0][0]["positions"][LAST]
    claim = "Stitched models inherit A's trait at late cuts (3 read as 8)"
    return [
        finding(claim, PAPER, _values(runs, 0, CONFUSION, LAST), "plain A, same stitch",
                _values(runs, 2, CONFUSION, LAST), side="greater", bounds=RATE, what=f"3s read as 8 at {last}"),
        finding(claim, PAPER, _values(runs, 0, CONFUSION, LAST), "random-init A, same stitch",
                _values(runs, 1, CONFUSION, LAST), side="greater", bounds=RATE, what=f"3s read as 8 at {last}"),
    ]


def _drop(summary: dict, layer: int) -> float:
    """The special layer's step: 3-as-8 while B's layer ``layer`` (0-based: fc1 = 0) is in the stitched model
    (the cuts up to and including it) minus after it has left."""
    values = summary["stitched"][CONFUSION]
    return statistics.fmean(values[: layer + 1]) - statistics.fmean(values[layer + 1 :])


def special_layer(runs: list[list[dict]]) -> list[dict]:
    layers = (0, 1, 2)  # B's special layer: fc1, fc2, fc3
    for k in layers:
        check_title("special-layer", 4 + k, f"fc{k + 1} (A trained separately, random start)")
        check_title("special-layer", 7 + k, f"random-init A -> B (special fc{k + 1}), random start")
        check_title("special-layer", k, f"fc{k + 1} (A trained separately, least-squares start")
        check_title("special-layer", 10 + k, f"random-init A -> B (special fc{k + 1}), least-squares start")

    def drops(first: int) -> list[float]:  # per seed: the mean step over the three special layers
        return [statistics.fmean(_drop(seed[first + k], k) for k in layers) for seed in runs]

    claim = "A trait located in one layer appears exactly when that layer is in the stitched model"
    return [
        finding(claim + " (random start)", PAPER, drops(4), "random-init A, random start", drops(7), side="greater",
                bounds=(-1.0, 1.0), what="3-as-8 before the layer leaves minus after, mean of fc1-fc3",
                note="The random start cannot copy B's layer into the stitch."),
        finding(claim + " (least-squares start)", PAPER, drops(0), "random-init A, least-squares start", drops(10),
                side="greater", bounds=(-1.0, 1.0), what="3-as-8 before the layer leaves minus after, mean of fc1-fc3",
                note="The report's start: a least-squares fit can copy B's special layer into C."),
    ]


def distributed(runs: list[list[dict]]) -> list[dict]:
    for k, words in ((0, "never saw a 3"), (1, "random-init A"), (2, "plain A")):
        check_title("distributed", k, words)
    last = runs[0][0]["positions"][LAST]
    claim = "A never-seen class fades as more of A is used (accuracy on 3s)"
    return [finding(claim, PAPER, _values(runs, 0, "class_acc:3", LAST), "plain A, same stitch (trained without 3s)",
                    _values(runs, 2, "class_acc:3", LAST), side="less", bounds=RATE,
                    what=f"accuracy on 3s at {last}",
                    note="The stitch never sees a 3, so a plain A loses the class too."),
            finding(claim, PAPER, _values(runs, 0, "class_acc:3", LAST), "random-init A, same stitch",
                    _values(runs, 1, "class_acc:3", LAST), side="less", bounds=RATE,
                    what=f"accuracy on 3s at {last}")]  # fmt: skip


def simplicity(runs: list[list[dict]]) -> list[dict]:
    check_title("simplicity", 0, "L1 + pruning")
    positions = runs[0][0]["positions"]

    def gzip(i: int) -> list[float]:
        return [seed[0]["simplicity"]["gzip_bits"][i] for seed in runs]

    return [finding("Simplicity moves from B's to A's: the stitched model's gzip size falls with more of A",
                    PAPER, gzip(-1), f"the same stitch at the first cut ({positions[0]})", gzip(0), side="less",
                    what=f"gzip bits at {positions[-1]}",
                    note="A (L1 + pruning) compresses smaller than B (L2); no random-init line (gzip adds up for "
                         "any bottom).")]  # fmt: skip


def two_cue(runs: list[list[dict]]) -> list[dict]:
    check_title("two-cue", 0, "A reads the left picture")
    check_title("two-cue", 1, "random-init A")
    last = runs[0][0]["positions"][LAST]
    return [finding("The cue used comes from the layers that decide: A's cue at late cuts", PAPER,
                    _values(runs, 0, "decor:right", LAST), "random-init A, same stitch",
                    _values(runs, 1, "decor:right", LAST), side="greater", bounds=RATE,
                    what=f"accuracy on A's cue alone at {last}")]  # fmt: skip


# in the order of docs/DESIGN.md; --presets picks some
READERS = {"inheritance": inheritance, "special-layer": special_layer, "distributed": distributed,
           "simplicity": simplicity, "two-cue": two_cue}


if __name__ == "__main__":
    main(__doc__.splitlines()[0], READERS)
