"""One function per run kind, made from the kind's spec (its fields are the function's keyword arguments, declared
once beside the spec), plus ``load``, ``runs`` and ``run``.

Each run function looks its spec up in the store and computes it on a miss, exactly as the app and the CLI do:
the same spec gives the same run id everywhere, so a run made here opens in the app by its link and a run made
in the app comes back here at once.  ``background=True`` returns a :class:`~stitchcore.api.background.RunHandle`.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from stitchcore.api.background import RunHandle
from stitchcore.api.progress import ProgressBar
from stitchcore.api.reproduce import FUNCTION_OF_KIND, positional, spec_from_call
from stitchcore.api.result import Result, Runs
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.models.loaded import LoadedModel
    from stitchcore.store.results import Store

__all__ = ["KIND_FUNCTIONS", "load", "run", "runs"]

CONTROLS = ("store", "background", "progress", "rerun", "device", "threads", "log_to")  # every run function's own


def _threads(threads: int | None) -> int:
    """Set torch's CPU threads for a run (``threads``, else ``$STITCHLAB_JOB_THREADS``, else the cores less one):
    torch's default of every core thrashes when anything else uses the CPU."""
    import torch

    from stitchcore.jobs.worker import configured_threads

    n = threads or configured_threads(1)
    torch.set_num_threads(n)
    return n


def run(kind: str, *, store: Store | str | Path | None = None, background: bool = False, progress: str | bool = "auto",
        rerun: bool = False, device: str | None = None, threads: int | None = None, log_to: str | None = None,
        **fields: Any) -> Result | RunHandle:  # fmt: skip
    """Run (or find in the store) the ``kind`` spec made of ``fields`` (every other field at today's default).

    ``store``: a Store, its directory, or None for the default one (the app's); ``progress``: ``"auto"`` a bar in
    a notebook or a terminal, ``"always"``, ``"never"``; ``rerun``: compute it again even if stored; ``device``:
    auto, cpu, cuda, cuda:N or mps; ``threads``: torch CPU threads; ``log_to``: also log the run to
    ``mlflow:DIR`` or ``tensorboard:DIR`` (:meth:`Result.log_to`).  A Result, or with ``background=True`` a
    RunHandle at once.  StitchError naming the field for anything the spec or its check refuses.
    """
    from stitchcore.experiments import list_experiments, run_experiment
    from stitchcore.store.opened import open_store
    from stitchcore.store.records import run_id_for

    if kind not in list_experiments():
        raise StitchError(f"no run kind {kind!r}: one of {', '.join(list_experiments())}")
    spec = spec_from_call(kind, fields)
    opened = open_store(store)
    if log_to is not None:
        from stitchcore.report.trackers import parse_target

        parse_target(log_to)  # a bad target is refused before the run, not after it

    def start(report: Callable[..., None] | None, cancel: Any) -> Result:
        _threads(threads)
        out = run_experiment(kind, spec, opened, rerun=rerun, progress=report, device=device, cancel=cancel)
        result = Result(out.record, opened, cached=out.cached)
        if log_to is not None:
            result.log_to(log_to)
        return result

    if background:
        return RunHandle(run_id_for(kind, spec.to_dict()), start)
    bar = ProgressBar(progress)
    try:
        return start(bar if bar.enabled else None, None)
    finally:
        bar.close()


def _field_doc(kind: str) -> str:
    """The fields of ``kind`` with their help and default, for the function's docstring."""
    from stitchcore.experiments.field_words import field_words
    from stitchcore.params import declared, spec_class

    words = {}
    for f in declared(kind):
        top = f.name.partition(".")[0]
        w = field_words(kind, f.name)
        words.setdefault(top, []).append(f"{f.key}: {w.help}" if "." in f.name else w.help)
    lines = []
    for f in dataclasses.fields(spec_class(kind)):
        said = "; ".join(words.get(f.name, [])) or "see the spec"
        lines.append(f"    {f.name}: {said}")
    return "\n".join(lines)


def _signature(kind: str) -> inspect.Signature:
    """``(a, b, ..., *, field=default, ..., store=None, background=False, ...)`` from the spec's fields."""
    from stitchcore.params import spec_class

    first, params = positional(kind), []
    cls = spec_class(kind)
    for name in first:
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    for f in dataclasses.fields(cls):
        if f.name in first:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default))
    for name, default in zip(CONTROLS, (None, False, "auto", False, None, None, None), strict=True):
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    params.append(inspect.Parameter("nested", inspect.Parameter.VAR_KEYWORD))  # init="random" ...
    return inspect.Signature(params, return_annotation="Result | RunHandle")


SUMMARIES = {
    "zoo": "Train a built-in model (a zoo recipe); its Result's ``ref`` names it for the other calls.",
    "stitch": "Stitch A's bottom (to ``cut_a``) into B's top (from ``cut_b``) through a trained adapter.",
    "matrix": "Stitch every cut of A into every cut of B: the heat map of how well each pair joins, with controls.",
    "similarity": "A similarity measure (CKA, Procrustes, RSA ...) of every cut pair, calibrated on random-init Bs.",
    "sweep": "Where a trait lives: stitch A into B at each position and measure the trait (accuracy, a class ...).",
    "assemble": "Assemble A's early blocks with B's later ones through every adapter recipe; accuracy against cost.",
    "merge": "Language models: B's blocks in place of A's from a split (block substitution), scored on held-out text.",
    "lmstitch": "Language models: A's residual stream at ``cut_a`` into B's at ``cut_b`` through a trained adapter.",
    "lmdepth": "Language models: the loss penalty of merging or stitching A into B at every depth.",
    "transfer": "Carry A's probe and class directions through a fitted stitch into B; read them on B unrefitted.",
}


def _kind_function(kind: str) -> Callable[..., Result | RunHandle]:
    """The API function of ``kind``: its positional fields, then any spec field by name."""
    first = positional(kind)

    def call(*args: Any, **fields: Any) -> Result | RunHandle:
        if len(args) > len(first):
            raise TypeError(f"{name}() takes {len(first)} positional arguments ({', '.join(first)}); "
                            f"give the other fields by name")
        given = dict(zip(first, args, strict=False))
        twice = sorted(set(given) & set(fields))
        if twice:
            raise TypeError(f"{name}() got {', '.join(twice)} both by position and by name")
        return run(kind, **given, **fields)

    name = FUNCTION_OF_KIND[kind]
    call.__name__ = call.__qualname__ = name
    call.__signature__ = _signature(kind)  # type: ignore[attr-defined]
    call.__doc__ = (f"{SUMMARIES.get(kind, kind)}\n\nThe {kind} spec's fields (today's defaults unless given; a "
                    f"nested field also by its own name, e.g. init='random'):\n{_field_doc(kind)}\n\n"
                    f"{run.__doc__.split(chr(10), 2)[2].strip()}")
    return call


def _kind_functions() -> dict[str, Callable[..., Result | RunHandle]]:
    import stitchcore.experiments  # noqa: F401  (registers the kinds and their declared fields)

    return {FUNCTION_OF_KIND[kind]: _kind_function(kind) for kind in FUNCTION_OF_KIND}


KIND_FUNCTIONS = _kind_functions()  # train, stitch, matrix, similarity, sweep, assemble, merge, lmstitch, lmdepth, transfer


def load(ref: str, *, store: Store | str | Path | None = None) -> LoadedModel:
    """The model ``ref`` names (``zoo:cnn-digits-s0``, ``timm:resnet18?pretrained=false``, ``file:PATH`` ...) in eval
    mode with frozen weights: ``.model`` (the torch module), ``.input_shape``, ``.num_classes``, ``.dataset``."""
    from stitchcore.models.sources import load_model
    from stitchcore.store.opened import open_store

    return load_model(ref, store=open_store(store))


def runs(kind: str | None = None, *, status: str | None = None, limit: int | None = None,
         store: Store | str | Path | None = None) -> Runs:  # fmt: skip
    """Stored runs, newest first (of one ``kind``, one ``status``, at most ``limit``); ``.to_pandas()`` is the
    app's Results table."""
    from stitchcore.store.opened import open_store

    opened = open_store(store)
    return Runs(Result(rec, opened) for rec in opened.list_runs(kind, status, limit))
