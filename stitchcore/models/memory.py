"""Will it fit? A model's memory counted before any of it is allocated, against what the machine has free.

A model is built on PyTorch's ``meta`` device (shapes and dtypes, no storage) and run there on a batch of the
input shape, every module's output counted; training needs its weights, their gradients and AdamW's two
moments (16 bytes a float32 parameter) and the activations twice (forward, then the gradients flowing back).
What exceeds the free memory is refused in one line naming the size, before the allocator is asked (a size
just under the machine's memory would otherwise be allocated inside the web server's process).

>>> from torch import nn
>>> need = training_bytes(lambda: nn.Linear(1000, 1000), (1000,), batch=64)
>>> need.params, need.activation_bytes  # 1000 x 1000 + 1000 parameters; the output of 64 x 1000 float32
(1001000, 256000)
>>> words(need.total)  # 16 bytes a parameter to train, the activations forward and back
'17 MB'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.errors import StitchError

__all__ = ["Footprint", "available_bytes", "check_buildable", "check_fits", "training_bytes", "words"]

TRAIN_BYTES_PER_PARAM = 16  # float32 weight + gradient + AdamW's two moments
FREE_SHARE = 0.9  # of the free memory a run may plan to use (the rest: the process, the data, fragmentation)


@dataclass(frozen=True)
class Footprint:
    """Memory a model needs to train on one batch, counted on the meta device."""

    params: int  # parameter count
    param_bytes: int  # their bytes as built
    activation_bytes: int  # every module's output for one batch (None where the forward cannot run on meta: 0)

    @property
    def total(self) -> int:
        """Bytes to train: weights, gradients and optimiser state, activations forward and back."""
        return self.params * TRAIN_BYTES_PER_PARAM + 2 * self.activation_bytes


def _on_meta(build: Callable[[], nn.Module]) -> nn.Module | None:
    """``build()`` under ``torch.device("meta")`` (shapes, no storage); None for an arch that cannot be built
    without storage (its own error, a bad option ..., comes from the real build that follows)."""
    try:
        with torch.device("meta"):
            return build()
    except Exception:  # noqa: BLE001 - not counted, built for real
        return None


def training_bytes(build: Callable[[], nn.Module], input_shape: tuple[int, ...], batch: int,
                   input_dtype: torch.dtype = torch.float32) -> Footprint:  # fmt: skip
    """What ``build()`` needs to train on batches of ``batch`` inputs of ``input_shape`` (one example's shape),
    counted without allocating: built on the meta device and run there (an op without a meta kernel leaves the
    activations uncounted)."""
    model = _on_meta(build)
    if model is None:
        return Footprint(0, 0, 0)
    params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    outputs = [0]

    def count(_module: nn.Module, _inputs: object, out: object) -> None:
        if isinstance(out, torch.Tensor):
            outputs[0] += out.numel() * out.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            model(torch.empty(batch, *input_shape, dtype=input_dtype, device="meta"))
    except Exception:  # noqa: BLE001 - an op with no meta kernel: the weights alone are counted
        outputs[0] = 0
    finally:
        for h in hooks:
            h.remove()
    return Footprint(params, param_bytes, outputs[0])


def check_buildable(what: str, build: Callable[[], nn.Module], fix: str = "") -> None:
    """StitchError before ``build()`` allocates weights this machine cannot hold (counted on the meta device):
    a checkpoint header, a stored summary or a model folder's config asking for a layer of hundreds of GB is
    refused in one line.  Buffers count too (a causal mask of a huge context is one)."""
    model = _on_meta(build)
    if model is not None:
        tensors = [*model.parameters(), *model.buffers()]
        check_fits(what, sum(t.numel() * t.element_size() for t in tensors), "cpu", fix)


def available_bytes(device: torch.device | str = "cpu") -> int:
    """Memory free for a new allocation: a CUDA device's free memory, else the machine's available RAM
    (``MemAvailable``; the physical memory where that cannot be read)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def words(n: int) -> str:
    """Bytes as people read them: '16 MB', '5.1 TB'."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{n} bytes"


def check_fits(what: str, need: int, device: torch.device | str = "cpu", fix: str = "") -> None:
    """StitchError in one line when ``need`` bytes exceed the free memory's usable share on ``device``."""
    free = available_bytes(device)
    if need > FREE_SHARE * free:
        where = "the GPU" if torch.device(device).type == "cuda" else "this machine"
        raise StitchError(f"{what} needs about {words(need)} of memory and {where} has {words(free)} free"
                          f"{': ' + fix if fix else ''}")  # fmt: skip
