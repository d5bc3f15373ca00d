"""CLI verb ``stitch``: A's bottom, a trained adapter, B's top (image models; LM refs go to :mod:`.lm`).

    python -m stitchcore stitch --a zoo:cnn-digits-s0 --b zoo:cnn-digits-s1 \\
        --cut-a block2 --cut-b block2 --init lstsq --json

A cut may be named by an alias (``--cut-a layer2`` on a ResNet: the stage, whose output is
its last block's, ``layer2.1``); it is resolved to the canonical name before the spec is
built, so the same stitch has one run id, and the output names both ("layer2 = layer2.1").
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from stitchcore.cli._args import safe
from stitchcore.cli._common import Command, ProgressBar, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values
from stitchcore.measures.intervals import seed_note

if TYPE_CHECKING:
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "resolve_cuts", "stitch_spec"]


def resolve_cuts(ref: str, names: tuple[str, ...] | None, store: Store) -> tuple[tuple[str, ...] | None, dict[str, str]]:
    """Cut names given on the command line -> (canonical names, {alias: canonical} for those resolved).

    Loads the model behind ``ref`` (its cuts decide); an unknown name raises the CutError
    that lists close names.  Names of a language model are left as given (the LM verbs
    take positions or names of their own).  Each resolved alias is noted on stderr.
    """
    if not names:
        return names, {}
    from stitchcore.cuts import alias_note, resolve_cut_name
    from stitchcore.models.sources import load_model

    m = load_model(ref, store=store)
    if m.input_kind != "image":
        return names, {}
    canonical = tuple(resolve_cut_name(m, n) for n in names)
    aliases = {n: c for n, c in zip(names, canonical, strict=True) if n != c}
    for n, c in aliases.items():
        print(f"note: cut {safe(alias_note(n, c))} in {safe(str(m.ref))}", file=sys.stderr)
    return canonical, aliases


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``stitch`` to the CLI's sub-parsers: its flags are the stitch kind's declared fields."""
    st = verbs.add_parser("stitch", parents=[common], help="stitch A's bottom to B's top and train the adapter")
    add_spec_flags(st, "stitch")
    st.add_argument("--rerun", action="store_true", help="run again even if the store has it")


def stitch_spec(args: argparse.Namespace, store: Store) -> StitchSpec:
    """The spec the command line asks for: its flags, cut aliases resolved to canonical names (stored specs
    hold those), every flag left out at today's default."""
    from stitchcore.models.refs import parse_ref
    from stitchcore.params import build_spec

    fields = spec_values(args, "stitch")
    ref_a, ref_b = str(parse_ref(args.a)), str(parse_ref(args.b))
    (cut_a,), _ = resolve_cuts(ref_a, (args.cut_a,), store)
    # the head cut is where B's middle ends (A's head takes over at the same name): B's names decide
    cuts_b, _ = resolve_cuts(ref_b, (args.cut_b,) + ((args.head_cut,) if args.head_cut else ()), store)
    fields.update(a=ref_a, b=ref_b, cut_a=cut_a, cut_b=cuts_b[0], head_cut=cuts_b[1] if args.head_cut else None)
    return build_spec("stitch", fields)


def _cmd_stitch(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Run one image stitch and print stitched vs. A and B accuracy, penalty, params and flops (and the noise
    sender's accuracy, penalty and stitched − noise margin, each with its 95% interval)."""
    spec = stitch_spec(args, store)
    cut_a, cut_b, head_cut = spec.cut_a, spec.cut_b, spec.head_cut
    out = run("stitch", spec, args, store, bar)
    s = out.record.summary
    def ci(key: str, sign: str = "", of: dict | None = None) -> str:  # " [lo, hi]": the 95% interval, where stored
        lo_hi = (s if of is None else of).get(key)
        return f" [{lo_hi[0]:{sign}.4f}, {lo_hi[1]:{sign}.4f}]" if lo_hi else ""

    text = (
        f"stitched {s['accuracy']:.4f}{ci('accuracy_ci')}  A {s['base']['a']:.4f}  B {s['base']['b']:.4f}"
        f"  penalty {s['penalty']:+.4f}{ci('penalty_ci', '+')}"
        f"  params {s['params']}  flops {s['flops']}  ({took(out.cached, out.seconds)})"
    )
    if s.get("seeds"):  # the spread over adapter trainings, beside the test images' interval above
        sd = s["seeds"]
        note = seed_note(len(sd["seed"]))
        text += (f"\nacross {len(sd['seed'])} seeds: stitched {sd['accuracy_mean']:.4f}{ci('accuracy_ci', of=sd)}  "
                 f"penalty {sd['penalty_mean']:+.4f}{ci('penalty_ci', '+', sd)}" + (f"  ({note})" if note else ""))
    noise = (s.get("controls") or {}).get("noise_sender")
    if noise and "skipped" in noise:
        text += f"\nnoise sender: skipped ({noise['skipped']})"
    elif noise:  # the control a stitch must beat: class-clustered noise through the same adapter and training
        text += (f"\nnoise sender {noise['accuracy']:.4f}{ci('accuracy_ci', of=noise)}  penalty {noise['penalty']:+.4f}"
                 f"{ci('penalty_ci', '+', noise)}  stitched - noise {noise['margin']:+.4f}{ci('margin_ci', '+', noise)}")
    given = {"cut_a": (args.cut_a, cut_a), "cut_b": (args.cut_b, cut_b), "head_cut": (args.head_cut, head_cut)}
    resolved = {k: v for k, v in given.items() if v[0] and v[0] != v[1]}  # field -> (alias, canonical)
    if resolved:
        text = f"cuts: {', '.join(dict.fromkeys(f'{n} = {c}' for n, c in resolved.values()))}\n{text}"
    extra = {f"{k}_alias": n for k, (n, _) in resolved.items()}  # e.g. cut_a_alias "layer2"; spec: "layer2.1"
    emit(args, outcome(out, **extra), text)


COMMANDS: dict[tuple[str, str | None], Command] = {("stitch", None): _cmd_stitch}
