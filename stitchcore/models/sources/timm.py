"""``timm:NAME`` models through ``timm.create_model``.

Forms::

    timm:resnet18                               pretrained (hub, or the local HF/torch cache)
    timm:resnet18.a1_in1k                       a specific pretrained tag
    timm:resnet18?pretrained=false              random init, seed 0
    timm:resnet18?pretrained=false&seed=3       random init, seed 3 (the same weights in every process)
    timm:resnet18@file=/path/w.safetensors      local weights (.safetensors or .pt/.pth)
    timm:resnet18?pretrained=false&num_classes=10&in_chans=1
    timm:vit_small_patch14_reg4_dinov2?img_size=224   a ViT at another input size (its position grid resampled)

Offline, pretrained weights come from the local cache (``HF_HUB_CACHE`` or the
torch hub dir) without touching the network; when they are not there the
error names ``@file=`` and ``?pretrained=false`` within seconds.

Random init is built under its own RNG seeded ``seed`` (default 0, left out of the canonical ref), so
a ref names one set of weights everywhere; ``seed=`` on a pretrained or ``@file=`` ref is refused.

Pretrained weights are fetched into the cache first (when missing) and read from there by
:func:`~stitchcore.models.sources.checkpoint.read_hub_weights` (safetensors, or ``torch.load(weights_only=True)``),
then handed to timm as a state dict: timm's own loader is never given a file (one of its paths retries a failed
weights-only load with a full unpickle).  A cache file that holds pickled code is refused in one line.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from torch import nn

from stitchcore.errors import CheckpointError, RefError, SourceError
from stitchcore.models.loaded import LoadedModel, hub_image_model, seeded_init
from stitchcore.models.memory import check_buildable
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed, random_twin
from stitchcore.models.sources._hub import (
    check_folder_files,
    host_reachable,
    parse_bool,
    read_json_config,
    refuse_seed,
)
from stitchcore.models.sources._registry import register_arch_builder, register_source
from stitchcore.models.sources.checkpoint import classifier_rows, load_into, read_checkpoint, read_hub_weights

__all__ = ["build_for_file", "load_timm", "pretrained_at_hand", "timm_preprocess"]

logger = logging.getLogger(__name__)

_OPTIONS = ("pretrained", "num_classes", "in_chans", "seed", "img_size")  # query options this source understands
_MODES = {"bilinear", "bicubic", "nearest", "area"}  # torch interpolate modes Preprocess can use
_MAX_SIDE = 8192  # pixels on an input side (timm's pretrained configs take at most ~1000)
_MAX_REPEATS = 1024  # a local-dir config's depth / layers / blocks per stage: each is built on meta to count it
_REPEAT_WORDS = ("depth", "layer", "block", "stage")  # model_args keys that say how often a module repeats
_FOLDER_FIX = "give a folder written by timm's save_for_hf() (config.json and the weights)"


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


def _size_option(ref: ModelRef | None, kwargs: dict[str, Any]) -> int | None:
    """``img_size``: a side in pixels (8 to _MAX_SIDE), else RefError in one line."""
    size = _int_option(ref, kwargs, "img_size")
    if size is not None and not 8 <= size <= _MAX_SIDE:
        raise RefError(f"img_size={size} is no input side; give 8 to {_MAX_SIDE} pixels, e.g. ?img_size=224")
    return size


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

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    try:
        return timm.create_model(name, **kwargs)
    except TypeError as e:
        if "img_size" not in kwargs or "img_size" not in str(e):
            raise
        raise RefError(f"timm:{name} takes no img_size (only models with a fixed patch grid, such as ViTs, do); "
                       "drop ?img_size=") from None  # fmt: skip


def _checked(cfg: dict[str, Any], what: str) -> tuple[int, int, int, tuple[float, ...], tuple[float, ...], float]:
    """``(chans, h, w, mean, std, crop_pct)`` of a resolved data config, each checked (a local-dir folder's
    config.json sets them): SourceError in one line for a value no model has."""

    def bad(key: str, rule: str) -> SourceError:
        return SourceError(f"{what}: its pretrained_cfg {key} is {str(cfg.get(key))[:40]!r}, not {rule}; fix "
                           "config.json or save the model again with timm's save_for_hf()")  # fmt: skip

    size = cfg.get("input_size")
    if not (isinstance(size, (list, tuple)) and len(size) == 3 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                       for v in size)):  # fmt: skip
        raise bad("input_size", "[channels, height, width] in whole numbers")
    chans, h, w = size
    if not (1 <= chans <= 64 and 1 <= h <= _MAX_SIDE and 1 <= w <= _MAX_SIDE):
        raise bad("input_size", f"1 to 64 channels and sides of 1 to {_MAX_SIDE} pixels")
    values = {}
    for key in ("mean", "std"):
        v = cfg.get(key)
        v = v if isinstance(v, (list, tuple)) else [v]
        if not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
            raise bad(key, "a list of finite numbers")
        values[key] = tuple(float(x) for x in v)
    if min(values["std"]) <= 0:
        raise bad("std", "positive numbers")
    crop = cfg.get("crop_pct") or 0.875
    if isinstance(crop, bool) or not isinstance(crop, (int, float)) or not 0 < crop <= 4:
        raise bad("crop_pct", "a fraction above 0 (at most 4)")
    return chans, h, w, values["mean"], values["std"], float(crop)


def timm_preprocess(model: nn.Module, in_chans: int | None = None, what: str = "the timm model",
                    img_size: int | None = None) -> Preprocess:  # fmt: skip
    """Preprocess from ``timm.data.resolve_data_config``: crop size and crop_pct, mean, std, interpolation.

    ``in_chans`` (when the model was built with it) overrides the config's 3
    channels; mean/std are then averaged to one value unless they match.  ``what`` names the model in the
    one-line SourceError for a config value no model has (a local-dir folder's).  ``img_size`` (a ViT built at
    another size) replaces the config's crop size, at the config's crop_pct.
    """
    from timm.data import resolve_data_config

    try:
        cfg = resolve_data_config({}, model=model)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:  # a folder's pretrained_cfg
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        raise SourceError(f"{what}: its pretrained_cfg does not describe the input ({reason}); fix config.json "
                          "or save the model again with timm's save_for_hf()") from e  # fmt: skip
    chans, h, w, mean, std, crop_pct = _checked(cfg, what)
    h, w = (img_size, img_size) if img_size else (h, w)
    chans = int(in_chans or chans)
    if len(mean) not in (1, chans):
        mean, std = (sum(mean) / len(mean),), (sum(std) / len(std),)
    mode = cfg.get("interpolation", "bilinear")
    # timm's eval transform (transforms_imagenet_eval, crop_mode "center"): the shorter side to
    # floor(size / crop_pct), then the centre crop.  Other crop modes ("squash", "border") are squashed to size.
    center = cfg.get("crop_mode", "center") == "center" and h == w
    return Preprocess(
        size=(h, w),
        channels=chans,
        mean=mean,
        std=std,
        interpolation=mode if mode in _MODES else "bilinear",
        resize=math.floor(h / crop_pct) if center else None,
    )


def _finisher(
    name: str, ref: str, weights: str, in_chans: int | None, seed: int | None = None, img_size: int | None = None
) -> Callable[[nn.Module], LoadedModel]:
    """``seed``: the seed of random-init weights (recorded as ``meta["init_seed"]``), else None."""

    def finish(model: nn.Module) -> LoadedModel:
        pre = timm_preprocess(model, in_chans, f"timm:{name}", img_size)
        num_classes = getattr(model, "num_classes", None) or None
        cfg = getattr(model, "pretrained_cfg", None) or {}
        meta: dict[str, Any] = {
            "arch": f"timm:{name}",
            "arch_kwargs": {"num_classes": num_classes, "in_chans": pre.channels,
                            **({"img_size": img_size} if img_size else {})},
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
    """Random-init ``name`` for ``file:...?arch=timm:NAME`` (options num_classes, in_chans, img_size).

    Without ``num_classes`` the head has as many outputs as the classifier rows in ``sd``.
    """
    _check_name(name)
    unknown = sorted(set(kwargs) - {"num_classes", "in_chans", "img_size"})
    if unknown:
        raise RefError(f"unknown option {unknown[0]!r} for arch timm:{name}; use num_classes, in_chans or img_size")
    in_chans, img_size = _int_option(None, kwargs, "in_chans"), _size_option(None, kwargs)
    num_classes = _int_option(None, kwargs, "num_classes")
    if num_classes is None and sd:
        num_classes = classifier_rows(sd, _classifier_names(name))
    model = _create(name, pretrained=False, num_classes=num_classes, in_chans=in_chans, img_size=img_size)
    return model, _finisher(name, ref, "file", in_chans, img_size=img_size)


def _classifier_names(model_name: str) -> tuple[str, ...]:
    """timm's classifier module name(s) for ``model_name`` (from its pretrained config), else ()."""
    from timm.models import get_pretrained_cfg, split_model_name_tag

    try:
        cfg = get_pretrained_cfg(split_model_name_tag(model_name)[0])
    except RuntimeError:
        return ()
    head = cfg.classifier if cfg is not None else None
    return (head,) if isinstance(head, str) else tuple(head or ())


def _weight_names(cfg: Any) -> list[str]:
    """The files timm looks for in ``cfg``'s Hugging Face repo, safetensors first (timm's safe alternatives)."""
    if not cfg.hf_hub_filename:
        return ["model.safetensors", "pytorch_model.bin"]
    from timm.models._hub import _get_safe_alternatives

    return [*_get_safe_alternatives(cfg.hf_hub_filename), cfg.hf_hub_filename]


def _cached_weights(cfg: Any) -> str | None:
    """Path of already-downloaded pretrained weights for ``cfg``, or None."""
    import torch.hub

    if cfg.hf_hub_id:
        from huggingface_hub import constants, try_to_load_from_cache

        repo, _, revision = cfg.hf_hub_id.partition("@")
        for filename in _weight_names(cfg):
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


def _download(cfg: Any) -> str:
    """Fetch ``cfg``'s pretrained weights into the cache (HF hub cache, else the torch hub dir); their path.

    Only the file is fetched: nothing is read or unpickled here.
    """
    if cfg.hf_hub_id:
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        repo, _, revision = cfg.hf_hub_id.partition("@")
        for filename in _weight_names(cfg):
            try:
                return hf_hub_download(repo, filename, revision=revision or None, cache_dir=constants.HF_HUB_CACHE)
            except EntryNotFoundError:
                continue
        raise OSError(f"no {' or '.join(_weight_names(cfg))} in {repo}")
    from timm.models._hub import download_cached_file

    return download_cached_file(cfg.url, check_hash=False, progress=False)  # as timm: not every name holds a hash


def _offline_message(name: str, reason: str = "") -> str:
    why = f" ({reason})" if reason else " (offline?)"
    return (
        f"could not download pretrained weights for timm:{name}{why}. "
        f"Use timm:{name}@file=/path/to/weights.safetensors, "
        f"or timm:{name}?pretrained=false for random init"
    )


def _from_cache_file(name: str, cfg: Any, path: str, **kwargs: Any) -> nn.Module:
    """``name`` with the pretrained weights in ``path`` (a cache file), read safely and handed to timm as a state
    dict (timm still adapts the head and input channels); a ``.npz`` (read by timm with numpy, which unpickles
    nothing) goes to timm as a file."""
    if path.endswith(".npz") or cfg.custom_load:
        overlay: dict[str, Any] = {"file": path}
    else:
        overlay = {"state_dict": read_hub_weights(path, f"timm:{name}")}
    try:
        return _create(name, pretrained=True, pretrained_cfg_overlay=overlay, **kwargs)
    except (KeyError, RuntimeError, ValueError, OSError) as e:  # the file's tensors do not fit the model
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise CheckpointError(f"the downloaded weights {path} do not fit timm:{name} ({reason}); delete that "
                              f"file so they download again, or use timm:{name}@file=/path/to/weights.safetensors"
                              ) from e  # fmt: skip


def pretrained_at_hand(name: str) -> bool:
    """True when timm model ``name``'s pretrained weights are in the local cache (HF hub or torch hub dir): it loads
    without the network.  Nothing is fetched.

    >>> pretrained_at_hand("resnet18.a1_in1k") in (True, False)
    True
    """
    from timm.models import get_pretrained_cfg, split_model_name_tag

    _check_name(name)
    arch, tag = split_model_name_tag(name)
    cfg = get_pretrained_cfg(name if tag else arch)
    return cfg is not None and _cached_weights(cfg) is not None


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
        cached = cfg.file if cfg.file and not (cfg.hf_hub_id or cfg.url) else _cached_weights(cfg)
        if cached:
            logger.info("timm:%s: pretrained weights from the local cache %s", name, cached)
            return _from_cache_file(name, cfg, cached, **kwargs)
        host = "huggingface.co" if cfg.hf_hub_id else urlparse(cfg.url or "").hostname
        if host and not host_reachable(host):
            raise SourceError(_offline_message(name))
        try:
            path = _download(cfg)
        except (OSError, RuntimeError, ValueError) as e:  # HTTP errors are OSErrors
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            raise SourceError(_offline_message(name, reason)) from e
        return _from_cache_file(name, cfg, path, **kwargs)
    local = name.startswith("local-dir:")
    if local:
        _check_local_dir(name, **kwargs)
    elif not host_reachable("huggingface.co"):
        raise SourceError(_offline_message(name))
    try:  # hf-hub: / local-dir: names: timm reads the folder's weights with weights_only=True or safetensors
        return _create(name, pretrained=True, **kwargs)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, AttributeError, AssertionError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        if local and "weights_only" in str(e):  # timm's weights-only load refused the folder's pickle
            raise SourceError(f"refused timm:{name}: its weights file holds pickled Python objects besides "
                              "tensors, and loading it could run code; save the weights as model.safetensors"
                              ) from e  # fmt: skip
        if local:
            raise SourceError(f"could not load timm:{name} ({reason}); {_FOLDER_FIX}") from e
        raise SourceError(_offline_message(name, reason)) from e


def _check_local_dir(name: str, **kwargs: Any) -> None:
    """A ``local-dir:`` folder's config.json, read before timm sees it: bounded (:func:`read_json_config`), an
    object naming an architecture timm knows, with ``model_args`` / ``pretrained_cfg`` objects and repeats
    (depth, layers, blocks) few enough to build; the model is then counted on the meta device and refused when
    this machine cannot hold it."""
    import timm

    what = f"refused timm:{name}"
    folder = Path(name.partition(":")[2]).expanduser()
    if not folder.is_dir():
        raise SourceError(f"{what}: {folder} is no folder; {_FOLDER_FIX}")
    check_folder_files(folder, what, _FOLDER_FIX)
    config = read_json_config(folder / "config.json", what, fix=_FOLDER_FIX)
    arch = config.get("architecture")
    if not isinstance(arch, str) or not timm.is_model(arch):
        raise SourceError(f"{what}: config.json's architecture {str(arch)[:60]!r} is no timm model; {_FOLDER_FIX}")
    for key in ("model_args", "pretrained_cfg"):
        if not isinstance(config.get(key, {}), dict):
            raise SourceError(f"{what}: config.json's {key} is not an object; {_FOLDER_FIX}")
    for key, value in config.get("model_args", {}).items():
        if any(word in key for word in _REPEAT_WORDS):
            counts = value if isinstance(value, (list, tuple)) else [value]
            if any(isinstance(n, int) and not 0 <= n <= _MAX_REPEATS for n in counts):
                raise SourceError(f"{what}: config.json's model_args {key} is {str(value)[:40]}, more repeats "
                                  f"than the {_MAX_REPEATS} any model has; {_FOLDER_FIX}")  # fmt: skip
    check_buildable(f"timm:{name}", lambda: _create(name, pretrained=False, **kwargs),
                    "its config.json asks for a larger model than this machine holds")  # fmt: skip


@register_source("timm")
def load_timm(ref: ModelRef, store: Any = None) -> LoadedModel:
    """Load ``timm:NAME[@file=PATH][?pretrained=..&num_classes=..&in_chans=..&seed=..]``."""
    _check_options(ref)
    _check_name(ref.name)
    num_classes = _int_option(ref, {}, "num_classes")
    in_chans, img_size = _int_option(ref, {}, "in_chans"), _size_option(ref, {})
    seed = parse_seed(ref)
    if ref.file is not None:
        refuse_seed(ref, "an @file= ref's weights come from its file")
        sd, _ = read_checkpoint(ref.file)
        if num_classes is None:
            num_classes = classifier_rows(sd, _classifier_names(ref.name))
        model = _create(ref.name, pretrained=False, num_classes=num_classes, in_chans=in_chans, img_size=img_size)
        load_into(model, sd, ref.file, f"timm:{ref.name}")
        return _finisher(ref.name, str(ref), ref.file, in_chans, img_size=img_size)(model)
    if parse_bool(ref, "pretrained", True):
        twin = random_twin(str(ref), seed)
        refuse_seed(ref, f"pretrained weights are not drawn: for random ones write {twin}")
        model = _create_pretrained(ref.name, num_classes=num_classes, in_chans=in_chans, img_size=img_size)
        return _finisher(ref.name, str(ref), "pretrained", in_chans, img_size=img_size)(model)
    with seeded_init(seed):
        model = _create(ref.name, pretrained=False, num_classes=num_classes, in_chans=in_chans, img_size=img_size)
    return _finisher(ref.name, str(ref), "random", in_chans, seed, img_size)(model)
