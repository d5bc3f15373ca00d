"""What two-model runs open with: models A and B of the input kind they need (:func:`load_pair`: the
image kinds and the LM kinds; similarity measures any pair, so it loads its own), which dataset an
image run uses (:func:`pair_dataset`), and whether the models' heads fit it.

Every image experiment (stitch, matrix, similarity, sweep, assemble) takes ``dataset=None`` to mean
"the data B was trained on" (else A's); a model whose output count differs from the
dataset's classes is refused before anything trains.  Pages call the same functions to
say so before Launch, and to offer the fix for a random-init hub model: its ref with
``num_classes`` set (its head is random anyway).

>>> from stitchcore.data import load_dataset
>>> from stitchcore.models.sources import load_model
>>> b = load_model("timm:resnet18?pretrained=false")
>>> head_mismatch(b, load_dataset("digits"), "B")
'model B (timm:resnet18?pretrained=false) has 1000 outputs but digits has 10 classes'
>>> head_fix(b, 10)
'timm:resnet18?num_classes=10&pretrained=false'
"""

from __future__ import annotations

from typing import Any

from stitchcore.data.images import ImageDataset, load_dataset
from stitchcore.errors import DataError, StitchError
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import ModelRef, parse_ref
from stitchcore.models.sources import load_model

__all__ = ["check_head_classes", "default_dataset", "head_fix", "head_mismatch", "load_pair", "pair_dataset", "resolve_dataset"]

_HEAD_SCHEMES = ("timm", "torchvision")  # sources whose refs take ?num_classes= for a random-init head


def default_dataset(a: LoadedModel, b: LoadedModel) -> str | None:
    """The dataset a run uses when its spec names none: B's training set, else A's, else None."""
    return b.dataset or a.dataset


def resolve_dataset(spec_dataset: str | None, a: LoadedModel, b: LoadedModel) -> str:
    """The spec's dataset, else B's training dataset, else A's; DataError if none is known."""
    name = spec_dataset or default_dataset(a, b)
    if name is None:
        raise DataError(
            f"neither {a.ref} nor {b.ref} says which data it was trained on; choose a dataset "
            "(--dataset on the command line, e.g. digits, cifar10)"
        )
    return name


def head_mismatch(model: LoadedModel, ds: ImageDataset, role: str) -> str | None:
    """Why ``model``'s outputs do not fit ``ds``'s classes, or None when they do (or it has no head)."""
    if model.num_classes is None or model.num_classes == ds.num_classes:
        return None
    return f"model {role} ({model.ref}) has {model.num_classes} outputs but {ds.name} has {ds.num_classes} classes"


def head_fix(model: LoadedModel, num_classes: int) -> str | None:
    """For a random-init timm/torchvision model, its ref with ``?num_classes=`` set; else None.

    A pretrained head cannot be resized without changing what the model is, so those get no fix.
    """
    if model.meta.get("weights") != "random":
        return None
    ref = parse_ref(model.ref)
    if ref.scheme not in _HEAD_SCHEMES:
        return None
    params = {**ref.param_dict(), "num_classes": str(num_classes)}
    return str(ModelRef(scheme=ref.scheme, name=ref.name, file=ref.file, params=tuple(params.items())))


def check_head_classes(model: LoadedModel, ds: ImageDataset, role: str) -> None:
    """DataError when ``model``'s outputs do not fit ``ds`` (see :func:`head_mismatch`), with the fix."""
    why = head_mismatch(model, ds, role)
    if why is None:
        return
    fix = head_fix(model, ds.num_classes)
    hint = f"use {fix} (a random head of {ds.num_classes} classes)" if fix else \
        "pick the dataset the model was trained on (--dataset)"
    raise DataError(f"{why}; {hint}")


def load_pair(spec: Any, store: Any, *, input_kind: str, hint: str) -> tuple[LoadedModel, LoadedModel]:
    """A and B of a spec (its ``a`` and ``b`` refs, through the store), both of ``input_kind`` ("image" or
    "tokens"); StitchError naming the model and ``hint`` (what to use instead) otherwise."""
    a, b = load_model(spec.a, store=store), load_model(spec.b, store=store)
    for m, role in ((a, "A"), (b, "B")):
        if m.input_kind != input_kind:
            what = "a language model" if input_kind == "image" else "not a language model"
            raise StitchError(f"model {role} ({m.ref}) is {what}; {hint}")
    return a, b


def pair_dataset(spec: Any, a: LoadedModel, b: LoadedModel) -> ImageDataset:
    """The data a run of ``spec`` on A and B uses, loaded: its ``dataset``, else B's, else A's."""
    return load_dataset(resolve_dataset(spec.dataset, a, b))
