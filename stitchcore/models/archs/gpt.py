"""Character-level GPT in the style of nanoGPT, sized for a CPU.

Token embedding ``wte``, position embedding ``wpe``, pre-LN blocks ``h.0 ..
h.{n_layer-1}`` (``ln_1, attn, ln_2, mlp``), final ``ln_f`` and ``lm_head``
whose weight is tied to ``wte`` (as in GPT-2, so "preserve head" keeps ``wte``
and ``ln_f``).  ``forward(idx)`` returns logits only; the loss lives in training
code, which keeps the forward a plain, fx-traceable sequence.

>>> import torch
>>> m = GPT(GPTConfig(vocab_size=50))
>>> m(torch.zeros(2, 16, dtype=torch.long)).shape
torch.Size([2, 16, 50])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.errors import RefError

__all__ = ["GPTConfig", "GPT", "Block", "CausalSelfAttention", "GPTMLP"]


@dataclass(frozen=True)
class GPTConfig:
    """Options of the ``gpt`` architecture."""

    vocab_size: int = 128  # characters; 128 covers ASCII, recipes set the corpus's own alphabet size
    block_size: int = 64  # longest context; 64 characters train fast on a CPU
    n_layer: int = 4  # transformer blocks h.0 .. h.{n_layer-1}: the cut points
    n_head: int = 4  # attention heads; must divide n_embd
    n_embd: int = 64  # residual stream width
    dropout: float = 0.0  # 0 keeps frozen halves exact and runs deterministic

    def __post_init__(self) -> None:
        if min(self.vocab_size, self.block_size, self.n_layer, self.n_head, self.n_embd) < 1:
            raise RefError("gpt vocab_size, block_size, n_layer, n_head and n_embd must be >= 1")
        if self.n_embd % self.n_head:
            raise RefError(
                f"gpt n_embd={self.n_embd} is not divisible by n_head={self.n_head}; e.g. n_embd=64&n_head=4"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise RefError(f"gpt dropout must be in [0, 1), got {self.dropout}")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: [B, T, C] -> [B, T, C]."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # q, k, v at once
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, C] -> [B, T, C]."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # each (B, T, C)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class GPTMLP(nn.Module):
    """Position-wise feed-forward: [B, T, C] -> [B, T, C] through 4C hidden units."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, C] -> [B, T, C]."""
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)); [B, T, C] -> [B, T, C]."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = GPTMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, C] -> [B, T, C]."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token ids [B, T] (T <= block_size) -> next-token logits [B, T, vocab_size]."""

    config_cls = GPTConfig
    input_kind = "tokens"
    recipe_defaults = {"optimizer": "adamw"}  # the GPT-2 report's recipe; SGD seeds are the comparison (DESIGN)

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # [B, T] -> [B, T, C]
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # [T] -> [T, C]
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)  # [B, T, C] -> [B, T, V]
        self.lm_head.weight = self.wte.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # scaled residual projections (GPT-2 paper)
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One example without the batch dimension: (block_size,)."""
        return (self.config.block_size,)

    @property
    def num_outputs(self) -> int:
        """Vocabulary size."""
        return self.config.vocab_size

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx [B, T] long -> logits [B, T, vocab_size]."""
        pos = torch.arange(idx.size(1), device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.h:
            x = block(x)  # (B, T, C)
        return self.lm_head(self.ln_f(x))  # (B, T, V)
