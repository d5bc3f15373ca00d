"""CLI verb ``transfer``: a probe and a steering direction carried from A's cut into B's through a fitted stitch.

    python -m stitchcore transfer --a zoo:cnn-digits-s0 --b zoo:cnn-digits-s1 --cut-a fc1 --cut-b fc1 --json
    python -m stitchcore transfer --a REF --b REF          # along depth: A's coarse cuts, B's at the same depth

Prints, per cut pair, the probe's accuracy on B carried from A (transferred), fitted on B (native) and carried
through a random-init adapter, each with its 95% interval, the transferred/native ratio, and the steering shifts.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._common import Command, ProgressBar, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "transfer_text"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``transfer`` to the CLI's sub-parsers (``common``: --store, --json, --device, --quiet)."""
    p = verbs.add_parser("transfer", parents=[common], help="carry A's probe and class directions through a fitted "
                         "stitch into B: transferred, native and random-adapter accuracy, steering shifts")
    add_spec_flags(p, "transfer", required=("a", "b"))
    p.add_argument("--rerun", action="store_true", help="run again even if the store has it")


def _pct(value: float, ci: list[float]) -> str:
    return f"{value:6.1%} [{ci[0]:.1%}, {ci[1]:.1%}]"


def transfer_text(s: dict[str, Any]) -> str:
    """One line per cut pair: the three accuracies with their intervals, the ratio, the steering shifts."""
    from stitchcore.experiments.transfer import SIDES, transfer_points

    lines = [f"{'A cut -> B cut':24s} " + " ".join(f"{side:>24s}" for side in SIDES) + "  ratio  steering t/n/r"]
    for p in transfer_points(s):
        steer = "/".join(f"{p['steering'][side]:+.3f}" for side in SIDES) if "steering" in p else "-"
        lines.append(f"{p['cut_a'] + ' -> ' + p['cut_b']:24s} " + " ".join(f"{_pct(p[side], p[side + '_ci']):>24s}"
                                                                          for side in SIDES)
                     + f"  {p['ratio']:.3f}  {steer}")  # fmt: skip
    if "property" in s:  # two language models: a token property, balanced accuracy
        lines.append(f"{s['measure']} of '{s['property']}' (chance 50%); probes fitted on {s['n_train']:,} training "
                     f"windows of {s['dataset']}, read on {s['n_test']:,} held-out windows; steering: "
                     f"{s['steering']}")  # fmt: skip
    else:
        lines.append(f"chance {s['chance']:.1%}; probes fitted on {s['n_train']:,} training images of {s['dataset']}, "
                     f"read on {s['n_test']:,} test images; steering: the rise of B's probability of a class when "
                     "its direction is added (transferred / native / random adapter)")
    return "\n".join(lines)


def _cmd_transfer(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    from stitchcore.params import build_spec

    spec = build_spec("transfer", spec_values(args, "transfer"))
    out = run("transfer", spec, args, store, bar)
    emit(args, outcome(out, kind="transfer"), f"{transfer_text(out.record.summary)}\n({took(out.cached, out.seconds)}; "
                                              f"run {out.record.id})")


COMMANDS: dict[tuple[str, str | None], Command] = {("transfer", None): _cmd_transfer}
