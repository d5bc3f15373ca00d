"""The spec of a matrix run: :class:`MatrixSpec` and the names every other module of the kind shares.

The bottom of the package: it imports nothing of the kind's, and everything else imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from stitchcore.errors import StitchError
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_choice,
    check_positive,
    check_sample_caps,
)
from stitchcore.models.refs import TWIN_SEEDS, parse_ref
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.fits import FIT_METHODS
from stitchcore.stitching.shared_suffix import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS

__all__ = ["CELLS_ARTIFACT", "CONTROLS", "CONTROL_NAMES", "MODES", "VARIANTS", "MatrixSpec"]

MODES = ("closed-form", "trained")
VARIANTS = ("trained", "random_sender", "random_receiver", "random_both")  # matrix first, then the controls
CONTROLS = VARIANTS[1:]
CONTROL_NAMES = {"random_sender": "random sender", "random_receiver": "random receiver", "random_both": "both random"}
CELLS_ARTIFACT = "cells.json"


def _lstsq_adapter() -> AdapterSpec:
    return AdapterSpec(kind="linear", norm="both", resample="bilinear", init="lstsq")


@dataclass(frozen=True)
class MatrixSpec(Spec):
    """Every sender cut of A x every receiver cut of B; hashed into the run id like any spec.

    >>> MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=["block1", "fc1"]).label()
    'matrix zoo:cnn-digits-s0 x zoo:cnn-digits-s1 (closed-form, 2 x all cuts)'
    """

    a: str  # ModelRef of the sender model (its bottoms); canonical spelling
    b: str  # ModelRef of the receiver model (its tops; penalties are against B)
    senders: tuple[str, ...] | None = None  # sender cut names of A, in order; None = every cut of A
    receivers: tuple[str, ...] | None = None  # receiver cut names of B; None = every cut of B
    adapter: AdapterSpec = field(default_factory=_lstsq_adapter)  # linear + BN both, lstsq: Csiszarik et al.
    mode: str = "closed-form"  # closed-form (lstsq fit only, seconds) | trained (fit, then task training)
    epochs: int = 3  # trained mode: few epochs, the lstsq start is already close (Csiszarik et al.)
    optimizer: str = "adamw"  # trained mode: adamw | sgd
    lr: float = 1e-2  # trained mode; as StitchSpec (small data gives few steps)
    weight_decay: float = 0.05  # trained mode; Traft & Cheney
    batch_size: int = 64  # trained mode
    seed: int = 0  # adapter init, data order, and the random-init controls' weights
    dataset: str | None = None  # None: the dataset B was trained on
    max_train: int | None = None  # cap on training images (fits and training); None = all
    max_test: int | None = None  # cap on test images; None = all
    controls: bool = False  # also random sender / random receiver / both random (zoo refs only)
    precision: str = "fp32"  # trained mode: fp32 | bf16 (autocast; fast on GPUs and AMX CPUs, slow elsewhere)
    twin_seeds: str = "distinct"  # controls: A's and B's random twins from different seeds (refs.random_twins)

    LEGACY: ClassVar[dict[str, Any]] = {"twin_seeds": "shared"}  # stored before: both twins from `seed`

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", str(parse_ref(self.a)))
        object.__setattr__(self, "b", str(parse_ref(self.b)))
        for role in ("senders", "receivers"):
            names = getattr(self, role)
            if names is None:
                continue
            if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
                raise StitchError(
                    f"{role} is a list of cut names (e.g. ['block1', 'fc1']) or None for all cuts"
                )
            names = tuple(names)
            if not names or len(set(names)) != len(names):
                raise StitchError(f"{role} must name at least one cut, each once; got {list(names)}")
            object.__setattr__(self, role, names)
        if isinstance(self.adapter, dict):
            object.__setattr__(self, "adapter", AdapterSpec.from_dict(self.adapter))
        if self.mode not in MODES:
            raise StitchError(f"unknown matrix mode {self.mode!r}; use one of: {', '.join(MODES)}")
        if self.mode == "closed-form" and self.adapter.init not in FIT_METHODS:
            raise StitchError(
                f"closed-form mode fits each adapter on cached activations, so init must be one of"
                f" {', '.join(FIT_METHODS)} (got {self.adapter.init!r}); or use mode='trained'"
            )
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("twin_seeds", self.twin_seeds, TWIN_SEEDS)
        if not self.controls:  # no twins drawn: the rule means nothing, so the run id does not move
            object.__setattr__(self, "twin_seeds", self.LEGACY["twin_seeds"])
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.epochs < 0 or self.batch_size < 1:
            raise StitchError("epochs must be >= 0 and batch size >= 1")
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_sample_caps(self)

    def label(self) -> str:
        n_s = len(self.senders) if self.senders is not None else "all cuts"
        n_r = len(self.receivers) if self.receivers is not None else "all cuts"
        extra = ", controls" if self.controls else ""
        return f"matrix {self.a} x {self.b} ({self.mode}, {n_s} x {n_r}{extra})"
