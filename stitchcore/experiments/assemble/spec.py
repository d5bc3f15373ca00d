"""The assemble kind's spec (:class:`AssembleSpec`), its recipes and the names the other modules share (the
bottom of :mod:`stitchcore.experiments.assemble`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from stitchcore.errors import StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LR,
    MAX_WEIGHT_DECAY,
    check_count,
    check_image_caps,
    check_rate,
)
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_choice,
    check_positive,
    check_seed,
)
from stitchcore.models.refs import parse_ref
from stitchcore.stitching.adapter_kinds import list_adapters
from stitchcore.stitching.adapters import (
    CLS_TOKENS,
    NO_DOWNSAMPLE,
    NORMS,
    RESAMPLES,
    RESCALES,
    AdapterSpec,
)
from stitchcore.stitching.train import (
    OPTIMIZERS,
)

CELLS_ARTIFACT = "cells.json"
DEFAULT_KINDS = ("linear", "linear_relu", "conv3x3_relu", "bottleneck")  # Traft & Cheney's adapters
COARSE = 3  # default cut set: this many cuts of each model, spread over depth (3 x 3 pairs x 8 recipes)
EVAL_BATCH = 256
CLS_SAMPLES = 256  # training images averaged for B's own class token (cls_token="receiver")


@dataclass(frozen=True)
class AssembleSpec(DataFiles, Spec):
    """Join A's bottom to B's top at every (sender, receiver) pair with every adapter recipe.

    >>> s = AssembleSpec("zoo:resnet-digits-s0", "zoo:vit-digits-s0-adamw")
    >>> [recipe_name(r) for r in s.recipes()][:3], len(s.recipes())
    (['linear/both/bilinear', 'linear/both/strided', 'linear_relu/both/bilinear'], 8)
    """

    a: str  # ModelRef of the bottom model (its layers up to the sender cut)
    b: str  # ModelRef of the top model (its layers after the receiver cut, and its head)
    senders: tuple[str, ...] | None = None  # A's cuts; None = default_cuts: COARSE maps/token cuts over depth
    receivers: tuple[str, ...] | None = None  # B's cuts; None = default_cuts
    kinds: tuple[str, ...] = DEFAULT_KINDS  # adapter kinds (stitching.adapter_kinds)
    norms: tuple[str, ...] = ("both",)  # BatchNorm placements: none | bn_before | bn_after | both
    # spatial rescaling: none | bilinear | nearest | strided | no_downsample (the sender's grid goes on into B)
    resamples: tuple[str, ...] = ("bilinear", "strided")
    cls_token: str = "adapter"  # a ViT receiver's class token: learned by the adapter, or B's own ("receiver")
    optimizer: str = "adamw"  # Traft & Cheney: AdamW, lr 2e-3, weight decay 0.05, cosine to 0
    lr: float = 2e-3
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps per cell
    batch_size: int = 64
    dataset: str | None = None  # None: the dataset B was trained on (C answers with B's head)
    finetune_baseline: bool = False  # also fine-tune every assembled network end to end (copies)
    finetune_epochs: int = 5
    finetune_lr: float = 5e-4
    max_train: int | None = None  # cap on training images; None = all
    max_test: int | None = None  # cap on test images; None = all
    seed: int = 0  # adapter init and data order
    # a gap of more than 2x: "chained" = one adapter per 2x step (Traft & Cheney); "oneshot" = one adapter that
    # resizes by the whole ratio (every run before issue 25: a spec dict without the key reads as "oneshot")
    rescale: str = "chained"
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES

    # built-in data: the run ids of before; no rescale key: a run from before chained rescaling
    LEGACY: ClassVar[dict[str, Any]] = {"data_id": None, "rescale": "oneshot"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        for name, valid in (("kinds", tuple(list_adapters())), ("norms", NORMS),
                            ("resamples", (*RESAMPLES, NO_DOWNSAMPLE)),
                            ("senders", None), ("receivers", None)):  # fmt: skip
            value = getattr(self, name)
            if value is None:
                continue
            items = (value,) if isinstance(value, str) else tuple(value)
            if not items or len(set(items)) != len(items):
                raise StitchError(f"{name} must name at least one value, each once; got {list(items)}")
            for item in items if valid is not None else ():
                check_choice(name[:-1], item, valid)
            object.__setattr__(self, name, items)
        if "identity" in self.kinds:
            raise StitchError("kind 'identity' adds no adapter (a merge); assemble joins parts with trained adapters")
        check_choice("cls_token", self.cls_token, CLS_TOKENS)
        check_choice("rescale", self.rescale, RESCALES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_positive("lr", self.lr, "the seed's value is 2e-3")
        check_rate("lr", self.lr, MAX_LR, "the seed's value is 2e-3")
        check_positive("finetune_lr", self.finetune_lr, "e.g. 5e-4")
        check_rate("finetune_lr", self.finetune_lr, MAX_LR, "e.g. 5e-4")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_count("epochs", self.epochs, 1, MAX_EPOCHS, "e.g. 10", "each epoch trains every cell's adapter again")
        check_count("finetune_epochs", self.finetune_epochs, 1, MAX_EPOCHS, "e.g. 5")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_seed("seed", self.seed)
        check_image_caps(self)
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    def recipes(self) -> list[AdapterSpec]:
        """Every adapter recipe of the spec: kinds x norms x resamples, random init, in that order."""
        return [AdapterSpec(kind=k, norm=n, resample=r, cls_token=self.cls_token, rescale=self.rescale)
                for k in self.kinds for n in self.norms for r in self.resamples]  # fmt: skip

    def cell_stitch(self, cell: dict[str, Any]) -> Any:
        """One assembled network (a summary's cell: sender, receiver, adapter kind, norm, resample) as a stitch
        run of its own, trained as the assembly trains it (random start, every train image, its rescaling).

        >>> spec = AssembleSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1")
        >>> s = spec.cell_stitch({"sender": "block1", "receiver": "block2", "adapter": "linear", "norm": "both",
        ...                       "resample": "bilinear"})
        >>> (s.adapter.init, s.adapter.rescale, s.epochs, s.val_fraction)
        ('random', 'chained', 10, 0.0)
        """
        from stitchcore.experiments.stitch import StitchSpec

        adapter = AdapterSpec(kind=cell["adapter"], norm=cell["norm"], resample=cell["resample"], init="random",
                              cls_token=self.cls_token, rescale=self.rescale)  # fmt: skip
        return StitchSpec(a=self.a, b=self.b, cut_a=cell["sender"], cut_b=cell["receiver"], adapter=adapter,
                          optimizer=self.optimizer, lr=self.lr, weight_decay=self.weight_decay, epochs=self.epochs,
                          batch_size=self.batch_size, seed=self.seed, dataset=self.dataset, val_fraction=0.0,
                          data_id=self.data_id)  # fmt: skip

    def label(self) -> str:
        return f"assemble {self.a} -> {self.b} ({len(self.recipes())} recipes)"


def recipe_name(spec: AdapterSpec) -> str:
    """``kind/norm/resample``: a recipe's name in cells, tables and the CLI."""
    return f"{spec.kind}/{spec.norm}/{spec.resample}"


