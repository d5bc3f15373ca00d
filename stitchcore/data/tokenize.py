"""Tokenizers that say which bytes each token covers, and the alignment of two tokenizations of one text (issue 43).

Two language models that do not share a tokenizer can still be stitched position by position if each of B's
tokens is given the A tokens of the same bytes.  Every token here comes with its byte span [start, end) in the
UTF-8 text: a character-level vocabulary's (``char_spans``) and a byte-level BPE's (:class:`BPEVocab`, trained
locally with the ``tokenizers`` package, no download).  :func:`align` gives, for each of B's tokens, the A tokens
it may read: those whose bytes end inside B's token's bytes, never one that runs past them (that would hand B's
position bytes it has not seen yet: a causal leak).  One exception, by the tokenizers' offsets being characters: a
character a byte-level BPE splits between two tokens gives both its span, so the first of them reads the whole
character (at most 3 bytes ahead, and only there).

What comes next (issue 43): GPTs trained with ``--tokenizer bpe:N``, the cross-tokenizer stitch through
:func:`aligned` scored in bits per byte, its controls (a shuffled alignment, a random-init A) and the transfer kind.

>>> text = "héllo wörld"
>>> a = char_spans(text)  # one token a character: 'é' and 'ö' are two bytes each
>>> a[:3].tolist()
[[0, 1], [1, 3], [3, 4]]
>>> b = torch.tensor([[0, 3], [3, 6], [6, 13]])  # three coarser tokens of the same 13 bytes
>>> first, last = align(a, b)
>>> last.tolist(), first.tolist()  # B's token 0 ('hé') ends with A's token 1, token 1 ('llo') with A's token 4
([1, 4, 10], [0, 2, 5])
"""

from __future__ import annotations

import json

import torch

from stitchcore.errors import DataError

__all__ = ["ALIGNMENTS", "BPEVocab", "align", "aligned", "char_spans"]

ALIGNMENTS = ("last", "mean")  # B's position reads A's last token inside its bytes, or the mean of those tokens


def char_spans(text: str) -> torch.Tensor:
    """The byte span [start, end) of each character of ``text`` in its UTF-8 encoding: int64 [T, 2]."""
    lengths = torch.tensor([len(c.encode("utf-8", "surrogatepass")) for c in text], dtype=torch.int64)  # [T]
    ends = torch.cumsum(lengths, 0)
    return torch.stack([ends - lengths, ends], dim=1)


class BPEVocab:
    """A byte-level BPE of ``size`` tokens trained on a text with the ``tokenizers`` package (deterministic: the
    same text and size give the same merges); :meth:`encode` gives ids and byte spans."""

    def __init__(self, tokenizer: object) -> None:
        self._tok = tokenizer

    @classmethod
    def train(cls, text: str, size: int) -> BPEVocab:
        """A BPE of ``size`` tokens (at least the 256 bytes plus one merge) learned from ``text``."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if isinstance(size, bool) or not isinstance(size, int) or not 257 <= size <= 65536:
            raise DataError(f"a byte-level BPE has 257 to 65,536 tokens (the 256 bytes and its merges), not {size!r}")
        if not text:
            raise DataError("a BPE needs text to learn its merges from")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
        chunks = [text[i : i + 4096] for i in range(0, len(text), 4096)]
        tok.train_from_iterator(chunks, trainer=trainer, length=len(chunks))
        return cls(tok)

    @property
    def size(self) -> int:
        """Number of tokens (the model's vocab_size)."""
        return self._tok.get_vocab_size()

    def encode(self, text: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(token ids int64 [T], byte spans int64 [T, 2]) of ``text``; the spans tile its UTF-8 bytes."""
        enc = self._tok.encode(text)
        starts = char_spans(text)[:, 0].tolist() + [len(text.encode("utf-8", "surrogatepass"))]  # char -> byte
        spans = [[starts[s], starts[e]] for s, e in enc.offsets]
        return torch.tensor(enc.ids, dtype=torch.int64), torch.tensor(spans, dtype=torch.int64).view(-1, 2)

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """Text of token ids [T]."""
        return self._tok.decode(ids.tolist() if isinstance(ids, torch.Tensor) else list(ids))

    def to_json(self) -> str:
        """The trained tokenizer as one JSON object (what a checkpoint keeps)."""
        return self._tok.to_str()

    @classmethod
    def from_json(cls, s: str) -> BPEVocab:
        """Inverse of :meth:`to_json`; DataError in one line for text that is not one."""
        from tokenizers import Tokenizer

        try:
            json.loads(s)
            return cls(Tokenizer.from_str(s))
        except (json.JSONDecodeError, Exception) as e:  # tokenizers raises its own Exception subclass
            raise DataError(f"not a BPE tokenizer JSON ({str(e).splitlines()[0][:80]})") from e


def align(spans_a: torch.Tensor, spans_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each of B's tokens (byte spans [T_b, 2]) the range of A's tokens (spans [T_a, 2], in order) it reads:
    (first [T_b], last [T_b]), inclusive.  ``last`` is A's last token that ends inside B's token's bytes (at or
    before its end), ``first`` the first one that ends after B's token starts; where A's token runs past B's
    whole span, ``first`` = ``last`` = the A token before it (-1 at the very start: nothing to read yet)."""
    if spans_a.dim() != 2 or spans_b.dim() != 2 or spans_a.shape[1] != 2 or spans_b.shape[1] != 2:
        raise DataError("byte spans are [T, 2] tensors of [start, end)")
    ends_a = spans_a[:, 1].contiguous()
    last = torch.searchsorted(ends_a, spans_b[:, 1].contiguous(), right=True) - 1  # [T_b] end_a <= end_b
    first = torch.searchsorted(ends_a, spans_b[:, 0].contiguous(), right=True)  # [T_b] end_a > start_b
    first = torch.minimum(first, last.clamp(min=0))
    return torch.where(last >= 0, first, last), last


def aligned(h_a: torch.Tensor, first: torch.Tensor, last: torch.Tensor, mode: str = "last") -> torch.Tensor:
    """A's activations [B, T_a, D] at B's positions [B, T_b, D] (``first``/``last``: :func:`align`'s, [T_b]):
    A's last token inside each of B's tokens, or the mean of those inside it; zeros where there is none (-1).

    >>> h = torch.arange(4.0).view(1, 4, 1)
    >>> aligned(h, torch.tensor([0, 1]), torch.tensor([0, 3]), "mean")[0, :, 0].tolist()
    [0.0, 2.0]
    """
    if mode not in ALIGNMENTS:
        raise DataError(f"an alignment is one of {', '.join(ALIGNMENTS)}, not {mode!r}")
    none = last < 0
    if mode == "last":
        out = h_a[:, last.clamp(min=0)]  # [B, T_b, D]
    else:
        csum = torch.cat([torch.zeros_like(h_a[:, :1]), h_a.cumsum(dim=1)], dim=1)  # [B, T_a + 1, D]
        total = csum[:, last.clamp(min=0) + 1] - csum[:, first.clamp(min=0)]
        out = total / (last - first + 1).clamp(min=1).to(h_a.dtype).view(1, -1, 1)
    return out.masked_fill(none.view(1, -1, 1), 0.0)
