"""``timm:NAME`` models through ``timm.create_model``.

Forms::

    timm:resnet18                               pretrained (hub, or the local HF/torch cache)
    timm:resnet18.a1_in1k                       a specific pretrained tag
    timm:resnet18?pretrained=false              random init, seed 0
    timm:resnet18?pretrained=false&seed=3       random init, seed 3 (the same weights in every process)
    timm:resnet18@file=/path/w.safetensors      local weights (.safetensors or .pt/.pth)
    timm:resnet18?pretrained=false&num_classes=10&in_chans=1

Offline, pretrained weights come from the local cache (``HF_HUB_CACHE`` or the
torch hub dir) without touching the network; when they are not there the
error names ``@file=`` and ``?pretrained=false`` within seconds.

Random init is built under its own RNG seeded ``seed`` (default 0, left out of the canonical ref), so
a ref names one set of weights everywhere; ``seed=`` on a pretrained or ``@file=`` ref is refused.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from torch import nn

from stitchcore.errors import RefError, SourceError
from stitchcore.models.loaded import LoadedModel, hub_image_model, seeded_init
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed, random_twin
from stitchcore.models.sources._hub import host_reachable, parse_bool, refuse_seed
from stitchcore.models.sources._registry import register_arch_builder, register_source
from stitchcore.models.sources.checkpoint import classifier_rows, load_into, read_checkpoint

__all__ = ["build_for_file", "load_timm", "timm_preprocess"]

logger = logging.getLogger(__name__)

_OPTIONS = ("pretrained", "num_classes", "in_chans", "seed")  # query options this source understands
_MODES = {"bilinear", "bicubic", "nearest", "area"}  # torch interpolate modes Preprocess can use


def _check_options(ref: ModelRef) -> None:
    for key, _ in ref.params:
        if key not in _OPTIONS:
            raise RefError(f"unknown option {key!r} in '{ref}'; timm: refs take {', '.join(_OPTIONS)}")


def _int_option(ref: ModelRef | None, kwargs: dict[str, Any], key: str) -> int | None:
    value = kwargs.get(key) if ref is None else ref.param(key)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RefError(f"option {key}={value!r} must be an integer, e.g. ?{key}=10") from None


def _check_name(name: str) -> None:
    """RefError with close names when timm does not know ``name`` (or its tag)."""
    import timm
    from timm.models import split_model_name_tag

    if name.startswith(("hf-hub:", "hf_hub:", "local-dir:")):
        return
    arch, tag = split_model_name_tag(name)
    if not timm.is_model(arch):
        close = difflib.get_close_matches(arch, timm.list_models(), n=3, cutoff=0.6)
        hint = (
            f"; did you mean {', '.join('timm:' + c for c in close)}?"
            if close
            else "; see timm.list_models()"
        )
        raise RefError(f"timm has no model {arch!r}{hint}")
    if tag:
        tags = timm.list_pretrained(f"{arch}.*")
        if name not in tags:
            raise RefError(
                f"timm model {arch!r} has no pretrained tag {tag!r}; tags: {', '.join(tags) or 'none'}"
            )


def _create(name: str, **kwargs: Any) -> nn.Module:
    import timm

    return timm.create_model(name, **{k: v for k, v in kwargs.items() if v is not None})


def timm_preprocess(model: nn.Module, in_chans: int | None = None) -> Preprocess:
    """Preprocess from ``timm.data.resolve_data_config``: crop size and crop_pct, mean, std, interpolation.

    ``in_chans`` (when the model was built with it) overrides the config's 3
    channels; mean/std are then averaged to one value unless they match.
    """
    from timm.data import resolve_data_config

    cfg = resolve_data_config({}, model=model)
    chans, h, w = cfg["input_size"]
    chans = int(in_chans or chans)
    mean, std = tuple(float(v) for v in cfg["mean"]), tuple(float(v) for v in cfg["std"])
    if len(mean) not in (1, chans):
        mean, std = (sum(mean) / len(mean),), (sum(std) / len(std),)
    mode = cfg.get("interpolation", "bilinear")
    # timm's eval transform (transforms_imagenet_eval, crop_mode "center"): the shorter side to
    # floor(size / crop_pct), then the centre crop.  Other crop modes ("squash", "border") are squashed to size.
    crop_pct = float(cfg.get("crop_pct") or 0.875)
    center = cfg.get("crop_mode", "center") == "center" and int(h) == int(w)
    return Preprocess(
        size=(int(h), int(w)),
        channels=chans,
        mean=mean,
        std=std,
        interpolation=mode if mode in _MODES else "bilinear",
        resize=math.floor(int(h) / crop_pct) if center else None,
    )


def _finisher(
    name: str, ref: str, weights: str, in_chans: int | None, seed: int | None = None
) -> Callable[[nn.Module], LoadedModel]:
    """``seed``: the seed of random-init weights (recorded as ``meta["init_seed"]``), else None."""

    def finish(model: nn.Module) -> LoadedModel:
        pre = timm_preprocess(model, in_chans)
        num_classes = getattr(model, "num_classes", None) or None
        cfg = getattr(model, "pretrained_cfg", None) or {}
        meta: dict[str, Any] = {
            "arch": f"timm:{name}",
            "arch_kwargs": {"num_classes": num_classes, "in_chans": pre.channels},
            "weights": weights,
        }
        if cfg.get("label_names"):
            meta["class_names"] = list(cfg["label_names"])
        if seed is not None:
            meta["init_seed"] = seed
        return hub_image_model(ref, model, pre, num_classes, meta)

    return finish


@register_arch_builder("timm")
def build_for_file(
    name: str, kwargs: dict[str, Any], ref: str, sd: dict[str, Any] | None = None
) -> tuple[nn.Module, Callable[[nn.Module], LoadedModel]]:
    """Random-init ``name`` for ``file:...?arch=timm:NAME`` (options num_classes, in_chans).

    Without ``num_classes`` the head has as many outputs as the classifier rows in ``sd``.
    """
    _check_name(name)
    unknown = sorted(set(kwargs) - {"num_classes", "in_chans"})
    if unknown:
        raise RefError(f"unknown option {unknown[0]!r} for arch timm:{name}; use num_classes or in_chans")
    in_chans = _int_option(None, kwargs, "in_chans")
    num_classes = _int_option(None, kwargs, "num_classes")
    if num_classes is None and sd:
        num_classes = classifier_rows(sd, _classifier_names(name))
    model = _create(name, pretrained=False, num_classes=num_classes, in_chans=in_chans)
    return model, _finisher(name, ref, "file", in_chans)


def _classifier_names(model_name: str) -> tuple[str, ...]:
    """timm's classifier module name(s) for ``model_name`` (from its pretrained config), else ()."""
    from timm.models import get_pretrained_cfg, split_model_name_tag

    try:
        cfg = get_pretrained_cfg(split_model_name_tag(model_name)[0])
    except RuntimeError:
        return ()
    head = cfg.classifier if cfg is not None else None
    return (head,) if isinstance(head, str) else tuple(head or ())


def _cached_weights(cfg: Any) -> str | None:
    """Path of already-downloaded pretrained weights for ``cfg``, or None."""
    import torch.hub

    if cfg.hf_hub_id:
        from huggingface_hub import constants, try_to_load_from_cache

        repo, _, revision = cfg.hf_hub_id.partition("@")
        names = [cfg.hf_hub_filename] if cfg.hf_hub_filename else ["model.safetensors", "pytorch_model.bin"]
        for filename in names:
            found = try_to_load_from_cache(
                repo, filename, cache_dir=constants.HF_HUB_CACHE, revision=revision or None
            )
            if isinstance(found, str) and os.path.exists(found):
                return found
    if cfg.url:
        path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(urlparse(cfg.url).path))
        if os.path.exists(path):
            return path
    return None


def _offline_message(name: str, reason: str = "") -> str:
    why = f" ({reason})" if reason else " (offline?)"
    return (
        f"could not download pretrained weights for timm:{name}{why}. "
        f"Use timm:{name}@file=/path/to/weights.safetensors, "
        f"or timm:{name}?pretrained=false for random init"
    )


def _create_pretrained(name: str, **kwargs: Any) -> nn.Module:
    from timm.models import get_pretrained_cfg, split_model_name_tag

    arch, tag = split_model_name_tag(name)
    cfg = (
        None
        if name.startswith(("hf-hub:", "hf_hub:", "local-dir:"))
        else get_pretrained_cfg(name if tag else arch)
    )
    if cfg is not None:
        if not (cfg.hf_hub_id or cfg.url or cfg.file):
            raise SourceError(
                f"timm:{name} has no pretrained weights; use timm:{name}?pretrained=false or @file=PATH"
            )
        cached = _cached_weights(cfg)
        if cached:
            logger.info("timm:%s: pretrained weights from the local cache %s", name, cached)
            return _create(name, pretrained=True, pretrained_cfg_overlay={"file": cached}, **kwargs)
        host = "huggingface.co" if cfg.hf_hub_id else urlparse(cfg.url or "").hostname
    else:
        host = "huggingface.co"
    if host and not host_reachable(host):
        raise SourceError(_offline_message(name))
    try:
        return _create(name, pretrained=True, **kwargs)
    except (OSError, RuntimeError, ValueError) as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0][:160]
        raise SourceError(_offline_message(name, reason)) from e


@register_source("timm")
def load_timm(ref: ModelRef, store: Any = None) -> LoadedModel:
    """Load ``timm:NAME[@file=PATH][?pretrained=..&num_classes=..&in_chans=..&seed=..]``."""
    _check_options(ref)
    _check_name(ref.name)
    num_classes = _int_option(ref, {}, "num_classes")
    in_chans = _int_option(ref, {}, "in_chans")
    seed = parse_seed(ref)
    if ref.file is not None:
        refuse_seed(ref, "an @file= ref's weights come from its file")
        sd, _ = read_checkpoint(ref.file)
        if num_classes is None:
            num_classes = classifier_rows(sd, _classifier_names(ref.name))
        model = _create(ref.name, pretrained=False, num_classes=num_classes, in_chans=in_chans)
        load_into(model, sd, ref.file, f"timm:{ref.name}")
        return _finisher(ref.name, str(ref), ref.file, in_chans)(model)
    if parse_bool(ref, "pretrained", True):
        twin = random_twin(str(ref), seed)
        refuse_seed(ref, f"pretrained weights are not drawn: for random ones write {twin}")
        model = _create_pretrained(ref.name, num_classes=num_classes, in_chans=in_chans)
        return _finisher(ref.name, str(ref), "pretrained", in_chans)(model)
    with seeded_init(seed):
        model = _create(ref.name, pretrained=False, num_classes=num_classes, in_chans=in_chans)
    return _finisher(ref.name, str(ref), "random", in_chans, seed)(model)
