"""CLI verb ``assemble``: new networks from A's bottom and B's top at disparate depths (Traft & Cheney).

    python -m stitchcore assemble --a zoo:resnet-digits-s0 --b zoo:vit-digits-s0-adamw-ffda8d --json
    python -m stitchcore assemble --a REF --b REF --senders layer2.0,layer3.0 --adapters linear,bottleneck \\
        --resample bilinear,strided --finetune-baseline --epochs 10 --max-train 500

Prints one line per cell (accuracy and penalty against B with their 95% intervals, MACs and FLOPs of
the whole network, the adapter's parameters), skipped cells with their reason, A and B for reference
and the accuracy-vs-FLOPs Pareto front.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._common import Command, ProgressBar, backend_parser, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values
from stitchcore.cli.stitch import resolve_cuts
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "cells_text"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``assemble`` to the CLI's sub-parsers (``common``: --store, --json, --device, --quiet)."""
    p = verbs.add_parser("assemble", parents=[common, backend_parser()],
                         help="A's bottom into B's top at every cut pair and adapter recipe: accuracy vs FLOPs")
    add_spec_flags(p, "assemble", required=("a", "b"))
    p.add_argument("--rerun", action="store_true", help="run again even if the store has it")


def _flops(v: int | None) -> str:
    return "-" if v is None else f"{v / 1e6:.2f}M"


def _ci(ci: list[float] | None, signed: bool = False) -> str:
    """A stored 95% interval as ' [lo, hi]' (blank for a run stored before intervals: the column stays aligned)."""
    if not ci:
        return " " * (18 if signed else 16)
    return f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if signed else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def cells_text(s: dict[str, Any]) -> str:
    """An assemble summary for the terminal: a line per cell (accuracy and penalty against B with their 95%
    intervals over the test images, MACs and the adapter's parameters beside them), A and B, the Pareto front.

    >>> s = {"cells": [{"sender": "layer2.0", "receiver": "blocks.3", "recipe": "linear/both/bilinear",
    ...                 "accuracy": 0.86, "accuracy_ci": [0.83, 0.89], "penalty": 0.08, "penalty_ci": [0.05, 0.11],
    ...                 "flops": 1133824, "macs": 566912, "adapter_params": 2368, "finetune_accuracy": None,
    ...                 "skipped_reason": None, "same_as": None}],
    ...      "base": {"a": {"ref": "zoo:a", "accuracy": 0.98, "flops": 1987072},
    ...               "b": {"ref": "zoo:b", "accuracy": 0.94, "flops": 4465920}},
    ...      "pareto": [{"cell": 0, "accuracy": 0.86, "flops": 1133824}, {"base": "a", "accuracy": 0.98, "flops": 1987072}]}
    >>> print(cells_text(s))
    sender      receiver    recipe                     accuracy [95% CI]          penalty [95% CI]              MACs  adapter params    FLOPs
    layer2.0    blocks.3    linear/both/bilinear          0.860 [0.830, 0.890]    +0.080 [+0.050, +0.110]    0.57M            2368    1.13M
    A zoo:a: accuracy 0.980, 1.99M FLOPs;  B zoo:b: accuracy 0.940, 4.47M FLOPs
    Pareto front (accuracy vs FLOPs): layer2.0 -> blocks.3 linear/both/bilinear 0.860 @ 1.13M; A 0.980 @ 1.99M
    [95% CI]: over the test images; penalty = B alone minus the network, its interval a paired bootstrap (same images)
    """
    lines = [f"{'sender':12s}{'receiver':12s}{'recipe':26s}{'accuracy':>9s}{' [95% CI]':16s}{'penalty':>10s}{' [95% CI]':18s}"
             f"{'MACs':>9s}  adapter params{'FLOPs':>9s}"
             + ("  fine-tuned e2e" if any(c.get("finetune_accuracy") is not None for c in s["cells"]) else "")]
    for c in s["cells"]:
        head = f"{c['sender'][:11]:12s}{c['receiver'][:11]:12s}{c['recipe'][:25]:26s}"
        if c.get("skipped_reason"):
            lines.append(f"{head}  skipped: {c['skipped_reason']}")
            continue
        if c.get("accuracy") is None:  # a cell of a failed sender
            lines.append(f"{head}  failed: {c.get('failed_reason') or 'no result'}")
            continue
        penalty = "-".rjust(10) if c.get("penalty") is None else f"{c['penalty']:+10.3f}"
        line = (f"{head}{c['accuracy']:9.3f}{_ci(c.get('accuracy_ci'))}{penalty}{_ci(c.get('penalty_ci'), True)}"
                f"{_flops(c.get('macs')):>9s}{c['adapter_params']:>16d}{_flops(c['flops']):>9s}")  # fmt: skip
        if c.get("finetune_accuracy") is not None:
            line += f"{c['finetune_accuracy']:16.3f}"
        lines.append(line + (f"  (= {c['same_as']})" if c.get("same_as") else ""))
    a, b = s["base"]["a"], s["base"]["b"]
    lines.append(f"A {a['ref']}: accuracy {a['accuracy']:.3f}{_ci(a.get('accuracy_ci')).rstrip()}, "
                 f"{_flops(a['flops'])} FLOPs;  B {b['ref']}: accuracy {b['accuracy']:.3f}"
                 f"{_ci(b.get('accuracy_ci')).rstrip()}, {_flops(b['flops'])} FLOPs")  # fmt: skip
    front = [(f"{s['cells'][p['cell']]['sender']} -> {s['cells'][p['cell']]['receiver']} "
              f"{s['cells'][p['cell']]['recipe']}" if "cell" in p else p["base"].upper())
             + f" {p['accuracy']:.3f} @ {_flops(p['flops'])}" for p in s["pareto"]]  # fmt: skip
    lines.append("Pareto front (accuracy vs FLOPs): " + "; ".join(front))
    if any(c.get("adapter") == "linear" and c.get("resample") == "strided" for c in s["cells"]):
        lines.append("linear/*/strided is Hernandez et al.'s patch stitch (kernel = stride), not one of Traft & "
                     "Cheney's four adapters; MACs = multiply-adds (the paper's Table 1), FLOPs = 2 per MAC")
    if any(c.get("accuracy_ci") for c in s["cells"]):
        lines.append("[95% CI]: over the test images; penalty = B alone minus the network, its interval a paired "
                     "bootstrap (same images)")
    return "\n".join(lines)


def _cmd_assemble(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Assemble every (sender, receiver, recipe) network; print the cells, A and B, and the front."""
    from stitchcore.params import build_spec, declared

    fields = spec_values(args, "assemble")
    for field in declared("assemble"):  # "" would quietly be the default (or a traceback)
        if fields.get(field.name) == ():
            raise StitchError(f"{field.flag} names nothing: give comma-separated values (see --help), or leave "
                              f"{field.flag} out for the default")  # fmt: skip
    senders, alias_a = resolve_cuts(args.a, fields.get("senders"), store)
    receivers, alias_b = resolve_cuts(args.b, fields.get("receivers"), store)
    spec = build_spec("assemble", {**fields, "senders": senders, "receivers": receivers})
    out = run("assemble", spec, args, store, bar)
    aliases = {**alias_a, **alias_b}
    emit(args, outcome(out, **({"aliases": aliases} if aliases else {})),
         cells_text(out.record.summary) + f"\n({took(out.cached, out.seconds)}; run {out.record.id})")


COMMANDS: dict[tuple[str, str | None], Command] = {("assemble", None): _cmd_assemble}
