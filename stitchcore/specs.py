"""Run specifications: frozen dataclasses whose canonical JSON is the cache key.

A spec holds every value that changes a result (models, cuts, adapter,
objective, optimiser, data, seed) and nothing that does not (device, store
location).  ``spec.to_dict()`` is what the store hashes into the run id, so the
same spec is never run twice.

>>> ZooRecipe(arch="cnn", dataset="digits", seed=1).short_name()
'cnn-digits-s1'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from stitchcore.adapters import AdapterSpec
from stitchcore.errors import StitchError

__all__ = [
    "OBJECTIVES",
    "OPTIMIZERS",
    "StitchSpec",
    "ZooRecipe",
    "check_choice",
    "check_sample_caps",
    "parse_objective",
]

OPTIMIZERS = ("sgd", "adamw")
OBJECTIVES = ("task", "match", "kd")


def check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    """StitchError naming the choices when ``value`` is not one of them."""
    if value not in choices:
        raise StitchError(f"unknown {what} {value!r}; use one of: {', '.join(choices)}")


def check_sample_caps(spec: Any) -> None:
    """A spec's ``max_train`` / ``max_test`` image caps are None (all images) or at least 2."""
    for name in ("max_train", "max_test"):
        value = getattr(spec, name)
        if value is not None and value < 2:
            raise StitchError(f"{name} must be at least 2 (or None for all images), got {value}")


def _from_dict(cls, d: dict[str, Any]):
    """Build a dataclass from a dict, naming unknown keys in the error."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise StitchError(f"unknown {cls.__name__} field(s) {unknown}; known: {sorted(names)}")
    return cls(**d)


@dataclass(frozen=True)
class ZooRecipe:
    """How to train a built-in (zoo) model; training one stores it as a run.

    Defaults train the small digits CNN to ~97% test accuracy in a few seconds
    on a laptop CPU, which is what the classroom demo needs.
    """

    arch: str = "cnn"  # a name from stitchcore.archs.list_archs()
    dataset: str = "digits"  # a name for stitchcore.data.load_dataset
    seed: int = 0  # weight init and data order
    optimizer: str = "sgd"  # sgd (momentum) | adamw (cosine schedule)
    epochs: int = 20  # digits: 1,347 training images, 20 epochs ~ 420 steps, ~97% in ~1 s
    lr: float | None = None  # None: 0.05 for sgd, 2e-3 for adamw
    batch_size: int = 64
    momentum: float = 0.9  # sgd only
    weight_decay: float | None = None  # None: 5e-4 for sgd, 0.05 for adamw
    image_size: int | None = None  # resize inputs (digits 8 -> 16/32 for deeper nets); None = native
    arch_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"blocks": [1, 1, 1, 1], "width": 16}
    relabel: tuple[int, int] | None = None  # trait: train with class X labelled Y
    drop_class: int | None = None  # trait: class X never seen in training
    l1: float = 0.0  # L1 penalty on weights (simple models, with pruning)
    l2: float = 0.0  # explicit L2 penalty on weights (beyond weight decay)
    prune_every: int = 0  # epochs between magnitude-pruning steps (0 = never)
    prune_fraction: float = 0.0  # fraction of remaining weights pruned at each step
    # Special layer (trait localization): after the main training, fine-tune only this named layer
    # (e.g. "fc2"; all others frozen) for finetune_epochs on finetune_data (None: the untransformed dataset).
    finetune_layer: str | None = None
    finetune_epochs: int = 10  # digits: enough for the last hidden layer to bring a dropped class back
    finetune_data: str | None = None  # e.g. "digits|relabel3to8": the trait is taught to that layer only
    finetune_lr: float | None = None  # None: the recipe's lr; smaller keeps the layer's other behaviour

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.epochs < 1 or self.batch_size < 1:
            raise StitchError("epochs and batch size must be at least 1")
        if not 0.0 <= self.prune_fraction < 1.0:
            raise StitchError("prune fraction must be in [0, 1)")
        if self.relabel is not None:
            object.__setattr__(self, "relabel", tuple(int(v) for v in self.relabel))
        if self.finetune_layer is None and (self.finetune_data is not None or self.finetune_lr is not None):
            raise StitchError("finetune_data and finetune_lr need a finetune_layer (the one layer trained)")
        if self.finetune_layer is not None and self.finetune_epochs < 1:
            raise StitchError("finetune_epochs must be at least 1 when a finetune_layer is set")

    @property
    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else (0.05 if self.optimizer == "sgd" else 2e-3)

    @property
    def resolved_weight_decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 5e-4 if self.optimizer == "sgd" else 0.05

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["relabel"] = list(self.relabel) if self.relabel else None
        if self.finetune_layer is None:  # absent unless used: run ids of older recipes stay the same
            del d["finetune_layer"], d["finetune_epochs"], d["finetune_data"], d["finetune_lr"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ZooRecipe:
        return _from_dict(cls, dict(d))

    def is_plain(self) -> bool:
        """True when only arch, dataset, seed and optimizer differ from the defaults."""
        base = ZooRecipe(arch=self.arch, dataset=self.dataset, seed=self.seed, optimizer=self.optimizer)
        return base == self

    def label(self) -> str:
        """Human label for run lists: 'train cnn on digits (seed 0, sgd, 20 epochs, drop 3)'."""
        extras = [f"seed {self.seed}", self.optimizer, f"{self.epochs} epochs"]
        if self.relabel:
            extras.append(f"relabel {self.relabel[0]}->{self.relabel[1]}")
        if self.drop_class is not None:
            extras.append(f"drop {self.drop_class}")
        if self.l1 or self.prune_fraction:
            extras.append("L1/pruned")
        if self.l2:
            extras.append(f"L2 {self.l2:g}")
        if self.finetune_layer is not None:
            extras.append(f"fine-tune {self.finetune_layer}" + (f" on {self.finetune_data}" if self.finetune_data else ""))
        return f"train {self.arch} on {self.dataset} ({', '.join(extras)})"

    def short_name(self) -> str:
        """Readable part of the zoo ref: ``cnn-digits-s0`` (``-adamw`` when not sgd)."""
        dataset = re.sub(r"[^a-z0-9]+", "", self.dataset.lower().split(":")[0])
        name = f"{self.arch}-{dataset}-s{self.seed}"
        return name + ("-adamw" if self.optimizer == "adamw" else "")


def parse_objective(text: str) -> dict[str, float]:
    """``"task"`` -> {"task": 1.0}; ``"task+0.5*match"`` -> {"task": 1.0, "match": 0.5}.

    >>> parse_objective("task+0.5*kd")
    {'task': 1.0, 'kd': 0.5}
    """
    weights: dict[str, float] = {}
    for term in text.replace(" ", "").split("+"):
        weight, _, name = term.rpartition("*")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise StitchError(f"bad objective term {term!r}; write e.g. 'task', 'match' or 'task+0.5*kd'") from None
        check_choice("objective", name, OBJECTIVES)
        weights[name] = weights.get(name, 0.0) + w
    return weights


@dataclass(frozen=True)
class StitchSpec:
    """One stitch: C = suffix_B(S(prefix_A(x))), train S, compare C with A and B.

    The defaults follow Traft & Cheney (AdamW, wd 0.05, cosine to 0; a larger lr
    because small datasets give few steps) with Bansal et al.'s low-capacity
    adapter (linear, BatchNorm before and after).
    """

    a: str  # ModelRef of the bottom model (canonical spelling)
    b: str  # ModelRef of the top model (its head is used; penalty is against B)
    cut_a: str  # sender cut name in A (see stitchcore.cuts.list_cuts)
    cut_b: str  # receiver cut name in B
    adapter: AdapterSpec = field(default_factory=AdapterSpec)
    objective: str = "task"  # task | match | kd | weighted sum "task+0.5*match"
    kd_temperature: float = 2.0  # softmax temperature for the kd objective
    optimizer: str = "adamw"  # adamw | sgd (momentum 0.9)
    lr: float = 1e-2  # Traft & Cheney use 2e-3 over ImageNet-sized epochs; small data has few steps
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps; random-init adapters reach a ~1-3 point penalty
    batch_size: int = 64
    seed: int = 0
    dataset: str | None = None  # None: the dataset B was trained on
    head: str = "b"  # "b": C = B_top(S(A_bottom)); "a": head-preserving C = A_head(B_middle(S(A_bottom)))
    head_cut: str | None = None  # head="a" only: where B's middle hands over to A's head (same family)
    max_train: int | None = None  # cap on training images (quick runs); None = all
    max_test: int | None = None  # cap on test images; None = all

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        parse_objective(self.objective)
        if self.epochs < 0 or self.batch_size < 1:
            raise StitchError("epochs must be >= 0 and batch size >= 1")
        check_choice("head", self.head, ("a", "b"))
        if (self.head == "a") != (self.head_cut is not None):
            raise StitchError("head='a' needs head_cut (where A's head takes over), and head_cut needs head='a'")
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["adapter"] = self.adapter.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StitchSpec:
        return _from_dict(cls, dict(d))

    def label(self) -> str:
        head = f" -> {self.a}[{self.head_cut}:]" if self.head == "a" else ""
        return f"{self.a}[{self.cut_a}] -> {self.b}[{self.cut_b}]{head} ({self.adapter.kind}, {self.adapter.init})"
