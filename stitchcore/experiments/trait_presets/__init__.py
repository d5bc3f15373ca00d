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

The last, foundation-pair, is Revisiting Stitching in the Foundation Model Era's (CVPR 2026) comparison of
objectives along depth: DINOv2-S/14 with registers into CLIP's ViT-B/16, each with a linear probe, stitched with
the task, match and final objectives; a random-init DINOv2 under the final one.  It needs their pretrained weights
(``Preset.needs_weights``; :func:`missing_weights`), and says so where they are not at hand.

What the Traits page reads from a preset's link and writes into one (``?preset=NAME&data=mnist5k&seeds=3``),
each bad value held with a note, is :mod:`stitchcore.experiments.trait_presets.links` (imported by name: it
reads model seeds from :mod:`stitchcore.experiments.preset_seeds`, which imports this package).

>>> [p.name for p in list_presets()]  # doctest: +NORMALIZE_WHITESPACE
['inheritance', 'special-layer', 'distributed', 'simplicity', 'two-cue', 'connectivity', 'more-is-better',
 'label-noise', 'coarse-labels', 'kernel-size', 'early-convergence', 'foundation-pair']
>>> [(p.title, p.sweeps) for p in get_preset("connectivity").panels]
[('Stitching connectivity: penalty at every depth', (0, 1, 2, 3))]
>>> noise = get_preset("label-noise")
>>> noise.baselines[0], [noise.sweep_titles[k] for k in noise.baselines[0]]
((7, 1), ['random-init A -> clean B', 'clean A (20 epochs) -> clean B'])
"""

from __future__ import annotations

# The presets register in the report's order: the Oxford report's, then Bansal et al.'s (list_presets).
# isort: off
from stitchcore.experiments.trait_presets._base import (  # noqa: F401 -- re-exported
    BLIND_DATA,
    MATCHED,
    MERGED,
    NEAR_NOISE,
    NO_NOISE_SENDER,
    PROTOCOLS,
    RANDOM_BOTTOM_SEED,
    REFERENCE,
    RELABEL_TO,
    SCALES,
    SIMPLICITY_EPOCHS,
    TASK_EPOCHS,
    TRAINED,
    TRAITS,
    TRAIT_CLASS,
    PenaltyPanel,
    Preset,
    PresetFn,
    get_preset,
    list_presets,
    missing_weights,
    needed_recipes,
    panel_lines,
    preset_scales,
    random_bottom,
    register_preset,
    run_preset,
    trait_recipe,
    weights_words,
    zoo_ref,
)
from stitchcore.experiments.trait_presets._oxford import (  # noqa: F401 -- re-exported
    L1_PRUNE,
    L2,
    RANDOM_START,
    TWO_CUE,
    TWO_CUE_METRICS,
)
from stitchcore.experiments.trait_presets._bansal import (  # noqa: F401 -- re-exported
    BANSAL,
    CHECKPOINT_EPOCHS,
    CONV_CUTS,
    KERNELS,
    MORE_NOISE_EPOCHS,
    NOISE_BUDGETS,
    NOISE_EPOCHS,
    NOISE_LEVELS,
    RANDOM_WORDS,
    STITCHING_LAYER,
    THIN,
    TRAIN_IMAGES,
    WIDE,
    WIDTHS,
)
from stitchcore.experiments.trait_presets._foundation import (  # noqa: F401 -- re-exported
    FOUNDATION,
    FOUNDATION_A,
    FOUNDATION_B,
    FOUNDATION_OBJECTIVES,
)
# isort: on

__all__ = ["PROTOCOLS", "STITCHING_LAYER", "TASK_EPOCHS", "TRAIT_CLASS", "PenaltyPanel", "Preset", "get_preset", "list_presets", "register_preset"]
__all__ += ["RANDOM_BOTTOM_SEED", "SCALES", "missing_weights", "needed_recipes", "weights_words", "panel_lines", "preset_scales", "random_bottom", "run_preset",
            "zoo_ref"]

