"""What every model source returns, the source registry, and helpers shared by sources.

A source is a function ``(ref: ModelRef, store) -> LoadedModel`` registered
under its scheme with :func:`register_source`; ``load_model`` dispatches on
``ref.scheme``.  Sources import their heavy libraries (timm, transformers)
inside the function, so importing ``stitchcore.sources`` stays cheap.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from stitchcore.preprocess import Preprocess
from stitchcore.refs import ModelRef

__all__ = [
    "LoadedModel",
    "SourceFn",
    "register_source",
    "get_source",
    "list_sources",
    "freeze",
    "host_reachable",
    "parse_bool",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
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
            return torch.randint(0, vocab, (batch, *self.input_shape), generator=gen)
        return torch.randn((batch, *self.input_shape), generator=gen)


SourceFn = Callable[..., LoadedModel]  # (ref: ModelRef, store=None) -> LoadedModel

_SOURCES: dict[str, SourceFn] = {}


def register_source(scheme: str) -> Callable[[SourceFn], SourceFn]:
    """Decorator registering the loader for ``scheme``; a scheme can be registered once."""

    def deco(fn: SourceFn) -> SourceFn:
        if scheme in _SOURCES:
            raise ValueError(
                f"model source {scheme!r} is already registered (by {_SOURCES[scheme].__qualname__})"
            )
        _SOURCES[scheme] = fn
        return fn

    return deco


def get_source(scheme: str) -> SourceFn:
    """The loader registered for ``scheme`` (KeyError if none: a programming error)."""
    return _SOURCES[scheme]


def list_sources() -> list[str]:
    """Registered schemes, in registration order."""
    return list(_SOURCES)


def freeze(model: nn.Module) -> nn.Module:
    """Eval mode, CPU, ``requires_grad=False`` on every parameter; returns ``model``."""
    model.eval().cpu()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


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


def parse_bool(ref: ModelRef, key: str, default: bool) -> bool:
    """Boolean query option ``key`` of ``ref`` (true/false/1/0/yes/no)."""
    from stitchcore.errors import RefError

    value = ref.param(key)
    if value is None:
        return default
    low = value.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", "none"):
        return False
    raise RefError(f"option {key}={value!r} in '{ref}' must be true or false, e.g. ?{key}=false")


_REACH_TTL_S = 60.0  # how long a reachability answer is reused
_REACH_TIMEOUT_S = 2.0  # connect timeout of the probe: fail fast when offline
_reach_cache: dict[str, tuple[float, bool]] = {}
_reach_lock = threading.Lock()


def _offline_flag() -> bool:
    for var in ("STITCHLAB_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    try:  # huggingface_hub reads its env once at import; honour a later patch of its constant too
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def host_reachable(host: str, port: int = 443) -> bool:
    """Whether ``host:port`` accepts a TCP connection within 2 s (answer cached 60 s).

    False at once when ``STITCHLAB_OFFLINE``, ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` is set.  Sources call this before a download so
    an offline machine gets a clear error in seconds instead of a minute of
    retries inside huggingface_hub.
    """
    if _offline_flag():
        return False
    now = time.monotonic()
    with _reach_lock:
        hit = _reach_cache.get(host)
        if hit is not None and now - hit[0] < _REACH_TTL_S:
            return hit[1]
    try:
        with socket.create_connection((host, port), timeout=_REACH_TIMEOUT_S):
            ok = True
    except OSError:
        ok = False
    logger.debug("host %s reachable: %s", host, ok)
    with _reach_lock:
        _reach_cache[host] = (now, ok)
    return ok
