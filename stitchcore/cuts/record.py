"""Record activations at named cuts during a forward pass: the one door for forward hooks.

:func:`record` is a context manager.  It hooks the module behind each cut name, yields a
dict that the forward pass fills with ``{name: output}``, and on exit -- normal, by an
exception, or by ``stop_at`` ending the forward -- removes every hook it added and gives
every module of the model back its train/eval flag (as torchvision's
``create_feature_extractor`` restores ``model.training`` and TransformerLens' ``hooks()``
removes its hooks).

>>> import torch
>>> from torch import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).train()
>>> with record(model, ["0", "1"], eval_mode=True) as acts:
...     logits = model(torch.randn(3, 4))  # [3, 2]
>>> {name: tuple(a.shape) for name, a in acts.items()}  # [B, 8] each
{'0': (3, 8), '1': (3, 8)}
>>> model.training, len(model[0]._forward_hooks)
(True, 0)

With ``stop_at`` the forward ends right after that cut is recorded, so the rest of the
model never runs (a prefix at the cost of the prefix); the ``with`` block ends there too:

>>> with record(model, ["0"], stop_at="0") as acts:
...     model(torch.randn(3, 4))
>>> acts["0"].shape
torch.Size([3, 8])

What is recorded for a name (``"layer2.1"``, or ``"blocks.0:1"`` for the second call of
a module called at several cut points, see :mod:`stitchcore.cuts`):

- the output of that call of the module, the first item where it returns a tuple or a
  list (HF blocks return ``(hidden [B, T, D], ...)``); outputs that are not tensors are
  not recorded;
- the very tensor the model computed: no copy, no detach, same device (call the forward
  under ``torch.no_grad`` to record without an autograd graph; clone before writing to it);
- a name whose call did not happen is absent; :meth:`Recording.require` says why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn

from stitchcore.cuts._naming import close_names, parse_call
from stitchcore.errors import CutError

__all__ = ["Recording", "record"]


class Recording(dict[str, torch.Tensor]):
    """What :func:`record` yields: cut name -> recorded output, e.g. [B, C, H, W] or [B, T, D].

    Filled in the order the recorded calls returned.  ``calls`` counts how often each
    hooked module ran (by module path), for messages about a missing name.
    """

    def __init__(self, model: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}  # module path -> calls seen while recording
        self._names = names  # the cut names asked for
        self._model_name = type(model).__name__  # for messages

    def require(self, name: str) -> torch.Tensor:
        """The output recorded for ``name``; a :class:`CutError` saying why there is none otherwise."""
        if name in self:
            return self[name]
        if name not in self._names:
            raise CutError(f"'{name}' was not recorded (recorded: {', '.join(self._names)}); "
                           "pass it to record()")
        path, call = parse_call(name)
        ran = self.calls.get(path, 0)
        if ran == 0:
            raise CutError(f"module '{path}' did not run in the forward pass of {self._model_name}; "
                           "pick a cut on the path from the input to the output")
        if call >= ran:
            raise CutError(f"module '{path}' ran {ran} time(s) in the forward pass; "
                           f"'{name}' does not exist, use '{path}'")
        raise CutError(f"module '{path}' returned no tensor (call {call}); pick another cut")


class _StopForward(Exception):
    """Raised by the ``stop_at`` hook to end the forward; caught by the recording that raised it."""

    def __init__(self, recording: Recording) -> None:
        super().__init__("forward stopped at a recorded cut")
        self.recording = recording  # only this recording's context swallows it


def _module(model: nn.Module, name: str, path: str) -> nn.Module:
    """The module at ``path``; a :class:`CutError` naming the close module paths otherwise."""
    try:
        if path:
            return model.get_submodule(path)
    except AttributeError:
        pass
    close = close_names(path, [n for n, _ in model.named_modules() if n])
    hint = f"close: {', '.join(close)}" if close else "list them: `python -m stitchcore cuts REF`"
    raise CutError(f"no module '{name}' in {type(model).__name__}; {hint}")


def _hook(rec: Recording, path: str, wanted: dict[int, str], stop_at: str | None) -> Callable:
    """A forward hook on module ``path`` that records the calls listed in ``wanted`` (call -> name)."""

    def hook(_module: nn.Module, _args: Any, out: Any) -> None:
        call = rec.calls.get(path, 0)
        rec.calls[path] = call + 1
        name = wanted.get(call)
        if name is None:
            return
        if isinstance(out, (tuple, list)) and out:  # HF blocks return (hidden [B, T, D], ...)
            out = out[0]
        if isinstance(out, torch.Tensor):
            rec[name] = out
        if name == stop_at:
            raise _StopForward(rec)

    return hook


@contextlib.contextmanager
def record(
    model: nn.Module,
    names: Iterable[str],
    *,
    stop_at: str | None = None,
    eval_mode: bool = False,
) -> Iterator[Recording]:
    """Forward hooks recording the outputs at the cut ``names`` of ``model`` while the block runs.

    ``names``: cut names, each a module path (``"layer2.1"``) or ``"path:k"`` for the k-th
    extra call of a shared module; an unknown path raises :class:`CutError` with the close
    ones before any hook is added.  ``stop_at`` (one of ``names``): end the forward as soon
    as that name is recorded; the exception that ends it is swallowed on exit.
    ``eval_mode``: put the whole model in eval mode for the block.

    On exit every hook is removed and every module's train/eval flag is what it was on entry.
    Yields a :class:`Recording`, ``{name: Tensor [B, ...]}``, filled by the forward.
    """
    names = list(dict.fromkeys(names))
    if stop_at is not None and stop_at not in names:
        raise CutError(f"stop_at {stop_at!r} is not one of the recorded names {names}; record it too")
    wanted: dict[str, dict[int, str]] = {}  # module path -> {call index: cut name}
    for name in names:
        path, call = parse_call(name)
        wanted.setdefault(path, {})[call] = name
    modules = {path: _module(model, calls[min(calls)], path) for path, calls in wanted.items()}
    rec = Recording(model, names)
    flags = [(m, m.training) for m in model.modules()]
    handles = []
    try:
        for path, module in modules.items():
            handles.append(module.register_forward_hook(_hook(rec, path, wanted[path], stop_at)))
        if eval_mode:
            model.eval()
        yield rec
    except _StopForward as stop:
        if stop.recording is not rec:  # another recording's stop: not ours to swallow
            raise
    finally:
        for h in handles:
            h.remove()
        for m, flag in flags:
            m.training = flag
