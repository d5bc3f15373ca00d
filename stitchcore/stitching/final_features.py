"""Final features: a model's penultimate representation, the input of its classifier head.

The objective ``final`` ("final feature matching", Revisiting Stitching in the Foundation Model Era, CVPR 2026)
trains a stitch so that B's top, fed by the adapter, reproduces B's own final features on the same image:
the mean squared error between the two [B, D] vectors, read where B's classifier head takes them.  Unlike ``match``
(B's activation at the receiving cut) it constrains what the whole top computes; unlike ``task`` it needs no labels.

:class:`HeadInput` runs a module (B's suffix from a cut, or B whole) and reads its head's input on the way, with a
pre-hook that lives only for that call and only listens to the calling thread (a cached model may serve another
run at the same time).

>>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
>>> logits, feats = HeadInput(net, head_of(net))(torch.ones(5, 3))
>>> tuple(logits.shape), tuple(feats.shape)
((5, 2), (5, 4))
>>> torch.equal(feats, torch.relu(net[0](torch.ones(5, 3))))
True
"""

from __future__ import annotations

import threading

import torch
from torch import nn

from stitchcore.errors import StitchError
from stitchcore.models.sources.checkpoint import head_names

__all__ = ["HeadInput", "head_of", "checked_head"]


def head_of(model: nn.Module) -> nn.Module:
    """``model``'s classifier head: its last Linear (or 1x1-style conv) in module order; StitchError when none.

    >>> head_of(nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4, 3))).out_features
    3
    """
    names = head_names(model)
    if not names:
        raise StitchError(f"{type(model).__name__} has no Linear or conv classifier head, so it has no final "
                          "features to match; use objective 'task' or 'match'")  # fmt: skip
    return model.get_submodule(names[0])


@torch.no_grad()
def checked_head(model: nn.Module, example: torch.Tensor) -> nn.Module:
    """:func:`head_of`, held to being the model's output layer: on ``example`` [B, ...] the head applied to what it
    reads must give the model's output (a model whose last Linear is not its classifier is refused in one line).

    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    >>> checked_head(net, torch.ones(2, 3)) is net[2]
    True
    """
    head = head_of(model)
    was = model.training
    model.eval()
    try:
        out, features = HeadInput(model, head)(example)  # [B, K], [B, D]
        x = features.view(len(features), -1, 1, 1) if isinstance(head, nn.Conv2d) else features
        same = isinstance(out, torch.Tensor) and out.dim() == 2 and torch.allclose(head(x).reshape(out.shape), out,
                                                                                    atol=1e-4)  # fmt: skip
    except (RuntimeError, StitchError):
        same = False
    finally:
        model.train(was)
    if not same:
        raise StitchError(f"{type(model).__name__}'s last Linear is not what gives its output, so its final features "
                          "(its classifier's input) cannot be read; use objective 'task' or 'match'",
                          fix={"objective": "task"})  # fmt: skip
    return head


class HeadInput(nn.Module):
    """``module`` run on x, with the input of ``head`` (a module it calls) read on the way:
    x -> (output, final features [B, D]); ``features_only`` -> the features alone (what ``collect`` caches).

    The features are the head's input flattened from dim 1 ([B, D]; a conv head's [B, D, 1, 1] -> [B, D]).
    """

    def __init__(self, module: nn.Module, head: nn.Module, *, features_only: bool = False) -> None:
        super().__init__()
        self.module, self.features_only = module, features_only
        object.__setattr__(self, "_head", head)  # not a submodule: its parameters are the module's

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | torch.Tensor:
        me, seen = threading.get_ident(), []

        def read(_module: nn.Module, inputs: tuple) -> None:
            if threading.get_ident() == me:
                seen.append(inputs[0])

        handle = self._head.register_forward_pre_hook(read)
        try:
            out = self.module(x)  # [B, K]
        finally:
            handle.remove()
        if not seen:
            raise StitchError(f"the classifier head was not reached from this cut of {type(self.module).__name__}; "
                              "final features are read where the head takes them")  # fmt: skip
        features = seen[-1].flatten(1)  # [B, D]
        return features if self.features_only else (out, features)
