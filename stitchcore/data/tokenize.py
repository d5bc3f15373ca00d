"""Tokenizers that say which bytes each token covers, and the alignment of two tokenizations of one text (issue 43).

Two language models that do not share a tokenizer can still be stitched position by position if each of B's
tokens is given the A tokens of the same bytes.  Every token here comes with its byte span [start, end) in the
UTF-8 text: a character-level vocabulary's (``char_spans``) and a byte-level BPE's (:class:`BPEVocab`, trained
locally with the ``tokenizers`` package, no download).  :func:`align` gives, for each of B's tokens, the A tokens
it may read: those whose bytes end inside B's token's bytes, never one that runs past them (that would hand B's
position bytes it has not seen yet: a causal leak).  A byte-level token's span is its own bytes, so a character a
BPE splits between two tokens is read, whole, only by the token that completes it.

Zoo GPTs are trained with either (``--tokenizer char`` or ``bpe:N``, :func:`parse_tokenizer`); the stitch across
them, scored in bits per byte, is :mod:`stitchcore.lm.cross`.

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

__all__ = ["ALIGNMENTS", "BPEVocab", "align", "aligned", "char_spans", "parse_tokenizer"]

ALIGNMENTS = ("last", "mean")  # B's position reads A's last token inside its bytes, or the mean of those tokens
TOKENIZERS = ("char", "bpe:N")  # a zoo GPT's tokenizer: one token a character, or a byte-level BPE of N tokens


def parse_tokenizer(text: str) -> int | None:
    """A zoo GPT's tokenizer as written (``char`` or ``bpe:N``): None for characters, else the BPE's size N.

    >>> parse_tokenizer("char"), parse_tokenizer("bpe:512")
    (None, 512)
    >>> parse_tokenizer("bpe:100")
    Traceback (most recent call last):
    ...
    stitchcore.errors.DataError: a byte-level BPE has 257 to 65,536 tokens (the 256 bytes and its merges), not 100
    """
    if text == "char":
        return None
    head, _, size = str(text).partition(":")
    if head != "bpe" or not (size.isascii() and size.isdigit() and len(size) <= 6):
        raise DataError(f"a tokenizer is char or bpe:N (a byte-level BPE of N tokens, e.g. bpe:512), not {text!r}")
    n = int(size)
    _check_size(n)
    return n


def _check_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 257 <= size <= 65536:
        raise DataError(f"a byte-level BPE has 257 to 65,536 tokens (the 256 bytes and its merges), not {size!r}")


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

        _check_size(size)
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
        """(token ids int64 [T], byte spans int64 [T, 2]) of ``text``; the spans tile its UTF-8 bytes exactly (a
        byte-level token is its bytes, so a character split between tokens gives each its own bytes)."""
        ids = self.ids(text)
        ends = torch.cumsum(self._byte_lengths[ids], 0)  # [T]
        if len(ids) and int(ends[-1]) != len(text.encode("utf-8", "surrogatepass")):  # not byte-level after all
            raise DataError("this tokenizer's tokens do not spell the text's bytes; train it with BPEVocab.train")
        return ids, torch.stack([ends - self._byte_lengths[ids], ends], dim=1)

    @property
    def _byte_lengths(self) -> torch.Tensor:
        """int64 [V]: the bytes each token stands for (its byte-level string has one character a byte)."""
        if not hasattr(self, "_lengths"):
            vocab = self._tok.get_vocab()
            lengths = torch.zeros(max(vocab.values()) + 1, dtype=torch.int64)
            for token, i in vocab.items():
                lengths[i] = len(token)
            self._lengths = lengths
        return self._lengths

    def ids(self, text: str) -> torch.Tensor:
        """Token ids int64 [T] of ``text`` (:meth:`encode` without the spans)."""
        return torch.tensor(self._tok.encode(text).ids, dtype=torch.int64)

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
    """A's activations [B, T_a, D] at B's positions [B, T_b, D] (``first``/``last``: :func:`align`'s, [T_b] for
    every row or [B, T_b] per row): A's last token inside each of B's tokens, or the mean of those inside it;
    zeros where there is none (-1).

    >>> h = torch.arange(4.0).view(1, 4, 1)
    >>> aligned(h, torch.tensor([0, 1]), torch.tensor([0, 3]), "mean")[0, :, 0].tolist()
    [0.0, 2.0]
    """
    if mode not in ALIGNMENTS:
        raise DataError(f"an alignment is one of {', '.join(ALIGNMENTS)}, not {mode!r}")
    n, _, d = h_a.shape
    first, last = first.expand(n, -1), last.expand(n, -1)  # [B, T_b]
    none = last < 0

    def at(src: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:  # src [B, T, D], idx [B, T_b] -> [B, T_b, D]
        return src.gather(1, idx.clamp(min=0).unsqueeze(-1).expand(-1, -1, d))

    if mode == "last":
        out = at(h_a, last)
    else:
        csum = torch.cat([torch.zeros_like(h_a[:, :1]), h_a.cumsum(dim=1)], dim=1)  # [B, T_a + 1, D]
        total = at(csum, last + 1) - at(csum, first)
        out = total / (last - first + 1).clamp(min=1).to(h_a.dtype).unsqueeze(-1)
    return out.masked_fill(none.unsqueeze(-1), 0.0)
