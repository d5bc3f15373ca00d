"""CLI verbs for models: ``zoo train``, ``zoo list`` and ``cuts``.

    python -m stitchcore zoo train --arch cnn --dataset digits --seed 0 --json
    python -m stitchcore zoo list
    python -m stitchcore cuts zoo:cnn-digits-s0
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stitchcore.cli._args import model_ref, safe
from stitchcore.cli._common import Command, ProgressBar, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``zoo`` (``train``, ``list``) and ``cuts`` to the CLI's sub-parsers."""
    zoo = verbs.add_parser("zoo", help="train and list built-in models").add_subparsers(
        dest="zoo_verb", required=True, metavar="train|list"
    )
    zt = zoo.add_parser("train", parents=[common], help="train a zoo recipe (cached: never trained twice)")
    add_spec_flags(zt, "zoo", required=())
    zt.add_argument("--rerun", action="store_true", help="train again even if the store has it")
    zoo.add_parser("list", parents=[common], help="list trained zoo models")

    cuts = verbs.add_parser("cuts", parents=[common], help="list the cut points of a model")
    cuts.add_argument("ref", type=model_ref, help="a ModelRef, e.g. zoo:cnn-digits-s0 or timm:resnet18?pretrained=false")


def _cmd_zoo_train(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Train one zoo recipe (or find it in the store) and print its ref and accuracy."""
    from stitchcore.models.archs import arch_recipe_defaults
    from stitchcore.params import build_spec, defaults

    given = spec_values(args, "zoo")
    arch = given.get("arch", defaults("zoo")["arch"])
    # an architecture's own training defaults (AdamW for transformers), then what the user gives
    recipe = build_spec("zoo", {**arch_recipe_defaults(arch), **given})
    out = run("zoo", recipe, args, store, bar)
    s = out.record.summary
    emit(args, outcome(out), f"{s['ref']}  accuracy {s['accuracy']:.4f}  ({took(out.cached, out.seconds)})")


def _cmd_zoo_list(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Every trained zoo model with its recipe and accuracy."""
    from stitchcore.models.sources.zoo import list_zoo_models

    models = [
        {"ref": r.summary["ref"], "recipe": r.spec, "accuracy": r.summary.get("accuracy"), "run_id": r.id}
        for r in list_zoo_models(store)
    ]
    lines = [f"{safe(str(m['ref'])):40s} accuracy {m['accuracy']:.4f}" for m in models] or ["(no zoo models trained yet)"]
    emit(args, {"models": models}, "\n".join(lines))


def _cmd_cuts(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """The cut points of one model: name, layout, shape, relative depth and aliases (other module
    names whose output is the same tensor, accepted wherever a cut name is); and the whole model's cost of one
    example at its input size: ``macs`` (multiply-adds, the convention of Traft & Cheney's Table 1 and most
    papers) and ``flops`` (FlopCounterMode's count, 2 per multiply-add)."""
    from stitchcore.cuts import list_cuts
    from stitchcore.models.sources import load_model
    from stitchcore.stitching.evaluate import module_flops

    m = load_model(args.ref, store=store)
    example = m.example_input(1)  # [1, *input shape]: what the model itself takes
    flops = module_flops(m.model, example)
    cuts = [
        {"name": c.name, "shape": list(c.shape), "layout": c.layout, "depth": round(c.depth, 4),
         "aliases": list(c.aliases)}
        for c in list_cuts(m)
    ]
    lines = [f"{c['name']:24s} {c['layout']:9s} {tuple(c['shape'])!s:20s} depth {c['depth']:.2f}"
             + (f"  = {', '.join(c['aliases'])}" if c["aliases"] else "") for c in cuts]
    size = "x".join(map(str, example.shape[1:]))
    lines.append(f"whole model at {size}: {flops // 2:.4g} MACs (multiply-adds), {flops:.4g} FLOPs (2 per MAC)")
    emit(args, {"model": m.ref, "input_shape": list(example.shape[1:]), "macs": flops // 2, "flops": flops,
                "cuts": cuts}, "\n".join(lines))  # fmt: skip


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("zoo", "train"): _cmd_zoo_train,
    ("zoo", "list"): _cmd_zoo_list,
    ("cuts", None): _cmd_cuts,
}
