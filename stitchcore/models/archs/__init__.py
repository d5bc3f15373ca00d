"""Built-in architectures sized for a CPU, behind one registry.

Each architecture is an ``nn.Module`` class with a frozen ``config_cls``
dataclass (its options and their defaults).  :func:`create_arch` resolves the
options, builds the model and records ``model.arch_name`` and
``model.arch_kwargs`` (JSON-ready) so a checkpoint can rebuild it exactly.

>>> m = create_arch("cnn", num_classes=3)
>>> m.arch_name, m.arch_kwargs["num_classes"]
('cnn', 3)
>>> list_archs()
['mlp', 'cnn', 'resnet', 'gpt', 'vit', 'swin']
>>> create_arch("cnm")
Traceback (most recent call last):
...
stitchcore.errors.RefError: unknown architecture 'cnm'; did you mean 'cnn'? (known: mlp, cnn, resnet, gpt, vit, swin)

Options may arrive as strings (from a ref query such as ``?blocks=2,2,2,2``) or
lists (from JSON); they are coerced to the type of the default value.
Module names are the cut-point names, so every layer is a named submodule and
every ``forward`` is a plain sequence of module calls (torch.fx-traceable).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable
from typing import Any

from torch import nn

from stitchcore.errors import RefError
from stitchcore.models.archs.cnn import CNN
from stitchcore.models.archs.gpt import GPT
from stitchcore.models.archs.mlp import MLP
from stitchcore.models.archs.resnet import ResNet
from stitchcore.models.archs.swin import Swin
from stitchcore.models.archs.vit import ViT
from stitchcore.registry import Registry

__all__ = [
    "arch_input_kind",
    "arch_recipe_defaults",
    "register_arch",
    "create_arch",
    "list_archs",
    "arch_defaults",
    "arch_config",
    "CNN",
    "GPT",
    "MLP",
    "ResNet",
    "Swin",
    "ViT",
]

# name -> model class; the built-ins register at the end of this module, so any import of it has them
_ARCHS: Registry[type[nn.Module]] = Registry("architecture", RefError)


def register_arch(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator adding an architecture under ``name``; a name can be registered once.

    The class needs a ``config_cls`` dataclass attribute and ``__init__(self, config)``.
    """

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if not dataclasses.is_dataclass(getattr(cls, "config_cls", None)):
            raise TypeError(f"{cls.__qualname__} needs a dataclass attribute 'config_cls' to be registered")
        return _ARCHS.register(name)(cls)

    return deco


def list_archs(pattern: str = "*") -> list[str]:
    """Registered architecture names matching the glob ``pattern``, in registration order."""
    return _ARCHS.list(pattern)


def _arch_class(name: str) -> type[nn.Module]:
    """The class registered as ``name``; unknown: RefError naming the close names."""
    return _ARCHS.get(name)


def arch_input_kind(name: str) -> str:
    """``"image"`` or ``"tokens"``: what architecture ``name`` takes as input."""
    return getattr(_arch_class(name), "input_kind", "image")


def arch_recipe_defaults(name: str) -> dict[str, Any]:
    """Training defaults architecture ``name`` needs beyond the zoo recipe's (the CLI and the Models page
    start from them, the Language page's char-GPT form too; a recipe stays explicit, so run ids never depend on them).

    >>> arch_recipe_defaults("vit"), arch_recipe_defaults("gpt"), arch_recipe_defaults("cnn")
    ({'optimizer': 'adamw', 'epochs': 40}, {'optimizer': 'adamw'}, {})
    """
    return dict(getattr(_arch_class(name), "recipe_defaults", {}))


def arch_defaults(name: str) -> dict[str, Any]:
    """Default options of architecture ``name`` as a JSON-ready dict."""
    return _to_json(_arch_class(name).config_cls())


def _to_json(config: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(config)))


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _coerce_scalar(value: Any, like: Any) -> Any:
    """``value`` converted to the type of ``like`` (bool, int, float or str); ValueError when impossible."""
    if isinstance(like, bool):
        return _parse_bool(value) if isinstance(value, str) else bool(value)
    if isinstance(like, int):
        if isinstance(value, bool):
            raise ValueError(value)
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(value)
            return int(value)
        return int(value)
    if isinstance(like, float):
        if isinstance(value, bool):
            raise ValueError(value)
        return float(value)
    return str(value)


def _coerce(value: Any, default: Any) -> Any:
    """Coerce one option to the type of its default (tuples element-wise)."""
    if isinstance(default, tuple):
        if isinstance(value, str):
            text = value.strip().strip("()[]")
            items: list[Any] = [p.strip() for p in text.split(",") if p.strip()]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            items = [value]
        like = default[0] if default else 0
        return tuple(_coerce_scalar(v, like) for v in items)
    return _coerce_scalar(value, default)


def arch_config(name: str, **kwargs: Any) -> Any:
    """The resolved config dataclass for ``name`` with ``kwargs`` coerced and validated."""
    cls = _arch_class(name)
    defaults = cls.config_cls()
    fields = {f.name for f in dataclasses.fields(defaults)}
    resolved = {}
    for key, value in kwargs.items():
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise RefError(
                f"unknown option {key!r} for architecture {name!r}{hint}; "
                f"options: {', '.join(sorted(fields))}"
            )
        default = getattr(defaults, key)
        try:
            resolved[key] = _coerce(value, default)
        except (TypeError, ValueError):
            kind = (
                f"a list of {type(default[0]).__name__}"
                if isinstance(default, tuple) and default
                else type(default).__name__
            )
            raise RefError(
                f"option {key}={value!r} for architecture {name!r} must be {kind}, "
                f"e.g. {key}={_spell(default)}"
            ) from None
    return cls.config_cls(**resolved)


def _spell(default: Any) -> str:
    return ",".join(str(v) for v in default) if isinstance(default, tuple) else str(default).lower()


def create_arch(name: str, **kwargs: Any) -> nn.Module:
    """Build architecture ``name`` (random init from torch's global RNG) with options ``kwargs``.

    Records ``model.arch_name`` and ``model.arch_kwargs`` (all options, resolved, JSON-ready).
    Unknown names or options raise :class:`RefError` naming the valid ones.
    """
    config = arch_config(name, **kwargs)
    model = _arch_class(name)(config)
    model.arch_name = name
    model.arch_kwargs = _to_json(config)
    return model


for _name, _cls in (("mlp", MLP), ("cnn", CNN), ("resnet", ResNet), ("gpt", GPT), ("vit", ViT), ("swin", Swin)):
    register_arch(_name)(_cls)
del _name, _cls
