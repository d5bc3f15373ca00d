"""The foundation-model preset: Revisiting Stitching in the Foundation Model Era (CVPR 2026) stitches CLIP, DINOv2
and SigLIP and trains the stitch to match B's final features; task and layer matching fall behind at shallow
cuts where that works.  Here: DINOv2-S/14 with registers (A) into CLIP's ViT-B/16 image tower (B), each with a
linear probe on the data (their pretrained weights frozen, the head trained alone), stitched at six depths with
each objective, and a random-init DINOv2 bottom under the final objective as the baseline that could break it.
It needs the two pretrained towers (:func:`missing_weights` says which are not on this machine; run_preset refuses
then, the Traits page says so on the card).  Private to :mod:`stitchcore.experiments.trait_presets`."""

from __future__ import annotations

from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets._base import (
    TRAINED,
    PenaltyPanel,
    Preset,
    _spec,
    random_bottom,
    register_preset,
    zoo_ref,
)
from stitchcore.experiments.zoo import ZooRecipe

__all__ = ["FOUNDATION", "FOUNDATION_A", "FOUNDATION_B", "FOUNDATION_EPOCHS", "FOUNDATION_OBJECTIVES",
           "FOUNDATION_POSITIONS", "PROBE_EPOCHS"]  # fmt: skip

FOUNDATION = "Revisiting Stitching in the Foundation Model Era (CVPR 2026)"
FOUNDATION_A = "vit_small_patch14_reg4_dinov2.lvd142m"  # 12 blocks, 384 wide, a class and 4 register tokens
FOUNDATION_B = "vit_base_patch16_clip_224.openai"  # 12 blocks, 768 wide, a class token
SIDE = 224  # both at 224 px: DINOv2's 16x16 grid of 14-pixel patches into CLIP's 14x14 of 16
FOUNDATION_POSITIONS = ("blocks.1", "blocks.3", "blocks.5", "blocks.7", "blocks.9", "blocks.11")
FOUNDATION_OBJECTIVES = ("task", "match", "final")  # B's labels | B's activation at the cut | B's final features
PROBE_EPOCHS = 10  # the linear probe each tower gets on the data (its head alone; the backbone stays as trained)
FOUNDATION_EPOCHS = 5  # each stitch's training, from a least-squares start, the same for every objective


def _probe(name: str, seed: int, dataset: str) -> ZooRecipe:
    """Tower ``name`` with a linear probe on ``dataset``: its pretrained weights, a new 10-class head trained alone."""
    return ZooRecipe(start=f"timm:{name}?num_classes=10&img_size={SIDE}", dataset=dataset, seed=seed, epochs=0,
                     finetune_layer="head", finetune_epochs=PROBE_EPOCHS, optimizer="adamw")  # fmt: skip


def _objective_sweep(a: str, b: str, objective: str, dataset: str) -> SweepSpec:
    return _spec(a=a, b=b, metrics=("accuracy",), positions=FOUNDATION_POSITIONS, dataset=dataset, adapter=TRAINED,
                 epochs=FOUNDATION_EPOCHS, objective=objective, control=False, simplicity=False)  # fmt: skip


@register_preset("foundation-pair")
def _foundation_pair(seed: int = 0) -> Preset:
    dataset = "digits"  # the page's one scale for it: the towers read the 8x8 digits at their own 224 px
    a, b = _probe(FOUNDATION_A, seed, dataset), _probe(FOUNDATION_B, seed + 1, dataset)
    sweeps = [_objective_sweep(zoo_ref(a), zoo_ref(b), objective, dataset) for objective in FOUNDATION_OBJECTIVES]
    sweeps.append(_objective_sweep(random_bottom(a, seed), zoo_ref(b), "final", dataset))
    return Preset(
        "foundation-pair", "Final-feature matching (DINOv2 -> CLIP)",
        "Trained to match B's final features, a stitch between foundation models keeps B's accuracy from shallow "
        "cuts on, where task and layer matching fall behind.",
        "The final-feature line has the smallest penalty at the early cuts, task and match higher there, all close "
        "late; the random-init DINOv2 bottom stays high (what matching B's features gives without A's layers).",
        (a, b), tuple(sweeps),
        ("objective task (B's labels)", "objective match (B's activation at the cut)",
         "objective final (B's final features)", "random-init A -> CLIP (final)"),
        (PenaltyPanel("DINOv2-S/14 into CLIP ViT-B/16: the three objectives along depth", (0, 1, 2, 3),
                      references=(3,)),),  # fmt: skip
        FOUNDATION,
        baselines={2: (3,)},  # the final objective's claim against the same stitch from an untrained DINOv2
        dataset=dataset,
        needs_weights=(FOUNDATION_A, FOUNDATION_B),
    )  # fmt: skip
