"""What a sweep runs on: the swept cuts (A's and B's of one name, in A's order), A and B loaded, and the data
(adapter training set and every evaluation set its metrics read); :func:`check_sweep`, everything the run checks
before its first position."""

from __future__ import annotations

from dataclasses import dataclass

from stitchcore.cuts import Cut, get_cut, list_cuts
from stitchcore.data.images import ImageDataset, load_dataset
from stitchcore.errors import AdapterError, CutError, StitchError
from stitchcore.experiments.dataset_check import check_head_classes, head_mismatch, load_pair, pair_dataset
from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.measures.traits import check_classes, metric_dataset, parse_metric
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.adapters import compatibility
from stitchcore.store.results import Store

__all__ = ["check_sweep"]


def _positions(spec: SweepSpec, a: LoadedModel, b: LoadedModel) -> list[tuple[Cut, Cut]]:
    """The swept cuts as (A's cut, B's cut of the same name), in A's execution order: every cut of A (or the
    named ones; CutError naming the close ones for a name A lacks).  Widths may differ (a wider A into a
    thinner B): the adapter maps A's channels to B's; AdapterError when it cannot join the pair."""
    cuts_a = list_cuts(a)
    cuts_b = {c.name: c for c in list_cuts(b)}
    by_name = {c.name: c for c in cuts_a}
    names = spec.positions or tuple(c.name for c in cuts_a)
    unknown = [n for n in names if n not in by_name]
    for n in unknown:
        try:
            canonical = get_cut(a, n).name
        except CutError:
            continue
        raise CutError(f"{n} is another name of {canonical} in {a.ref}; sweep positions are canonical cut names: "
                       f"use {canonical}")
    if unknown:
        raise CutError(f"no cut(s) {unknown} in {a.ref}; its cuts are: {', '.join(by_name)}")
    for n in names:
        other = cuts_b.get(n)
        why = "it has no such cut" if other is None else compatibility(by_name[n], other, spec.adapter)
        if why is not None:
            raise AdapterError(
                f"a sweep joins A and B at cuts of the same name: {a.ref}[{n}] is {by_name[n].shape} and {b.ref} "
                f"cannot take it there ({why}); pick two models of one architecture (widths may differ)"
            )
    order = [c.name for c in cuts_a]
    return [(by_name[n], cuts_b[n]) for n in sorted(names, key=order.index)]


@dataclass
class _Data:
    """Datasets of one sweep: adapter training data and every evaluation set the metrics read."""

    train: ImageDataset
    base: ImageDataset  # the evaluation set proper (accuracy, per-class, simplicity)
    evals: dict[str, ImageDataset]  # metric_dataset name -> dataset (base included)
    metric_sets: dict[str, str]  # metric key -> evaluation dataset name
    n_train: int
    n_test: int
    a_own: _Data | None = None  # A's reference data when A's head is another task's (a coarse-label A)


def _own_data(spec: SweepSpec, a: LoadedModel, base: ImageDataset) -> _Data | None:
    """A's own task when its head does not fit ``base`` (Bansal et al.'s coarse-label A: only A's bottom is used,
    so its head may be another task's); accuracy-only sweeps, A's reference scored on A's own data."""
    if head_mismatch(a, base, "A") is None or set(spec.metrics) != {"accuracy"} or not a.dataset:
        return None
    own = load_dataset(a.dataset)
    if head_mismatch(a, own, "A") is not None or own.image_shape != base.image_shape:
        return None
    n_test = len(own.labels("test")) if spec.max_test is None else min(spec.max_test, len(own.labels("test")))
    return _Data(own, own, {own.name: own}, {"accuracy": own.name}, 0, n_test)


def _load_data(spec: SweepSpec, a: LoadedModel, b: LoadedModel) -> _Data:
    base = pair_dataset(spec, a, b)
    check_head_classes(b, base, "B")
    a_own = _own_data(spec, a, base)
    if a_own is None:
        check_head_classes(a, base, "A")
    train = load_dataset(spec.train_data) if spec.train_data else base
    if train.image_shape != base.image_shape or train.num_classes != base.num_classes:
        raise StitchError(f"train_data {train.name} ({train.image_shape}, {train.num_classes} classes) does not match"
                          f" {base.name} ({base.image_shape}, {base.num_classes}); use a variant of the same data")
    metric_sets = {}
    for key in spec.metrics:
        metric = parse_metric(key)
        check_classes(metric, base.num_classes)
        metric_sets[key] = metric_dataset(metric, base.name)
    evals = {base.name: base}
    for name in metric_sets.values():
        evals.setdefault(name, load_dataset(name))
    n_train = len(train.labels("train")) if spec.max_train is None else min(spec.max_train, len(train.labels("train")))
    n_test = min(len(ds.labels("test")) for ds in evals.values())
    n_test = n_test if spec.max_test is None else min(spec.max_test, n_test)
    return _Data(train, base, evals, metric_sets, n_train, n_test, a_own)


def _prepare(spec: SweepSpec, store: Store) -> tuple[LoadedModel, LoadedModel, list[tuple[Cut, Cut]], _Data]:
    """A and B loaded, the swept cuts and the data; StitchError for anything that cannot run."""
    a, b = load_pair(spec, store, input_kind="image", hint="sweeps need image classifiers")
    return a, b, _positions(spec, a, b), _load_data(spec, a, b)


def check_sweep(spec: SweepSpec, store: Store) -> None:
    """Everything the run checks before its first position, without training: models, cut names and shapes,
    data and heads, trait metrics."""
    _prepare(spec, store)
