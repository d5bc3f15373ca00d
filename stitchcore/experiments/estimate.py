"""How long a run will take on this machine, said before it is launched.

An estimate is a calibration times the spec's work.  The first time a kind of work is
estimated in this process, a few real steps of it are timed here, with the code the run
itself uses (the recipe's training step, the adapter step through B's frozen suffix, a
char-GPT step, an LM adapter step), and the unit costs are cached; the estimate then
multiplies them by the counts the spec gives (epochs x steps per epoch, examples, cells,
positions, splits).  Changing epochs or steps therefore costs nothing; a new model, cut or
batch size is timed once (well under a second for the built-in models).

``estimate_seconds(kind, spec, store)`` covers ``zoo`` (image recipes), ``lm_zoo`` (char-GPT
recipes; ``zoo`` with a gpt recipe is the same), ``stitch``, ``matrix``, ``sweep``,
``similarity``, ``merge``, ``lmstitch`` and ``lmdepth``; ``estimate_plan`` sums a list of runs
queued in order (the classroom demo: two models, then their stitch), standing in untrained
copies of models that an earlier item trains.  Neither ever raises: what cannot be estimated
(an unknown kind, a model that does not load) is None, and the reason goes to the log.

Timings are taken with the calling thread's torch thread count while other work may run,
so the range (``low`` .. ``high``) is wide on purpose: half to twice the best guess.

>>> Estimate(372.0, 186.0, 744.0, "calibrated: 1 step of gpt = 310 ms; 1,000 steps").describe()
'about 6 min on this machine (calibrated: 1 step of gpt = 310 ms; 1,000 steps)'
>>> estimate_seconds("no-such-kind", None, None) is None
True
"""

from __future__ import annotations

import atexit
import contextvars
import gzip
import logging
import statistics
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from stitchcore.cuts import Cut, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset, drop_class, load_dataset
from stitchcore.device import pick_device
from stitchcore.errors import StitchError
from stitchcore.experiments._shared import resolve_dataset
from stitchcore.experiments.assemble import AssembleSpec, assemble_plan
from stitchcore.experiments.lm_zoo import EVAL_WINDOWS, STEPS_PER_EPOCH, lm_train_step
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.merge import FIT_BATCHES, DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.zoo import ZooRecipe, untrained_model, zoo_name
from stitchcore.models.archs import arch_input_kind
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store, run_id_for

__all__ = ["Estimate", "calibrating", "calibrations", "clear_calibrations", "estimate_kind", "estimate_plan", "estimate_seconds", "format_duration"]

log = logging.getLogger(__name__)

SPREAD = 2.0  # low = best guess / SPREAD, high = best guess * SPREAD
CAL_STEPS = 3  # quick steps: at least this many are timed after the warm-up step
MAX_STEPS = 40  # ... or more of them, up to this many, when a step is quick
STEADY_SECONDS = 0.15  # quick steps are timed for about this long
CAL_EXAMPLES = 256  # examples a forward pass is timed on
MAX_SAMPLED = 3  # cells / positions timed per spec; the others are assumed to cost their mean


@dataclass(frozen=True)
class Estimate:
    """A run's expected wall time on this machine."""

    seconds: float  # best guess
    low: float  # plausible range
    high: float
    basis: str  # how it was reached ("calibrated: 1 step of cnn = 3.1 ms; 420 steps")
    stored: bool = False  # the run is in the store already: it opens at once

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
                        f"{self.basis} + {other.basis}")


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


def _ms(seconds: float) -> str:
    """``"3.1 ms"``, ``"310 ms"``, ``"1.2 s"``."""
    ms = seconds * 1000
    if ms >= 1000:
        return f"{seconds:.1f} s"
    return f"{ms:.2g} ms" if ms < 10 else f"{ms:.0f} ms"


def _estimate(seconds: float, basis: str) -> Estimate:
    return Estimate(seconds, seconds / SPREAD, seconds * SPREAD, basis)


# ---------------------------------------------------------------------------- calibration cache

_CACHE: dict[Hashable, Any] = {}
_LOCK = threading.Lock()  # guards the tables below (held briefly, never while timing)
_MEASURING = threading.Lock()  # one calibration at a time: two timed at once would slow each other down
_FAILED: dict[Hashable, tuple[float, BaseException]] = {}  # background calibrations that failed, and when
_RETRY_SECONDS = 60.0  # a failed background calibration is tried again after this long (a model may appear)
_background: threading.Thread | None = None  # the one background calibration running, if any
_NO_WAIT = contextvars.ContextVar("stitchlab_estimate_no_wait", default=False)
_THREADS: contextvars.ContextVar[int | None] = contextvars.ContextVar("stitchlab_estimate_threads", default=None)


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


def _where(device: torch.device) -> str:
    """The part of a calibration's key that says where it was timed: ``cpu x 2 threads``."""
    return f"{device} x {_THREADS.get() or torch.get_num_threads()} threads"


class _Calibrating(Exception):
    """Raised inside an estimate made with ``wait=False`` whose calibration runs in the background."""


def _cached(key: Hashable, measure: Callable[[], Any]) -> Any:
    """``measure()`` once per process and key (failures are not cached: a model may appear later).

    Under ``wait=False`` a missing calibration starts in a background thread (one at a time) and
    this raises :class:`_Calibrating`; a recent background failure is raised again.
    """
    global _background
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
    with _LOCK:
        if _background is None or not _background.is_alive():
            _background = threading.Thread(target=_calibrate, args=(key, measure, _THREADS.get()), daemon=True,
                                           name="stitchlab-estimate")
            _background.start()
    raise _Calibrating(str(key))


def _calibrate(key: Hashable, measure: Callable[[], Any], threads: int | None) -> None:
    """A background calibration: its result goes to the cache, a failure to _FAILED (logged)."""
    try:
        with _MEASURING:
            with _LOCK:
                if key in _CACHE:
                    return
            value = _with_threads(measure, threads)
            with _LOCK:
                _CACHE[key] = value
        _FAILED.pop(key, None)
    except StitchError as exc:  # a model or dataset that is not there (yet): say nothing for a while
        log.info("calibration %s failed: %s", key[0] if isinstance(key, tuple) else key, exc)
        _FAILED[key] = (time.monotonic(), exc)
    except Exception as exc:  # unexpected: logged with its traceback, tried again at the next ask
        log.warning("calibration %s failed", key[0] if isinstance(key, tuple) else key, exc_info=exc)
        _FAILED[key] = (time.monotonic() - _RETRY_SECONDS + 5.0, exc)


@atexit.register
def _finish_background() -> None:
    """Let a background calibration end before the interpreter does (torch aborts the process when a thread
    still inside an op is torn down at exit)."""
    thread = _background
    if thread is not None and thread.is_alive():
        thread.join(timeout=60)


def calibrating() -> bool:
    """True while a background calibration runs (an estimate asked with ``wait=False`` will come)."""
    with _LOCK:
        return _background is not None and _background.is_alive()


def calibrations() -> int:
    """How many calibrations this process holds (tests check that the second estimate times nothing)."""
    with _LOCK:
        return len(_CACHE)


def clear_calibrations() -> None:
    """Forget every calibration: the next estimates time their steps again (the machine got busier)."""
    with _LOCK:
        _CACHE.clear()
        _FAILED.clear()


def _step_time(stamps: list[float], total: float, steps: int) -> float:
    """Seconds per step from the times each step ended: the median gap after the first (warm-up) step."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return statistics.median(gaps) if gaps else total / max(steps, 1)


def _per_step(run: Callable[[int, Callable[..., None]], Any]) -> float:
    """Seconds per step of ``run(steps, on_step)`` (real training steps that call ``on_step`` after each):
    one step after a warm-up step; when that was quick, about STEADY_SECONDS more of them (at most
    MAX_STEPS), whose median gap is steadier.  A slow model costs two steps, a small one ~0.2 s."""
    stamps: list[float] = []
    total = _timed(lambda: run(2, lambda *_: stamps.append(time.perf_counter())))
    estimate = _step_time(stamps, total, 2)
    if estimate * CAL_STEPS < STEADY_SECONDS:
        steps = min(MAX_STEPS, max(CAL_STEPS + 1, int(STEADY_SECONDS / max(estimate, 1e-5))))
        stamps = []
        total = _timed(lambda: run(steps, lambda *_: stamps.append(time.perf_counter())))
        estimate = _step_time(stamps, total, steps)
    return estimate


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _device() -> torch.device:
    return pick_device()  # the device a job gets by default (the runner's default queue)


# ---------------------------------------------------------------------------- models


def _pending(items: Iterable[tuple[str, Any]]) -> dict[str, ZooRecipe]:
    """Zoo refs (``zoo:NAME``) that the zoo recipes among ``items`` will make."""
    out = {}
    for kind, spec in items:
        if kind in ("zoo", "lm_zoo") and isinstance(spec, ZooRecipe):
            out[f"zoo:{zoo_name(spec, run_id_for('zoo', spec.to_dict()))}"] = spec
    return out


def _load(ref: str, store: Store, pending: dict[str, ZooRecipe]) -> LoadedModel:
    """``ref`` from the store, or an untrained model of the recipe that is about to train it."""
    try:
        return load_model(ref, store=store)
    except Exception:
        r = parse_ref(ref)
        recipe = pending.get(f"zoo:{r.name}") if r.scheme == "zoo" else None
        if recipe is None:
            raise
        return untrained_model(recipe)


def _n(ds: ImageDataset, split_name: str, cap: int | None) -> int:
    n = len(ds.labels(split_name))
    return n if cap is None else min(cap, n)


def _forward_per_example(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Seconds per example of ``module`` over ``x`` [N, ...] without gradients (after one warm-up batch)."""
    with torch.no_grad():
        module(x[: min(8, len(x))])
        return _timed(lambda: module(x)) / len(x)


def _images(ds: ImageDataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = next(iter(ds.batches("train", n)))
    return x, y


# ---------------------------------------------------------------------------- zoo (images)


def _zoo_units(recipe: ZooRecipe, device: torch.device) -> dict[str, float]:
    """Seconds per training step (the recipe's batch) and per evaluated example of an image recipe."""
    from stitchcore.stitching.train import train_classifier

    untrained_model(recipe)  # the dataset loads once per process (the run finds it cached)
    t0 = time.perf_counter()
    m = untrained_model(recipe)
    ds = load_dataset(recipe.dataset)
    setup = time.perf_counter() - t0
    model = m.model.train()
    for p in model.parameters():
        p.requires_grad_(True)

    def batches(n: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:  # the run's data path: shuffle, preprocess
        for k in range(n):
            x, y = next(iter(ds.batches("train", recipe.batch_size, shuffle=True, seed=k)))
            yield m.preprocess(x), y

    step = _per_step(lambda n, on_step: train_classifier(
        model, lambda _e: batches(n), n, optimizer=recipe.optimizer, lr=1e-4, weight_decay=0.0,
        momentum=recipe.momentum, epochs=1, device=device, l1=recipe.l1, l2=recipe.l2, on_step=on_step,
    ))  # fmt: skip
    model.eval()
    xe, _ = _images(ds, min(CAL_EXAMPLES, len(ds.labels("train"))))
    return {"step": step, "setup": setup,
            "eval": _forward_per_example(lambda v: model(m.preprocess(v.to(device))), xe)}  # fmt: skip


def _estimate_zoo(recipe: ZooRecipe, device: torch.device) -> Estimate:
    if arch_input_kind(recipe.arch) != "image":
        return _estimate_lm_zoo(recipe, device)
    key = ("zoo", recipe.arch, repr(sorted(recipe.arch_kwargs.items())), recipe.dataset, recipe.image_size,
           recipe.batch_size, recipe.optimizer, recipe.l1 > 0, _where(device))  # fmt: skip
    u = _cached(key, lambda: _zoo_units(recipe, device))
    ds = load_dataset(recipe.dataset)
    train = drop_class(ds, recipe.drop_class) if recipe.drop_class is not None else ds
    per_epoch = -(-len(train.labels("train")) // recipe.batch_size)
    epochs = recipe.epochs + (recipe.finetune_epochs if recipe.finetune_layer else 0)
    steps = epochs * per_epoch
    seconds = u["setup"] + steps * u["step"] + (epochs + 1) * len(ds.labels("test")) * u["eval"]
    return _estimate(seconds, f"calibrated: 1 step of {recipe.arch} = {_ms(u['step'])}; {steps:,} steps")


# ---------------------------------------------------------------------------- zoo (char-GPT)


def _lm_zoo_units(recipe: ZooRecipe, device: torch.device) -> dict[str, float]:
    """Seconds per optimiser step, per validation pass and per sampled token of a char-GPT recipe."""
    from stitchcore.data.text import CharVocab, char_splits, lm_batches, load_text
    from stitchcore.lm.evaluate import eval_windows, lm_loss, sample_text
    from stitchcore.lm.parts import TokenCodec
    from stitchcore.models.archs import create_arch
    from stitchcore.stitching.train import make_optimizer

    t0 = time.perf_counter()
    text = load_text(recipe.dataset)
    vocab = CharVocab.from_text(text)
    train_ids, val_ids = char_splits(text, vocab)
    model = create_arch(recipe.arch, **{"vocab_size": vocab.size, **recipe.arch_kwargs}).to(device)
    setup = time.perf_counter() - t0
    block = model.config.block_size
    opt = make_optimizer(model.parameters(), recipe.optimizer, 1e-4, recipe.resolved_weight_decay, recipe.momentum)

    def run(n: int, on_step: Callable[..., None]) -> None:
        for step, (x, y) in enumerate(lm_batches(train_ids, block, recipe.batch_size, recipe.seed, n)):
            lm_train_step(model, opt, x.to(device), y.to(device), 1e-4, step)
            on_step()

    step = _per_step(run)
    windows = eval_windows(val_ids, block, 8)
    val = _timed(lambda: lm_loss(model, windows, device)) / len(windows) * EVAL_WINDOWS
    codec = TokenCodec("chars", vocab.size, "", vocab.encode, vocab.decode)
    token = _timed(lambda: sample_text(model, codec, text[:24], 8, block, device)) / 8
    return {"step": step, "setup": setup, "val": val, "token": token}


def _estimate_lm_zoo(recipe: ZooRecipe, device: torch.device) -> Estimate:
    key = ("lm_zoo", recipe.arch, repr(sorted(recipe.arch_kwargs.items())), recipe.dataset, recipe.batch_size,
           recipe.optimizer, _where(device))  # fmt: skip
    u = _cached(key, lambda: _lm_zoo_units(recipe, device))
    steps = recipe.epochs * STEPS_PER_EPOCH
    seconds = u["setup"] + steps * u["step"] + (recipe.epochs + 1) * u["val"] + 160 * u["token"]
    return _estimate(seconds, f"calibrated: 1 step of {recipe.arch} = {_ms(u['step'])}; {steps:,} steps")


# ---------------------------------------------------------------------------- one adapter between two cuts


def _pair_units(a: LoadedModel, b: LoadedModel, ds: ImageDataset, cut_a: Cut, cut_b: Cut, adapter_spec: Any,
                batch_size: int, objective: str, optimizer: str, device: torch.device) -> dict[str, float]:
    """Seconds per example of A's prefix, B's prefix and the least-squares fit, per adapter training step
    through B's suffix, and per example of the stitched model's evaluation."""
    from stitchcore.stitching.activations import collect
    from stitchcore.stitching.adapters import build_adapter
    from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
    from stitchcore.stitching.train import AdapterTargets, parse_objective, train_adapter

    prefix_a, _ = split(a.model, cut_a, a.example_input())
    prefix_b, suffix_b = split(b.model, cut_b, b.example_input())
    for m in (prefix_a, prefix_b, suffix_b):
        m.to(device).eval()
    n = min(max(CAL_EXAMPLES, (CAL_STEPS + 1) * batch_size), len(ds.labels("train")))
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
        out["fit"] = _timed(lambda: fit_adapter(adapter, iter(pairs), method=adapter_spec.init)) / n
    adapter.to(device)
    objective_map = parse_objective(objective)
    y = ds.labels("train")[:n]
    targets = AdapterTargets(labels=y, receiver=target)
    objective_map = {k: v for k, v in objective_map.items() if k != "kd"} or {"task": 1.0}
    out["step"] = _per_step(lambda steps, on_step: train_adapter(
        adapter, suffix_b, h, targets, objective=objective_map, optimizer=optimizer, lr=1e-4, weight_decay=0.0,
        epochs=-(-steps * batch_size // n), batch_size=batch_size, seed=0, device=device, on_step=on_step,
    ))  # fmt: skip
    adapter.eval()
    out["eval"] = _forward_per_example(lambda v: suffix_b(adapter(v.to(device))), h[:CAL_EXAMPLES])
    return out


def _full_forward(m: LoadedModel, ds: ImageDataset, device: torch.device) -> float:
    """Seconds per example of the whole model (A or B scored alone)."""
    model = m.model.to(device).eval()
    x, _ = _images(ds, min(CAL_EXAMPLES, len(ds.labels("train"))))
    return _forward_per_example(lambda v: model(m.preprocess(v.to(device)) if m.preprocess else v.to(device)), x)


def _model_key(ref: str, store: Store, pending: dict[str, ZooRecipe]) -> str:
    """What fixes a model's cost: its ref, or the recipe that will train it."""
    r = parse_ref(ref)
    recipe = pending.get(f"zoo:{r.name}") if r.scheme == "zoo" else None
    return repr(recipe.to_dict()) if recipe is not None else f"{ref}@{store.root}"


def _stitch_units(spec: StitchSpec, store: Store, pending: dict[str, ZooRecipe],
                  device: torch.device) -> dict[str, float]:
    t0 = time.perf_counter()
    a, b = _load(spec.a, store, pending), _load(spec.b, store, pending)
    ds = load_dataset(resolve_dataset(spec.dataset, a, b))
    cut_a = get_cut(a.model, a.example_input(), spec.cut_a)
    cut_b = get_cut(b.model, b.example_input(), spec.cut_b)
    setup = time.perf_counter() - t0
    u = _pair_units(a, b, ds, cut_a, cut_b, spec.adapter, spec.batch_size, spec.objective, spec.optimizer, device)
    u.update(setup=setup, full_a=_full_forward(a, ds, device), full_b=_full_forward(b, ds, device),
             n_train=len(ds.labels("train")), n_test=len(ds.labels("test")))
    return u


def _image_counts(u: dict, spec: Any) -> tuple[int, int]:
    """Train and test images a run sees: the calibrated dataset's counts under the spec's caps."""
    n_train = int(u["n_train"] if spec.max_train is None else min(spec.max_train, u["n_train"]))
    n_test = int(u["n_test"] if spec.max_test is None else min(spec.max_test, u["n_test"]))
    return n_train, n_test


def _estimate_stitch(spec: StitchSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> Estimate:
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "kd_temperature")
    fixed = {k: v for k, v in spec.to_dict().items() if k not in scale}
    key = ("stitch", repr(sorted(fixed.items())), _model_key(spec.a, store, pending),
           _model_key(spec.b, store, pending), _where(device))  # fmt: skip
    u = _cached(key, lambda: _stitch_units(spec, store, pending, device))
    n_train, n_test = _image_counts(u, spec)
    needs_receiver = "match" in spec.objective or spec.adapter.init in ("lstsq", "procrustes")
    steps = spec.epochs * -(-n_train // spec.batch_size)
    seconds = (u["setup"] + (n_train + n_test) * u["prefix_a"] + n_train * (u["prefix_b"] + u["fit"]) * needs_receiver
               + n_train * u["full_b"] * ("kd" in spec.objective) + steps * u["step"]
               + (spec.epochs + 2) * n_test * u["eval"] + n_test * (u["full_a"] + u["full_b"]))  # fmt: skip
    return _estimate(seconds, f"calibrated: 1 adapter step = {_ms(u['step'])}; {steps:,} steps")


# ---------------------------------------------------------------------------- sweep and matrix


def _spread(items: list, k: int = MAX_SAMPLED) -> list:
    """At most ``k`` items spread over ``items`` (first, middle, last ...)."""
    if len(items) <= k:
        return list(items)
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def _gzip_seconds_per_byte() -> float:
    data = torch.randn(1 << 18).numpy().tobytes()  # 1 MiB of float32 weights
    return _timed(lambda: gzip.compress(data, compresslevel=9, mtime=0)) / len(data)


def _sweep_units(spec: SweepSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> dict:
    from stitchcore.experiments.sweep import _positions

    t0 = time.perf_counter()
    a, b = _load(spec.a, store, pending), _load(spec.b, store, pending)
    cuts = _positions(spec, a, b)
    ds = load_dataset(resolve_dataset(spec.dataset, a, b))
    train = load_dataset(spec.train_data) if spec.train_data else ds
    setup = time.perf_counter() - t0
    per = [_pair_units(a, b, train, ca, cb, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for ca, cb in _spread(cuts)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]}
    n_bytes = 4 * sum(p.numel() for p in a.model.parameters())
    return {**mean, "setup": setup, "positions": len(cuts), "full": _full_forward(a, ds, device),
            "gzip": n_bytes * _gzip_seconds_per_byte(), "n_train": len(train.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def _estimate_sweep(spec: SweepSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> Estimate:
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "control", "control_seeds",
             "simplicity", "sharpness_eps", "sharpness_draws", "metrics")  # fmt: skip
    fixed = {k: v for k, v in spec.to_dict().items() if k not in scale}
    key = ("sweep", repr(sorted(fixed.items())), _model_key(spec.a, store, pending),
           _model_key(spec.b, store, pending), _where(device))  # fmt: skip
    u = _cached(key, lambda: _sweep_units(spec, store, pending, device))
    n_train, n_test = _image_counts(u, spec)
    evals = 1 + sum(":" in m and not m.startswith(("class_acc", "confusion")) for m in spec.metrics)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    fits = spec.adapter.init in ("lstsq", "procrustes")
    one = (n_train * (u["prefix_a"] + fits * (u["prefix_b"] + u["fit"])) + steps * u["step"]
           + evals * n_test * (u["prefix_a"] + u["eval"]))  # fmt: skip
    controls = spec.control_seeds if spec.control and all(r.startswith("zoo:") for r in (spec.a, spec.b)) else 0
    # gradient norm (forward + backward ~ 3 forwards) and sharpness (a forward per draw) over the test set
    simple = (n_test * u["full"] * (3 + spec.sharpness_draws) + u["gzip"]) if spec.simplicity else 0.0
    positions = int(u["positions"])
    stitches = positions * (1 + controls)
    seconds = (u["setup"] + 2 * (evals * n_test * u["full"] + simple) + stitches * one + positions * simple)
    return _estimate(seconds, f"calibrated: 1 adapter step = {_ms(u['step'])}; {stitches} stitches of "
                              f"{steps:,} steps")


def _assemble_units(spec: AssembleSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> dict:
    t0 = time.perf_counter()
    a, b = _load(spec.a, store, pending), _load(spec.b, store, pending)
    ds = load_dataset(resolve_dataset(spec.dataset, a, b))
    senders, trained = assemble_plan(spec, a, b)  # the cells that train an adapter: (sender, receiver, recipe)
    setup = time.perf_counter() - t0
    per = [_pair_units(a, b, ds, s, r, recipe, spec.batch_size, "task", spec.optimizer, device)
           for s, r, recipe in _spread(trained)]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in per[0]} if per else {"prefix_a": 0.0, "step": 0.0,
                                                                                  "eval": 0.0}  # fmt: skip
    return {**mean, "setup": setup, "senders": len(senders), "cells": len(trained),
            "full": _full_forward(a, ds, device) + _full_forward(b, ds, device),
            "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip


def _estimate_assemble(spec: AssembleSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device
                       ) -> Estimate:  # fmt: skip
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "finetune_baseline", "finetune_epochs",
             "finetune_lr")  # fmt: skip
    fixed = {k: v for k, v in spec.to_dict().items() if k not in scale}
    key = ("assemble", repr(sorted(fixed.items())), _model_key(spec.a, store, pending),
           _model_key(spec.b, store, pending), _where(device))  # fmt: skip
    u = _cached(key, lambda: _assemble_units(spec, store, pending, device))
    n_train, n_test = _image_counts(u, spec)
    steps = spec.epochs * -(-n_train // spec.batch_size)
    # per cell: the adapter's steps, a BN recalibration pass and the test pass through B's suffix
    cell = steps * u["step"] + (n_train + n_test) * u["eval"]
    if spec.finetune_baseline:  # every part trains: forward + backward of the whole network ~ 3 forwards
        cell += spec.finetune_epochs * n_train * 3 * (u["prefix_a"] + u["eval"]) + n_test * (u["prefix_a"] + u["eval"])
    seconds = u["setup"] + n_test * u["full"] + u["senders"] * (n_train + n_test) * u["prefix_a"] + u["cells"] * cell
    return _estimate(seconds, f"calibrated: 1 adapter step = {_ms(u['step'])}; {int(u['cells'])} adapters of "
                              f"{steps:,} steps")


def _matrix_units(spec: MatrixSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> dict:
    from stitchcore.stitching.adapters import compatibility

    t0 = time.perf_counter()
    a, b = _load(spec.a, store, pending), _load(spec.b, store, pending)
    ds = load_dataset(resolve_dataset(spec.dataset, a, b))

    def cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
        ex = m.example_input()
        return list_cuts(m.model, ex) if names is None else [get_cut(m.model, ex, n) for n in names]

    senders, receivers = cuts(a, spec.senders), cuts(b, spec.receivers)
    setup = time.perf_counter() - t0
    pairs = [(s, r) for s in senders for r in receivers if compatibility(s, r, spec.adapter) is None]
    if not pairs:
        return {"setup": setup, "cells": 0, "full_a": 0.0, "full_b": 0.0, "fit": 0.0, "step": 0.0, "eval": 0.0,
                "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip
    by_receiver = {}
    for s, r in pairs:
        by_receiver.setdefault(r.name, (s, r))
    sampled = _spread(list(by_receiver.values()))
    per = [_pair_units(a, b, ds, s, r, spec.adapter, spec.batch_size, "task", spec.optimizer, device)
           for s, r in sampled]  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in ("fit", "step", "eval")}
    return {**mean, "setup": setup, "cells": len(pairs), "full_a": _full_forward(a, ds, device),
            "full_b": _full_forward(b, ds, device), "n_train": len(ds.labels("train")),
            "n_test": len(ds.labels("test"))}  # fmt: skip


def _estimate_matrix(spec: MatrixSpec, store: Store, pending: dict[str, ZooRecipe], device: torch.device) -> Estimate:
    scale = ("epochs", "max_train", "max_test", "seed", "lr", "weight_decay", "controls", "mode", "precision")
    fixed = {k: v for k, v in spec.to_dict().items() if k not in scale}
    key = ("matrix", repr(sorted(fixed.items())), _model_key(spec.a, store, pending),
           _model_key(spec.b, store, pending), _where(device))  # fmt: skip
    u = _cached(key, lambda: _matrix_units(spec, store, pending, device))
    n_train, n_test = _image_counts(u, spec)
    variants = 4 if spec.controls else 1
    models = 2 if spec.controls else 1  # each sending / receiving model runs once over the data
    steps = spec.epochs * -(-n_train // spec.batch_size) if spec.mode == "trained" else 0
    fits = spec.adapter.init in ("lstsq", "procrustes")
    cell = n_train * u["fit"] * fits + steps * u["step"] + n_test * u["eval"]
    cells = int(u["cells"]) * variants
    seconds = (u["setup"] + models * ((n_train + n_test) * u["full_a"] + n_train * u["full_b"])
               + 2 * models * n_test * (u["full_a"] + u["full_b"]) / 2 + cells * cell)  # fmt: skip
    what = f"{cells} cells of {steps:,} adapter steps" if steps else f"{cells} least-squares cells"
    return _estimate(seconds, f"calibrated: 1 cell = {_ms(cell)}; {what}")


def _estimate_similarity(spec: SimilaritySpec, store: Store, pending: dict[str, ZooRecipe],
                         device: torch.device) -> Estimate:
    """Both models once over the images (every cut recorded), then the measure for every cut pair."""
    def units() -> dict:
        t0 = time.perf_counter()
        a, b = _load(spec.a, store, pending), _load(spec.b, store, pending)
        ds = load_dataset(resolve_dataset(spec.dataset, a, b))
        n_a = len(list_cuts(a.model, a.example_input()) if spec.senders is None else spec.senders)
        n_b = len(list_cuts(b.model, b.example_input()) if spec.receivers is None else spec.receivers)
        x = torch.randn(spec.batch_size, 512, dtype=torch.float64)
        gram = _timed(lambda: (x @ x.T) @ (x @ x.T))  # about one pair's work per batch
        return {"setup": time.perf_counter() - t0, "full": _full_forward(a, ds, device) + _full_forward(b, ds, device),
                "pairs": n_a * n_b, "gram": gram, "n": len(ds.labels(spec.split))}  # fmt: skip

    key = ("similarity", spec.a, spec.b, repr(spec.senders), repr(spec.receivers), spec.dataset, spec.split,
           spec.batch_size, _model_key(spec.a, store, pending), _model_key(spec.b, store, pending), _where(device))
    u = _cached(key, units)
    n = int(u["n"] if spec.max_samples is None else min(spec.max_samples, u["n"]))
    passes = 2 if spec.baseline else 1
    batches = -(-n // spec.batch_size)
    seconds = u["setup"] + passes * (n * u["full"] + batches * u["pairs"] * u["gram"])
    return _estimate(seconds, f"calibrated: both models = {_ms(u['full'] * 1000)} per 1,000 images; "
                              f"{int(u['pairs'])} cut pairs")


# ---------------------------------------------------------------------------- language models


def _lm_units(spec: MergeSpec | LMStitchSpec | DepthSpec, store: Store, pending: dict[str, ZooRecipe],
              device: torch.device) -> dict[str, float]:
    """Loading, scoring one validation window, sampling one token, and one adapter step at the middle split."""
    from stitchcore.experiments.merge import _receiver, _whole
    from stitchcore.lm.evaluate import eval_windows, lm_data, lm_loss, sample_text
    from stitchcore.lm.parts import build_stitch, lm_parts, make_token_adapter
    from stitchcore.lm.train import train_lm_adapter
    from stitchcore.stitching.train import parse_objective

    t0 = time.perf_counter()
    la, lb = _load(spec.a, store, pending), _load(spec.b, store, pending)
    a, b = lm_parts(la), lm_parts(lb)
    for p in (a, b):
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(device)
    data = lm_data(spec.text or la.dataset or lb.dataset or "pydoc", a.codec)
    block = min(la.input_shape[0], lb.input_shape[0], a.context, b.context)
    setup = time.perf_counter() - t0
    windows = eval_windows(data.val, block, 8)
    whole = _whole(a, "A")
    window = (_timed(lambda: lm_loss(whole, windows, device)) + _timed(lambda: lm_loss(_whole(b, "B"), windows,
                                                                                         device))) / 2 / len(windows)
    token = _timed(lambda: sample_text(whole, a.codec, data.prompt, 8, block, device)) / 8
    out = {"setup": setup, "window": window, "token": token, "n_a": a.n_layer, "n_b": b.n_layer,
           "same_width": float(a.width == b.width), "step": 0.0}  # fmt: skip
    if isinstance(spec, (LMStitchSpec, DepthSpec)):
        i = a.n_layer // 2 if isinstance(spec, DepthSpec) else spec.cut_a
        j = _receiver(i, a.n_layer, b.n_layer) if isinstance(spec, DepthSpec) else (
            spec.cut_a if spec.cut_b is None else spec.cut_b)
        adapter = make_token_adapter(spec.adapter, a, i, b, j, spec.mlp_hidden)
        model = build_stitch(a, b, i, j, adapter, "b")
        objective = {k: v for k, v in parse_objective(spec.objective).items() if k != "kd"} or {"task": 1.0}
        step = _per_step(lambda steps, on_step: train_lm_adapter(
            model, i, adapter, data.train, block_size=block, objective=objective, steps=steps,
            batch_size=spec.batch_size, lr=1e-4, weight_decay=0.0, seed=0, device=device,
            receiver=lambda x: b.residual(x, j), on_step=on_step,
        ))  # fmt: skip
        out["step"] = step * (1.3 if "kd" in spec.objective else 1.0)
    return out


def _estimate_lm(kind: str, spec: MergeSpec | LMStitchSpec | DepthSpec, store: Store, pending: dict[str, ZooRecipe],
                 device: torch.device) -> Estimate:
    train = {k: getattr(spec, k) for k in ("adapter", "batch_size", "mlp_hidden", "objective") if hasattr(spec, k)}
    where = (spec.cut_a, spec.cut_b) if isinstance(spec, LMStitchSpec) else None
    key = ("lm", kind, spec.a, spec.b, spec.text, repr(train), where, _model_key(spec.a, store, pending),
           _model_key(spec.b, store, pending), _where(device))  # fmt: skip
    u = _cached(key, lambda: _lm_units(spec, store, pending, device))
    score = spec.eval_windows * u["window"]
    sample = spec.sample_tokens * u["token"]
    setup = u["setup"] + 2 * (score + sample)  # A and B scored and sampled
    if isinstance(spec, MergeSpec):
        return _estimate(setup + score + sample, f"calibrated: 1 validation window = {_ms(u['window'])}; "
                                                 f"{3 * spec.eval_windows} windows")
    fit = FIT_BATCHES * spec.batch_size * u["window"] if spec.adapter.init in ("lstsq", "procrustes") else 0.0
    stitch = fit + 2 * score + spec.steps * u["step"]
    if isinstance(spec, LMStitchSpec):
        return _estimate(setup + stitch + sample, f"calibrated: 1 adapter step = {_ms(u['step'])}; "
                                                  f"{spec.steps:,} steps")
    n_a, n_b = int(u["n_a"]), int(u["n_b"])
    splits = len(spec.splits) if spec.splits is not None else n_a + 1
    merges = stitches = 0
    for mode in spec.modes:
        for head in spec.heads:
            if not u["same_width"] and (mode == "merge" or head == "a"):
                continue
            if mode == "merge" and n_a != n_b:
                continue
            merges += splits * (mode == "merge")
            stitches += splits * (mode == "stitch")
    cells = (n_a + 1) * (n_b + 1) if spec.heatmap else 0
    curves = len(spec.modes) * len(spec.heads)
    seconds = setup + merges * score + (stitches + cells) * stitch + curves * sample
    return _estimate(seconds, f"calibrated: 1 adapter step = {_ms(u['step'])}; {stitches + cells} stitches of "
                              f"{spec.steps:,} steps, {merges} merges")


# ---------------------------------------------------------------------------- public


def estimate_kind(kind: str, spec: Any) -> str:
    """The kind an estimate (and a page's job watch) calls a run: ``lm_zoo`` for a zoo recipe of a language
    model, else ``kind``.

    >>> estimate_kind("zoo", ZooRecipe(arch="gpt", dataset="pydoc")), estimate_kind("zoo", ZooRecipe())
    ('lm_zoo', 'zoo')
    """
    if kind == "zoo" and isinstance(spec, ZooRecipe):
        try:
            return "zoo" if arch_input_kind(spec.arch) == "image" else "lm_zoo"
        except Exception:  # an unknown arch: the run will say so
            return kind
    return kind


_ESTIMATORS: dict[str, tuple[type, Callable[..., Estimate]]] = {
    "zoo": (ZooRecipe, lambda spec, store, pending, device: _estimate_zoo(spec, device)),
    "lm_zoo": (ZooRecipe, lambda spec, store, pending, device: _estimate_lm_zoo(spec, device)),
    "stitch": (StitchSpec, _estimate_stitch),
    "sweep": (SweepSpec, _estimate_sweep),
    "assemble": (AssembleSpec, _estimate_assemble),
    "matrix": (MatrixSpec, _estimate_matrix),
    "similarity": (SimilaritySpec, _estimate_similarity),
    "merge": (MergeSpec, lambda spec, store, pending, device: _estimate_lm("merge", spec, store, pending, device)),
    "lmstitch": (LMStitchSpec, lambda spec, store, pending, device: _estimate_lm("lmstitch", spec, store, pending,
                                                                                  device)),
    "lmdepth": (DepthSpec, lambda spec, store, pending, device: _estimate_lm("lmdepth", spec, store, pending, device)),
}


def _one(kind: str, spec: Any, store: Store, pending: dict[str, ZooRecipe]) -> Estimate | None:
    entry = _ESTIMATORS.get(kind)
    if entry is None or not isinstance(spec, entry[0]):
        return None
    stored_kind = "zoo" if kind == "lm_zoo" else kind
    if store.lookup_done(run_id_for(stored_kind, spec.to_dict())) is not None:
        return Estimate(0.0, 0.0, 0.0, "in the store", stored=True)
    return entry[1](spec, store, pending, _device())


def estimate_seconds(kind: str, spec: Any, store: Store, *, wait: bool = True,
                     threads: int | None = None) -> Estimate | None:
    """How long ``kind`` run on ``spec`` takes on this machine (``stored`` when the store has it already);
    None when it cannot be estimated (unknown kind, a model that does not load ...).  Never raises.

    The first estimate of a model / cut / batch size times a few real steps (cached for the process);
    later ones with other epochs, steps or caps are arithmetic.  ``wait=False`` (pages): never time
    anything here; a missing calibration starts in the background and this returns None meanwhile
    (:func:`calibrating` says so), so a page is never held up by it.  ``threads``: time with the torch
    thread count the job will run with (the job runner's ``cpu_threads``; default: the caller's).
    """
    token, threads_token = _NO_WAIT.set(not wait), _THREADS.set(threads)
    try:
        return _one(estimate_kind(kind, spec), spec, store, {})
    except _Calibrating:
        return None
    except Exception as exc:  # an estimate is a courtesy: say nothing rather than fail
        log.info("no estimate for %s: %s: %s", kind, type(exc).__name__, exc)
        return None
    finally:
        _NO_WAIT.reset(token)
        _THREADS.reset(threads_token)


def estimate_plan(items: list[tuple[str, Any]], store: Store, *, also_pending: list[tuple[str, Any]] = (),
                  wait: bool = True, threads: int | None = None) -> Estimate | None:
    """The runs ``items`` [(kind, spec)] one after the other (one job queue runs them in order): the sum of
    those not in the store yet, where a later item may use a zoo model an earlier one (or one of
    ``also_pending``, e.g. running jobs) trains: an untrained copy stands in for the timing.  ``stored``
    when all are in the store; None when any cannot be estimated (``wait=False``: or is still being timed).
    """
    token, threads_token = _NO_WAIT.set(not wait), _THREADS.set(threads)
    try:
        pending = _pending((estimate_kind(k, s), s) for k, s in [*also_pending, *items])
        total = Estimate(0.0, 0.0, 0.0, "in the store", stored=True)
        for kind, spec in items:
            est = _one(estimate_kind(kind, spec), spec, store, pending)
            if est is None:
                return None
            total = total + est
        return total
    except _Calibrating:
        return None
    except Exception as exc:
        log.info("no estimate for the plan %s: %s: %s", [k for k, _ in items], type(exc).__name__, exc)
        return None
    finally:
        _NO_WAIT.reset(token)
        _THREADS.reset(threads_token)

