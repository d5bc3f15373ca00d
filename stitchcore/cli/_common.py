"""What every CLI verb shares: the ``common`` flags, the progress bar, output (argument types: ``_args``).

A verb module (``models``, ``stitch``, ``matrix``, ``runs``, ``lm``, ``sweep``) exposes
``add_verbs(verbs, common)`` and ``COMMANDS``, a dict ``(verb, sub-verb or None) -> command``;
a command is ``fn(args, store, bar) -> None`` and prints only through :func:`emit`.
A verb group (``zoo train``) stores its sub-verb in ``args.<verb>_verb``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from stitchcore.cli._args import MAX_THREADS, bounded, device_name, given, number, safe, safe_text, store_dir
from stitchcore.api.progress import ProgressBar
from stitchcore.timewords import duration_words

if TYPE_CHECKING:
    from stitchcore.experiments import RunOutcome
    from stitchcore.store.results import Store

__all__ = [
    "Command",
    "OneLineParser",
    "ProgressBar",
    "check_device",
    "common_parser",
    "check_log_to",
    "emit",
    "log_to_tracker",
    "outcome",
    "run",
    "took",
]


Command = Callable[[argparse.Namespace, "Store", "ProgressBar"], "int | None"]  # (args, store, bar) -> exit code or None (0)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, like every other bad input: ``error: ...`` (exit 2).

    The usage text is left to ``--help``, which the line names.  Sub-parsers inherit the class.

    >>> p = OneLineParser(prog="python -m stitchcore zoo train")
    >>> _ = p.add_argument("--epochs", type=int)
    >>> p.parse_args(["--epochs", "x"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {safe(message)}; see {self.prog} --help\n")  # argparse echoes what was typed


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of every verb: --store, --json, --device, --quiet, --no-wait, --threads."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", type=store_dir, help="results store directory (default: $STITCHLAB_STORE, else "
                        "cache/ of a checkout, ~/.cache/stitchlab installed)")
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_argument("--device", type=device_name, default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    common.add_argument("--quiet", action="store_true", help="no progress on stderr")
    common.add_argument("--log-to", type=given, default=None, metavar="TRACKER:DIR",
                        help="also log the run to an experiment tracker: mlflow:DIR (or mlflow:http://SERVER) or "
                             "tensorboard:DIR")
    common.add_argument("--progress", action="store_true",
                        help="progress on stderr even when it is not a terminal (a line every few seconds); by "
                             "default a bar in a terminal only")
    common.add_argument("--threads", type=bounded(1, MAX_THREADS), default=None, metavar="N",
                        help="torch CPU threads (default: $STITCHLAB_JOB_THREADS, else the cores less one)")
    common.add_argument("--no-wait", action="store_true",
                        help="when another process is running the same run, exit at once (exit 3) instead of"
                             " waiting for its result")
    return common


def backend_parser() -> argparse.ArgumentParser:
    """--backend, --address, --task-threads, --gpus-per-task, --max-retries: where a run's units execute."""
    from stitchcore.backends import ADDRESS_ENV, BACKEND_ENV, BACKENDS

    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("where the work runs (not part of the result's identity)")
    g.add_argument("--backend", choices=BACKENDS, default=None,
                   help=f"local: this process (default, or ${BACKEND_ENV}); ray: Ray tasks on a cluster")
    g.add_argument("--address", type=given, default=None, metavar="HOST:PORT",
                   help=f"ray: a running cluster's address (default ${ADDRESS_ENV}, else start Ray on this machine)")
    g.add_argument("--task-threads", type=bounded(1, MAX_THREADS), default=1, metavar="N",
                   help="ray: torch threads (and Ray CPUs) per task (default 1)")
    g.add_argument("--gpus-per-task", type=number, default=0.0, metavar="F",
                   help="ray: GPUs per task; 0 = CPU tasks (default), 0.25 packs four small-model tasks per GPU")
    g.add_argument("--max-retries", type=bounded(0, 100), default=2, metavar="N",
                   help="ray: re-runs of a task whose worker or node died (default 2, at most 100)")
    return p


def run_options(args: argparse.Namespace) -> Any:
    """The RunOptions of ``--backend`` & co. (defaults from the environment), None for verbs without them."""
    if not hasattr(args, "backend"):
        return None
    from stitchcore.backends import RunOptions, options_from_env

    default = options_from_env()
    backend = args.backend or default.backend
    address = args.address if args.address is not None else (default.address if backend == "ray" else None)
    return RunOptions(backend, address, task_threads=args.task_threads, gpus_per_task=args.gpus_per_task,
                      max_retries=args.max_retries)


def set_threads(args: argparse.Namespace) -> int:
    """Set torch's CPU threads for this command (``--threads``, else ``$STITCHLAB_JOB_THREADS``, else the cores
    less one), deliberately: torch's default of every core thrashes when anything else uses the CPU."""
    import torch

    from stitchcore.jobs.worker import configured_threads

    threads = getattr(args, "threads", None) or configured_threads(1)
    torch.set_num_threads(threads)
    return threads


def emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    """Print the result: ``obj`` as one JSON line with ``--json`` (JSON escapes every control character), else
    ``text`` with :func:`safe_text` (a stored name can carry terminal escapes; its line breaks are kept)."""
    if args.json:
        print(json.dumps(obj, sort_keys=True, default=str))
    else:
        print(safe_text(text))


def check_device(args: argparse.Namespace) -> None:
    """Refuse a ``--device`` this machine lacks even when the store answers without running anything.

    >>> from types import SimpleNamespace as NS
    >>> check_device(NS(device="cpu")), check_device(NS(device=None))
    (None, None)
    """
    if args.device is not None:
        from stitchcore.device import pick_device

        pick_device(args.device)


class CtrlC(threading.Event):
    """The cancel event of the CLI's runs.  The SIGINT handler sets it beside the KeyboardInterrupt it raises (a
    KeyboardInterrupt that lands in a finalizer is swallowed by Python, "Exception ignored in ..."; the run's next
    cancel check stops it then); ``runs cancel`` from another process sets it too, without ``by_ctrl_c``.

    >>> e = CtrlC(); e.ctrl_c(); (e.is_set(), e.reason)
    (True, 'cancelled with Ctrl-C')
    >>> e.clear(); e.set(); e.reason
    'cancelled by the user'
    """

    by_ctrl_c = False

    def ctrl_c(self) -> None:
        self.by_ctrl_c = True
        self.set()

    def clear(self) -> None:
        self.by_ctrl_c = False
        super().clear()

    @property
    def reason(self) -> str:
        """Why a run stopped, as its store row says (RunContext.check_cancel reads it)."""
        return "cancelled with Ctrl-C" if self.by_ctrl_c else "cancelled by the user"


CTRL_C = CtrlC()  # every run the CLI starts watches it (cancel=CTRL_C)


def run(kind: str, spec: Any, args: argparse.Namespace, store: Store, bar: ProgressBar) -> RunOutcome:
    """``run_experiment`` with the CLI's --rerun and --device, the bar as progress; closes the bar."""
    from stitchcore.experiments import run_experiment

    check_device(args)
    set_threads(args)
    check_log_to(args)
    out = run_experiment(kind, spec, store, rerun=args.rerun, progress=bar, device=args.device, cancel=CTRL_C,
                         wait=not args.no_wait, options=run_options(args))
    bar.close()
    log_to_tracker(args, store, out.record)
    return out


def check_log_to(args: argparse.Namespace) -> None:
    """``--log-to``'s target refused before a run, not after it."""
    if args.log_to is not None:
        from stitchcore.report.trackers import parse_target

        parse_target(args.log_to)


def log_to_tracker(args: argparse.Namespace, store: Store, record: Any) -> None:
    """``--log-to``: log a finished run to the tracker named, saying where on stderr."""
    if args.log_to is not None:
        from stitchcore.report.trackers import log_run

        print(f"logged to {safe(log_run(record, store, args.log_to))}", file=sys.stderr)


def outcome(out: RunOutcome, **extra: Any) -> dict[str, Any]:
    """The JSON object of a run: ``run_id``, ``cached``, ``elapsed`` (s), ``extra``, then its summary.

    >>> from types import SimpleNamespace as NS
    >>> out = NS(record=NS(id="ab12", summary={"accuracy": 0.9}), cached=False, seconds=1.23456)
    >>> outcome(out, kind="zoo")
    {'run_id': 'ab12', 'cached': False, 'elapsed': 1.235, 'kind': 'zoo', 'accuracy': 0.9}
    """
    return {"run_id": out.record.id, "cached": out.cached, "elapsed": round(out.seconds, 3), **extra,
            **out.record.summary}  # fmt: skip


def took(cached: bool, seconds: float) -> str:
    """How a run was had, for the text output.

    >>> took(True, 3.0), took(False, 3.04), took(False, 1944.9)
    ('cached', '3.0 s', '32 min 25 s')
    """
    return "cached" if cached else duration_words(seconds)
