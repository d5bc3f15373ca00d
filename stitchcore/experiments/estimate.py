"""How long a run will take on this machine, said before it is launched: the timing engine.

An estimate is a calibration times the spec's work.  The first time a kind of work is
estimated in this process, a few real steps of it are timed here, with the code the run
itself uses (the recipe's training step, the adapter step through B's frozen suffix, a
char-GPT step, an LM adapter step), and the unit costs are cached; the estimate then
multiplies them by the counts the spec gives (epochs x steps per epoch, examples, cells,
positions, splits).  Changing epochs or steps therefore costs nothing; a new model, cut or
batch size is timed once (well under a second for the built-in models).

Each kind registers its own estimator with its run (``register_experiment(..., estimate=)``,
in the kind's module, from the helpers here: :func:`calibrated`, :func:`per_step`,
:func:`pair_units` ...); this module imports no kind.  ``estimate_seconds(kind, spec, store)``
asks the kind's estimator; ``estimate_plan`` sums a list of runs queued in order (the classroom
demo: two models, then their stitch), standing in untrained copies of models that an earlier
item makes (a kind's ``makes``).  Neither ever raises: what cannot be estimated (a kind without
an estimator, a model that does not load) is None, and the reason goes to the log.

Timings are taken with the calling thread's torch thread count while other work may run,
so the range (``low`` .. ``high``) is wide on purpose: half to twice the best guess.

Pages never wait (``wait=False``): a missing calibration is timed in the background, first as a
*quick* one (the same code on a handful of examples and one step at a small batch, scaled up: a
second or two even for two ImageNet ResNets), then in full.  Meanwhile the quick figure is given as a
``provisional`` estimate, so every Launch button has a figure within seconds that is refined when the
full timing is in.

This module holds the figure (:class:`Estimate`), what an estimator sees (:class:`EstimateContext`), the quick
settings a page offers for a long run, and the entry points; the calibration cache and its background lanes
are :mod:`stitchcore.experiments.calibration`, the timing helpers :mod:`stitchcore.experiments.timing` (both
re-exported here: a kind's estimator imports them from this module).

>>> Estimate(372.0, 186.0, 744.0, "calibrated: 1 step of gpt = 310 ms; 1,000 steps").describe()
'about 6 min on this machine (calibrated: 1 step of gpt = 310 ms; 1,000 steps)'
>>> estimate_seconds("no-such-kind", None, None) is None
True
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stitchcore.device import pick_device
from stitchcore.experiments._registry import EXPERIMENTS, get_experiment
from stitchcore.experiments.calibration import (
    _NO_WAIT,
    _THREADS,
    _USED_QUICK,
    _Calibrating,
    calibrated,
    calibrating,
    calibrations,
    clear_calibrations,
    quick,
    where,
    yield_to,
)
from stitchcore.experiments.timing import (
    CAL_EXAMPLES,
    QUICK_BATCH,
    QUICK_EXAMPLES,
    first_images,
    forward_per_example,
    full_forward,
    image_counts,
    pair_units,
    per_step,
    spread,
    timed,
)
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store, run_id_for

__all__ = ["CAL_EXAMPLES", "QUICK_BATCH", "QUICK_EXAMPLES", "Estimate", "EstimateContext", "calibrated", "calibrating", "calibrations",
           "clear_calibrations", "estimate_from", "estimate_plan", "estimate_seconds", "first_images",
           "format_duration", "forward_per_example", "full_forward", "image_counts", "ms", "pair_units", "per_step",
           "quick", "quick_settings", "describe_changes", "spread", "timed", "where", "yield_to"]

log = logging.getLogger(__name__)

SPREAD = 2.0  # low = best guess / SPREAD, high = best guess * SPREAD


@dataclass(frozen=True)
class Estimate:
    """A run's expected wall time on this machine."""

    seconds: float  # best guess
    low: float  # plausible range
    high: float
    basis: str  # how it was reached ("calibrated: 1 step of cnn = 3.1 ms; 420 steps")
    stored: bool = False  # the run is in the store already: it opens at once
    provisional: bool = False  # from a quick calibration (a few examples); the full timing is on its way

    def describe(self) -> str:
        """``about 6 min on this machine (calibrated: ...)``."""
        if self.stored:
            return "in the store already: opens at once"
        return f"about {format_duration(self.seconds)} on this machine ({self.basis})"

    def __add__(self, other: Estimate) -> Estimate:
        """Two runs one after the other (bases joined with " + ", stored ones left out)."""
        if self.stored:
            return other
        if other.stored:
            return self
        return Estimate(self.seconds + other.seconds, self.low + other.low, self.high + other.high,
                        f"{self.basis} + {other.basis}", provisional=self.provisional or other.provisional)


def format_duration(seconds: float) -> str:
    """Round a duration for people: ``"4 s"``, ``"1 min 10 s"``, ``"6 min"``, ``"1 h 20 min"``.

    >>> format_duration(3.2), format_duration(70), format_duration(365), format_duration(4800)
    ('3 s', '1 min 10 s', '6 min', '1 h 20 min')
    """
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{max(1, round(s))} s"
    if s < 300:
        m, r = divmod(int(round(s / 10) * 10), 60)
        return f"{m} min" + (f" {r} s" if r else "")
    if s < 3600:
        return f"{round(s / 60)} min"
    h, m = divmod(int(round(s / 600) * 10), 60)
    return f"{h} h" + (f" {m} min" if m else "")


def ms(seconds: float) -> str:
    """``"3.1 ms"``, ``"310 ms"``, ``"1.2 s"``."""
    ms = seconds * 1000
    if ms >= 1000:
        return f"{seconds:.1f} s"
    return f"{ms:.2g} ms" if ms < 10 else f"{ms:.0f} ms"


def estimate_from(seconds: float, basis: str) -> Estimate:
    """An estimate of ``seconds`` with the usual range (half to twice) and its ``basis``."""
    return Estimate(seconds, seconds / SPREAD, seconds * SPREAD, basis)


def _device() -> torch.device:
    return pick_device()  # the device a job gets by default (the runner's default queue)


# ---------------------------------------------------------------------------- what an estimator sees


StandIn = tuple[str, Callable[[], LoadedModel]]  # (what fixes its cost, an untrained copy) of a model a run makes


@dataclass(frozen=True)
class EstimateContext:
    """What a kind's estimator gets beside its spec: the store, the device a job gets, and the models
    that runs queued before it make (``pending``: ref -> stand-in), which it may time untrained."""

    store: Store
    device: torch.device
    pending: dict[str, StandIn] = field(default_factory=dict)

    def load(self, ref: str) -> LoadedModel:
        """``ref`` from the store, or an untrained copy of the model a queued run is about to make."""
        try:
            return load_model(ref, store=self.store)
        except Exception:
            stand_in = self._stand_in(ref)
            if stand_in is None:
                raise
            return stand_in[1]()

    def model_key(self, ref: str) -> str:
        """What fixes a model's cost in a calibration key: its ref, or what the run making it says."""
        stand_in = self._stand_in(ref)
        return stand_in[0] if stand_in is not None else f"{ref}@{self.store.root}"

    def pair_key(self, kind: str, spec: Any, scales: tuple[str, ...]) -> tuple:
        """The calibration key of a two-model spec: its fields but ``scales`` (counts the estimate multiplies
        by, never timed), what fixes each model's cost, and where it is timed."""
        fixed = {k: v for k, v in spec.to_dict().items() if k not in scales}
        return kind, repr(sorted(fixed.items())), self.model_key(spec.a), self.model_key(spec.b), where(self.device)

    def _stand_in(self, ref: str) -> StandIn | None:
        r = parse_ref(ref)
        return self.pending.get(f"zoo:{r.name}") if r.scheme == "zoo" else None


# ---------------------------------------------------------------------------- quick settings

QUICK_EPOCHS = 2  # the quick settings a page offers for a long run: this many epochs ...
QUICK_IMAGES = 300  # ... on at most this many training and test images ...
QUICK_STEPS = 100  # ... or this many steps (language-model adapters)


def quick_settings(spec: Any) -> dict[str, Any]:
    """The fields of ``spec`` to change for a quick, rougher run: fewer epochs or steps, capped images
    (only fields the spec has, and only where that is less than it asks for).

    >>> from stitchcore.experiments.stitch import StitchSpec
    >>> quick_settings(StitchSpec(a="zoo:a", b="zoo:b", cut_a="x", cut_b="y", epochs=10))
    {'epochs': 2, 'max_train': 300, 'max_test': 300}
    >>> quick_settings(StitchSpec(a="zoo:a", b="zoo:b", cut_a="x", cut_b="y", epochs=1, max_train=100, max_test=100))
    {}
    """
    names = {f.name for f in dataclasses.fields(spec)}
    out: dict[str, Any] = {}
    for name, quick_value in (("epochs", QUICK_EPOCHS), ("steps", QUICK_STEPS)):
        if name in names and getattr(spec, name) > quick_value:
            out[name] = quick_value
    for name in ("max_train", "max_test"):
        if name in names and (getattr(spec, name) is None or getattr(spec, name) > QUICK_IMAGES):
            out[name] = QUICK_IMAGES
    return out


def describe_changes(changes: dict[str, Any]) -> str:
    """``quick_settings``' changes for a button: ``2 epochs, 300 train / 300 test images``.

    >>> describe_changes({"epochs": 2, "max_train": 300, "max_test": 300})
    '2 epochs, 300 train / 300 test images'
    """
    parts = [f"{changes[k]} {k}" for k in ("epochs", "steps") if k in changes]
    images = [f"{changes[k]} {what}" for k, what in (("max_train", "train"), ("max_test", "test")) if k in changes]
    if images:
        parts.append(" / ".join(images) + " images")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- public


def _pending(items: Iterable[tuple[str, Any]]) -> dict[str, StandIn]:
    """The models that the runs ``items`` [(kind, spec)] make (their kinds' ``makes``), by ref; an item this
    process cannot read (no spec, a kind it does not register) makes none."""
    out: dict[str, StandIn] = {}
    for kind, spec in items:
        makes = get_experiment(kind).makes if kind in EXPERIMENTS else None
        if makes is not None and spec is not None:
            out.update(makes(spec, run_id_for(kind, spec.to_dict())))
    return out


def _one(kind: str, spec: Any, store: Store, pending: dict[str, StandIn]) -> Estimate | None:
    estimate = get_experiment(kind).estimate if kind in EXPERIMENTS else None
    if estimate is None:
        return None
    if store.lookup_done(run_id_for(kind, spec.to_dict())) is not None:
        return Estimate(0.0, 0.0, 0.0, "in the store", stored=True)
    return estimate(spec, EstimateContext(store, _device(), pending))


def estimate_seconds(kind: str, spec: Any, store: Store, *, wait: bool = True,
                     threads: int | None = None) -> Estimate | None:
    """How long ``kind`` run on ``spec`` takes on this machine (``stored`` when the store has it already);
    None when it cannot be estimated (a kind without an estimator, a model that does not load ...).  Never raises.

    The first estimate of a model / cut / batch size times a few real steps (cached for the process);
    later ones with other epochs, steps or caps are arithmetic.  ``wait=False`` (pages): never time
    anything here; a missing calibration starts in the background and this returns None meanwhile
    (:func:`calibrating` says so), so a page is never held up by it.  ``threads``: time with the torch
    thread count the job will run with (the job runner's ``cpu_threads``; default: the caller's).
    """
    token, threads_token, used = _NO_WAIT.set(not wait), _THREADS.set(threads), _USED_QUICK.set([])
    try:
        return _mark(_one(kind, spec, store, {}))
    except _Calibrating:
        return None
    except Exception as exc:  # an estimate is a courtesy: say nothing rather than fail
        log.info("no estimate for %s: %s: %s", kind, type(exc).__name__, exc)
        return None
    finally:
        _NO_WAIT.reset(token)
        _THREADS.reset(threads_token)
        _USED_QUICK.reset(used)


def _mark(est: Estimate | None) -> Estimate | None:
    """``est`` marked provisional when a quick calibration went into it (this context's ``_USED_QUICK``)."""
    if est is None or not _USED_QUICK.get() or est.stored:
        return est
    return dataclasses.replace(est, provisional=True, basis=f"{est.basis}; a first figure from a few examples, "
                                                            "refined when the full timing is in")


def estimate_plan(items: list[tuple[str, Any]], store: Store, *, also_pending: list[tuple[str, Any]] = (),
                  wait: bool = True, threads: int | None = None) -> Estimate | None:
    """The runs ``items`` [(kind, spec)] one after the other (one job queue runs them in order): the sum of
    those not in the store yet, where a later item may use a zoo model an earlier one (or one of
    ``also_pending``, e.g. running jobs) trains: an untrained copy stands in for the timing.  ``stored``
    when all are in the store; None when any cannot be estimated (``wait=False``: or is still being timed).
    """
    token, threads_token, used = _NO_WAIT.set(not wait), _THREADS.set(threads), _USED_QUICK.set([])
    try:
        pending = _pending([*also_pending, *items])
        total = Estimate(0.0, 0.0, 0.0, "in the store", stored=True)
        for kind, spec in items:
            est = _one(kind, spec, store, pending)
            if est is None:
                return None
            total = total + est
        return _mark(total)
    except _Calibrating:
        return None
    except Exception as exc:
        log.info("no estimate for the plan %s: %s: %s", [k for k, _ in items], type(exc).__name__, exc)
        return None
    finally:
        _NO_WAIT.reset(token)
        _THREADS.reset(threads_token)
        _USED_QUICK.reset(used)
