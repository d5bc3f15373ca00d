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

>>> Estimate(372.0, 186.0, 744.0, "calibrated: 1 step of gpt = 310 ms; 1,000 steps").describe()
'about 6 min on this machine (calibrated: 1 step of gpt = 310 ms; 1,000 steps)'
>>> estimate_seconds("no-such-kind", None, None) is None
True
"""

from __future__ import annotations

import atexit
import contextvars
import dataclasses
import logging
import statistics
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stitchcore.cuts import Cut, split
from stitchcore.data.images import ImageDataset
from stitchcore.device import pick_device
from stitchcore.errors import StitchError
from stitchcore.experiments._registry import EXPERIMENTS, get_experiment
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
CAL_STEPS = 3  # quick steps: at least this many are timed after the warm-up step
MAX_STEPS = 40  # ... or more of them, up to this many, when a step is quick
STEADY_SECONDS = 0.15  # quick steps are timed for about this long
CAL_EXAMPLES = 256  # examples a forward pass is timed on
MAX_SAMPLED = 3  # cells / positions timed per spec; the others are assumed to cost their mean
QUICK_EXAMPLES = 16  # a quick calibration times forward passes on this many examples ...
QUICK_BATCH = 8  # ... and training steps at most this batch size, scaled up to the spec's batch size
QUICK_CHEAP_SECONDS = 0.1  # ... unless A's prefix takes less than this on those examples: then in full


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


# ---------------------------------------------------------------------------- calibration cache

_CACHE: dict[Hashable, Any] = {}  # full calibrations
_QUICK_CACHE: dict[Hashable, Any] = {}  # quick ones (a handful of examples), until the full one is in
_ASKED: dict[Hashable, float] = {}  # when a page first asked for a calibration (monotonic seconds)
QUICK_GRACE_SECONDS = 1.5  # a quick figure is given only once the full one has been awaited this long
_LOCK = threading.Lock()  # guards the tables below (held briefly, never while timing)
_MEASURING = threading.Lock()  # one full calibration at a time: two timed at once would slow each other down
_FAILED: dict[Hashable, tuple[float, BaseException]] = {}  # background calibrations that failed, and when
_RETRY_SECONDS = 60.0  # a failed background calibration is tried again after this long (a model may appear)
_NO_WAIT = contextvars.ContextVar("stitchlab_estimate_no_wait", default=False)
_QUICK = contextvars.ContextVar("stitchlab_estimate_quick", default=False)  # measure on a handful of examples
_IN_FULL: contextvars.ContextVar[list | None] = contextvars.ContextVar("stitchlab_estimate_in_full", default=None)
_USED_QUICK: contextvars.ContextVar[list | None] = contextvars.ContextVar("stitchlab_estimate_used_quick",
                                                                          default=None)
_THREADS: contextvars.ContextVar[int | None] = contextvars.ContextVar("stitchlab_estimate_threads", default=None)
# Inside full background timing: each timed section first checks that no job runs (else _Deferred), so a run
# launched meanwhile gets the CPU within one section, not after the whole calibration (12 s of a 27 s preset seen).
_DEFERS = contextvars.ContextVar("stitchlab_estimate_defers", default=False)
_DEFERRED: set[Hashable] = set()  # keys whose full timing waits for the jobs: not asked of the quick lane again


def _with_threads(measure: Callable[[], Any], threads: int | None) -> Any:
    """``measure()`` with this OS thread's torch intra-op threads at ``threads`` (the job runner's count;
    OpenMP keeps the count per thread), restored after."""
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        return measure()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def where(device: torch.device) -> str:
    """The part of a calibration's key that says where it was timed: ``cpu x 2 threads``."""
    return f"{device} x {_THREADS.get() or torch.get_num_threads()} threads"


def quick() -> bool:
    """True inside a quick calibration: measure functions time a handful of examples (``QUICK_EXAMPLES``) and
    steps at a small batch (``QUICK_BATCH``), scaled to the spec (``pair_units``, ``per_step`` do this)."""
    return _QUICK.get()


class _Calibrating(Exception):
    """Raised inside an estimate made with ``wait=False`` whose calibration runs in the background."""


class _Deferred(Exception):
    """Raised by a timed section of full background timing while a job runs: timed again once none does."""


class _Lane:
    """A background thread that runs calibrations one after the other, the newest asked first (the page
    the user looks at now, not the pair they typed on the way to it); a key already asked is not queued twice."""

    def __init__(self, name: str, run: Callable[[Hashable, Callable[[], Any], int | None], None],
                 after: _Lane | None = None) -> None:
        self.name, self._run, self._after = name, run, after  # after: wait while that lane is busy
        self._todo: dict[Hashable, tuple[Callable[[], Any], int | None]] = {}
        self._thread: threading.Thread | None = None

    def ask(self, key: Hashable, measure: Callable[[], Any], threads: int | None) -> None:
        """Queue ``key`` (caller holds _LOCK)."""
        self._todo.pop(key, None)
        self._todo[key] = (measure, threads)  # last = newest
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, daemon=True, name=self.name)
            self._thread.start()

    def busy(self) -> bool:
        """Queued or running (caller holds _LOCK)."""
        return bool(self._todo) or (self._thread is not None and self._thread.is_alive())

    def busy_now(self) -> bool:
        """As :meth:`busy`, taking the lock."""
        with _LOCK:
            return self.busy()

    def _loop(self) -> None:
        while True:
            while self._after is not None and (self._after.busy_now() or _jobs_busy()):
                time.sleep(0.05)  # quick figures first, and full ones on a CPU no run is using
            with _LOCK:
                if not self._todo:
                    self._thread = None
                    return
                key = next(reversed(self._todo))
                measure, threads = self._todo.pop(key)
            self._run(key, measure, threads)

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout)


def calibrated(key: Hashable, measure: Callable[[], Any]) -> Any:
    """``measure()`` once per process and key (failures are not cached: a model may appear later).

    Under ``wait=False`` a missing calibration is queued for the background (quick, then full) and this
    returns the quick value when there is one (the estimate is then ``provisional``), else raises
    :class:`_Calibrating`; a recent background failure is raised again.
    """
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    if not _NO_WAIT.get():
        with _MEASURING:
            with _LOCK:
                if key in _CACHE:
                    return _CACHE[key]
            value = _with_threads(measure, _THREADS.get())
            with _LOCK:
                return _CACHE.setdefault(key, value)
    failed = _FAILED.get(key)
    if failed is not None and time.monotonic() - failed[0] < _RETRY_SECONDS:
        raise failed[1]
    threads = _THREADS.get()
    with _LOCK:
        asked = _ASKED.setdefault(key, time.monotonic())
        quick_value = _QUICK_CACHE.get(key, None)
        if quick_value is None and key not in _DEFERRED:
            _QUICK_LANE.ask(key, measure, threads)
        _FULL_LANE.ask(key, measure, threads)
    if quick_value is None or time.monotonic() - asked < QUICK_GRACE_SECONDS:
        raise _Calibrating(str(key))  # a small model's full timing is in before a first figure is needed
    used = _USED_QUICK.get()
    if used is not None:
        used.append(key)
    return quick_value


def _calibrate(key: Hashable, measure: Callable[[], Any], threads: int | None, *, is_quick: bool) -> None:
    """A background calibration: its result goes to the cache, a failure to _FAILED (logged)."""
    cache = _QUICK_CACHE if is_quick else _CACHE
    try:
        with _LOCK:
            if key in _CACHE or key in cache:
                return
        in_full: list[bool] = []
        if is_quick:  # short: not held back behind a full calibration (a first figure within seconds)
            token, full_token = _QUICK.set(True), _IN_FULL.set(in_full)
            try:
                value = _with_threads(measure, threads)
            finally:
                _QUICK.reset(token)
                _IN_FULL.reset(full_token)
            if in_full and all(in_full):  # small models: timed in full by the quick one; nothing left to refine
                cache, is_quick = _CACHE, False
        else:
            defers = _DEFERS.set(True)
            try:
                with _MEASURING:
                    value = _with_threads(measure, threads)
            finally:
                _DEFERS.reset(defers)
        with _LOCK:
            cache[key] = value
            if not is_quick:
                _QUICK_CACHE.pop(key, None)
                _ASKED.pop(key, None)
                _DEFERRED.discard(key)
        _FAILED.pop(key, None)
    except _Deferred:  # a job started: the full lane times it once the jobs are done
        with _LOCK:
            _DEFERRED.add(key)
            _FULL_LANE.ask(key, measure, threads)
    except StitchError as exc:  # a model or dataset that is not there (yet): say nothing for a while
        log.info("calibration %s failed: %s", key[0] if isinstance(key, tuple) else key, exc)
        _FAILED[key] = (time.monotonic(), exc)
    except Exception as exc:  # unexpected: logged with its traceback, tried again at the next ask
        log.warning("calibration %s failed", key[0] if isinstance(key, tuple) else key, exc_info=exc)
        _FAILED[key] = (time.monotonic() - _RETRY_SECONDS + 5.0, exc)


_BUSY_CHECKS: list[Callable[[], bool]] = []  # e.g. a job runner's "a job is running"


def yield_to(busy: Callable[[], bool]) -> Callable[[], None]:
    """Full background calibrations wait while ``busy()`` is true (a job runner passes "a job is running":
    timing beside a run would slow the run and skew the figure; quick ones still give a first figure).
    Returns the function that takes ``busy`` back."""
    with _LOCK:
        _BUSY_CHECKS.append(busy)

    def release() -> None:
        with _LOCK:
            if busy in _BUSY_CHECKS:
                _BUSY_CHECKS.remove(busy)
    return release


def _jobs_busy() -> bool:
    with _LOCK:
        checks = list(_BUSY_CHECKS)
    return any(check() for check in checks)


_QUICK_LANE = _Lane("stitchlab-estimate-quick", lambda k, m, t: _calibrate(k, m, t, is_quick=True))
_FULL_LANE = _Lane("stitchlab-estimate", lambda k, m, t: _calibrate(k, m, t, is_quick=False), after=_QUICK_LANE)


@atexit.register
def _finish_background() -> None:
    """Let background calibrations end before the interpreter does (torch aborts the process when a thread
    still inside an op is torn down at exit)."""
    with _LOCK:
        _QUICK_LANE._todo.clear()
        _FULL_LANE._todo.clear()
    _QUICK_LANE.join(timeout=60)
    _FULL_LANE.join(timeout=60)


def calibrating() -> bool:
    """True while a background calibration is queued or runs (an estimate asked with ``wait=False`` will come,
    or be refined)."""
    with _LOCK:
        return _QUICK_LANE.busy() or _FULL_LANE.busy()


def calibrations() -> int:
    """How many calibrations this process holds (tests check that the second estimate times nothing)."""
    with _LOCK:
        return len(_CACHE)


def clear_calibrations() -> None:
    """Forget every calibration: the next estimates time their steps again (the machine got busier)."""
    with _LOCK:
        _CACHE.clear()
        _QUICK_CACHE.clear()
        _ASKED.clear()
        _FAILED.clear()
        _DEFERRED.clear()


def _step_time(stamps: list[float], total: float, steps: int) -> float:
    """Seconds per step from the times each step ended: the median gap after the first (warm-up) step."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return statistics.median(gaps) if gaps else total / max(steps, 1)


def per_step(run: Callable[[int, Callable[..., None]], Any]) -> float:
    """Seconds per step of ``run(steps, on_step)`` (real training steps that call ``on_step`` after each):
    one step after a warm-up step; when that was quick, about STEADY_SECONDS more of them (at most
    MAX_STEPS), whose median gap is steadier.  A slow model costs two steps, a small one ~0.2 s."""
    stamps: list[float] = []
    total = timed(lambda: run(2, lambda *_: stamps.append(time.perf_counter())))
    estimate = _step_time(stamps, total, 2)
    if estimate * CAL_STEPS < STEADY_SECONDS and not quick():
        steps = min(MAX_STEPS, max(CAL_STEPS + 1, int(STEADY_SECONDS / max(estimate, 1e-5))))
        stamps = []
        total = timed(lambda: run(steps, lambda *_: stamps.append(time.perf_counter())))
        estimate = _step_time(stamps, total, steps)
    return estimate


def timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes.  In full background timing, raises _Deferred first while a job runs."""
    if _DEFERS.get() and _jobs_busy():
        raise _Deferred
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


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


def forward_per_example(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Seconds per example of ``module`` over ``x`` [N, ...] without gradients (after one warm-up batch)."""
    with torch.no_grad():
        module(x[: min(8, len(x))])
        return timed(lambda: module(x)) / len(x)


def first_images(ds: ImageDataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` training images [n, C, H, W] and labels [n] of ``ds``."""
    x, y = next(iter(ds.batches("train", n)))
    return x, y


# ---------------------------------------------------------------------------- one adapter between two cuts


def _timed_in_full(measure: Callable[[], Any]) -> Any:
    """``measure()`` outside quick mode, inside a quick calibration: its result is the full one (kept as such)."""
    token, defers = _QUICK.set(False), _DEFERS.set(True)  # full timing: it waits for the jobs as the full lane's
    try:
        value = measure()
    finally:
        _QUICK.reset(token)
        _DEFERS.reset(defers)
    parts = _IN_FULL.get()
    if parts is not None:
        parts.append(True)
    return value


def pair_units(a: LoadedModel, b: LoadedModel, ds: ImageDataset, cut_a: Cut, cut_b: Cut, adapter_spec: Any,
                batch_size: int, objective: str, optimizer: str, device: torch.device) -> dict[str, float]:
    """Seconds per example of A's prefix, B's prefix and the least-squares fit, per adapter training step
    through B's suffix, and per example of the stitched model's evaluation."""
    from stitchcore.stitching.activations import collect
    from stitchcore.stitching.adapters import build_adapter
    from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
    from stitchcore.stitching.train import AdapterTargets, TrainKnobs, parse_objective, train_adapter

    a.to(device), b.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    prefix_a, _ = split(a, cut_a)
    prefix_b, suffix_b = split(b, cut_b)
    available = len(ds.labels("train"))
    is_quick = quick()
    if is_quick:  # a small model is timed in full: a handful of its examples is all overhead (20x seen)
        probe = min(QUICK_EXAMPLES, available)
        with torch.no_grad():
            is_quick = timed(lambda: collect(prefix_a, ds, a.preprocess, "train", device=device, batch_size=256,
                                             limit=probe)) > QUICK_CHEAP_SECONDS
        if not is_quick:
            return _timed_in_full(lambda: pair_units(a, b, ds, cut_a, cut_b, adapter_spec, batch_size, objective,
                                                     optimizer, device))
        if (parts := _IN_FULL.get()) is not None:
            parts.append(False)  # this part is a quick one: the full timing will refine it
    timed_batch = min(batch_size, QUICK_BATCH) if is_quick else batch_size  # quick: steps scaled up after
    n = min(QUICK_EXAMPLES if is_quick else max(CAL_EXAMPLES, (CAL_STEPS + 1) * batch_size), available)
    n = max(n, min(2 * timed_batch, available))
    acts = dict(device=device, batch_size=256, limit=n)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    h = collect(prefix_a, ds, a.preprocess, "train", **acts)
    out["prefix_a"] = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    target = collect(prefix_b, ds, b.preprocess, "train", **acts)
    out["prefix_b"] = (time.perf_counter() - t0) / n
    adapter = build_adapter(adapter_spec, cut_a, cut_b)
    out["fit"] = 0.0
    if adapter_spec.init in FIT_METHODS:
        pairs = [(h[i: i + 256], target[i: i + 256]) for i in range(0, n, 256)]
        out["fit"] = timed(lambda: fit_adapter(adapter, iter(pairs), method=adapter_spec.init)) / n
    adapter.to(device)
    objective_map = parse_objective(objective)
    y = ds.labels("train")[:n]
    targets = AdapterTargets(labels=y, receiver=target)
    objective_map = {k: v for k, v in objective_map.items() if k != "kd"} or {"task": 1.0}
    def step_at(batch: int) -> float:
        return per_step(lambda steps, on_step: train_adapter(
            adapter, suffix_b, h, targets, objective=objective_map,
            knobs=TrainKnobs(optimizer, 1e-4, 0.0, epochs=-(-steps * batch // n), batch_size=batch, seed=0),
            device=device, on_step=on_step,
        ))  # fmt: skip

    out["step"] = step_at(timed_batch)
    if timed_batch < batch_size:  # quick: a step's fixed cost plus its cost per example, from two small batches
        half = step_at(max(1, timed_batch // 2))
        per_example = max(0.0, (out["step"] - half) / (timed_batch - max(1, timed_batch // 2)))
        out["step"] = max(out["step"], out["step"] + per_example * (batch_size - timed_batch))
    adapter.eval()
    out["eval"] = forward_per_example(lambda v: suffix_b(adapter(v.to(device))), h[:n])
    return out


def full_forward(m: LoadedModel, ds: ImageDataset, device: torch.device) -> float:
    """Seconds per example of the whole model (A or B scored alone)."""
    model = m.model.to(device).eval()
    x, _ = first_images(ds, min(QUICK_EXAMPLES if quick() else CAL_EXAMPLES, len(ds.labels("train"))))
    return forward_per_example(lambda v: model(m.preprocess(v.to(device)) if m.preprocess else v.to(device)), x)


def image_counts(u: dict, spec: Any) -> tuple[int, int]:
    """Train and test images a run sees: the calibrated dataset's counts under the spec's caps."""
    n_train = int(u["n_train"] if spec.max_train is None else min(spec.max_train, u["n_train"]))
    n_test = int(u["n_test"] if spec.max_test is None else min(spec.max_test, u["n_test"]))
    return n_train, n_test



def spread(items: list, k: int = MAX_SAMPLED) -> list:
    """At most ``k`` items spread over ``items`` (first, middle, last ...)."""
    if len(items) <= k:
        return list(items)
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


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

