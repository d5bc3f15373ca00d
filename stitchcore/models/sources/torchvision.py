"""``torchvision:NAME`` classification models through ``torchvision.models.get_model``.

Forms::

    torchvision:resnet18                           DEFAULT weights (download or torch hub cache)
    torchvision:resnet18?weights=IMAGENET1K_V1     a named weights enum member
    torchvision:resnet18?weights=none              random init, seed 0 (&num_classes=10 allowed)
    torchvision:resnet18?weights=none&seed=3       random init, seed 3 (the same weights in every process)
    torchvision:resnet18@file=/path/w.pth          local weights (.pth/.pt or .safetensors)

Preprocessing comes from the weights' ``transforms()`` (crop size, mean, std),
also for random init when the model has pretrained weights (no download
needed); otherwise the ImageNet defaults at 224x224.

Random init is built under its own RNG seeded ``seed`` (default 0, left out of the canonical ref), so
a ref names one set of weights everywhere; ``seed=`` with pretrained weights or ``@file=`` is refused.

Pretrained weights are read by :func:`~stitchcore.models.sources.checkpoint.read_hub_weights` from the torch hub
cache (downloaded there first when missing), never by torch hub's own loader, which unpickles with
``weights_only=False``: a pickle planted in the cache is refused in one line, and nothing of it runs.
"""

from __future__ import annotations

import difflib
import logging
import os
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from torch import nn

from stitchcore.errors import CheckpointError, RefError, SourceError
from stitchcore.models.loaded import IMAGENET_MEAN, IMAGENET_STD, LoadedModel, hub_image_model, seeded_init
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed, random_twin
from stitchcore.models.sources._hub import host_reachable, refuse_seed
from stitchcore.models.sources._registry import register_arch_builder, register_source
from stitchcore.models.sources.checkpoint import (
    classifier_rows,
    head_names,
    load_into,
    read_checkpoint,
    read_hub_weights,
)

__all__ = ["build_for_file", "load_torchvision", "torchvision_preprocess"]

logger = logging.getLogger(__name__)

_OPTIONS = ("weights", "num_classes", "seed")  # query options this source understands
_NO_WEIGHTS = ("none", "random", "false", "0")  # spellings of ?weights=none


def _check_name(name: str) -> None:
    import torchvision.models as tvm

    names = tvm.list_models(module=tvm)  # classification models only
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        other = name in tvm.list_models()
        hint = (
            "; only classification models are supported"
            if other
            else (f"; did you mean {', '.join('torchvision:' + c for c in close)}?" if close else "")
        )
        raise RefError(f"torchvision has no classification model {name!r}{hint}")


def _weights_enum(name: str) -> Any:
    import torchvision.models as tvm

    try:
        return tvm.get_model_weights(name)
    except (ValueError, KeyError):
        return None


def torchvision_preprocess(weights: Any) -> Preprocess:
    """Preprocess from a weights enum member's ``transforms()``; ImageNet 224 defaults when None."""
    t = weights.transforms() if weights is not None else None
    crop = getattr(t, "crop_size", None)
    if not crop:
        return Preprocess(size=(224, 224), channels=3, mean=IMAGENET_MEAN, std=IMAGENET_STD, resize=256)
    mode = getattr(getattr(t, "interpolation", None), "value", "bilinear")
    resize = getattr(t, "resize_size", None)  # the shorter side, then the centre crop (ImageClassification)
    return Preprocess(
        size=(int(crop[0]), int(crop[-1])),
        channels=3,
        mean=tuple(float(v) for v in t.mean),
        std=tuple(float(v) for v in t.std),
        interpolation=mode if mode in ("bilinear", "bicubic", "nearest") else "bilinear",
        resize=int(resize[0]) if resize and len(resize) == 1 else None,
    )


def _int(value: Any, key: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RefError(f"option {key}={value!r} must be an integer, e.g. ?{key}=10") from None


def _finisher(
    name: str, ref: str, weights: Any, source: str, num_classes: int | None, seed: int | None = None
) -> Callable[[nn.Module], LoadedModel]:
    """``seed``: the seed of random-init weights (recorded as ``meta["init_seed"]``), else None."""

    def finish(model: nn.Module) -> LoadedModel:
        enum = _weights_enum(name)
        pre = torchvision_preprocess(weights if weights is not None else (enum.DEFAULT if enum else None))
        meta: dict[str, Any] = {
            "arch": f"torchvision:{name}",
            "arch_kwargs": {"num_classes": num_classes or 1000},
            "weights": source,
        }
        if weights is not None and weights.meta.get("categories"):
            meta["class_names"] = list(weights.meta["categories"])
        if seed is not None:
            meta["init_seed"] = seed
        return hub_image_model(ref, model, pre, num_classes or 1000, meta)  # 1000: torchvision's default head

    return finish


@register_arch_builder("torchvision")
def build_for_file(
    name: str, kwargs: dict[str, Any], ref: str, sd: dict[str, Any] | None = None
) -> tuple[nn.Module, Callable[[nn.Module], LoadedModel]]:
    """Random-init ``name`` for ``file:...?arch=torchvision:NAME`` (option num_classes).

    Without ``num_classes`` the head has as many outputs as the classifier rows in ``sd``.
    """
    import torchvision.models as tvm

    _check_name(name)
    unknown = sorted(set(kwargs) - {"num_classes"})
    if unknown:
        raise RefError(f"unknown option {unknown[0]!r} for arch torchvision:{name}; use num_classes")
    num_classes = _int(kwargs.get("num_classes"), "num_classes")
    model = tvm.get_model(name, weights=None, **({"num_classes": num_classes} if num_classes else {}))
    if num_classes is None and sd:
        rows = classifier_rows(sd, head_names(model))
        if rows is not None and rows != _outputs(model):
            num_classes = rows
            model = tvm.get_model(name, weights=None, num_classes=rows)
    return model, _finisher(name, ref, None, "file", num_classes)


def _outputs(model: nn.Module) -> int | None:
    """Rows of the classifier of a freshly built model (its head size)."""
    return classifier_rows(model.state_dict(), head_names(model))


def _resolve_weights(ref: ModelRef) -> Any:
    value = ref.param("weights", "DEFAULT")
    if value.lower() in _NO_WEIGHTS:
        return None
    enum = _weights_enum(ref.name)
    if enum is None:
        raise SourceError(
            f"torchvision:{ref.name} has no pretrained weights; use torchvision:{ref.name}?weights=none"
        )
    if value.upper() == "DEFAULT":
        return enum.DEFAULT
    try:
        return enum[value]
    except KeyError:
        options = ", ".join(["DEFAULT", *[w.name for w in enum], "none"])
        raise RefError(
            f"torchvision:{ref.name} has no weights {value!r}; use ?weights= one of {options}"
        ) from None


def _offline_message(name: str, reason: str = "") -> str:
    why = f" ({reason})" if reason else " (offline?)"
    return (
        f"could not download pretrained weights for torchvision:{name}{why}. "
        f"Use torchvision:{name}@file=/path/to/weights.pth, "
        f"or torchvision:{name}?weights=none for random init"
    )


def _cached_path(url: str) -> str:
    """Where torch hub keeps the file of ``url``: ``$TORCH_HOME/hub/checkpoints/<its name>``."""
    import torch.hub

    return os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(urlparse(url).path))


def _pretrained_state_dict(name: str, weights: Any) -> dict[str, Any]:
    """The state dict of ``weights`` from the torch hub cache, downloaded there first when missing (checked
    against the hash in its name), read without running anything pickled in it."""
    import torch.hub

    cached = _cached_path(weights.url)
    if not os.path.exists(cached):
        if not host_reachable(urlparse(weights.url).hostname or ""):
            raise SourceError(_offline_message(name))
        named = torch.hub.HASH_REGEX.search(os.path.basename(cached))
        try:
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            torch.hub.download_url_to_file(weights.url, cached, named.group(1) if named else None, progress=False)
        except (OSError, RuntimeError, ValueError) as e:  # URLError is an OSError; a wrong hash a RuntimeError
            reason = (str(e).splitlines() or [type(e).__name__])[0][:160]
            raise SourceError(_offline_message(name, reason)) from e
    return read_hub_weights(cached, f"torchvision:{name}")


_LOADER_LOCK = threading.Lock()  # torchvision's weight loader is swapped while one pretrained model is built


def _build_pretrained(name: str, weights: Any, sd: dict[str, Any]) -> nn.Module:
    """``get_model(name, weights=weights)`` with ``sd`` as the weights' state dict.

    The builders know what the weights need (head size, aux heads, renamed keys) and fetch them through
    ``torchvision.models._api.load_state_dict_from_url`` (torch hub's, which unpickles with
    ``weights_only=False``); while this model is built that name hands out ``sd``, already read safely.
    """
    import torchvision
    import torchvision.models as tvm
    from torchvision.models import _api

    def already_read(url: str, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        if url != weights.url:
            raise SourceError(f"torchvision:{name} asked for a second weights file ({url}); "
                              f"use torchvision:{name}@file=/path/to/weights.pth")  # fmt: skip
        return sd

    if not callable(getattr(_api, "load_state_dict_from_url", None)):  # a torchvision that loads another way
        raise SourceError(f"torchvision {torchvision.__version__} loads pretrained weights in a way StitchLab "
                          f"cannot check; use torchvision:{name}@file=/path/to/weights.pth")  # fmt: skip
    with _LOADER_LOCK:
        hub_loader = _api.load_state_dict_from_url
        _api.load_state_dict_from_url = already_read
        try:
            return tvm.get_model(name, weights=weights)
        except (KeyError, RuntimeError, ValueError) as e:  # the cached file's tensors do not fit the model
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            raise CheckpointError(f"the downloaded weights {_cached_path(weights.url)} do not fit "
                                  f"torchvision:{name} ({reason}); delete that file so they download again, "
                                  f"or use torchvision:{name}@file=/path/to/weights.pth") from e  # fmt: skip
        finally:
            _api.load_state_dict_from_url = hub_loader


@register_source("torchvision")
def load_torchvision(ref: ModelRef, store: Any = None) -> LoadedModel:
    """Load ``torchvision:NAME[@file=PATH][?weights=DEFAULT|NAME|none&num_classes=N&seed=S]``."""
    import torchvision.models as tvm

    for key, _ in ref.params:
        if key not in _OPTIONS:
            raise RefError(f"unknown option {key!r} in '{ref}'; torchvision: refs take {', '.join(_OPTIONS)}")
    _check_name(ref.name)
    num_classes = _int(ref.param("num_classes"), "num_classes")
    extra = {"num_classes": num_classes} if num_classes else {}
    seed = parse_seed(ref)
    if ref.file is not None:
        refuse_seed(ref, "an @file= ref's weights come from its file")
        sd, _ = read_checkpoint(ref.file)
        model, _ = build_for_file(ref.name, extra, str(ref), sd)  # head sized by the file without num_classes
        load_into(model, sd, ref.file, f"torchvision:{ref.name}")
        return _finisher(ref.name, str(ref), None, ref.file, _outputs(model))(model)
    weights = _resolve_weights(ref)
    if weights is None:
        with seeded_init(seed):
            model = tvm.get_model(ref.name, weights=None, **extra)
        return _finisher(ref.name, str(ref), None, "random", num_classes, seed)(model)
    refuse_seed(ref, f"pretrained weights are not drawn: for random ones write {random_twin(str(ref), seed)}")
    if num_classes is not None and num_classes != len(weights.meta.get("categories", ())):
        raise RefError(
            f"num_classes={num_classes} needs random init: "
            f"torchvision:{ref.name}?weights=none&num_classes={num_classes}"
        )
    model = _build_pretrained(ref.name, weights, _pretrained_state_dict(ref.name, weights))
    classes = len(weights.meta.get("categories", ())) or None
    return _finisher(ref.name, str(ref), weights, f"pretrained:{weights.name}", classes)(model)
