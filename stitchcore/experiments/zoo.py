"""Experiment ``zoo``: train a built-in architecture from a recipe and store it.

The checkpoint (safetensors with the architecture in its metadata) becomes an
artifact of the run; the run's summary holds the ref (``zoo:cnn-digits-s0``),
test accuracy, preprocessing and class names, so ``zoo:`` refs resolve through
the store and a recipe is never trained twice.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from stitchcore.data.images import ImageDataset, drop_class, load_dataset, relabel
from stitchcore.data.text import list_texts
from stitchcore.errors import DataError, StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._shared import (
    check_at_least,
    check_choice,
    check_positive,
    field_label,
    spec_from_dict,
)
from stitchcore.models.archs import arch_defaults, arch_input_kind, create_arch
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.sources.checkpoint import save_checkpoint
from stitchcore.stitching.evaluate import count_params, evaluate_batches
from stitchcore.stitching.train import OPTIMIZERS, train_classifier

__all__ = ["ZooRecipe", "check_zoo", "train_zoo", "untrained_model", "zoo_name"]

log = logging.getLogger(__name__)

CHECKPOINT = "model.safetensors"


@dataclass(frozen=True)
class ZooRecipe:
    """How to train a built-in (zoo) model; training one stores it as a run.

    Defaults train the small digits CNN to ~97% test accuracy in a few seconds
    on a laptop CPU, which is what the classroom demo needs.
    """

    arch: str = "cnn"  # a name from stitchcore.models.archs.list_archs()
    dataset: str = "digits"  # a name for stitchcore.data.load_dataset
    seed: int = 0  # weight init and data order
    optimizer: str = "sgd"  # sgd (momentum) | adamw (cosine schedule)
    epochs: int = 20  # digits: 1,347 training images, 20 epochs ~ 420 steps, ~97% in ~1 s
    lr: float | None = None  # None: 0.05 for sgd, 2e-3 for adamw
    batch_size: int = 64
    momentum: float = 0.9  # sgd only
    weight_decay: float | None = None  # None: 5e-4 for sgd, 0.05 for adamw
    image_size: int | None = None  # resize inputs (digits 8 -> 16/32 for deeper nets); None = native
    arch_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"blocks": [1, 1, 1, 1], "width": 16}
    relabel: tuple[int, int] | None = None  # trait: train with class X labelled Y
    drop_class: int | None = None  # trait: class X never seen in training
    l1: float = 0.0  # L1 penalty on weights (simple models, with pruning)
    l2: float = 0.0  # explicit L2 penalty on weights (beyond weight decay)
    prune_every: int = 0  # epochs between magnitude-pruning steps (0 = never)
    prune_fraction: float = 0.0  # fraction of remaining weights pruned at each step
    # Special layer (trait localization): after the main training, fine-tune only this named layer
    # (e.g. "fc2"; all others frozen) for finetune_epochs on finetune_data (None: the untransformed dataset).
    finetune_layer: str | None = None
    finetune_epochs: int = 10  # digits: enough for the last hidden layer to bring a dropped class back
    finetune_data: str | None = None  # e.g. "digits|relabel3to8": the trait is taught to that layer only
    finetune_lr: float | None = None  # None: the recipe's lr; smaller keeps the layer's other behaviour

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_at_least("seed", self.seed, 0)
        check_at_least("epochs", self.epochs, 1, "e.g. 20")
        check_at_least("batch_size", self.batch_size, 1, "e.g. 64")
        if self.lr is not None:
            check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1; leave it out for the default")
        if self.weight_decay is not None:
            check_at_least("weight_decay", self.weight_decay, 0, "typical values 0 .. 0.1")
        check_at_least("momentum", self.momentum, 0, "e.g. 0.9")
        if self.momentum >= 1.0:
            raise StitchError(f"momentum must be below 1 (got {self.momentum!r}); e.g. 0.9")
        if self.image_size is not None:
            check_at_least("image_size", self.image_size, 1, "leave it out for the dataset's native size")
        for name in ("l1", "l2"):
            check_at_least(name, getattr(self, name), 0, "0 turns the penalty off")
        check_at_least("prune_every", self.prune_every, 0, "0 never prunes")
        check_at_least("prune_fraction", self.prune_fraction, 0)
        if self.prune_fraction >= 1.0:
            raise StitchError(f"{field_label('prune_fraction')} must be below 1 (got {self.prune_fraction})")
        if not isinstance(self.arch_kwargs, dict):
            raise StitchError(f"{field_label('arch_kwargs')} must be a JSON object, e.g. {{\"width\": 32}}")
        if self.relabel is not None:
            if len(self.relabel) != 2:
                raise StitchError(f"relabel takes two classes X:Y, got {self.relabel!r}")
            object.__setattr__(self, "relabel", tuple(int(v) for v in self.relabel))
        if self.finetune_layer is None and (self.finetune_data is not None or self.finetune_lr is not None):
            raise StitchError("finetune_data and finetune_lr need a finetune_layer (the one layer trained)")
        if self.finetune_layer is not None and self.finetune_epochs < 1:
            raise StitchError("finetune_epochs must be at least 1 when a finetune_layer is set")
        if self.finetune_lr is not None:
            check_positive("finetune_lr", self.finetune_lr, "leave it out for the recipe's lr")

    @property
    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else (0.05 if self.optimizer == "sgd" else 2e-3)

    @property
    def resolved_weight_decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 5e-4 if self.optimizer == "sgd" else 0.05

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["relabel"] = list(self.relabel) if self.relabel else None
        if self.finetune_layer is None:  # absent unless used: run ids of older recipes stay the same
            del d["finetune_layer"], d["finetune_epochs"], d["finetune_data"], d["finetune_lr"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ZooRecipe:
        return spec_from_dict(cls, dict(d))

    def is_plain(self) -> bool:
        """True when only arch, dataset, seed and optimizer differ from the defaults."""
        base = ZooRecipe(arch=self.arch, dataset=self.dataset, seed=self.seed, optimizer=self.optimizer)
        return base == self

    def label(self) -> str:
        """Human label for run lists: 'train cnn on digits (seed 0, sgd, 20 epochs, drop 3)'."""
        extras = [f"seed {self.seed}", self.optimizer, f"{self.epochs} epochs"]
        if self.relabel:
            extras.append(f"relabel {self.relabel[0]}->{self.relabel[1]}")
        if self.drop_class is not None:
            extras.append(f"drop {self.drop_class}")
        if self.l1 or self.prune_fraction:
            extras.append("L1/pruned")
        if self.l2:
            extras.append(f"L2 {self.l2:g}")
        if self.finetune_layer is not None:
            extras.append(f"fine-tune {self.finetune_layer}" + (f" on {self.finetune_data}" if self.finetune_data else ""))
        return f"train {self.arch} on {self.dataset} ({', '.join(extras)})"

    def short_name(self) -> str:
        """Readable part of the zoo ref: ``cnn-digits-s0`` (``-adamw`` when not sgd)."""
        dataset = re.sub(r"[^a-z0-9]+", "", self.dataset.lower().split(":")[0])
        name = f"{self.arch}-{dataset}-s{self.seed}"
        return name + ("-adamw" if self.optimizer == "adamw" else "")


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


def untrained_model(recipe: ZooRecipe) -> LoadedModel:
    """The recipe's architecture with fresh (unseeded) weights, shaped as its trained model will load:
    what :mod:`stitchcore.experiments.estimate` times before the model is trained.

    >>> m = untrained_model(ZooRecipe())
    >>> m.input_shape, m.num_classes, m.ref
    ((1, 8, 8), 10, 'zoo:cnn-digits-s0?init=random')
    """
    if arch_input_kind(recipe.arch) != "image":
        from stitchcore.experiments.lm_zoo import untrained_lm

        return untrained_lm(recipe)
    ds = load_dataset(recipe.dataset)
    size = recipe.image_size
    preprocess = Preprocess(size=(size, size) if size else None, channels=ds.image_shape[0], mean=ds.mean, std=ds.std)
    kwargs = _arch_kwargs(recipe, ds)
    model = create_arch(recipe.arch, **kwargs).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    c, h, w = ds.image_shape
    return LoadedModel(
        ref=f"zoo:{recipe.short_name()}?init=random", model=model, input_kind="image",
        input_shape=(c, size, size) if size else (c, h, w), preprocess=preprocess, num_classes=ds.num_classes,
        dataset=recipe.dataset, meta={"arch": recipe.arch, "arch_kwargs": kwargs, "class_names": list(ds.classes)},
    )


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
    """Special layer: train only ``layer`` (all other weights frozen) on ``finetune_data`` (default: ``ds``)."""
    ds = _finetune_dataset(recipe, ds)
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
    if arch_input_kind(recipe.arch) != "image":  # unknown arch: RefError naming the close ones
        if recipe.dataset not in list_texts() and not recipe.dataset.startswith("file:"):
            raise DataError(f"{recipe.arch!r} is a language model: train it on a text corpus"
                            f" ({', '.join(list_texts())} or file:PATH), not on {recipe.dataset!r}")  # fmt: skip
        untrained_model(recipe)  # the corpus and the arch's options
        return
    model = untrained_model(recipe)  # unknown option, a dataset that is missing or does not fit the arch
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


@register_experiment("zoo", ZooRecipe.from_dict, check=check_zoo)
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
