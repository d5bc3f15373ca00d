"""Experiment ``zoo``: train a built-in architecture from a recipe and store it.

The checkpoint (safetensors with the architecture in its metadata) becomes an
artifact of the run; the run's summary holds the ref (``zoo:cnn-digits-s0``),
test accuracy, preprocessing and class names, so ``zoo:`` refs resolve through
the store and a recipe is never trained twice.  A recipe on a folder of images is trained on the files its
``data_id`` names, read as they are now (``load_dataset`` never serves an in-process copy of older ones), or
refused.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from typing import Any

import torch

from stitchcore.data.augment import augment
from stitchcore.data.images import ImageDataset, drop_class, load_dataset, relabel
from stitchcore.data.text import list_texts
from stitchcore.errors import DataError, StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import field_label
from stitchcore.experiments.estimate import (
    CAL_EXAMPLES,
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    first_images,
    forward_per_example,
    ms,
    per_step,
    where,
)  # fmt: skip
from stitchcore.experiments.lm_zoo import estimate_lm_zoo, train_lm_zoo, untrained_lm
from stitchcore.experiments.zoo_recipe import ZooRecipe, check_data_files, checkpoint_artifact, zoo_name
from stitchcore.models.archs import arch_defaults, arch_input_kind, create_arch
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.memory import check_fits, training_bytes
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import parse_ref, random_twin
from stitchcore.models.sources import load_model
from stitchcore.models.sources.checkpoint import load_into, save_checkpoint
from stitchcore.stitching.evaluate import count_params, evaluate_batches
from stitchcore.stitching.train import train_classifier
from stitchcore.store.claims import register_namer

__all__ = ["ZooRecipe", "check_zoo", "estimate_zoo", "hub_start", "train_zoo", "untrained_model", "zoo_name",
           "zoo_stand_in"]

log = logging.getLogger(__name__)

CHECKPOINT = "model.safetensors"


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


def untrained_model(recipe: ZooRecipe) -> LoadedModel:
    """The recipe's architecture with fresh (unseeded) weights, shaped as its trained model will load:
    what :mod:`stitchcore.experiments.estimate` times before the model is trained.

    >>> m = untrained_model(ZooRecipe())
    >>> m.input_shape, m.num_classes, m.ref
    ((1, 8, 8), 10, 'zoo:cnn-digits-s0?init=random')
    """
    if recipe.trains_language_model():
        return untrained_lm(recipe)
    if recipe.fine_tunes_hub:  # its random twin, drawn from the recipe's seed
        hub = hub_start(recipe, random_twin(recipe.start, recipe.seed))
        hub.ref = f"zoo:{recipe.short_name()}?init=random"
        return hub
    ds = load_dataset(recipe.dataset)
    size = recipe.image_size
    preprocess = Preprocess(size=(size, size) if size else None, channels=ds.image_shape[0], mean=ds.mean, std=ds.std)
    kwargs = _arch_kwargs(recipe, ds)
    c, h, w = ds.image_shape
    need = training_bytes(lambda: create_arch(recipe.arch, **kwargs), (c, size, size) if size else (c, h, w),
                          recipe.batch_size)  # counted on the meta device: nothing allocated yet  # fmt: skip
    check_fits(f"training {recipe.arch} ({need.params:,} parameters) at {size or h}x{size or w}", need.total,
               fix="lower --image-size or the widths in --arch-kwargs")  # fmt: skip
    model = create_arch(recipe.arch, **kwargs).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedModel(
        ref=f"zoo:{recipe.short_name()}?init=random", model=model, input_kind="image",
        input_shape=(c, size, size) if size else (c, h, w), preprocess=preprocess, num_classes=ds.num_classes,
        dataset=recipe.dataset, meta={"arch": recipe.arch, "arch_kwargs": kwargs, "class_names": list(ds.classes)},
    )


def hub_start(recipe: ZooRecipe, ref: str, store: Any = None) -> LoadedModel:
    """The hub model ``ref`` (the recipe's start, or its random twin) as the recipe trains it: on the recipe's
    dataset through the hub's own preprocessing, at ``image_size`` when the recipe sets one; frozen, as loaded.
    StitchError when its head does not fit the dataset's classes, naming the option that does."""
    m = load_model(ref, store=store)
    ds = load_dataset(recipe.dataset)
    if m.input_kind != "image" or m.preprocess is None:
        raise StitchError(f"start {recipe.start} is not an image classifier; a zoo recipe fine-tunes image models")
    if m.num_classes != ds.num_classes:
        raise StitchError(f"start {recipe.start} has {m.num_classes} outputs and {ds.name} has {ds.num_classes} "
                          f"classes: add num_classes={ds.num_classes} to its ref")
    pre = m.preprocess
    if recipe.image_size is not None:
        pre = pre.at_size(recipe.image_size)  # the hub's crop fraction kept
    return LoadedModel(ref=m.ref, model=m.model, input_kind="image", input_shape=(pre.channels, *pre.size),
                       preprocess=pre, num_classes=ds.num_classes, dataset=recipe.dataset,
                       meta={"arch": recipe.arch, "arch_kwargs": dict(m.meta.get("arch_kwargs") or {}),
                             "class_names": list(ds.classes)})  # fmt: skip


def _special_layer(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """The named submodule a special-layer recipe fine-tunes; StitchError listing the choices otherwise."""
    layers = {n: m for n, m in model.named_modules() if n and any(True for _ in m.parameters())}
    if name not in layers:
        raise StitchError(f"finetune_layer {name!r} is not a layer with weights of this model; use one of: "
                          f"{', '.join(n for n in layers if '.' not in n)}")  # fmt: skip
    return layers[name]


def _finetune_dataset(recipe: ZooRecipe, ds: ImageDataset) -> ImageDataset:
    """The data a special layer is fine-tuned on: ``finetune_data`` (a variant of ``ds``), else ``ds``."""
    if recipe.finetune_data is None:
        return ds
    other = load_dataset(recipe.finetune_data)
    if (other.image_shape, other.num_classes) != (ds.image_shape, ds.num_classes):
        raise StitchError(f"finetune_data {other.name} must be a variant of {ds.name} (same image shape and"
                          " classes), e.g. digits|relabel3to8")  # fmt: skip
    return other


def _finetune(model, layer, recipe: ZooRecipe, ds: ImageDataset, preprocess, evaluate, ctx: RunContext) -> list:
    """Special layer: train only ``layer`` (all other weights frozen) on ``ds`` (the recipe's
    ``finetune_data``, else its dataset)."""
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


def check_zoo(recipe: ZooRecipe, store: Any = None) -> None:
    """What training would refuse, found before any row is written: the arch and its options, the dataset
    (and whether the arch fits it), the trait classes, the fine-tuned layer and its data.

    >>> check_zoo(ZooRecipe(drop_class=10))
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: drop_class (--drop-class) 10 is not a class of digits; use 0..9
    """
    if not recipe.fine_tunes_hub and arch_input_kind(recipe.arch) != "image":  # unknown: RefError naming close ones
        if recipe.dataset not in list_texts() and not recipe.dataset.startswith("file:"):
            raise DataError(f"{recipe.arch!r} is a language model: train it on a text corpus"
                            f" ({', '.join(list_texts())} or file:PATH), not on {recipe.dataset!r}")  # fmt: skip
        untrained_model(recipe)  # the corpus and the arch's options
        check_data_files(recipe)  # the text file is the one the recipe (and its name) says
        return
    model = untrained_model(recipe)  # unknown option, a dataset that is missing or does not fit the arch
    if recipe.fine_tunes_hub and recipe.image_size is not None:  # not every hub model takes another input size
        try:
            model.model(model.example_input(1))
        except Exception as exc:  # noqa: BLE001 (the model's own error, whatever it is, told in one line)
            raise StitchError(f"{recipe.start} does not run at image size {recipe.image_size} "
                              f"({str(exc).splitlines()[0][:160]}); leave image size out for its own") from None
    ds = load_dataset(recipe.dataset)
    last = ds.num_classes - 1
    given = {"drop_class": [recipe.drop_class], "relabel": list(recipe.relabel or ())}
    for name, classes in given.items():
        for c in classes:
            if c is not None and not 0 <= c <= last:
                raise StitchError(f"{field_label(name)} {c} is not a class of {ds.name}; use 0..{last}")
    if recipe.relabel is not None:
        relabel(ds, *recipe.relabel)  # the same class twice
    if recipe.finetune_layer is not None:
        _special_layer(model.model, recipe.finetune_layer)
    _finetune_dataset(recipe, ds)
    if recipe.start is not None:  # a well-formed ref (a preset queues its start before it: loaded by the run)
        parse_ref(recipe.start)
    check_data_files(recipe)  # the folder's files are the ones the recipe (and its name) says


# ---------------------------------------------------------------------------- estimate


def _zoo_units(recipe: ZooRecipe, device: torch.device) -> dict[str, float]:
    """Seconds per training step (the recipe's batch) and per evaluated example of an image recipe."""
    untrained_model(recipe)  # the dataset loads once per process (the run finds it cached)
    t0 = time.perf_counter()
    m = untrained_model(recipe)
    ds = load_dataset(recipe.dataset)
    setup = time.perf_counter() - t0
    model = m.model.train()
    for p in model.parameters():
        p.requires_grad_(True)

    def batches(n: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:  # the run's data path: shuffle, preprocess
        for k in range(n):
            x, y = next(iter(ds.batches("train", recipe.batch_size, shuffle=True, seed=k)))
            yield m.preprocess(x), y

    step = per_step(lambda n, on_step: train_classifier(
        model, lambda _e: batches(n), n, optimizer=recipe.optimizer, lr=1e-4, weight_decay=0.0,
        momentum=recipe.momentum, epochs=1, device=device, l1=recipe.l1, l2=recipe.l2, on_step=on_step,
    ))  # fmt: skip
    model.eval()
    xe, _ = first_images(ds, min(CAL_EXAMPLES, len(ds.labels("train"))))
    return {"step": step, "setup": setup,
            "eval": forward_per_example(lambda v: model(m.preprocess(v.to(device))), xe)}  # fmt: skip


def estimate_zoo(recipe: ZooRecipe, ectx: EstimateContext) -> Estimate:
    """Training steps of the recipe (a language model's: :func:`~stitchcore.experiments.lm_zoo.estimate_lm_zoo`)."""
    device = ectx.device
    if recipe.trains_language_model():
        return estimate_lm_zoo(recipe, ectx)
    key = ("zoo", recipe.arch, repr(sorted(recipe.arch_kwargs.items())), recipe.dataset, recipe.image_size,
           recipe.batch_size, recipe.optimizer, recipe.l1 > 0, where(device))  # fmt: skip
    u = calibrated(key, lambda: _zoo_units(recipe, device))
    ds = load_dataset(recipe.dataset)
    train = drop_class(ds, recipe.drop_class) if recipe.drop_class is not None else ds
    per_epoch = -(-len(train.labels("train")) // recipe.batch_size)
    epochs = recipe.epochs + (recipe.finetune_epochs if recipe.finetune_layer else 0)
    steps = epochs * per_epoch
    seconds = u["setup"] + steps * u["step"] + (epochs + 1) * len(ds.labels("test")) * u["eval"]
    return estimate_from(seconds, f"calibrated: 1 step of {recipe.arch} = {ms(u['step'])}; {steps:,} steps")


def zoo_stand_in(recipe: ZooRecipe, run_id: str) -> dict[str, tuple[str, Any]]:
    """The model a queued zoo run makes (its ref), for the estimates of runs queued after it: the recipe
    fixes its cost, an untrained copy stands in for it."""
    return {f"zoo:{zoo_name(recipe, run_id)}": (repr(recipe.to_dict()), lambda: untrained_model(recipe))}


# zoo:NAME resolves from what the spec determines, never from a summary an import supplied (store/claims.py)
register_namer("zoo", lambda spec, run_id: zoo_name(ZooRecipe.from_dict(spec), run_id))


@register_experiment("zoo", ZooRecipe.from_dict, check=check_zoo, estimate=estimate_zoo, makes=zoo_stand_in)
def train_zoo(recipe: ZooRecipe, ctx: RunContext) -> dict:
    """Train ``recipe`` on its dataset; returns the summary stored with the run."""
    if recipe.trains_language_model():  # language models: stitchcore.experiments.lm_zoo
        return train_lm_zoo(recipe, ctx, zoo_name(recipe, ctx.run_id))
    ds = load_dataset(recipe.dataset)
    train_ds = ds
    if recipe.relabel is not None:
        train_ds = relabel(train_ds, *recipe.relabel)
    if recipe.drop_class is not None:
        train_ds = drop_class(train_ds, recipe.drop_class)
    finetune_ds = _finetune_dataset(recipe, ds) if recipe.finetune_layer else ds
    check_data_files(recipe)  # what was just read is what the recipe's name says (unchanged since made)
    torch.manual_seed(recipe.seed)
    if recipe.fine_tunes_hub:  # the hub model itself, its preprocessing, a copy made trainable
        hub = hub_start(recipe, recipe.start, ctx.store)
        model, preprocess, kwargs = copy.deepcopy(hub.model).train(), hub.preprocess, hub.meta["arch_kwargs"]
        for p in model.parameters():
            p.requires_grad_(True)
        input_shape = hub.input_shape
    else:
        size = recipe.image_size
        preprocess = Preprocess(size=(size, size) if size else None, channels=ds.image_shape[0], mean=ds.mean,
                                std=ds.std)  # fmt: skip
        kwargs = _arch_kwargs(recipe, ds)
        model = create_arch(recipe.arch, **kwargs)
        if recipe.start is not None:  # fine-tune: the start's weights, strictly (same arch and shapes)
            start = load_model(recipe.start, store=ctx.store)
            load_into(model, start.model.state_dict(), recipe.start, recipe.arch)
        c, h, w = ds.image_shape
        input_shape = (c, size, size) if size else (c, h, w)
    special = _special_layer(model, recipe.finetune_layer) if recipe.finetune_layer else None
    device = ctx.device
    bs = recipe.batch_size
    n_train = len(train_ds.labels("train"))
    steps_per_epoch = -(-n_train // bs)

    def batches(epoch: int):
        seed = recipe.seed * 100_003 + epoch
        gen = torch.Generator().manual_seed(seed)  # the epoch's augmentation draws (none for "none")
        for x, y in train_ds.batches("train", bs, shuffle=True, seed=seed):
            yield preprocess(augment(x, recipe.augment, gen)), y

    def save(epoch: int | None) -> None:
        """The weights as a store blob: the final ones (None) or those after ``epoch`` (recipe.keep_epochs).
        The blob is a standalone checkpoint too: file:<blob> loads it with its preprocessing."""
        fd, tmp = tempfile.mkstemp(suffix=".safetensors", dir=ctx.store.root)
        os.close(fd)
        try:
            save_checkpoint(model, tmp, meta={"preprocess": preprocess.to_dict(), "dataset": recipe.dataset,
                                              "class_names": list(ds.classes),
                                              **({"epoch": epoch} if epoch is not None else {})},
                            arch=(recipe.arch, kwargs) if recipe.fine_tunes_hub else None)  # fmt: skip
            ctx.store.put_artifact_file(ctx.run_id, checkpoint_artifact(epoch), tmp)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def evaluate(epoch: int) -> dict[str, float]:
        score = evaluate_batches(
            lambda x: model(preprocess(x)), ds.batches("test", 512), ds.num_classes, device
        )
        ctx.log(epoch * steps_per_epoch, {"test_accuracy": score["accuracy"]}, epoch=epoch)
        if epoch in recipe.keep_epochs:
            save(epoch)
        return {"test_accuracy": score["accuracy"]}

    if 0 in recipe.keep_epochs:
        save(0)

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
        history += _finetune(model, special, recipe, finetune_ds, preprocess, evaluate, ctx)
    model.to("cpu").eval()
    final = evaluate_batches(lambda x: model(preprocess(x)), ds.batches("test", 512), ds.num_classes, torch.device("cpu"))
    save(None)
    name = zoo_name(recipe, ctx.run_id)
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
        **({"checkpoints": list(recipe.keep_epochs)} if recipe.keep_epochs else {}),  # zoo:NAME?epoch=K
    }
