"""The linear maps adapters are made of and closed-form fits set.

:class:`ChannelLinear` is ``y = W x + b`` over the channel dim of a channel-first tensor
(a 1x1 or patch-merging conv for maps, a Linear for tokens and vectors); :class:`LowRankLinear`
factors ``W`` through a bottleneck of rank ``r``.  :func:`to_rows` turns activations into the
sample rows both use.

>>> to_rows(torch.zeros(2, 3, 4, 5)).shape  # [B, C, H, W] -> [B*H*W, C]
torch.Size([40, 3])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ChannelLinear", "LowRankLinear", "to_rows"]


def to_rows(z: torch.Tensor) -> torch.Tensor:
    """Channel-first [B, C, ...] -> samples [B * prod(...), C] (pixels and tokens are samples)."""
    return z.movedim(1, -1).reshape(-1, z.shape[1])


class ChannelLinear(nn.Module):
    """``y = W x + b`` over the channel dim of a channel-first tensor; what closed-form fits set.

    Maps use a conv with kernel = stride (1x1, or an r x r patch merge when the core
    downsamples by r); tokens [B,D,N] and vectors [B,D] a Linear.  ``weight2d`` is the
    [C_out, C_in*kh*kw] view of the weight, ``rows`` the matching [n, C_in*kh*kw] samples.
    """

    rank: int | None = None  # full rank

    def __init__(self, c_in: int, c_out: int, ndim: int, stride: tuple[int, int] = (1, 1), bias: bool = True):
        super().__init__()
        self.ndim, self.stride = ndim, tuple(stride)
        shape = (c_out, c_in, *self.stride) if ndim == 4 else (c_out, c_in)
        self.weight = nn.Parameter(torch.empty(shape))
        self.bias = nn.Parameter(torch.empty(c_out)) if bias else None
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # PyTorch's Linear/Conv default
        if self.bias is not None:
            nn.init.uniform_(self.bias, -1 / math.sqrt(self.in_features), 1 / math.sqrt(self.in_features))

    @property
    def in_features(self) -> int:
        return self.weight[0].numel()

    @property
    def weight2d(self) -> torch.Tensor:
        return self.weight.view(self.weight.shape[0], -1)  # [C_out, C_in*kh*kw]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ndim == 4:  # [B, C_in, H, W] -> [B, C_out, H/kh, W/kw]
            return F.conv2d(x, self.weight, self.bias, stride=self.stride)
        # [B, C_in] -> [B, C_out]; [B, C_in, N] -> [B, C_out, N]
        return F.linear(x.movedim(1, -1), self.weight, self.bias).movedim(-1, 1)

    def rows(self, z: torch.Tensor) -> torch.Tensor:
        """Core input [B, C_in, ...] -> [n, in_features], rows in the order of ``to_rows(output)``."""
        if self.ndim == 4 and self.stride != (1, 1):
            u = F.unfold(z, kernel_size=self.stride, stride=self.stride)  # [B, C_in*kh*kw, L], weight order
            return u.transpose(1, 2).reshape(-1, u.shape[1])
        return to_rows(z)

    @torch.no_grad()
    def load_(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        """Set ``weight2d = w`` [C_out, in_features] and ``bias = b`` [C_out]."""
        self.weight.copy_(w.reshape(self.weight.shape))
        if self.bias is not None and b is not None:
            self.bias.copy_(b)

    @torch.no_grad()
    def init_identity(self) -> None:
        """Eye weight (an average over the patch when strided), zero bias; needs C_in == C_out."""
        eye = torch.eye(self.weight.shape[0], dtype=self.weight.dtype)
        kk = self.in_features // self.weight.shape[1]
        eye = (eye / kk).reshape(*eye.shape, *([1] * (self.weight.dim() - 2)))  # [C, C(, 1, 1)]
        self.weight.copy_(eye.expand_as(self.weight))
        if self.bias is not None:
            self.bias.zero_()


class LowRankLinear(nn.Module):
    """``W = up @ down`` of rank r: C_in -> r (kernel = stride, no bias) -> C_out (1x1, bias)."""

    def __init__(self, c_in: int, c_out: int, ndim: int, stride: tuple[int, int], rank: int):
        super().__init__()
        self.rank = rank
        self.down = ChannelLinear(c_in, rank, ndim, stride, bias=False)
        self.up = ChannelLinear(rank, c_out, ndim)

    @property
    def in_features(self) -> int:
        return self.down.in_features

    @property
    def weight2d(self) -> torch.Tensor:
        return self.up.weight2d @ self.down.weight2d  # [C_out, in_features], rank <= r

    @property
    def bias(self) -> torch.Tensor:
        return self.up.bias

    def rows(self, z: torch.Tensor) -> torch.Tensor:
        return self.down.rows(z)  # [B, C_in, ...] -> [n, in_features]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(x))  # [B, C_in, ...] -> [B, r, ...] -> [B, C_out, ...]

    @torch.no_grad()
    def load_(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        """Factor ``w`` [C_out, in_features] by SVD, keeping the top ``rank`` directions."""
        u, s, vh = torch.linalg.svd(w.double(), full_matrices=False)
        k = min(self.rank, s.numel())
        root = torch.zeros(self.rank, dtype=torch.float64)
        root[:k] = s[:k].sqrt()
        down = torch.zeros(self.rank, w.shape[1], dtype=torch.float64)
        up = torch.zeros(w.shape[0], self.rank, dtype=torch.float64)
        down[:k], up[:, :k] = root[:k, None] * vh[:k], u[:, :k] * root[:k]
        self.down.load_(down, None)
        self.up.load_(up, b)
