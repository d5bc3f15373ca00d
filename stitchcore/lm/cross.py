"""Stitching two GPTs that do not share a tokenizer, scored in bits per byte (issue 43).

A window is one piece of text (at most ``chars`` characters) tokenized by A and by B on its own.  Each of B's
tokens t reads A's stream at the A tokens of the same bytes (:func:`stitchcore.data.tokenize.align`: the ones
that end inside B's token, never one that runs past it), through a per-token adapter into B's stream at ``j``;
B's blocks from ``j`` and B's head then predict B's next token.  The stitched model is a
:class:`~stitchcore.lm.parts.ComposedLM` whose "embedding" is A's bottom and the alignment
(:class:`AlignedBottom`), so the adapter trains with :func:`stitchcore.lm.train.train_lm_adapter` as any LM
stitch's does.

**Bits per byte** (tokenizer-independent): B's next-token loss summed over a window's targets (B's tokens 1 ..
L-1, each predicted from the ones before it), in bits, over the UTF-8 bytes those targets cover.  B alone is
scored on the same windows and targets, so the two numbers differ only by what reaches B's position ``j``.

Controls beside every stitch (:func:`shuffled_alignment`; a random-init A is the caller's: another A):

>>> x = CrossBatch(a_ids=torch.zeros(1, 4, dtype=torch.int64), b_ids=torch.zeros(1, 3, dtype=torch.int64),
...                first=torch.tensor([[0, 1, 3]]), last=torch.tensor([[0, 2, 3]]),
...                targets=torch.tensor([[5, 6, -100]]), target_bytes=torch.tensor([3.0]))
>>> y = shuffled_alignment(x, seed=0)
>>> bool((y.last <= x.last).all())  # every position reads a span at or before its own: no byte from the future
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.data.tokenize import ALIGNMENTS, align, aligned
from stitchcore.errors import DataError
from stitchcore.lm.parts import ComposedLM, LMParts, TokenCodec
from stitchcore.measures.intervals import paired_statistic_ci

__all__ = ["EVAL_BATCH", "AlignedBottom", "ByteScore", "CrossBatch", "b_alone", "bits_per_byte", "bpb_ci",
           "bpb_penalty_ci", "build_cross_stitch", "cross_batches", "cross_layout", "cross_pairs", "cross_windows",
           "shuffled_alignment"]  # fmt: skip

EVAL_BATCH = 32  # windows per forward pass when scoring
LN2 = math.log(2.0)
IGNORE = -100  # a target F.cross_entropy skips: B's last token of a window, and padding


@dataclass
class CrossBatch:
    """``n`` windows, each tokenized by A and by B, with B's positions aligned to A's (padding: 0 ids, -1
    alignment, IGNORE targets; both models are causal, so padding after a window's end changes nothing in it)."""

    a_ids: torch.Tensor  # int64 [n, T_a]: A's tokens
    b_ids: torch.Tensor  # int64 [n, T_b]: B's tokens
    first: torch.Tensor  # int64 [n, T_b]: the first A token B's token reads (-1: none)
    last: torch.Tensor  # int64 [n, T_b]: the last A token it reads (-1: none)
    targets: torch.Tensor  # int64 [n, T_b]: B's next token at each position (IGNORE where there is none)
    target_bytes: torch.Tensor  # float64 [n]: the UTF-8 bytes the window's targets cover

    def __len__(self) -> int:
        return int(self.a_ids.shape[0])

    def to(self, device: torch.device | str) -> CrossBatch:
        return CrossBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def rows(self, lo: int, hi: int) -> CrossBatch:
        """Windows ``lo .. hi-1``."""
        return CrossBatch(**{f.name: getattr(self, f.name)[lo:hi] for f in fields(self)})


def _spans_of(codec: TokenCodec, role: str) -> Callable[[str], tuple[torch.Tensor, torch.Tensor]]:
    if codec.spans is None:
        raise DataError(f"model {role}'s tokenizer ({codec.describe()}) gives no byte offsets, so its tokens cannot "
                        "be aligned to the other model's; use a zoo GPT (char or bpe:N) or an HF fast tokenizer")
    return codec.spans


def _window(piece: str, spans_a: Callable, spans_b: Callable, contexts: tuple[int, int]) -> tuple | None:
    """A's and B's tokens of ``piece`` (shortened until both fit their contexts), aligned; None if B has < 2."""
    while piece:
        ids_a, sp_a = spans_a(piece)
        ids_b, sp_b = spans_b(piece)
        if len(ids_a) <= contexts[0] and len(ids_b) <= contexts[1]:
            break
        piece = piece[: int(len(piece) * 0.9)]
    if len(piece) == 0 or len(ids_b) < 2 or len(ids_a) < 1:
        return None
    first, last = align(sp_a, sp_b)
    targets = torch.cat([ids_b[1:], torch.tensor([IGNORE])])
    nbytes = float((sp_b[1:, 1] - sp_b[1:, 0]).sum())
    return ids_a, ids_b, first, last, targets, nbytes


def _stack(rows: list[tuple]) -> CrossBatch:
    n, t_a, t_b = len(rows), max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    out = CrossBatch(torch.zeros(n, t_a, dtype=torch.int64), torch.zeros(n, t_b, dtype=torch.int64),
                     torch.full((n, t_b), -1), torch.full((n, t_b), -1), torch.full((n, t_b), IGNORE),
                     torch.tensor([r[5] for r in rows], dtype=torch.float64))  # fmt: skip
    for k, (ids_a, ids_b, first, last, targets, _) in enumerate(rows):
        out.a_ids[k, : len(ids_a)] = ids_a
        out.b_ids[k, : len(ids_b)] = ids_b
        out.first[k, : len(ids_b)], out.last[k, : len(ids_b)] = first, last
        out.targets[k, : len(ids_b)] = targets
    return out


def cross_windows(text: str, codec_a: TokenCodec, codec_b: TokenCodec, n: int, chars: int,
                  contexts: tuple[int, int], seed: int = 1234) -> CrossBatch:
    """``n`` windows of ``text``, each starting at a character drawn from ``seed`` and ``chars`` long (shorter
    where a tokenization would not fit its model's context ``contexts`` = (A's, B's))."""
    spans_a, spans_b = _spans_of(codec_a, "A"), _spans_of(codec_b, "B")
    if len(text) < chars + 2:
        raise DataError(f"{len(text)} characters are too few for windows of {chars}; use a longer text")
    g = torch.Generator().manual_seed(seed)
    rows: list[tuple] = []
    for _ in range(max(4 * n, 16)):  # a window B tokenizes to fewer than two tokens is drawn again
        start = int(torch.randint(0, len(text) - chars, (1,), generator=g))
        row = _window(text[start : start + chars], spans_a, spans_b, contexts)
        if row is not None:
            rows.append(row)
        if len(rows) == n:
            return _stack(rows)
    raise DataError(f"could not draw {n} windows of {chars} characters that B tokenizes into 2 or more tokens")


def cross_batches(text: str, codec_a: TokenCodec, codec_b: TokenCodec, batch_size: int, chars: int,
                  contexts: tuple[int, int], seed: int, steps: int) -> Iterator[tuple[CrossBatch, torch.Tensor]]:
    """``steps`` training batches of random windows: (windows, their targets int64 [n, T_b])."""
    for step in range(steps):
        x = cross_windows(text, codec_a, codec_b, batch_size, chars, contexts, seed=seed * 100_003 + step)
        yield x, x.targets


def shuffled_alignment(x: CrossBatch, seed: int) -> CrossBatch:
    """The control that breaks the alignment and nothing else: each of B's tokens t reads the A tokens of a B
    token s drawn uniformly from 0 .. t of its window (the same spans, reordered; drawn from the past, so the
    control never reads a byte B has not seen and can only lose information)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(x.first.shape[1])  # [T_b]
    draw = (torch.rand(x.first.shape, generator=g) * (t + 1)).floor().long().clamp(max=t)  # [n, T_b], <= t
    first, last = x.first.gather(1, draw), x.last.gather(1, draw)
    pad = x.last < 0
    return CrossBatch(x.a_ids, x.b_ids, first.masked_fill(pad, -1), last.masked_fill(pad, -1), x.targets,
                      x.target_bytes)


class AlignedBottom(nn.Module):
    """A's tokens up to its position ``i`` read at B's positions: CrossBatch -> [n, T_b, D_A]."""

    def __init__(self, a: LMParts, i: int, mode: str = "last") -> None:
        super().__init__()
        if mode not in ALIGNMENTS:
            raise DataError(f"an alignment is one of {', '.join(ALIGNMENTS)}, not {mode!r}")
        self.embed, self.blocks, self.i, self.mode = a.embed, nn.ModuleList(a.blocks[:i]), i, mode

    def forward(self, x: CrossBatch) -> torch.Tensor:
        h = self.embed(x.a_ids)  # [n, T_a, D_A]
        for block in self.blocks:
            h = block(h)
        return aligned(h, x.first, x.last, self.mode)  # [n, T_b, D_A]


class _ReadB(nn.Module):
    """B's embeddings of a CrossBatch's B tokens: [n, T_b, D_B]."""

    def __init__(self, b: LMParts) -> None:
        super().__init__()
        self.embed = b.embed

    def forward(self, x: CrossBatch) -> torch.Tensor:
        return self.embed(x.b_ids)


def cross_layout(n_a: int, n_b: int, i: int, j: int, mode: str = "last", adapter: str = "S") -> list[str]:
    """The parts of a cross-tokenizer stitch, in order: A's bottom, the alignment, the adapter, B's top.

    >>> cross_layout(4, 4, 1, 2)
    ['A.wte', 'A.wpe', 'A.h.0', 'align(last)', 'S', 'B.h.2', 'B.h.3', 'B.ln_f', 'B.lm_head']
    """
    return ["A.wte", "A.wpe", *[f"A.h.{k}" for k in range(i)], f"align({mode})", adapter,
            *[f"B.h.{k}" for k in range(j, n_b)], "B.ln_f", "B.lm_head"]


def build_cross_stitch(a: LMParts, b: LMParts, i: int, j: int, adapter: nn.Module, mode: str = "last") -> ComposedLM:
    """A's bottom (``i`` blocks), aligned to B's tokens, -> ``adapter`` [.., D_A] -> [.., D_B] -> B from ``j``.

    Its part 0 is the adapter: ``residual(x, 0)`` is A's aligned stream and ``finish(h, 1)`` B's top."""
    layout = cross_layout(a.n_layer, b.n_layer, i, j, mode, getattr(adapter, "label", "S"))
    return ComposedLM(AlignedBottom(a, i, mode), [adapter, *b.blocks[j:]], b.head, layout, b.context)


def b_alone(b: LMParts) -> ComposedLM:
    """B on its own tokens of the same windows (the baseline every stitch is read against)."""
    layout = ["B.wte", "B.wpe", *[f"B.h.{k}" for k in range(b.n_layer)], "B.ln_f", "B.lm_head"]
    return ComposedLM(_ReadB(b), list(b.blocks), b.head, layout, b.context)


def cross_pairs(a: LMParts, b: LMParts, i: int, j: int, batches: list[CrossBatch], mode: str,
                device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(A's aligned stream at ``i`` [N, D_A], B's stream at ``j`` [N, D_B]) over the real positions of each batch:
    what the adapter's closed-form start is fitted on."""
    bottom = AlignedBottom(a, i, mode)
    for x in batches:
        x = x.to(device)
        with torch.no_grad():
            keep = x.last >= 0  # [n, T_b]: a real position with an A token to read
            yield bottom(x)[keep], b.residual(x.b_ids, j)[keep]


class ByteScore(dict):
    """{'bits_per_byte', 'loss' (nats per target token), 'accuracy'} (a plain dict for JSON); ``.nll`` float64
    [n] each window's summed loss in nats and ``.bytes`` float64 [n] its target bytes (what intervals resample)."""

    nll: torch.Tensor
    bytes: torch.Tensor


@torch.no_grad()
def bits_per_byte(model: nn.Module, windows: CrossBatch, device: torch.device,
                  check_cancel: Callable[[], None] | None = None) -> ByteScore:
    """B's next-token loss of ``model`` (a cross stitch, or :func:`b_alone`) over ``windows``, in bits per byte."""
    model.eval()
    nll, correct, count = [], 0, 0
    for lo in range(0, len(windows), EVAL_BATCH):
        if check_cancel is not None:
            check_cancel()
        x = windows.rows(lo, lo + EVAL_BATCH).to(device)
        logits = model(x).float()  # [n, T_b, V_B]
        ce = F.cross_entropy(logits.flatten(0, 1), x.targets.flatten(), ignore_index=IGNORE, reduction="none")
        nll.append(ce.view(x.targets.shape).sum(1).double().cpu())  # [n]
        real = x.targets != IGNORE
        correct += int(((logits.argmax(-1) == x.targets) & real).sum())
        count += int(real.sum())
    total, nbytes = torch.cat(nll), windows.target_bytes.double()
    score = ByteScore(bits_per_byte=round(float(total.sum() / nbytes.sum()) / LN2, 6),
                      loss=round(float(total.sum()) / count, 6), accuracy=round(correct / count, 6))  # fmt: skip
    score.nll, score.bytes = total, nbytes
    return score


def bpb_ci(score: ByteScore, seed: int = 0) -> list[float]:
    """95% interval of bits per byte, the windows resampled (summed loss over summed bytes in each resample)."""
    lo, hi = paired_statistic_ci(lambda nll, nbytes: nll / nbytes / LN2, score.nll, score.bytes, seed=seed)
    return [lo, hi]


def bpb_penalty_ci(score: ByteScore, base: ByteScore, seed: int = 0) -> list[float]:
    """95% interval of ``score``'s bits per byte minus ``base``'s on the same windows (paired; > 0: worse)."""
    lo, hi = paired_statistic_ci(lambda n1, n0, nbytes: (n1 - n0) / nbytes / LN2, score.nll, base.nll,
                                 score.bytes, seed=seed)  # fmt: skip
    return [lo + 0.0, hi + 0.0]
