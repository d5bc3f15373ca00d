"""Issue 43, first part: a byte-level BPE trained locally on the pydoc corpus, byte spans for it and for the
character vocabulary, and the alignment of B's tokens to A's over the same bytes.  The alignment is tested so that
a wrong one fails: A's aligned token must be the last character of B's token (an off-by-one aligner gets most of
them wrong), and it never reads a byte past B's token (no causal leak)."""

from __future__ import annotations

import pytest
import torch

from stitchcore.data.text import load_text
from stitchcore.data.tokenize import BPEVocab, align, aligned, char_spans
from stitchcore.errors import DataError


@pytest.fixture(scope="module")
def corpus() -> tuple[str, str]:
    text = load_text("pydoc")
    return text[:150_000], text[-20_000:]  # the merges learned from the first part; the last part held out


@pytest.fixture(scope="module")
def bpe(corpus) -> BPEVocab:
    return BPEVocab.train(corpus[0], 512)


def test_a_bpe_is_learned_offline_deterministically_and_its_spans_tile_the_bytes(corpus, bpe):
    held = corpus[1][:5_000]
    ids, spans = bpe.encode(held)
    assert bpe.size == 512 and len(ids) == len(spans) and len(ids) < len(held)  # merges: fewer tokens than chars
    assert bpe.decode(ids) == held
    assert spans[0, 0] == 0 and spans[-1, 1] == len(held.encode("utf-8"))
    # each token its own bytes, in order: no gap, no overlap (a character split between byte tokens included)
    assert bool((spans[1:, 0] == spans[:-1, 1]).all() and (spans[:, 1] > spans[:, 0]).all())
    curly = "a \u201cb\u201d"  # two 3-byte characters a 512-token BPE of pydoc splits into byte tokens
    c_ids, c_spans = bpe.encode(curly)
    assert bool((c_spans[1:, 0] == c_spans[:-1, 1]).all()) and int(c_spans[-1, 1]) == len(curly.encode())
    assert torch.equal(BPEVocab.train(corpus[0], 512).encode(held)[0], ids)  # the same merges again
    again = BPEVocab.from_json(bpe.to_json())
    assert torch.equal(again.encode(held)[0], ids)
    with pytest.raises(DataError, match="not a BPE tokenizer JSON"):
        BPEVocab.from_json("{}")
    with pytest.raises(DataError, match="257 to 65,536"):
        BPEVocab.train("abc", 100)


def test_each_b_token_reads_the_last_character_inside_it_and_never_a_later_byte(corpus, bpe):
    text = corpus[1][:3_000]
    a_spans = char_spans(text)  # A: one token a character
    b_ids, b_spans = bpe.encode(text)
    first, last = align(a_spans, b_spans)
    assert bool((a_spans[last, 1] <= b_spans[:, 1]).all())  # no byte past B's token: no causal leak
    after = last + 1  # A's next token runs past B's token (or there is none): ``last`` is the last one inside
    assert bool(((after >= len(a_spans)) | (a_spans[after.clamp(max=len(a_spans) - 1), 1] > b_spans[:, 1])).all())
    h = torch.tensor([float(ord(c)) for c in text]).view(1, -1, 1)  # A's "activation": its character
    got = aligned(h, first, last, "last")[0, :, 0]
    pieces = [bpe.decode([i]) for i in b_ids.tolist()]
    whole = torch.tensor(["\ufffd" not in p for p in pieces])  # a token that is part of a character decodes to U+FFFD
    want = torch.tensor([float(ord(p[-1])) for p in pieces])
    assert bool(whole.float().mean() > 0.9) and torch.equal(got[whole], want[whole])  # the character ending B's token
    off = aligned(h, (first - 1).clamp(min=0), (last - 1).clamp(min=0), "last")[0, :, 0]
    assert float((off[whole] == want[whole]).float().mean()) < 0.3  # an off-by-one aligner: mostly wrong
    mean = aligned(h, first, last, "mean")[0, :, 0]
    manual = torch.tensor([h[0, f : l + 1, 0].mean().item() for f, l in zip(first.tolist(), last.tolist())])
    assert torch.allclose(mean, manual)
    with pytest.raises(DataError, match="alignment is one of"):
        aligned(h, first, last, "first")
