"""The ``file:`` source: ``file:/path/model.pt?arch=zoo:cnn&dataset=digits&mean=0.31&std=0.38&size=8``.

Builds the architecture named by ``arch`` (``zoo:NAME``, ``timm:NAME`` or ``torchvision:NAME``,
found through the arch-builder registry), then loads the state dict strictly.  The other options
are the architecture's kwargs, except the input options, which describe the data, not the weights:

=================  ==================================================================
``dataset=NAME``   what it was trained on (``LoadedModel.dataset``; experiments default to it)
``mean=M[,M..]``   per-channel normalisation of [0, 1] images (one value, or one per channel)
``std=S[,S..]``
``size=N|H,W``     the input size images are resized to
=================  ==================================================================

What the ref leaves out comes from the checkpoint's own record (files written by
:func:`~stitchcore.models.sources.checkpoint.save_checkpoint` need no ``?arch=`` either), else
from the architecture.  For zoo archs that is the zoo recipe's: the dataset is ``digits`` when the
model's input and head fit it, and mean/std are the dataset's, as the zoo trainer normalises;
with no dataset known, mean 0 / std 1.  For timm and torchvision archs it is their own config.
The head size (``num_classes``) is read off the checkpoint when not given.
``LoadedModel.meta["defaults"]`` says which defaults were used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from torch import nn

from stitchcore.data.images import ImageDataset, dataset_loader, load_dataset
from stitchcore.errors import CheckpointError, DataError, RefError
from stitchcore.models.archs import arch_defaults, create_arch, list_archs
from stitchcore.models.loaded import LoadedModel, wrap_arch_model
from stitchcore.models.memory import check_buildable
from stitchcore.models.preprocess import Preprocess, format_size, parse_size, parse_values
from stitchcore.models.refs import ModelRef
from stitchcore.models.sources._registry import ARCH_BUILDERS, register_arch_builder, register_source
from stitchcore.models.sources.checkpoint import (
    ARCH_HINT,
    classifier_rows,
    head_names,
    load_into,
    read_checkpoint,
)

__all__ = ["INPUT_OPTIONS", "ZOO_DATASET", "InputOptions", "load_checkpoint", "load_file"]

INPUT_OPTIONS = ("dataset", "mean", "std", "size")  # file: options about the data, never arch kwargs
ZOO_DATASET = "digits"  # ZooRecipe's default dataset: the zoo archs' default shapes are sized for it


@dataclass(frozen=True)
class InputOptions:
    """The input options of a ``file:`` ref, parsed and checked; None where the ref gives none.

    >>> InputOptions.from_ref(ModelRef("file", "/m.pt", params=(("mean", "0.5"), ("size", "32"))))
    InputOptions(dataset=None, mean=(0.5,), std=None, size=(32, 32))
    """

    dataset: str | None = None  # a name for stitchcore.data.load_dataset (text corpus for LMs)
    mean: tuple[float, ...] | None = None  # per channel, or one value for all
    std: tuple[float, ...] | None = None  # per channel, or one value for all; positive
    size: tuple[int, int] | None = None  # (H, W) images are resized to

    @classmethod
    def from_ref(cls, ref: ModelRef) -> InputOptions:
        """Parse ``dataset/mean/std/size``; RefError / DataError (one line) for a bad value."""
        dataset = ref.param("dataset")
        if dataset is not None and not dataset.strip():
            raise RefError("dataset= is empty; name a dataset (e.g. dataset=digits) or leave the option out")
        mean, std, size = ref.param("mean"), ref.param("std"), ref.param("size")
        return cls(
            dataset=dataset.strip() if dataset else None,
            mean=None if mean is None else parse_values("mean", mean),
            std=None if std is None else parse_values("std", std),
            size=None if size is None else parse_size(size),
        )


@register_arch_builder("zoo")
def _build_zoo(
    name: str, kwargs: dict[str, Any], ref: str, sd: dict[str, Any] | None = None
) -> tuple[nn.Module, None]:
    """A random-init zoo architecture, its head sized by ``sd`` when kwargs give no num_classes (refused before
    anything is allocated when its arch_kwargs ask for more memory than the machine has)."""
    check_buildable(f"{ref} ({name})", lambda: create_arch(name, **kwargs),
                    "its arch_kwargs (from the ref or the checkpoint's header) ask for more than this machine holds")
    model = create_arch(name, **kwargs)
    if sd and "num_classes" not in kwargs and "num_classes" in arch_defaults(name):
        rows = classifier_rows(sd, head_names(model))
        if rows is not None and rows != model.num_outputs:
            model = create_arch(name, **{**kwargs, "num_classes": rows})
    return model, None


def _build(arch: str, kwargs: dict[str, Any], ref: str, sd: dict[str, Any]) -> tuple[nn.Module, Any]:
    """Random-init model for ``arch`` plus a finisher ``(model) -> LoadedModel`` (None: zoo)."""
    family, _, name = arch.partition(":")
    if name and family in ARCH_BUILDERS:
        return ARCH_BUILDERS.get(family)(name, kwargs, ref, sd)
    if arch in list_archs():
        raise RefError(f"write ?arch=zoo:{arch} (not ?arch={arch}) in '{ref}'")
    raise RefError(f"unknown arch {arch!r} in '{ref}'; use {ARCH_HINT}")


def load_checkpoint(path: str | os.PathLike, ref: str | None = None, **arch_kwargs: Any) -> LoadedModel:
    """Load a checkpoint written by :func:`save_checkpoint` (or any file with arch info).

    ``ref`` is recorded as the LoadedModel's ref (default ``file:<path>``);
    ``arch_kwargs`` override the recorded options.  Used by the zoo for its blobs.
    """
    sd, info = read_checkpoint(path)
    if "arch" not in info:
        raise CheckpointError(f"{path} records no architecture; load it with file:{path}{ARCH_HINT}")
    kwargs = {**info.get("arch_kwargs", {}), **arch_kwargs}
    return _finish(sd, info, info["arch"], kwargs, ref or f"file:{path}", path, InputOptions())


def _finish(
    sd: dict, info: dict, arch: str, kwargs: dict, ref: str, path: Any, opts: InputOptions
) -> LoadedModel:
    model, finisher = _build(arch, kwargs, ref, sd)
    load_into(model, sd, str(path), arch)
    if finisher is None:
        return _zoo_inputs(wrap_arch_model(model, ref, meta=info.get("meta")), opts)
    return _hub_inputs(finisher(model), opts, info.get("meta") or {})


def _check_dataset(name: str) -> None:
    """DataError naming close names when ``name`` is no dataset (nothing is loaded)."""
    base = name.split("|")[0]
    if not base.startswith("imagefolder:"):
        dataset_loader(base)


def _dataset(name: str, ref: str) -> ImageDataset:
    try:
        return load_dataset(name)
    except DataError as e:
        raise DataError(f"{ref}: mean/std default to dataset {name}'s, but {e}; or give mean= and std=") \
            from e


def _fit(values: tuple[float, ...], channels: int) -> tuple[float, ...]:
    """A dataset's per-channel values for a model with ``channels`` inputs (averaged when they differ)."""
    return values if len(values) in (1, channels) else (sum(values) / len(values),)


def _zoo_inputs(loaded: LoadedModel, opts: InputOptions) -> LoadedModel:
    """Apply the input options to a zoo-arch model; fill the rest from its record or the zoo recipe."""
    meta, arch = loaded.meta, loaded.meta.get("arch")
    if loaded.input_kind != "image":
        if opts.mean or opts.std or opts.size:
            raise RefError(f"mean=, std= and size= are for image models; {arch} takes token ids")
        loaded.dataset = opts.dataset or loaded.dataset
        return loaded
    c, h, w = loaded.input_shape
    if opts.size is not None and opts.size != (h, w):
        raise RefError(
            f"size={format_size(opts.size)} does not fit {arch}, built for {h}x{w} input; "
            f"drop size= or build it for that size (e.g. image_size={opts.size[0]})"
        )
    notes = []
    dataset = opts.dataset or loaded.dataset
    if opts.dataset:
        _check_dataset(opts.dataset)
    elif dataset is None:
        digits = load_dataset(ZOO_DATASET)
        if (tuple(loaded.input_shape), loaded.num_classes) == (digits.image_shape, digits.num_classes):
            dataset = ZOO_DATASET
            fits = f"input {c}x{h}x{w} and {loaded.num_classes} classes fit it"
            notes.append(f"dataset {ZOO_DATASET} (the zoo recipe's: {fits})")
        else:
            shape = f"input {c}x{h}x{w} with {loaded.num_classes} classes"
            notes.append(f"no dataset ({shape} does not fit {ZOO_DATASET}, the zoo default; give dataset=)")
    pre = loaded.preprocess
    recorded = isinstance(meta.get("preprocess"), dict) or "mean" in meta or "std" in meta
    if recorded:
        if opts.mean is None or opts.std is None:
            notes.append("mean/std recorded in the checkpoint")
    elif opts.mean is None or opts.std is None:
        if dataset is not None:
            ds = _dataset(dataset, loaded.ref)
            # the model's input size (as the zoo source: data at another size, a streamed folder, is brought to it)
            pre = Preprocess(size=(h, w), channels=c, mean=_fit(ds.mean, c), std=_fit(ds.std, c))
            notes.append(f"mean/std of {dataset} (the zoo trainer's normalisation)")
        else:
            notes.append("mean 0, std 1 (no dataset; give mean= and std=)")
    loaded.preprocess = pre.with_options(mean=opts.mean, std=opts.std)
    loaded.dataset = dataset
    meta["defaults"] = "; ".join(notes)
    return loaded


def _hub_inputs(loaded: LoadedModel, opts: InputOptions, recorded: dict[str, Any]) -> LoadedModel:
    """Apply the input options to a timm/torchvision model; else what the checkpoint records (its preprocess
    and dataset: a fine-tuned model's), else the architecture's own config."""
    dataset = opts.dataset or recorded.get("dataset")
    if dataset:
        _check_dataset(dataset)
        loaded.dataset = dataset
    from_record = isinstance(recorded.get("preprocess"), dict)
    base = Preprocess.from_dict(recorded["preprocess"]) if from_record else loaded.preprocess
    pre = base.with_options(mean=opts.mean, std=opts.std, size=opts.size)
    loaded.preprocess, loaded.input_shape = pre, (pre.channels, *pre.size)
    family = str(loaded.meta.get("arch", "")).partition(":")[0]
    given = [k for k in ("mean", "std", "size") if getattr(opts, k) is not None]
    left = [k for k in ("mean", "std", "size") if k not in given]
    source = "the checkpoint's record" if from_record else f"{family}'s config for the architecture"
    notes = [f"{'/'.join(left)} from {source}"] if left else []
    if not opts.dataset:
        notes.append(f"dataset {dataset} (recorded in the checkpoint)" if dataset else "no dataset (give dataset=)")
    loaded.meta["defaults"] = "; ".join(notes)
    return loaded


@register_source("file")
def load_file(ref: ModelRef, store: Any = None) -> LoadedModel:
    """``file:/path/model.pt?arch=zoo:cnn&dataset=digits&num_classes=10`` or ``file:/path/m.safetensors``."""
    opts = InputOptions.from_ref(ref)
    sd, info = read_checkpoint(ref.name)
    arch = ref.param("arch")
    kwargs: dict[str, Any] = ref.without_params("arch", *INPUT_OPTIONS)
    if arch is None:
        if "arch" not in info:
            raise CheckpointError(
                f"{ref.name} records no architecture; say which with file:{ref.name}{ARCH_HINT}"
            )
        arch = info["arch"]
    if arch == info.get("arch"):
        kwargs = {**info.get("arch_kwargs", {}), **kwargs}
    return _finish(sd, info, arch, kwargs, str(ref), ref.name, opts)
