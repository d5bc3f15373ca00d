"""The ``file:`` source: ``file:/path/model.pt?arch=zoo:cnn&num_classes=10``.

Builds the architecture named by ``arch`` (``zoo:NAME``, ``timm:NAME`` or ``torchvision:NAME``,
found through the arch-builder registry; the other options are its kwargs), then loads the state
dict strictly.  Files written by :func:`~stitchcore.models.sources.checkpoint.save_checkpoint`
need no ``?arch=``.
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from stitchcore.errors import CheckpointError, RefError
from stitchcore.models.archs import create_arch, list_archs
from stitchcore.models.loaded import LoadedModel, wrap_arch_model
from stitchcore.models.refs import ModelRef
from stitchcore.models.sources._registry import ARCH_BUILDERS, register_arch_builder, register_source
from stitchcore.models.sources.checkpoint import ARCH_HINT, load_into, read_checkpoint

__all__ = ["load_checkpoint", "load_file"]


@register_arch_builder("zoo")
def _build_zoo(name: str, kwargs: dict[str, Any], ref: str) -> tuple[nn.Module, None]:
    """A random-init zoo architecture; the caller wraps it with its checkpoint's metadata."""
    return create_arch(name, **kwargs), None


def _build(arch: str, kwargs: dict[str, Any], ref: str) -> tuple[nn.Module, Any]:
    """Random-init model for ``arch`` plus a finisher ``(model) -> LoadedModel`` (None: zoo)."""
    family, _, name = arch.partition(":")
    if name and family in ARCH_BUILDERS:
        return ARCH_BUILDERS.get(family)(name, kwargs, ref)
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
    return _finish(
        sd, info, info["arch"], {**info.get("arch_kwargs", {}), **arch_kwargs}, ref or f"file:{path}", path
    )


def _finish(sd: dict, info: dict, arch: str, kwargs: dict, ref: str, path: Any) -> LoadedModel:
    model, finisher = _build(arch, kwargs, ref)
    load_into(model, sd, str(path), arch)
    if finisher is None:
        return wrap_arch_model(model, ref, meta=info.get("meta"))
    return finisher(model)


@register_source("file")
def load_file(ref: ModelRef, store: Any = None) -> LoadedModel:
    """``file:/path/model.pt?arch=zoo:cnn&num_classes=10`` or ``file:/path/model.safetensors``."""
    sd, info = read_checkpoint(ref.name)
    arch = ref.param("arch")
    kwargs: dict[str, Any] = ref.without_params("arch")
    if arch is None:
        if "arch" not in info:
            raise CheckpointError(
                f"{ref.name} records no architecture; say which with file:{ref.name}{ARCH_HINT}"
            )
        arch = info["arch"]
    if arch == info.get("arch"):
        kwargs = {**info.get("arch_kwargs", {}), **kwargs}
    return _finish(sd, info, arch, kwargs, str(ref), ref.name)
