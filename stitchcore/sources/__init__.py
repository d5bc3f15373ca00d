"""Load any ModelRef: one verb over a registry of sources.

>>> lm = load_model("zoo:cnn-digits-s0")                        # doctest: +SKIP
>>> lm = load_model("timm:resnet18?pretrained=false")           # doctest: +SKIP
>>> lm.model(lm.preprocess(images)).shape                       # doctest: +SKIP

Every source returns a :class:`LoadedModel` (eval mode, CPU, frozen) with the
model's input transform.  Sources import timm / torchvision / transformers
only when called, so importing this package is cheap.
"""

from __future__ import annotations

from typing import Any

from stitchcore.errors import RefError
from stitchcore.refs import ModelRef, parse_ref
from stitchcore.sources import file_source, hf_source, timm_source, torchvision_source
from stitchcore.sources.file_source import load_checkpoint, read_checkpoint, save_checkpoint, wrap_arch_model
from stitchcore.sources.loaded import LoadedModel, freeze, get_source, list_sources, register_source

__all__ = [
    "load_model",
    "LoadedModel",
    "register_source",
    "list_sources",
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint",
    "wrap_arch_model",
    "file_source",
    "hf_source",
    "timm_source",
    "torchvision_source",
]


@register_source("zoo")
def _load_zoo(ref: ModelRef, store: Any = None) -> LoadedModel:
    """Zoo models are stored results: the zoo module finds the checkpoint in the store."""
    from stitchcore.sources.zoo import load_zoo_model

    return load_zoo_model(ref, store)


def load_model(ref: str | ModelRef, store: Any = None) -> LoadedModel:
    """Load the model a ref names: eval mode, on CPU, all parameters frozen.

    ``store`` is the results store (zoo models live there); other sources ignore it.
    Raises :class:`RefError` for a bad ref, :class:`SourceError` /
    :class:`CheckpointError` when the model cannot be loaded, each naming the fix.
    """
    ref = parse_ref(ref)
    if ref.scheme not in list_sources():
        raise RefError(f"no loader for '{ref.scheme}:' models; available: {', '.join(list_sources())}")
    loaded = get_source(ref.scheme)(ref, store)
    freeze(loaded.model)
    loaded.ref = loaded.ref or str(ref)
    return loaded
