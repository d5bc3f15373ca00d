"""The spec of a matrix run: :class:`MatrixSpec` and the names every other module of the kind shares.

The bottom of the package: it imports nothing of the kind's, and everything else imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from stitchcore.errors import StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
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
    MAX_SEED,
    Spec,
    check_at_least,
    check_choice,
    check_positive,
    check_seed,
)
from stitchcore.models.refs import TWIN_SEEDS, parse_ref
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.fits import FIT_METHODS
from stitchcore.stitching.precision import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS, parse_objective

__all__ = ["CELLS_ARTIFACT", "CONTROLS", "CONTROL_NAMES", "CONTROL_TRAININGS", "INTO_RANDOM", "MATRIX_OBJECTIVES",
           "MATRIX_PRESETS", "MAX_SEEDS", "MODES", "MODE_RULES", "VARIANTS", "MatrixMode", "MatrixSpec",
           "cell_objective", "made_alike", "matrix_mode", "matrix_objective", "preset_fields", "variant_training"]  # fmt: skip


@dataclass(frozen=True)
class MatrixMode:
    """What a matrix mode means: the one place a mode's name is read.  The spec's checks, the Similarity page's
    form, the CLI's output and the runner ask these (``spec.trains``, ``spec.scores`` ...), never the name.

    >>> [(m.name, m.trains, m.scores) for m in MODE_RULES.values()]
    [('closed-form', False, True), ('trained', True, True), ('proxy', False, False)]
    """

    name: str
    trains: bool  # each cell's adapter is trained after its start: an objective, several seeds, a random start
    scores: bool  # each cell is scored on test images (accuracy, penalty, controls); proxy: the fits' R² and CKA

    @property
    def fits(self) -> bool:
        """Each adapter is a closed-form fit of cached activations and nothing more: its init must be a fit."""
        return not self.trains

    @property
    def allows_controls(self) -> bool:
        """The controls are scored as the cells are: a matrix that scores nothing has nothing to compare."""
        return self.scores


# proxy: the closed-form fits' moments alone (held-out ridge R² and linear CKA per cell, nothing scored): what
# ranks the cells before anything is trained (:mod:`.recommend`)
MODE_RULES = {m.name: m for m in (MatrixMode("closed-form", trains=False, scores=True),
                                  MatrixMode("trained", trains=True, scores=True),
                                  MatrixMode("proxy", trains=False, scores=False))}  # fmt: skip
MODES = tuple(MODE_RULES)


def matrix_mode(name: str) -> MatrixMode:
    """The rules of mode ``name`` (a spec's, or a stored summary's); StitchError naming the modes otherwise.

    >>> matrix_mode("proxy").allows_controls
    False
    """
    if name not in MODE_RULES:
        raise StitchError(f"unknown matrix mode {name!r}; use one of: {', '.join(MODES)}")
    return MODE_RULES[name]


MAX_SEEDS = 10  # adapter seeds per cell: each multiplies the trained cells' work
# matrix first, then the controls.  noise_sender: A's activations at each sender cut replaced by class-clustered
# noise of their shape and scale (stitching.noise_sender; "Functional Alignment Can Mislead", ICML 2025): a cell
# is evidence about A's representation only where it beats a sender that holds nothing of the image but its label
VARIANTS = ("trained", "random_sender", "random_receiver", "random_both", "noise_sender")
CONTROLS = VARIANTS[1:]
CONTROL_NAMES = {"random_sender": "random sender", "random_receiver": "random receiver", "random_both": "both random",
                 "noise_sender": "noise sender"}  # fmt: skip
INTO_RANDOM = ("random_receiver", "random_both")  # the controls whose receiver is B's random-init twin
CELLS_ARTIFACT = "cells.json"
# trained mode: cross-entropy through B's top | copy B's own activation (MSE) | B's own final features (MSE)
MATRIX_OBJECTIVES = ("task", "match", "final")
# How the controls' adapters are made.  "matched" (issue 39): exactly as the matrix's own cells (closed form beside
# closed form, trained beside trained: a debiased cell then compares like with like), except the controls into a
# random receiver where the cells never see the task loss -- a closed-form (or copy-task) fit into a random receiver
# copies that random net's activation, so the stitched net predicts what random B predicts: chance in every cell.
# Those are task-trained for ``epochs`` and drawn beside the matrix, never subtracted from it.  "task": every control
# task-trained, whatever the matrix's mode and objective (runs of issue 25; a closed-form matrix's debiased maps then
# mixed closed-form cells with trained controls, and its readers now refuse them).  "as-matrix": every control
# exactly as the cells (what every run stored before issue 25; the key is then left out of the dict).
CONTROL_TRAININGS = ("matched", "task", "as-matrix")

# Named recipes: field values a preset sets (the CLI's --preset, the Similarity page's "Recipe").  Where the
# paper leaves a choice open, docs/DESIGN.md ("Stitching matrices") says what was chosen and why.
MATRIX_PRESETS: dict[str, dict[str, Any]] = {
    # Hernandez, Dangovski & Lu: a 1x1-conv stitch (strided conv to downsample, nearest upsample + 1x1 to
    # upsample), started from random weights and trained on the task loss; controls, when asked for, trained too
    "hernandez": {"mode": "trained", "objective": "task", "control_training": "matched",
                  "adapter": {"kind": "linear", "norm": "both", "resample": "strided", "init": "random",
                              "rescale": "oneshot"}},
    # the house default: least-squares fits in closed form (Csiszarik et al.), seconds per matrix
    "closed-form": {"mode": "closed-form", "objective": "task", "control_training": "matched",
                    "adapter": {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "lstsq",
                                "rescale": "chained"}},
}


def preset_fields(name: str) -> dict[str, Any]:
    """The MatrixSpec fields of a named recipe (an AdapterSpec for ``adapter``); the error lists the names.

    >>> preset_fields("hernandez")["adapter"].resample
    'strided'
    """
    if name not in MATRIX_PRESETS:
        raise StitchError(f"unknown matrix preset {name!r}; use one of: {', '.join(MATRIX_PRESETS)}")
    fields = dict(MATRIX_PRESETS[name])
    fields["adapter"] = AdapterSpec(**fields["adapter"])
    return fields


def matrix_objective(objective: Any) -> dict[str, float]:
    """The weights of a matrix's objective: task, match or a sum of them; StitchError otherwise.

    >>> matrix_objective("task+0.5*match")
    {'task': 1.0, 'match': 0.5}
    """
    weights = parse_objective(objective) if isinstance(objective, str) else None
    if weights is None or set(weights) - set(MATRIX_OBJECTIVES):
        raise StitchError(f"a matrix objective is {' | '.join(MATRIX_OBJECTIVES)} or a sum such as"
                          f" 'task+0.5*match' (got {objective!r})")  # fmt: skip
    return weights


def _lstsq_adapter() -> AdapterSpec:
    return AdapterSpec(kind="linear", norm="both", resample="bilinear", init="lstsq", rescale="chained")


@dataclass(frozen=True)
class MatrixSpec(DataFiles, Spec):
    """Every sender cut of A x every receiver cut of B; hashed into the run id like any spec.

    >>> MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=["block1", "fc1"]).label()
    'matrix zoo:cnn-digits-s0 x zoo:cnn-digits-s1 (closed-form, 2 x all cuts)'
    """

    a: str  # ModelRef of the sender model (its bottoms); canonical spelling
    b: str  # ModelRef of the receiver model (its tops; penalties are against B)
    senders: tuple[str, ...] | None = None  # sender cut names of A, in order; None = every cut of A
    receivers: tuple[str, ...] | None = None  # receiver cut names of B; None = every cut of B
    adapter: AdapterSpec = field(default_factory=_lstsq_adapter)  # linear + BN both, lstsq: Csiszarik et al.
    mode: str = "closed-form"  # closed-form (lstsq fit only, seconds) | trained (fit, then task training) | proxy
    epochs: int = 3  # trained mode: few epochs, the lstsq start is already close (Csiszarik et al.)
    optimizer: str = "adamw"  # trained mode: adamw | sgd
    lr: float = 1e-2  # trained mode; as StitchSpec (small data gives few steps)
    weight_decay: float = 0.05  # trained mode; Traft & Cheney
    batch_size: int = 64  # trained mode
    seed: int = 0  # adapter init, data order, and the random-init controls' weights
    dataset: str | None = None  # None: the dataset B was trained on
    max_train: int | None = None  # cap on training images (fits and training); None = all
    max_test: int | None = None  # cap on test images; None = all
    controls: bool = False  # also random sender / random receiver / both random / noise sender (zoo refs only)
    precision: str = "fp32"  # trained mode: fp32 | bf16 (autocast; fast on GPUs and AMX CPUs, slow elsewhere)
    twin_seeds: str = "distinct"  # controls: A's and B's random twins from different seeds (refs.random_twins)
    # trained mode: task (cross-entropy through B's top), match (the paper's copy task: MSE to B's own activation
    # at the receiving cut), final (MSE to B's own final features), or a sum such as "task+0.5*match"; absent from
    # older dicts = task
    objective: str = "task"
    # controls: "matched" = made as the matrix's cells, but those into a random receiver task-trained where the
    # cells never see the task loss (see CONTROL_TRAININGS); "task" = every control task-trained (issue 25's runs);
    # "as-matrix" = every control as the cells (older dicts, key absent).  Without controls, or wherever the
    # choice changes nothing (a matrix whose cells train on a task term), held as "as-matrix"
    control_training: str = "matched"
    # trained mode: train every cell's adapter from this many seeds (seed, seed+1, ...): each cell keeps seed's
    # value and its interval over test images, and adds the mean and a t-interval across the seeds
    seeds: int = 1
    # the identity of the files a dataset on disk holds (imagefolder:/file:; experiments._data_id): measured when
    # the spec is made, kept as stored when one is read; None for built-in data (left out of the run id)
    data_id: dict[str, str] | str | None = MEASURE_FILES
    # controls: also the noise-sender control (each sender cut's activations replaced by class-clustered noise of
    # their shape and scale, stitching.noise_sender), its cells made as the matrix's; without controls held False
    noise_sender: bool = True

    # what a dict written before each field computed (Spec.LEGACY: left out of to_dict at that value, so old run
    # ids stay): both twins from `seed`, the task objective, controls made as the matrix's cells, no noise sender
    LEGACY: ClassVar[dict[str, Any]] = {"twin_seeds": "shared", "objective": "task", "control_training": "as-matrix",
                                        "seeds": 1, "data_id": None, "noise_sender": False}  # fmt: skip

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
        mode = matrix_mode(self.mode)
        if mode.fits and self.adapter.init not in FIT_METHODS:
            raise StitchError(
                f"{self.mode} mode fits each adapter on cached activations, so init must be one of"
                f" {', '.join(FIT_METHODS)} (got {self.adapter.init!r}); or use mode='trained'",
                fix={"mode": "trained"},
            )
        if self.controls and not mode.allows_controls:
            raise StitchError("a proxy matrix scores nothing, so it has no controls to compare with: run it without"
                              " controls, or use mode='closed-form'", fix={"controls": False})  # fmt: skip
        weights = matrix_objective(self.objective)
        if not mode.trains and weights != {"task": 1.0}:
            raise StitchError(f"objective {self.objective!r} trains the adapters; {self.mode} mode only fits them"
                              " by least squares: use mode='trained'", fix={"mode": "trained"})  # fmt: skip
        check_count("epochs", self.epochs, 0, MAX_EPOCHS, "0 keeps the fitted start",
                    "each epoch passes over the training images, in every cell")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        check_choice("control_training", self.control_training, CONTROL_TRAININGS)
        held = self.held_fields()
        cells_see_task = mode.trains and "task" in weights  # then "matched" makes them as the cells
        if "control_training" in held or (self.control_training == "matched" and cells_see_task):
            object.__setattr__(self, "control_training", "as-matrix")  # the same computation either way
        if self.control_training != "as-matrix" and self.epochs < 1:
            raise StitchError("task-trained controls need epochs >= 1 (or run without controls)", fix={"epochs": 1})
        if not isinstance(self.noise_sender, bool):
            raise StitchError(f"noise_sender is true or false (got {self.noise_sender!r})")
        if "noise_sender" in held:  # no controls, no noise sender: the run id does not move
            object.__setattr__(self, "noise_sender", False)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("twin_seeds", self.twin_seeds, TWIN_SEEDS)
        if "twin_seeds" in held:  # no twins drawn: the rule means nothing, so the run id does not move
            object.__setattr__(self, "twin_seeds", self.LEGACY["twin_seeds"])
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_rate("lr", self.lr, MAX_LR, "typical values 1e-3 .. 1e-1 (default 1e-2)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1 (default 0.05)")
        check_seed("seed", self.seed)
        check_image_caps(self)
        check_adapter_rank(self.adapter)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or not 1 <= self.seeds <= MAX_SEEDS:
            raise StitchError(f"seeds is 1 to {MAX_SEEDS} adapter trainings per cell (got {self.seeds!r})")
        if self.seed + self.seeds - 1 > MAX_SEED:  # the cells' adapters train from seed, seed+1, ... (one spec each)
            raise StitchError(f"seed + seeds - 1 must be at most {MAX_SEED} (got {self.seed} + {self.seeds} - 1): "
                              "lower the seed")  # fmt: skip
        if self.seeds > 1 and not mode.trains:
            raise StitchError("seeds > 1 trains each cell's adapter from several seeds; a closed-form fit is the same"
                              " from every seed: use mode='trained'", fix={"mode": "trained"})  # fmt: skip
        self._check_data_id()  # last: measuring walks the files, after every cheaper check

    @property
    def rules(self) -> MatrixMode:
        """What this matrix's mode means (:class:`MatrixMode`)."""
        return matrix_mode(self.mode)

    @property
    def trains(self) -> bool:
        """Each cell's adapter is trained after its start (``mode="trained"``)."""
        return self.rules.trains

    @property
    def scores(self) -> bool:
        """Each cell is scored on test images; a proxy matrix keeps its fits' held-out R² and CKA alone."""
        return self.rules.scores

    def held_fields(self) -> tuple[str, ...]:
        """The fields this spec holds at one value whatever was given, because they change nothing here (so the
        run id does not move): without controls the controls' training, noise sender and twins' seeds; with
        controls beside cells task-trained alone, the controls' training (made as the cells either way).  A
        link and a command line leave them out (:func:`stitchcore.params.link_params`).

        >>> MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1").held_fields()
        ('control_training', 'noise_sender', 'twin_seeds')
        """
        if not self.controls:
            return ("control_training", "noise_sender", "twin_seeds")
        if self.trains and parse_objective(self.objective) == {"task": 1.0}:
            return ("control_training",)
        return ()

    @staticmethod
    def unused(mode: str, controls: bool) -> frozenset[str]:
        """The fields a matrix of ``mode`` (with or without ``controls``) does not use, by name: a form disables
        them.  Of those, :meth:`fixed` are the ones the spec takes at one value only.

        >>> sorted(MatrixSpec.unused("closed-form", False))
        ['control_training', 'noise_sender', 'objective', 'seeds', 'twin_seeds']
        """
        rules, out = matrix_mode(mode), set()
        if not rules.trains:
            out |= {"objective", "seeds"}
        if not rules.allows_controls:
            out.add("controls")
        if not (controls and rules.allows_controls):
            out |= {"control_training", "noise_sender", "twin_seeds"}
        if not rules.scores:  # nothing trained, nothing scored: the fits' moments alone
            out |= {"epochs", "optimizer", "lr", "weight_decay", "batch_size", "precision"}
        return frozenset(out)

    @staticmethod
    def fixed(mode: str) -> dict[str, Any]:
        """The fields ``mode`` takes at one value only (the spec refuses any other): a form disables them
        (:meth:`unused`) and gives these values.

        >>> MatrixSpec.fixed("proxy")
        {'objective': 'task', 'seeds': 1, 'controls': False}
        """
        rules = matrix_mode(mode)
        out: dict[str, Any] = {} if rules.trains else {"objective": "task", "seeds": 1}
        return out if rules.allows_controls else {**out, "controls": False}

    @property
    def variants(self) -> tuple[str, ...]:
        """What the run computes, in :data:`VARIANTS` order: the matrix's own cells, then each control it asks for.

        >>> MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", controls=True).variants
        ('trained', 'random_sender', 'random_receiver', 'random_both', 'noise_sender')
        >>> MatrixSpec.from_dict({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "controls": True}).variants
        ('trained', 'random_sender', 'random_receiver', 'random_both')
        """
        if not self.controls:
            return VARIANTS[:1]
        return tuple(v for v in VARIANTS if v != "noise_sender" or self.noise_sender)

    @property
    def controls_at_chance(self) -> tuple[str, ...]:
        """The controls whose every cell is pinned at chance by construction: a random receiver whose adapters
        never see the task loss only copy (closed form) or are trained to copy (match) the random net's own
        activation, so the stitched net predicts what the random B does."""
        if not self.controls:
            return ()
        weights = cell_objective(self, "random_receiver")
        if weights is not None and "task" in weights and self.epochs > 0:
            return ()
        return ("random_receiver", "random_both")

    def cell_stitch(self, sender: str, receiver: str) -> Any:
        """The stitch of cell (``sender``, ``receiver``) as a run of its own (what a cell opens on the Stitch
        page): the matrix's data, adapter and seeds, on every train image (no validation split, as the matrix
        fits); a trained matrix's training too, a closed-form cell's fit trained further at the stitch's
        defaults (epochs 0 is the cell itself).

        >>> m = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", seeds=1)
        >>> s = m.cell_stitch("fc1", "fc2")
        >>> (s.cut_a, s.cut_b, s.adapter.init, s.val_fraction)
        ('fc1', 'fc2', 'lstsq', 0.0)
        """
        from stitchcore.experiments.stitch import StitchSpec

        trained = {"epochs": self.epochs, "optimizer": self.optimizer, "lr": self.lr, "weight_decay": self.weight_decay,
                   "batch_size": self.batch_size, "objective": self.objective} if self.trains else {}  # fmt: skip
        return StitchSpec(a=self.a, b=self.b, cut_a=sender, cut_b=receiver, adapter=self.adapter, dataset=self.dataset,
                          seed=self.seed, seeds=self.seeds, val_fraction=0.0, data_id=self.data_id,
                          **trained)  # fmt: skip

    def label(self) -> str:
        n_s = len(self.senders) if self.senders is not None else "all cuts"
        n_r = len(self.receivers) if self.receivers is not None else "all cuts"
        extra = (", controls" if self.controls else "") + (f", {self.seeds} seeds" if self.seeds > 1 else "")
        return f"matrix {self.a} x {self.b} ({self.mode}, {n_s} x {n_r}{extra})"


def variant_training(mode: str, objective: str, control_training: str, variant: str) -> dict[str, float] | None:
    """How the adapters of ``variant``'s cells are trained after their start, from the spec's (or a stored
    summary's) ``mode``, ``objective`` and ``control_training``: objective weights, or None for a closed-form fit.

    >>> variant_training("closed-form", "task", "matched", "random_sender")  # as the cells: a closed-form fit
    >>> variant_training("closed-form", "task", "matched", "random_receiver")  # a fit there would copy random B
    {'task': 1.0}
    """
    cells = parse_objective(objective) if matrix_mode(mode).trains else None
    if variant == "trained" or control_training == "as-matrix":
        return cells
    if control_training == "task" or (variant in INTO_RANDOM and (cells is None or "task" not in cells)):
        return {"task": 1.0}
    return cells


def made_alike(mode: str, objective: str, control_training: str, control: str) -> bool:
    """Whether ``control``'s adapters are made exactly as the matrix's own cells: only then is a debiased cell
    (cell minus control) a difference of senders, not of how the two stitches were made.

    >>> made_alike("closed-form", "task", "matched", "noise_sender")  # both closed-form fits
    True
    >>> made_alike("closed-form", "task", "task", "random_sender")  # a trained control beside closed-form cells
    False
    """
    return variant_training(mode, objective, control_training, control) == variant_training(
        mode, objective, control_training, "trained")


def cell_objective(spec: MatrixSpec, variant: str) -> dict[str, float] | None:
    """How the adapters of ``variant``'s cells are trained after their start: objective weights, or None for
    a closed-form fit alone (:func:`variant_training` of the spec's fields).

    >>> spec = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", controls=True)
    >>> [cell_objective(spec, v) for v in ("trained", "random_sender", "random_receiver")]
    [None, None, {'task': 1.0}]
    """
    return variant_training(spec.mode, spec.objective, spec.control_training, variant)
