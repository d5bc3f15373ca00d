"""What every CLI verb shares: the ``common`` flags, argument types, the progress bar, output.

A verb module (``models``, ``stitch``, ``matrix``, ``runs``, ``lm``, ``sweep``) exposes
``add_verbs(verbs, common)`` and ``COMMANDS``, a dict ``(verb, sub-verb or None) -> command``;
a command is ``fn(args, store, bar) -> None`` and prints only through :func:`emit`.
A verb group (``zoo train``) stores its sub-verb in ``args.<verb>_verb``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import threading
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from stitchcore.errors import StitchError
from stitchcore.timewords import duration_words

if TYPE_CHECKING:
    from stitchcore.experiments import RunOutcome
    from stitchcore.store.results import Store

__all__ = [
    "MAX_THREADS",
    "Command",
    "OneLineParser",
    "ProgressBar",
    "bounded",
    "check_device",
    "common_parser",
    "data_name",
    "device_name",
    "emit",
    "given",
    "in_file",
    "json_obj",
    "model_ref",
    "names",
    "number",
    "out_path",
    "outcome",
    "pair",
    "run",
    "safe",
    "safe_text",
    "store_dir",
    "took",
    "whole",
]

MAX_THREADS = 1024  # torch CPU threads: above any machine's cores; 10**9 made libgomp abort the process (216 GB)
_WHOLE = re.compile(r"[+-]?[0-9]{1,40}")  # ASCII digits only: int() takes "٣" (Arabic-Indic 3), not "²"
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,4})?|[+-]?(nan|inf|infinity)", re.IGNORECASE)
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:[0-9]{1,3})?")  # pick_device's spellings; whether it is here: at run time
_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}  # marks, embeddings, overrides
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

Command = Callable[[argparse.Namespace, "Store", "ProgressBar"], "int | None"]  # (args, store, bar) -> exit code or None (0)


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second.

    Called as ``bar(fraction, message, metrics)``, the ``progress`` callback of ``run_experiment``.
    """

    def __init__(self, enabled: bool = True, width: int = 30) -> None:
        self.enabled = enabled
        self.width = width
        self._last = 0.0
        self._shown = False

    def __call__(self, fraction: float, message: str, metrics: dict[str, float]) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and fraction < 1.0):
            return
        self._last = now
        filled = int(self.width * fraction)
        extra = "  ".join(f"{k}={v:.4g}" for k, v in metrics.items())
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {fraction:6.1%} {safe(message)[:60]:60s} {safe(extra)}"
        sys.stderr.write(line[:160])
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        """End the bar's line (if one was drawn) so what follows starts on a fresh line."""
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


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
    common.add_argument("--store", type=store_dir, help="results store directory (default: $STITCHLAB_STORE, else cache/)")
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_argument("--device", type=device_name, default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    common.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
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


def _shown(text: str) -> str:
    r"""``text`` quoted for a one-line message: control characters escaped, at most 40 characters.

    >>> print(_shown("x" * 50), _shown("a\x1b"))
    'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' 'a\x1b'
    """
    return f"'{safe(text) if len(text) <= 40 else safe(text[:37]) + '...'}'"


def whole(text: str) -> int:
    """Argument type: a whole number in ASCII digits; the flag's range is its spec's to check (it names it).

    Python's ``int()`` takes "٣" (an Arabic-Indic 3) but not "²", though both are ``isdigit()``: neither is
    taken, so a number means the same in every verb and never reaches ``int()`` half-checked.

    >>> whole("12"), whole("-3"), whole(" 7 ")
    (12, -3, 7)
    >>> whole("٣")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a whole number, not '٣'
    """
    if not _WHOLE.fullmatch(text.strip()):
        if re.fullmatch(r"[+-]?[0-9]+", text.strip()):  # int() itself gives up past 4300 digits
            raise argparse.ArgumentTypeError(f"{_shown(text)} has more than 40 digits: no count or seed is that large")
        raise argparse.ArgumentTypeError(f"expected a whole number, not {_shown(text)}")
    return int(text)


def number(text: str) -> float:
    """Argument type: a decimal number in ASCII (``1e-3``, ``0.5``); ``nan`` and ``inf`` pass, for the spec to
    refuse naming its field.

    >>> number("1e-3"), number(".5"), number("nan") != number("nan")
    (0.001, 0.5, True)
    >>> number("1_000")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a number such as 0.01 or 1e-3, not '1_000'
    """
    if not _NUMBER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a number such as 0.01 or 1e-3, not {_shown(text)}")
    return float(text)


def bounded(least: int, most: int | None = None) -> Callable[[str], int]:
    """Argument type: a whole number (:func:`whole`) from ``least`` to ``most``, for flags no spec checks.

    >>> bounded(1, 10)("3")
    3
    >>> bounded(1, 10)("11")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be at most 10, not 11
    """

    def parse(text: str) -> int:
        value = whole(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, not {value}")
        return value

    parse.__name__ = "whole number"
    return parse


positive_int = bounded(1)  # a whole number of at least 1


def given(text: str) -> str:
    """Argument type: any text but an empty one (``--dataset ""`` would quietly mean the default).

    >>> given("digits")
    'digits'
    >>> given(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give a value, or leave the flag out for its default
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a value, or leave the flag out for its default")
    return text


def model_ref(text: str) -> str:
    """Argument type of a model ref (:func:`given`): a ``file:PATH`` (with its ``?options``) is refused when a
    FIFO, a device or a folder is there, before anything opens it (a checkpoint read from a FIFO waited
    forever).  A missing file is left to the loader, whose message names the fix.

    >>> model_ref("zoo:cnn-digits-s0"), model_ref("file:/nonexistent.pt?arch=zoo:cnn")
    ('zoo:cnn-digits-s0', 'file:/nonexistent.pt?arch=zoo:cnn')
    >>> model_ref("file:/dev/zero")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: checkpoint /dev/zero is a device, not a file: give a .pt, .pth or .safetensors file
    """
    if not text.strip():  # the ref parser's own words: what a model ref looks like
        from stitchcore.models.refs import parse_ref

        try:
            parse_ref(text)
        except StitchError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return _file_part(text, "checkpoint", "give a .pt, .pth or .safetensors file")


def data_name(text: str) -> str:
    """Argument type of a dataset or corpus name (:func:`given`): a ``file:PATH`` corpus is refused as
    :func:`model_ref` refuses a checkpoint.

    >>> data_name("digits")
    'digits'
    >>> data_name("file:/dev/zero")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: text file /dev/zero is a device, not a file: give a plain text file
    """
    return _file_part(text, "text file", "give a plain text file")


def _file_part(text: str, what: str, fix: str) -> str:
    given(text)
    if text.startswith("file:"):
        path = Path(text[len("file:"):].split("?", 1)[0]).expanduser()
        if os.path.lexists(path):  # missing: the loader says so, naming the fix
            try:
                in_file(path, what, fix)
            except StitchError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def device_name(text: str) -> str:
    """Argument type ``--device``: one of pick_device's spellings (whether this machine has it is checked
    when a command uses it).

    >>> device_name("cuda:1"), device_name(" CPU ")
    ('cuda:1', 'cpu')
    >>> device_name("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: unknown device ''; use auto, cpu, cuda, cuda:N or mps
    """
    name = text.strip().lower()
    if not _DEVICE.fullmatch(name):
        raise argparse.ArgumentTypeError(f"unknown device {_shown(text)}; use auto, cpu, cuda, cuda:N or mps")
    return name


def out_path(text: str) -> str:
    r"""Argument type ``--out``: a file name, not empty and without control characters (a name holding an ESC or
    a newline would be written, then printed back to the terminal); what is at the path is
    :func:`stitchcore.store.disk.out_file`'s to check.

    >>> out_path("report.html")
    'report.html'
    >>> out_path("r\x1b[2J.html")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'r\x1b[2J.html' has control characters: name a plain file, e.g. report.html
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the file to write, e.g. report.html")
    if safe(text) != text:
        raise argparse.ArgumentTypeError(f"{_shown(text)} has control characters: name a plain file, e.g. report.html")
    return text


def store_dir(text: str) -> str:
    """Argument type ``--store``: a folder name, not empty (``--store ""`` would quietly be the default store) and
    without control characters (a folder named with an ESC would be made).

    >>> store_dir("cache")
    'cache'
    >>> store_dir("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: name the store's folder, or leave --store out for the default
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the store's folder, or leave --store out for the default")
    if safe(text) != text:
        raise argparse.ArgumentTypeError(f"{_shown(text)} has control characters: name a plain folder")
    return text


def in_file(path: str | Path, what: str, fix: str) -> Path:
    """``path`` (``~`` expanded, a link followed) when it is a regular file the CLI may read; else a
    StitchError naming what is there: a folder, a FIFO (a read would wait forever), a device such as
    ``/dev/zero`` (it never ends), a socket.  ``what`` names the file, ``fix`` says what to give instead.

    >>> in_file("/dev/zero", "bundle", "give a .zip made by `runs export`")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: bundle /dev/zero is a device, not a file: give a .zip made by `runs export`
    """
    p = Path(path).expanduser()
    if not str(path).strip():
        raise StitchError(f"no {what} named: {fix}")
    try:
        mode = os.stat(p).st_mode  # through links: what a read would open
    except FileNotFoundError:
        raise StitchError(f"no {what} at {safe(str(p))}: {fix}") from None
    except OSError as exc:
        raise StitchError(f"cannot read {what} {safe(str(p))} ({exc.strerror or exc}): {fix}") from None
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        raise StitchError(f"{what} {safe(str(p))} is {kind}, not a file: {fix}")
    return p


def safe(text: str) -> str:
    r"""``text`` with every character a terminal would act on written as a visible escape: C0 and C1 controls
    (ESC, newlines, ``\r``, DEL), line and paragraph separators, and the bidi marks and overrides (U+202E
    turns what follows around).  Stored names (a bundle's label) and typed input echoed in an error go
    through it, so nothing printed can move the cursor, recolour the terminal or add a line.

    >>> safe("run\x1b[2J\nlabel\u202eTXT")
    'run\\x1b[2J\\nlabel\\u202eTXT'
    >>> safe("zoo:cnn-digits-s0 · 0.98")
    'zoo:cnn-digits-s0 · 0.98'
    """
    if text.isprintable():  # the common case: nothing to escape
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif code in _BIDI or unicodedata.category(ch) in ("Zl", "Zp"):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def safe_text(text: str) -> str:
    r""":func:`safe` for a block of output: every line of ``text`` made safe, its line breaks kept.

    >>> print(safe_text("a\x1b[31m\nb"))
    a\x1b[31m
    b
    """
    return "\n".join(safe(line) for line in text.split("\n"))


def set_threads(args: argparse.Namespace) -> int:
    """Set torch's CPU threads for this command (``--threads``, else ``$STITCHLAB_JOB_THREADS``, else the cores
    less one), deliberately: torch's default of every core thrashes when anything else uses the CPU."""
    import torch

    from stitchcore.jobs.worker import configured_threads

    threads = getattr(args, "threads", None) or configured_threads(1)
    torch.set_num_threads(threads)
    return threads


def pair(text: str) -> tuple[int, int]:
    """Argument type ``X:Y``, two class indices.

    >>> pair("3:8")
    (3, 8)
    """
    try:
        x, y = text.split(":")
        return whole(x), whole(y)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected X:Y (two class indices), got {_shown(text)}") from None


def json_obj(text: str) -> dict[str, Any]:
    """Argument type: a JSON object.

    >>> json_obj('{"blocks": [1, 1]}')
    {'blocks': [1, 1]}
    >>> json_obj("[1]")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a JSON object, e.g. '{"width": 32}'
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: '[' * 10**5
        raise argparse.ArgumentTypeError(f"not JSON ({getattr(exc, 'msg', 'nested too deep')}): {_shown(text)}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"width\": 32}'")
    return value


def names(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated names (cuts, metrics) as a tuple; None (or empty) stays None: "all" / the default.

    >>> names("block1, fc1,")
    ('block1', 'fc1')
    >>> names(None) is None
    True
    """
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else None


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
    out = run_experiment(kind, spec, store, rerun=args.rerun, progress=bar, device=args.device, cancel=CTRL_C,
                         wait=not args.no_wait, options=run_options(args))
    bar.close()
    return out


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
