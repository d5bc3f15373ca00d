"""A frozen model as something that travels to another process: its structure and its tensors, apart.

A cluster worker (see :mod:`stitchcore.backends`) never opens the results store or a
checkpoint path; the driver sends each model once as a :class:`ModelPackage`.  The package holds the
module tree with every weight on PyTorch's ``meta`` device (no memory, pickles in milliseconds) and
the weights as a flat ``name -> tensor`` dict: the state dict plus the non-persistent buffers a
state dict leaves out (attention masks, position indices), which a rebuilt model must not lack.
Any source's model travels this way (zoo, timm, torchvision, transformers, files), provided its
module classes import on the worker.

>>> from stitchcore.models.loaded import LoadedModel, freeze
>>> net = freeze(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
>>> m = LoadedModel("zoo:demo", net, "image", (3,), None, 2)
>>> back = pack_model(m).unpack()
>>> x = torch.ones(1, 3)
>>> bool(torch.equal(back.model(x), m.model(x))), back.model[0].weight.requires_grad, back.model.training
(True, False, False)
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace

import torch
from torch import nn

from stitchcore.models.loaded import LoadedModel, freeze

__all__ = ["ModelPackage", "pack_model"]


@dataclass(frozen=True)
class ModelPackage:
    """A :class:`LoadedModel` split into structure and tensors (both picklable)."""

    skeleton: LoadedModel  # the model with every parameter and buffer on the meta device
    tensors: dict[str, torch.Tensor]  # qualified name -> CPU tensor: every parameter and buffer (persistent or not)

    @property
    def nbytes(self) -> int:
        """Bytes of weights the package carries."""
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def unpack(self) -> LoadedModel:
        """The model again, on CPU, eval mode, frozen; the package itself is left untouched."""
        model = copy.deepcopy(self.skeleton.model)
        for name, tensor in self.tensors.items():
            owner_name, _, leaf = name.rpartition(".")
            owner = model.get_submodule(owner_name)
            if leaf in owner._parameters:
                owner._parameters[leaf] = nn.Parameter(tensor, requires_grad=False)
            else:
                owner._buffers[leaf] = tensor
        missing = [n for n, t in itertools.chain(model.named_parameters(), model.named_buffers()) if t.is_meta]
        if missing:  # cannot happen for a package made by pack_model; a hand-made one may lack names
            raise ValueError(f"model package lacks {len(missing)} tensor(s), e.g. {missing[0]}")
        return replace(self.skeleton, model=freeze(model))


def _named_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    named = itertools.chain(model.named_parameters(remove_duplicate=False), model.named_buffers(remove_duplicate=False))
    return {name: t.detach() for name, t in named if t is not None}


def pack_model(loaded: LoadedModel) -> ModelPackage:
    """Split ``loaded`` into a meta-device skeleton and its tensors; ``loaded`` is not modified.

    Tensors shared by two names (tied embeddings) are shipped once and stay shared after unpacking.
    """
    tensors = _named_tensors(loaded.model)
    memo: dict[int, torch.Tensor] = {}
    for t in itertools.chain(loaded.model.parameters(), loaded.model.buffers()):
        if id(t) not in memo:  # deepcopy puts the meta twin where the weight was, copying no data
            meta = torch.empty_like(t, device="meta")
            memo[id(t)] = nn.Parameter(meta, requires_grad=False) if isinstance(t, nn.Parameter) else meta
    skeleton = copy.deepcopy(loaded.model, memo)
    return ModelPackage(replace(loaded, model=skeleton), {k: v.cpu() for k, v in tensors.items()})
