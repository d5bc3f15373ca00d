"""The source tables: scheme -> loader, and arch family -> builder for ``file:?arch=FAMILY:NAME``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from stitchcore.errors import RefError
from stitchcore.models.loaded import LoadedModel
from stitchcore.registry import Registry

__all__ = ["ARCH_BUILDERS", "SOURCES", "ArchBuilder", "SourceFn", "register_arch_builder", "register_source"]

SourceFn = Callable[..., LoadedModel]  # (ref: ModelRef, store=None) -> LoadedModel
# (name, kwargs, ref, state dict) -> (random-init model, its head sized by the state dict when kwargs
# give no num_classes; finisher (model) -> LoadedModel, or None for zoo archs)
ArchBuilder = Callable[[str, dict[str, Any], str, dict[str, Any]], tuple[nn.Module, Any]]

SOURCES: Registry[SourceFn] = Registry("model source", RefError, hint="write scheme:name, e.g. zoo:cnn-digits-s0")
ARCH_BUILDERS: Registry[ArchBuilder] = Registry("architecture family", RefError)


def register_source(scheme: str) -> Callable[[SourceFn], SourceFn]:
    """Decorator registering the loader for ``scheme``; a scheme can be registered once."""
    return SOURCES.register(scheme)


def register_arch_builder(family: str) -> Callable[[ArchBuilder], ArchBuilder]:
    """Decorator registering how ``file:...?arch=FAMILY:NAME`` builds a random-init FAMILY model."""
    return ARCH_BUILDERS.register(family)
