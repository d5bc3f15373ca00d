"""Bansal, Nakkiran & Barak's presets (connectivity, more is better, label noise, coarse labels, kernel size, early
convergence), at the digits scale and, for all but label noise, at mnist5k.  Private to
:mod:`stitchcore.experiments.trait_presets`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets._base import (
    NEAR_NOISE,
    PenaltyPanel,
    Preset,
    _check_scale,
    _spec,
    random_bottom,
    register_preset,
    zoo_ref,
)
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.experiments.zoo_recipe import recipe_for
from stitchcore.stitching.adapters import AdapterSpec

# ---------------------------------------------------------------------------- Bansal et al.

BANSAL = "Bansal, Nakkiran & Barak 2021"
# The paper's stitching layer (a 1x1 conv with BatchNorm before and after), here started by least squares and then
# task-trained (SweepSpec's 10 epochs, AdamW lr 1e-2) on clean digits: the Stitch page's default adapter.
STITCHING_LAYER = AdapterSpec(init="lstsq")
# On 8x8 digits a random-init bottom stitches almost as well as a trained one at the conv cuts (penalty +0.002 ..
# +0.009 at block1, +0.04 .. +0.05 at block2, measured): "good early layers" is read against it, never alone.
RANDOM_WORDS = ("The random-init A (dashed: A's architecture, untrained, the same stitch) is the line a claim "
                "about early layers must beat: on 8x8 digits it stitches within a few points at the conv cuts.")


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


