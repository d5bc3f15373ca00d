"""Ready-made trait experiments: zoo recipes for A and B plus the sweeps over them.

Each preset reproduces one finding of the Oxford stitching report on the bundled
digits data, in a few minutes on a laptop CPU (each model trains in seconds, each
sweep position trains one small adapter per model pair).  Class 3 is the trait
class throughout; adapters train on ``digits|drop3`` (no 3s), so whatever the
stitched model does with a 3 comes from A's or B's layers, never from the adapter.

===================  ===========================================  ==========================================
preset               A (bottom) / B (top)                          what to look for
===================  ===========================================  ==========================================
inheritance          A: CNN trained with every 3 labelled 8;       "3 predicted as 8" rises with the cut:
                     B: plain CNN                                  early cuts act like B, late like A
special-layer        A: plain MLP; B: plain MLP, then only fc1 /    "3 predicted as 8" only while B's special
                     fc2 / fc3 fine-tuned with 3s labelled 8       layer is in C (cuts before it), ~0 after
                     (three sweeps)
distributed          A: CNN never shown a 3; B: plain CNN          class-3 accuracy falls step by step as
                                                                   more layers come from A
simplicity           A: CNN with L1 + magnitude pruning;           gzip size (and the other measures) move
                     B: CNN with an L2 penalty                     from B's value to A's along the cut
===================  ===========================================  ==========================================

>>> [p.name for p in list_presets()]
['inheritance', 'special-layer', 'distributed', 'simplicity']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stitchcore.errors import StitchError
from stitchcore.experiments._registry import ProgressFn, RunOutcome, run_experiment
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.zoo import ZooRecipe, zoo_name
from stitchcore.registry import Registry
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for

__all__ = ["TRAIT_CLASS", "Preset", "get_preset", "list_presets", "register_preset", "run_preset", "zoo_ref"]

TRAIT_CLASS = 3  # the class every preset's trait is about (digit 3)
RELABEL_TO = 8  # inheritance: every 3 labelled 8 (a 3 looks most like an 8 or a 5)
BLIND_DATA = f"digits|drop{TRAIT_CLASS}"  # adapter fit data: no 3s, so no 3 is ever matched


@dataclass(frozen=True)
class Preset:
    """Recipes to train (in order), then sweeps over the trained models."""

    name: str  # url/CLI name
    title: str  # button text
    claim: str  # the report's claim this preset reproduces
    look_for: str  # what the plots should show if the claim holds
    recipes: tuple[ZooRecipe, ...]
    sweeps: tuple[SweepSpec, ...]
    sweep_titles: tuple[str, ...]  # one short title per sweep


PresetFn = Callable[[], Preset]  # builds the preset (its recipes' run ids are computed on the call)
_PRESETS: Registry[PresetFn] = Registry("preset", StitchError)


def register_preset(name: str) -> Callable[[PresetFn], PresetFn]:
    """Decorator registering a preset factory under ``name`` (the url/CLI name); a name is registered once."""
    return _PRESETS.register(name)


def zoo_ref(recipe: ZooRecipe) -> str:
    """The ``zoo:`` ref a recipe will have once trained (the run id is the hash of its spec)."""
    return f"zoo:{zoo_name(recipe, run_id_for('zoo', recipe.to_dict()))}"


# Label-free adapters: a closed-form least-squares match of B's own activation (Csiszarik et al.), fitted on
# data without 3s and never trained on labels, so the adapter cannot learn anything about class 3 itself.
# (Task-trained adapters either learn class 3 themselves -- the random-init control reaches ~90% on 3s on
# digits -- or, trained without 3s, learn to never answer 3 at late cuts: both measured, see docs/DESIGN.md.)
MATCHED = AdapterSpec(init="lstsq")
MERGED = AdapterSpec(kind="identity", norm="none", init="identity")  # weight substitution: no adapter at all


def _sweep(a: ZooRecipe, b: ZooRecipe, metrics: tuple[str, ...], train_data: str | None,
           adapter: AdapterSpec = MATCHED) -> SweepSpec:  # fmt: skip
    return SweepSpec(a=zoo_ref(a), b=zoo_ref(b), metrics=metrics, train_data=train_data, adapter=adapter, epochs=0)


@register_preset("inheritance")
def _inheritance() -> Preset:
    a = ZooRecipe(arch="cnn", seed=1, relabel=(TRAIT_CLASS, RELABEL_TO))
    b = ZooRecipe(arch="cnn", seed=0)
    metrics = ("accuracy", f"class_acc:{TRAIT_CLASS}", f"confusion:{TRAIT_CLASS}->{RELABEL_TO}")
    return Preset(
        "inheritance", "Trait inheritance (relabel)",
        "Stitched models inherit traits of the models they are made of.",
        f"'{TRAIT_CLASS} predicted as {RELABEL_TO}' low where B does most of the work (early cuts), high where "
        "A does (late cuts); the random-init control stays low.",
        (a, b), (_sweep(a, b, metrics, BLIND_DATA),), (f"A calls {TRAIT_CLASS}s {RELABEL_TO}s, B is plain",),
    )  # fmt: skip


@register_preset("special-layer")
def _special_layer() -> Preset:
    # The trait is taught to one layer only: B is A (a plain MLP, same seed) with only fc_k fine-tuned on
    # digits with every 3 labelled 8, so A and B differ in that one layer, and C = B_{>cut}(A_{<=cut}(x))
    # joins them without an adapter (identity: a least-squares adapter fitted to B's activations copies
    # B's fc_k change at every later cut, measured).  (Dropping 3 and fine-tuning fc_k on all digits brings
    # 3s back through fc3 only: with fc1 or fc2 the frozen layers above keep class 3 dead, measured.)
    plain = ZooRecipe(arch="mlp", seed=0)
    relabel = f"digits|relabel{TRAIT_CLASS}to{RELABEL_TO}"
    specials = [ZooRecipe(arch="mlp", seed=0, finetune_layer=f"fc{k}", finetune_data=relabel) for k in (1, 2, 3)]
    metrics = ("accuracy", f"class_acc:{TRAIT_CLASS}", f"confusion:{TRAIT_CLASS}->{RELABEL_TO}")
    return Preset(
        "special-layer", "Special-layer localization (fc1/fc2/fc3)",
        "A trait located in one layer appears only once that layer is in the stitched model.",
        f"'{TRAIT_CLASS} predicted as {RELABEL_TO}' high at cuts before B's special layer (the layer is in C), "
        "low from that layer on; the step moves with the special layer fc1 -> fc2 -> fc3.",
        (plain, *specials), tuple(_sweep(plain, s, metrics, BLIND_DATA, MERGED) for s in specials),
        tuple(f"B's special layer: fc{k}" for k in (1, 2, 3)),
    )  # fmt: skip


@register_preset("distributed")
def _distributed() -> Preset:
    a = ZooRecipe(arch="cnn", seed=1, drop_class=TRAIT_CLASS)
    b = ZooRecipe(arch="cnn", seed=0)
    metrics = ("accuracy", f"class_acc:{TRAIT_CLASS}")
    return Preset(
        "distributed", "Distributed trait (drop class)",
        "A distributed trait grows with the number of layers taken from its model.",
        f"Accuracy on {TRAIT_CLASS}s falls gradually as more of A (never shown a {TRAIT_CLASS}) is used.",
        (a, b), (_sweep(a, b, metrics, BLIND_DATA),), (f"A never saw a {TRAIT_CLASS}, B is plain",),
    )  # fmt: skip


@register_preset("simplicity")
def _simplicity() -> Preset:
    # L1 1e-4 and 40% of the remaining weights pruned every 4 epochs (4 steps in 20 epochs: ~87% zeros)
    a = ZooRecipe(arch="cnn", seed=1, l1=1e-4, prune_every=4, prune_fraction=0.4)
    b = ZooRecipe(arch="cnn", seed=0, l2=1e-3)
    return Preset(
        "simplicity", "Simple vs complex (L1+pruning vs L2)",
        "Simplicity can be traced layer by layer through stitching.",
        "gzip size falls from B's (dense) toward A's (sparse) as the cut moves deeper; sharpness and gradient "
        "norm follow whichever model contributes the layers.",
        (a, b), (_sweep(a, b, ("accuracy",), None),), ("A: L1 + pruning, B: L2",),
    )  # fmt: skip


TRAITS = ("plain", "relabel", "drop", "special-relabel", "special-drop", "l1-prune", "l2")  # trait_recipe kinds


def trait_recipe(kind: str, *, arch: str = "cnn", seed: int = 0, x: int = TRAIT_CLASS, y: int = RELABEL_TO,
                 layer: str = "fc1", dataset: str = "digits") -> ZooRecipe:  # fmt: skip
    """A zoo recipe that gives a model one trait (the Traits page's "build A and B" form).

    plain; relabel (every x labelled y); drop (x never seen); special-relabel (plain, then only ``layer``
    fine-tuned with x labelled y); special-drop (x dropped, then only ``layer`` fine-tuned on all data);
    l1-prune (L1 + magnitude pruning); l2 (L2 penalty).
    """
    if kind == "plain":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed)
    if kind == "relabel":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, relabel=(x, y))
    if kind == "drop":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, drop_class=x)
    if kind == "special-relabel":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, finetune_layer=layer,
                         finetune_data=f"{dataset}|relabel{x}to{y}")  # fmt: skip
    if kind == "special-drop":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, drop_class=x, finetune_layer=layer)
    if kind == "l1-prune":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, l1=1e-4, prune_every=4, prune_fraction=0.4)
    if kind == "l2":
        return ZooRecipe(arch=arch, dataset=dataset, seed=seed, l2=1e-3)
    raise StitchError(f"unknown trait recipe {kind!r}; use one of: {', '.join(TRAITS)}")


def list_presets() -> list[Preset]:
    """All presets, in the report's order (the order they are registered in)."""
    return [_PRESETS.get(name)() for name in _PRESETS.list()]


def get_preset(name: str) -> Preset:
    """A preset by name; StitchError naming the close names and every known one otherwise.

    >>> get_preset("inheritence")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: unknown preset 'inheritence'; did you mean 'inheritance'? (known: ...)
    """
    return _PRESETS.get(name)()


def run_preset(
    name: str, store: Store, *, progress: ProgressFn | None = None, device: str | None = None, rerun: bool = False
) -> tuple[list[RunOutcome], list[RunOutcome]]:
    """Train the preset's recipes (cached), then run its sweeps; returns (model outcomes, sweep outcomes)."""
    preset = get_preset(name)
    models = [run_experiment("zoo", r, store, progress=progress, device=device) for r in preset.recipes]
    sweeps = [run_experiment("sweep", s, store, progress=progress, device=device, rerun=rerun) for s in preset.sweeps]
    return models, sweeps
