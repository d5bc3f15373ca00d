"""Experiment ``zoo``: train a built-in architecture from a recipe and store it.

The checkpoint (safetensors with the architecture in its metadata) becomes an
artifact of the run; the run's summary holds the ref (``zoo:cnn-digits-s0``),
test accuracy, preprocessing and class names, so ``zoo:`` refs resolve through
the store and a recipe is never trained twice.
"""

from __future__ import annotations

import logging
import os
import tempfile

import torch

from stitchcore.archs import arch_defaults, create_arch, arch_input_kind
from stitchcore.errors import StitchError
from stitchcore.data import ImageDataset, drop_class, load_dataset, relabel
from stitchcore.evaluate import count_params, evaluate_batches
from stitchcore.experiments import RunContext, register_experiment
from stitchcore.preprocess import Preprocess
from stitchcore.sources.file_source import save_checkpoint
from stitchcore.specs import ZooRecipe
from stitchcore.train import train_classifier

__all__ = ["train_zoo", "zoo_name"]

log = logging.getLogger(__name__)

CHECKPOINT = "model.safetensors"


def zoo_name(recipe: ZooRecipe, run_id: str) -> str:
    """``cnn-digits-s0`` for plain recipes; a run-id suffix keeps other recipes apart."""
    name = recipe.short_name()
    return name if recipe.is_plain() else f"{name}-{run_id[:6]}"


def _arch_kwargs(recipe: ZooRecipe, ds: ImageDataset) -> dict:
    """Recipe kwargs plus what the dataset decides (channels, size, classes), where the arch takes them."""
    c, h, w = ds.image_shape
    size = recipe.image_size or h
    accepted = set(arch_defaults(recipe.arch))
    in_shape = (c, size, size) if recipe.image_size else (c, h, w)  # two-cue images are [C, H, 2W]
    derived = {"in_chans": c, "image_size": size, "in_shape": in_shape, "num_classes": ds.num_classes}
    kwargs = {k: v for k, v in derived.items() if k in accepted}
    kwargs.update(recipe.arch_kwargs)
    return kwargs


def _special_layer(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """The named submodule a special-layer recipe fine-tunes; StitchError listing the choices otherwise."""
    layers = {n: m for n, m in model.named_modules() if n and any(True for _ in m.parameters())}
    if name not in layers:
        raise StitchError(f"finetune_layer {name!r} is not a layer with weights of this model; use one of: "
                          f"{', '.join(n for n in layers if '.' not in n)}")  # fmt: skip
    return layers[name]


def _finetune(model, layer, recipe: ZooRecipe, ds: ImageDataset, preprocess, evaluate, ctx: RunContext) -> list:
    """Special layer: train only ``layer`` (all other weights frozen) on ``finetune_data`` (default: ``ds``)."""
    if recipe.finetune_data is not None:
        other = load_dataset(recipe.finetune_data)
        if (other.image_shape, other.num_classes) != (ds.image_shape, ds.num_classes):
            raise StitchError(f"finetune_data {other.name} must be a variant of {ds.name} (same image shape and"
                              " classes), e.g. digits|relabel3to8")  # fmt: skip
        ds = other
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in layer.parameters():
        p.requires_grad_(True)
    steps = -(-len(ds.labels("train")) // recipe.batch_size)

    def batches(epoch: int):
        for x, y in ds.batches("train", recipe.batch_size, shuffle=True, seed=recipe.seed * 100_003 + 7919 + epoch):
            yield preprocess(x), y

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        ctx.progress(step / total, f"fine-tuning {recipe.finetune_layer} on all of {recipe.dataset}: {step}/{total}")

    try:
        return train_classifier(
            model, batches, steps, optimizer=recipe.optimizer,
            lr=recipe.finetune_lr if recipe.finetune_lr is not None else recipe.resolved_lr,
            weight_decay=recipe.resolved_weight_decay, momentum=recipe.momentum, epochs=recipe.finetune_epochs,
            device=ctx.device, on_step=on_step, on_epoch=lambda e: evaluate(recipe.epochs + e),
            check_cancel=ctx.check_cancel,
        )  # fmt: skip
    finally:
        for p, flag in frozen:
            p.requires_grad_(flag)


@register_experiment("zoo", ZooRecipe.from_dict)
def train_zoo(recipe: ZooRecipe, ctx: RunContext) -> dict:
    """Train ``recipe`` on its dataset; returns the summary stored with the run."""
    if arch_input_kind(recipe.arch) != "image":  # language models: stitchcore.experiments.lm_zoo
        from stitchcore.experiments.lm_zoo import train_lm_zoo

        return train_lm_zoo(recipe, ctx, zoo_name(recipe, ctx.run_id))
    ds = load_dataset(recipe.dataset)
    train_ds = ds
    if recipe.relabel is not None:
        train_ds = relabel(train_ds, *recipe.relabel)
    if recipe.drop_class is not None:
        train_ds = drop_class(train_ds, recipe.drop_class)
    size = recipe.image_size
    preprocess = Preprocess(size=(size, size) if size else None, channels=ds.image_shape[0], mean=ds.mean, std=ds.std)
    kwargs = _arch_kwargs(recipe, ds)
    torch.manual_seed(recipe.seed)
    model = create_arch(recipe.arch, **kwargs)
    special = _special_layer(model, recipe.finetune_layer) if recipe.finetune_layer else None
    device = ctx.device
    bs = recipe.batch_size
    n_train = len(train_ds.labels("train"))
    steps_per_epoch = -(-n_train // bs)

    def batches(epoch: int):
        for x, y in train_ds.batches("train", bs, shuffle=True, seed=recipe.seed * 100_003 + epoch):
            yield preprocess(x), y

    def evaluate(epoch: int) -> dict[str, float]:
        score = evaluate_batches(
            lambda x: model(preprocess(x)), ds.batches("test", 512), ds.num_classes, device
        )
        ctx.log(epoch * steps_per_epoch, {"test_accuracy": score["accuracy"]}, epoch=epoch)
        return {"test_accuracy": score["accuracy"]}

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        ctx.progress(step / total, f"training {recipe.arch} on {recipe.dataset}: step {step}/{total}")
        if step % 10 == 0 or step == total:
            ctx.log(step, metrics)

    history = train_classifier(
        model,
        batches,
        steps_per_epoch,
        optimizer=recipe.optimizer,
        lr=recipe.resolved_lr,
        weight_decay=recipe.resolved_weight_decay,
        momentum=recipe.momentum,
        epochs=recipe.epochs,
        device=device,
        l1=recipe.l1,
        l2=recipe.l2,
        prune_every=recipe.prune_every,
        prune_fraction=recipe.prune_fraction,
        on_step=on_step,
        on_epoch=evaluate,
        check_cancel=ctx.check_cancel,
    )
    if special is not None:
        history += _finetune(model, special, recipe, ds, preprocess, evaluate, ctx)
    model.to("cpu").eval()
    final = evaluate_batches(lambda x: model(preprocess(x)), ds.batches("test", 512), ds.num_classes, torch.device("cpu"))
    fd, tmp = tempfile.mkstemp(suffix=".safetensors", dir=ctx.store.root)
    os.close(fd)
    try:
        # The blob is a standalone checkpoint too: file:<blob> loads it with its preprocessing.
        save_checkpoint(model, tmp, meta={"preprocess": preprocess.to_dict(), "dataset": recipe.dataset,
                                          "class_names": list(ds.classes)})
        ctx.store.put_artifact_file(ctx.run_id, CHECKPOINT, tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    name = zoo_name(recipe, ctx.run_id)
    c, h, w = ds.image_shape
    input_shape = (c, size, size) if size else (c, h, w)
    return {
        "ref": f"zoo:{name}",
        "name": name,
        "arch": recipe.arch,
        "arch_kwargs": getattr(model, "arch_kwargs", kwargs),
        "dataset": recipe.dataset,
        "classes": list(ds.classes),
        "input_shape": list(input_shape),
        "preprocess": preprocess.to_dict(),
        "accuracy": final["accuracy"],
        "per_class": final["per_class"],
        "params": count_params(model, trainable_only=False),
        "final_train_loss": round(history[-1]["train_loss"], 6) if history else None,
        "sparsity": history[-1].get("sparsity", 0.0) if history else 0.0,
    }
