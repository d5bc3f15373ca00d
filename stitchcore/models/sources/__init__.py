"""Load any ModelRef: one verb over a registry of sources.

>>> lm = load_model("zoo:cnn-digits-s0")                        # doctest: +SKIP
>>> lm = load_model("timm:resnet18?pretrained=false")           # doctest: +SKIP
>>> lm.model(lm.preprocess(images)).shape                       # doctest: +SKIP
>>> list_sources()
['file', 'hf', 'timm', 'torchvision', 'zoo']

Every source returns a :class:`LoadedModel` (eval mode, CPU, frozen) with the
model's input transform.  Each source module registers itself when this package
imports it; sources import timm / torchvision / transformers only when called, so
importing this package is cheap.
"""

from __future__ import annotations

from typing import Any

from stitchcore.models.loaded import LoadedModel, freeze, private_rng, wrap_arch_model
from stitchcore.models.refs import ModelRef, parse_ref
from stitchcore.models.sources import file, hf, timm, torchvision, zoo  # noqa: F401  (each registers itself)
from stitchcore.models.sources._hub import offline_flag
from stitchcore.models.sources._registry import SOURCES, SourceFn, register_source
from stitchcore.models.sources.checkpoint import load_into, read_checkpoint, save_checkpoint
from stitchcore.models.sources.file import load_checkpoint

__all__ = [
    "LoadedModel",
    "get_source",
    "list_sources",
    "load_checkpoint",
    "load_into",
    "load_model",
    "offline_flag",
    "read_checkpoint",
    "register_source",
    "save_checkpoint",
    "wrap_arch_model",
]


def get_source(scheme: str) -> SourceFn:
    """The loader registered for ``scheme``; unknown: RefError naming the known schemes."""
    return SOURCES.get(scheme)


def list_sources(pattern: str = "*") -> list[str]:
    """Registered schemes matching ``pattern``, in registration order."""
    return SOURCES.list(pattern)


def load_model(ref: str | ModelRef, store: Any = None) -> LoadedModel:
    """Load the model a ref names: eval mode, on CPU, all parameters frozen.

    ``store`` is the results store (zoo models live there); other sources ignore it.
    Random weights are drawn from the ref's ``seed=`` (default 0), the same in every process, and
    loading leaves the caller's torch RNG as it was (building a model draws from it, even one whose
    weights are then loaded).
    Raises :class:`RefError` for a bad ref, :class:`SourceError` /
    :class:`CheckpointError` when the model cannot be loaded, each naming the fix.
    """
    ref = parse_ref(ref)
    with private_rng(0):  # draws for weights then loaded: a throwaway generator, never the global one
        loaded = get_source(ref.scheme)(ref, store)
    freeze(loaded.model)
    loaded.ref = loaded.ref or str(ref)
    return loaded
