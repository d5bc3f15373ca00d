"""What every model source returns: :class:`LoadedModel`, and the constructors sources share.

A source is a function ``(ref: ModelRef, store) -> LoadedModel`` registered under its scheme
(see :mod:`stitchcore.models.sources`); everything above the sources sees only this type.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from stitchcore.device import module_device, use_channels_last
from stitchcore.models.preprocess import Preprocess

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "LoadedModel",
    "freeze",
    "hub_image_model",
    "private_rng",
    "seeded_init",
    "wrap_arch_model",
]

logger = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # torchvision/timm ImageNet normalisation
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class LoadedModel:
    """A model ready for cutting: eval mode, on CPU, every parameter frozen."""

    ref: str  # canonical ref string (str(ModelRef))
    model: nn.Module  # eval mode, CPU, requires_grad False on all params
    input_kind: str  # "image" (float [B, C, H, W]) or "tokens" (long [B, T])
    input_shape: tuple[int, ...]  # one example without batch: (C, H, W) or (T,)
    preprocess: Preprocess | None  # image models: dataset [0,1] images -> model input; None for LMs
    num_classes: int | None  # classifier outputs, or vocab size for LMs
    dataset: str | None = None  # dataset it was trained on if known (zoo recipes), else None
    meta: dict[str, Any] = field(
        default_factory=dict
    )  # extras: arch, arch_kwargs, class_names, tokenizer ...

    def example_input(self, batch: int = 2) -> torch.Tensor:
        """A deterministic example batch in model-input space.

        Images: standard-normal floats [batch, C, H, W] (seed 0); tokens: ids
        [batch, T] uniform in [0, num_classes) (seed 0).
        """
        gen = torch.Generator().manual_seed(0)
        if self.input_kind == "tokens":
            vocab = self.num_classes or 2
            x = torch.randint(0, vocab, (batch, *self.input_shape), generator=gen)
        else:
            x = torch.randn((batch, *self.input_shape), generator=gen)
        return x.to(module_device(self.model))  # the same values on the device the model is on

    def to(self, device: torch.device | str) -> LoadedModel:
        """Move the whole model to ``device`` in eval mode (in place; a run's own load); returns self.
        Conv nets on CUDA go channels_last (:func:`~stitchcore.device.use_channels_last`).

        A run moves its models whole before it splits them: a part moved alone (a suffix) would leave the
        model on two devices.
        """
        self.model.to(device).eval()
        if use_channels_last(self.model, device):  # conv nets on CUDA: NHWC weights and activations
            self.model.to(memory_format=torch.channels_last)
        return self


def freeze(model: nn.Module) -> nn.Module:
    """Eval mode, CPU, ``requires_grad=False`` on every parameter; returns ``model``."""
    model.eval().cpu()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


# A factory overload without a generator (``randn.default``) has a twin that takes one (``randn.generator``).
_GENERATOR_TWIN = {"default": "generator", "low": "low_generator", "names": "generator_with_names"}


@functools.cache
def _with_generator(func: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """``func`` if it takes ``generator=``, else its twin that does, else None (not a random op)."""
    if any(arg.name == "generator" for arg in func._schema.arguments):
        return func
    twin = _GENERATOR_TWIN.get(func._overloadname)
    if twin is not None and twin in func.overloadpacket.overloads():
        return getattr(func.overloadpacket, twin)
    return None


class _PrivateGenerator(TorchDispatchMode):
    """Hands ``gen`` to every random ATen op of this thread that names no generator (dispatch modes are per
    thread).  At the ATen level, so draws nested inside ``torch.nn.init`` and the hubs' own init code are seen."""

    def __init__(self, gen: torch.Generator) -> None:
        super().__init__()
        self.gen = gen

    def __torch_dispatch__(self, func: torch._ops.OpOverload, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        random_op = _with_generator(func)
        if random_op is not None and kwargs.get("generator") is None:
            func, kwargs = random_op, {**kwargs, "generator": self.gen}
        return func(*args, **kwargs)


@contextlib.contextmanager
def private_rng(seed: int) -> Iterator[torch.Generator]:
    """Random draws of this thread inside the block come from a CPU generator of its own, seeded ``seed``:
    the same stream as ``torch.manual_seed(seed)`` gives, but torch's global generator is neither read nor
    moved, so another thread drawing from it meanwhile (a page, a background timing) changes nothing here,
    and nothing here changes its draws.

    >>> torch.manual_seed(5); before = torch.random.get_rng_state()  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> with private_rng(0):
    ...     w = torch.nn.Linear(2, 2).weight
    >>> _ = torch.manual_seed(0)
    >>> torch.equal(w, torch.nn.Linear(2, 2).weight)  # what a global seed of 0 would have drawn
    True
    >>> _ = torch.random.set_rng_state(before)
    """
    gen = torch.Generator().manual_seed(seed)
    with _PrivateGenerator(gen):
        yield gen


@contextlib.contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Build random weights inside this block: drawn from a generator seeded ``seed`` (:func:`private_rng`),
    so the same in every process and whatever other threads draw meanwhile; the caller's RNG is untouched.

    >>> torch.manual_seed(5); before = torch.random.get_rng_state()  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> with seeded_init(0):
    ...     w = torch.nn.Linear(2, 2).weight
    >>> with seeded_init(0):
    ...     torch.equal(w, torch.nn.Linear(2, 2).weight)
    True
    >>> torch.equal(before, torch.random.get_rng_state())
    True
    """
    with private_rng(seed):
        yield


def hub_image_model(ref: str, model: nn.Module, pre: Preprocess, num_classes: int | None,
                    meta: dict[str, Any]) -> LoadedModel:
    """A frozen hub image classifier (timm, torchvision): input shape from its preprocessing."""
    return LoadedModel(
        ref=ref,
        model=freeze(model),
        input_kind="image",
        input_shape=(pre.channels, *pre.size),
        preprocess=pre,
        num_classes=num_classes,
        dataset=None,
        meta=meta,
    )


def wrap_arch_model(
    model: nn.Module, ref: str, meta: dict[str, Any] | None = None, dataset: str | None = None
) -> LoadedModel:
    """A :class:`LoadedModel` for a built-in (zoo) architecture, frozen.

    Preprocess: ``meta["preprocess"]`` (a ``Preprocess.to_dict()``) when
    recorded, else the arch's size and channels with ``meta["mean"]/["std"]``
    or (0,)/(1,).
    """
    meta = dict(meta or {})
    kind, shape = model.input_kind, tuple(model.input_shape)
    preprocess = None
    if kind == "image":
        if isinstance(meta.get("preprocess"), dict):
            preprocess = Preprocess.from_dict(meta["preprocess"])
            if preprocess.size is None:  # as the zoo source: data at another size is brought to the model's
                preprocess = dataclasses.replace(preprocess, size=(shape[1], shape[2]))
        else:
            mean = tuple(float(v) for v in meta.get("mean", (0.0,)))
            std = tuple(float(v) for v in meta.get("std", (1.0,)))
            preprocess = Preprocess(size=(shape[1], shape[2]), channels=shape[0], mean=mean, std=std)
    meta.setdefault("arch", f"zoo:{model.arch_name}")
    meta.setdefault("arch_kwargs", dict(model.arch_kwargs))
    return LoadedModel(
        ref=ref,
        model=freeze(model),
        input_kind=kind,
        input_shape=shape,
        preprocess=preprocess,
        num_classes=model.num_outputs,
        dataset=dataset if dataset is not None else meta.get("dataset"),
        meta=meta,
    )
