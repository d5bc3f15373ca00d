"""The sweep kind's spec, :class:`SweepSpec` (the bottom of :mod:`stitchcore.experiments.sweep`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from stitchcore.errors import StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_EPOCHS,
    MAX_LR,
    MAX_WEIGHT_DECAY,
    check_adapter_rank,
    check_count,
    check_image_caps,
    check_rate,
)
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_at_most,
    check_choice,
    check_positive,
    check_seed,
)
from stitchcore.measures.traits import parse_metric
from stitchcore.models.refs import TWIN_SEEDS, parse_ref
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.train import OPTIMIZERS, parse_objective

__all__ = ["SweepSpec"]


@dataclass(frozen=True)
class SweepSpec(DataFiles, Spec):
    """Stitch A's bottom to B's top at every depth; measure traits and simplicity at each.

    >>> SweepSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", metrics=("class_acc:3",)).label()
    'sweep zoo:cnn-digits-s0 -> zoo:cnn-digits-s1 (class_acc:3, all cuts)'
    """

    a: str  # ModelRef of the bottom model (its layers up to the cut)
    b: str  # ModelRef of the top model (its layers after the cut); A's architecture, any width
    positions: tuple[str, ...] | None = None  # cut names in execution order; None = every cut
    metrics: tuple[str, ...] = ("accuracy",)  # trait metrics, see stitchcore.measures.traits
    dataset: str | None = None  # evaluation data (test split); None = the dataset B was trained on
    train_data: str | None = None  # adapter training data (train split); None = the evaluation dataset
    adapter: AdapterSpec = field(default_factory=AdapterSpec)  # linear, BN both sides, random init
    optimizer: str = "adamw"  # as StitchSpec
    lr: float = 1e-2  # as StitchSpec: small data gives few steps
    weight_decay: float = 0.05
    epochs: int = 10  # digits: ~210 steps per position
    batch_size: int = 64
    seed: int = 0  # adapter init and data order; control twins use seed, seed+1, ...
    control: bool = True  # the random-init control at every position (zoo refs only)
    control_seeds: int = 2  # random pairs per position; the band spans their min..max
    simplicity: bool = True  # gradient norm, sharpness, gzip size per position and for A, B
    sharpness_eps: float = 0.1  # relative perturbation size per tensor (0.05 gives increases near the noise)
    sharpness_draws: int = 5  # perturbations averaged
    max_train: int | None = None  # cap on adapter training images; None = all
    max_test: int | None = None  # cap on test images; None = all
    # Added for issue 25 (LEGACY below: what a dict stored before them computed).
    twin_seeds: str = "distinct"  # control pairs: A's and B's twins from different seeds (refs.random_twins)
    simplicity_adapter: bool = True  # the project's three measures count the adapter's parameters too
    simplicity_report: bool = True  # also the Oxford report's definitions (measures.simplicity.report_simplicity)
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES
    # Added for issue 39: at every position the same adapter also trained from a sender of class-clustered noise
    # (A's activation shape and scale; stitching.noise_sender): a stitch that does no better says nothing of A
    noise_control: bool = True
    # Added for issue 42: what each position's adapter learns (stitch's objectives; ``final``: B's own final
    # features, the foundation-model paper's final feature matching); every sweep before it trained on the task
    objective: str = "task"

    # Before: one seed for both twins (one network when A and B share an architecture), measures over A's and
    # B's weights only, no report definitions, no noise sender.
    LEGACY: ClassVar[dict[str, Any]] = {"twin_seeds": "shared", "simplicity_adapter": False, "simplicity_report": False,
                                        "data_id": None, "noise_control": False, "objective": "task"}  # fmt: skip
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("dataset", "train_data")  # both read from disk when on files

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        if isinstance(self.metrics, str) or not self.metrics:
            raise StitchError("metrics is a non-empty list of trait metrics, e.g. ['accuracy', 'class_acc:3']")
        keys = tuple(dict.fromkeys(parse_metric(m).key for m in self.metrics))
        object.__setattr__(self, "metrics", keys)
        if self.positions is not None:
            names = (self.positions,) if isinstance(self.positions, str) else tuple(self.positions)
            if not names or len(set(names)) != len(names):
                raise StitchError(f"positions must name at least one cut, each once; got {list(names)}")
            object.__setattr__(self, "positions", names)
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        parse_objective(self.objective)
        check_choice("twin_seeds", self.twin_seeds, TWIN_SEEDS)
        if not isinstance(self.noise_control, bool):
            raise StitchError(f"noise_control (--no-noise-control) is true or false, not {self.noise_control!r}")
        for name, used in (("twin_seeds", self.control), ("simplicity_adapter", self.simplicity),
                           ("simplicity_report", self.simplicity)):  # fmt: skip
            if not used:  # a rule that changes nothing keeps its legacy value: the run id does not move
                object.__setattr__(self, name, self.LEGACY[name])
        check_count("epochs", self.epochs, 0, MAX_EPOCHS, "0 keeps the fitted start",
                    "each epoch passes over the training images, at every position")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_count("control_seeds", self.control_seeds, 1, MAX_DRAWS, "e.g. 2",
                    "each trains a random pair's adapter at every position")
        check_count("sharpness_draws", self.sharpness_draws, 1, MAX_DRAWS, "e.g. 5")
        check_at_least("sharpness_eps", self.sharpness_eps, 0, "a relative size, e.g. 0.05")
        check_at_most("sharpness_eps", self.sharpness_eps, 10, "a relative size, e.g. 0.05")
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_rate("lr", self.lr, MAX_LR, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_seed("seed", self.seed)
        check_image_caps(self)
        check_adapter_rank(self.adapter)
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    def label(self) -> str:
        where = f"{len(self.positions)} cuts" if self.positions else "all cuts"
        return f"sweep {self.a} -> {self.b} ({', '.join(self.metrics)}, {where})"
