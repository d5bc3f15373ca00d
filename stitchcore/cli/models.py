"""CLI verbs for models: ``zoo train``, ``zoo list`` and ``cuts``.

    python -m stitchcore zoo train --arch cnn --dataset digits --seed 0 --json
    python -m stitchcore zoo list
    python -m stitchcore cuts zoo:cnn-digits-s0
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import data_name, given, json_obj, model_ref, number, pair, safe, whole
from stitchcore.cli._common import Command, ProgressBar, emit, outcome, run, took

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``zoo`` (``train``, ``list``) and ``cuts`` to the CLI's sub-parsers."""
    zoo = verbs.add_parser("zoo", help="train and list built-in models").add_subparsers(
        dest="zoo_verb", required=True, metavar="train|list"
    )
    zt = zoo.add_parser("train", parents=[common], help="train a zoo recipe (cached: never trained twice)")
    zt.add_argument("--arch", type=given, default="cnn", help="mlp | cnn | resnet | vit | swin | gpt (stitchcore.models.archs)")
    zt.add_argument("--dataset", type=data_name, default="digits", help="digits | mnist | fashion-mnist | cifar10 | cifar100 | imagefolder:PATH")
    zt.add_argument("--seed", type=whole, default=0)
    zt.add_argument("--optimizer", choices=("sgd", "adamw"), default=None, help="default sgd (vit, swin: adamw)")
    zt.add_argument("--epochs", type=whole, default=None, help="default 20 (vit, swin: 40)")
    zt.add_argument("--lr", type=number, default=None, help="default 0.05 (sgd) / 2e-3 (adamw)")
    zt.add_argument("--batch-size", type=whole, default=None)
    zt.add_argument("--weight-decay", type=number, default=None)
    zt.add_argument("--image-size", type=whole, default=None, help="resize inputs (e.g. 16 or 32 for digits)")
    zt.add_argument("--arch-kwargs", type=json_obj, default=None, help='JSON, e.g. \'{"blocks": [1,1,1,1]}\'')
    zt.add_argument("--relabel", type=pair, default=None, metavar="X:Y", help="train with class X labelled Y")
    zt.add_argument("--drop-class", type=whole, default=None, metavar="X", help="never show class X in training")
    zt.add_argument("--l1", type=number, default=0.0)
    zt.add_argument("--l2", type=number, default=0.0)
    zt.add_argument("--prune-every", type=whole, default=0, metavar="EPOCHS")
    zt.add_argument("--prune-fraction", type=number, default=0.0)
    zt.add_argument("--augment", default=None, choices=("none", "crop-flip", "resized-crop-flip"),
                    help="training augmentation: crop-flip (CIFAR's pad-and-crop + flip), resized-crop-flip "
                         "(ImageNet's); default none")
    zt.add_argument("--start", type=model_ref, default=None, metavar="REF",
                    help="fine-tune from this model instead of a fresh init: zoo:NAME, file:PATH of a zoo arch, or "
                         "timm:NAME / torchvision:NAME (with num_classes= the dataset's; its arch replaces --arch)")
    zt.add_argument("--rerun", action="store_true", help="train again even if the store has it")
    zoo.add_parser("list", parents=[common], help="list trained zoo models")

    cuts = verbs.add_parser("cuts", parents=[common], help="list the cut points of a model")
    cuts.add_argument("ref", type=model_ref, help="a ModelRef, e.g. zoo:cnn-digits-s0 or timm:resnet18?pretrained=false")


def _cmd_zoo_train(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Train one zoo recipe (or find it in the store) and print its ref and accuracy."""
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.models.archs import arch_recipe_defaults

    kwargs: dict[str, Any] = {"arch": args.arch, "dataset": args.dataset, "seed": args.seed}
    kwargs.update(arch_recipe_defaults(args.arch))  # e.g. AdamW for transformers; what the user gives wins
    optional = {
        "optimizer": args.optimizer, "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size, "weight_decay": args.weight_decay,
        "image_size": args.image_size, "arch_kwargs": args.arch_kwargs, "relabel": args.relabel,
        "drop_class": args.drop_class, "start": args.start, "augment": args.augment,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    kwargs.update(l1=args.l1, l2=args.l2, prune_every=args.prune_every, prune_fraction=args.prune_fraction)
    out = run("zoo", ZooRecipe(**kwargs), args, store, bar)
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
