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
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import data_name, given, model_ref, number, safe, whole
from stitchcore.cli._common import Command, ProgressBar, emit, outcome, run, took
from stitchcore.measures.intervals import seed_note

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "resolve_cuts"]


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


def _spec_default(name: str) -> Any:
    """The StitchSpec default for a field, so the CLI never restates it."""
    from dataclasses import MISSING

    from stitchcore.experiments.stitch import StitchSpec

    spec_field = StitchSpec.__dataclass_fields__[name]
    return spec_field.default if spec_field.default_factory is MISSING else spec_field.default_factory()


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``stitch`` to the CLI's sub-parsers."""
    st = verbs.add_parser("stitch", parents=[common], help="stitch A's bottom to B's top and train the adapter")
    st.add_argument("--a", type=model_ref, required=True, help="ModelRef of the bottom model A")
    st.add_argument("--b", type=model_ref, required=True, help="ModelRef of the top model B")
    st.add_argument("--cut-a", type=given, required=True, help="sender cut name in A")
    st.add_argument("--cut-b", type=given, required=True, help="receiver cut name in B")
    st.add_argument("--adapter", type=given, default="linear", help="identity|linear|linear_relu|conv3x3_relu|bottleneck|lowrank")
    st.add_argument("--norm", type=given, default="both", help="none|bn_before|bn_after|both")
    st.add_argument("--resample", type=given, default="bilinear", help="none|bilinear|nearest|strided")
    st.add_argument("--init", type=given, default=_spec_default("adapter").init,
                    help="lstsq (default: least-squares start, as on the page) | random | identity | procrustes")
    st.add_argument("--rank", type=whole, default=None, help="rank of a lowrank adapter")
    st.add_argument("--objective", type=given, default="task", help="task|match|kd or a sum like task+0.5*kd")
    st.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    st.add_argument("--lr", type=number, default=_spec_default("lr"))
    st.add_argument("--weight-decay", type=number, default=_spec_default("weight_decay"))
    st.add_argument("--epochs", type=whole, default=_spec_default("epochs"))
    st.add_argument("--batch-size", type=whole, default=_spec_default("batch_size"))
    st.add_argument("--seed", type=whole, default=_spec_default("seed"))
    st.add_argument("--dataset", type=data_name, default=None, help="default: the dataset B was trained on")
    st.add_argument("--head", choices=("b", "a"), default="b", help="a: keep A's head after B's middle (needs --head-cut)")
    st.add_argument("--head-cut", type=given, default=None, help="with --head a: the cut where A's head takes over")
    st.add_argument("--max-train", type=whole, default=None)
    st.add_argument("--max-test", type=whole, default=None)
    st.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast over the frozen models and the adapter (fast on GPUs and AMX CPUs)")
    st.add_argument("--val-fraction", type=number, default=_spec_default("val_fraction"),
                    help="train images held out as validation: the per-epoch curve and --keep best (0: none)")
    st.add_argument("--split-seed", type=whole, default=_spec_default("split_seed"),
                    help="which train images are held out (fixed while --seed varies the adapter)")
    st.add_argument("--keep", choices=("last", "best"), default=_spec_default("keep"),
                    help="best: the adapter of the epoch with the best validation accuracy (early stopping)")
    st.add_argument("--seeds", type=whole, default=_spec_default("seeds"),
                    help="train n adapters (seed, seed+1, ...): mean and 95%% interval across them")
    st.add_argument("--no-noise-control", action="store_true",
                    help="skip the noise sender: the adapter trained again from class-clustered noise of A's cut "
                         "(a stitch that does no better is not evidence about A's layers)")
    st.add_argument("--rerun", action="store_true", help="run again even if the store has it")


def _cmd_stitch(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Run one image stitch and print stitched vs. A and B accuracy, penalty, params and flops (and the noise
    sender's accuracy, penalty and stitched − noise margin, each with its 95% interval)."""
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.models.refs import parse_ref
    from stitchcore.stitching.adapters import AdapterSpec

    adapter = AdapterSpec(kind=args.adapter, norm=args.norm, resample=args.resample, init=args.init, rank=args.rank)
    ref_a, ref_b = str(parse_ref(args.a)), str(parse_ref(args.b))
    (cut_a,), _ = resolve_cuts(ref_a, (args.cut_a,), store)  # stored specs hold canonical names
    # the head cut is where B's middle ends (A's head takes over at the same name): B's names decide
    cuts_b, _ = resolve_cuts(ref_b, (args.cut_b,) + ((args.head_cut,) if args.head_cut else ()), store)
    cut_b, head_cut = cuts_b[0], (cuts_b[1] if args.head_cut else None)
    spec = StitchSpec(
        a=ref_a, b=ref_b, cut_a=cut_a, cut_b=cut_b, adapter=adapter,
        objective=args.objective, optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
        epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, dataset=args.dataset,
        head=args.head, head_cut=head_cut, max_train=args.max_train, max_test=args.max_test, precision=args.precision,
        val_fraction=args.val_fraction, split_seed=args.split_seed, keep=args.keep, seeds=args.seeds,
        noise_control=not args.no_noise_control,
    )
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
