"""GPT-style language models as parts: embeddings, a list of blocks, a head; merge and stitch them.

A GPT (the zoo's char-GPT, or a Hugging Face GPT-2 family model) is read as

    embed  ids [B, T] -> residual [B, T, D]      wte(ids) + wpe(pos), then dropout (off in eval)
    h.k    residual [B, T, D] -> [B, T, D]       k = 0 .. L-1
    head   residual [B, T, D] -> logits [B, T, V] ln_f then lm_head (tied to wte)

**Positions** on the residual stream are integers ``k = 0 .. L``: the stream after ``k``
blocks (0 = right after the embeddings, ``L`` = after the last block, before ``ln_f``).
Their cut names (:func:`cut_name`) are the ones :func:`stitchcore.cuts.list_cuts` uses:
``drop`` for 0, ``h.{k-1}`` for k >= 1 (``hf.transformer.`` in front for HF models).

**Merge** (no new parameters) replaces A's blocks ``start .. end-1`` (half-open) with B's
blocks of the same indices; ``embed`` says whose ``wte``/``wpe`` read the input and ``head``
whose ``ln_f``/``lm_head`` write the output.  Preserving the head (``head="a"``) keeps
A's ``wte``, ``wpe`` and ``ln_f`` (the head is tied to ``wte``).  :func:`merge_layout`
lists the exact parts before anything is built:

>>> merge_layout(4, 4, start=1, end=4, head="b")
['A.wte', 'A.wpe', 'A.h.0', 'B.h.1', 'B.h.2', 'B.h.3', 'B.ln_f', 'B.lm_head']

**Stitch** joins A's stream at position ``i`` to B's at ``j`` through an adapter S applied to
every token: C = B_head(B_{j..}(S(A_{<i}))); the head-preserving variant (``head="a"``) is
C = A_head(A_{h..}(B_{j..h}(S(A_{<i})))), with ``h`` = ``head_at`` (default: B's last block).

Parts are taken from a deep copy of the loaded model, so merging or training never touches
a loaded (possibly cached) model; every part is frozen and in eval mode.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.stitching.adapters import Adapter, AdapterSpec, build_adapter
from stitchcore.cuts import Cut
from stitchcore.errors import AdapterError, CutError, DataError, SourceError, shown
from stitchcore.models.gpt2 import block_kwargs, causal_mask, gpt2_root
from stitchcore.models.loaded import LoadedModel

__all__ = [
    "HEADS",
    "ComposedLM",
    "LMParts",
    "TokenCodec",
    "TokenwiseAdapter",
    "build_merge",
    "build_stitch",
    "check_same_vocab",
    "codec_of",
    "cut_name",
    "lm_parts",
    "lm_shape",
    "make_token_adapter",
    "merge_layout",
    "n_layers",
    "parse_position",
    "stitch_layout",
]  # fmt: skip

log = logging.getLogger(__name__)

HEADS = ("a", "b")


# ------------------------------------------------------------------------------------ vocabularies


@dataclass(frozen=True)
class TokenCodec:
    """Text <-> token ids for one model; two models can be joined only with equal fingerprints (or, through an
    alignment of their byte spans, by a cross-tokenizer stitch: :mod:`stitchcore.lm.cross`)."""

    kind: str  # "chars" (zoo char-GPT) | "bpe" (zoo BPE-GPT) | "hf" (a transformers tokenizer) | "ids" (none known)
    size: int  # vocabulary size V (the logits' last dim)
    fingerprint: str  # sha1 of the vocabulary itself: equal fingerprints = same token ids
    encode: Callable[[str], torch.Tensor]  # text -> int64 [N]
    decode: Callable[[list[int]], str]  # ids -> text
    # text -> (ids int64 [N], byte spans int64 [N, 2]); None where the tokenizer gives no offsets
    spans: Callable[[str], tuple[torch.Tensor, torch.Tensor]] | None = None

    def describe(self) -> str:
        return {"chars": f"{self.size} characters", "bpe": f"a byte-level BPE of {self.size} tokens",
                "hf": f"tokenizer of {self.size} tokens"}.get(self.kind, f"{self.size} token ids, no tokenizer")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _hf_spans(tok: object) -> Callable[[str], tuple[torch.Tensor, torch.Tensor]] | None:
    """A fast HF tokenizer's ids and byte spans (its offsets are characters); None for a slow one."""
    from stitchcore.data.tokenize import char_spans

    if not getattr(tok, "is_fast", False):
        return None

    def spans(text: str) -> tuple[torch.Tensor, torch.Tensor]:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = char_spans(text)[:, 0].tolist() + [len(text.encode("utf-8", "surrogatepass"))]  # char -> byte
        pairs = [[starts[s], starts[e]] for s, e in enc["offset_mapping"]]
        return torch.tensor(enc["input_ids"], dtype=torch.int64), torch.tensor(pairs, dtype=torch.int64).view(-1, 2)

    return spans


def codec_of(m: LoadedModel) -> TokenCodec:
    """The model's vocabulary: a zoo char-GPT's stored characters, a zoo BPE-GPT's tokenizer, or its HF tokenizer."""
    from stitchcore.data.text import CharVocab
    from stitchcore.data.tokenize import BPEVocab, char_spans

    if m.input_kind != "tokens":
        raise SourceError(f"{m.ref} is not a language model (input {m.input_kind}); pick a zoo gpt or hf: LM")
    chars = m.meta.get("vocab")
    if isinstance(chars, str):
        vocab = CharVocab(chars)
        return TokenCodec("chars", vocab.size, _sha("chars:" + chars), vocab.encode, vocab.decode,
                          lambda text: (vocab.encode(text), char_spans(text)))
    bpe_json = m.meta.get("bpe")
    if isinstance(bpe_json, str):
        bpe = BPEVocab.from_json(bpe_json)
        return TokenCodec("bpe", bpe.size, _sha("bpe:" + bpe_json), bpe.ids, bpe.decode, bpe.encode)
    tok = m.meta.get("tokenizer")
    size = int(m.num_classes or 0)
    if tok is not None:
        items = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
        fp = _sha("hf:" + "\n".join(f"{t}\t{i}" for t, i in items))

        def encode(text: str) -> torch.Tensor:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            return torch.tensor(ids, dtype=torch.int64)

        return TokenCodec("hf", size, fp, encode, lambda ids: tok.decode(list(ids)), _hf_spans(tok))

    def no_text(_text: str) -> torch.Tensor:
        raise DataError(f"{m.ref} has no tokenizer, so text cannot be encoded; save one beside the model "
                        "(tokenizer.save_pretrained(DIR)) and load hf:DIR")

    return TokenCodec("ids", size, _sha(f"ids:{size}"), no_text, lambda ids: " ".join(map(str, ids)))


def check_same_vocab(a: TokenCodec, b: TokenCodec, what: str = "joined") -> None:
    """DataError unless A and B read and write the same token ids."""
    if a.fingerprint != b.fingerprint or a.size != b.size:
        raise DataError(
            f"models A and B have different vocabularies (A: {a.describe()}, B: {b.describe()}) and cannot be "
            f"{what}; pick two models trained on the same corpus (zoo) or with the same tokenizer (hf)"
        )


# ------------------------------------------------------------------------------------ parts


class Embed(nn.Module):
    """ids [B, T] -> residual [B, T, D]: dropout(wte(ids) + wpe(positions))."""

    def __init__(self, wte: nn.Embedding, wpe: nn.Embedding, drop: nn.Module) -> None:
        super().__init__()
        self.wte, self.wpe, self.drop = wte, wpe, drop

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        if idx.shape[1] > self.wpe.num_embeddings:
            raise DataError(f"sequence of {idx.shape[1]} tokens exceeds the context of {self.wpe.num_embeddings}")
        pos = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        return self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, D)


class Head(nn.Module):
    """residual [B, T, D] -> logits [B, T, V]: lm_head(ln_f(h))."""

    def __init__(self, ln_f: nn.Module, lm_head: nn.Module) -> None:
        super().__init__()
        self.ln_f, self.lm_head = ln_f, lm_head

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln_f(h))  # (B, T, V)


class HFBlock(nn.Module):
    """A transformers GPT-2 block as residual [B, T, D] -> [B, T, D] (builds its causal mask)."""

    def __init__(self, block: nn.Module, config: object) -> None:
        super().__init__()
        self.block, self.config = block, config

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)  # [1, T]
        out = self.block(h, **block_kwargs(self.block, causal_mask(self.config, h, pos), pos))
        return out[0] if isinstance(out, tuple) else out  # (B, T, D)


@dataclass
class LMParts:
    """One GPT taken apart (from a private deep copy of the loaded model)."""

    ref: str  # the model's ref
    family: str  # "gpt" (zoo char-GPT) | "gpt2" (transformers GPT-2 family)
    embed: Embed  # ids [B, T] -> [B, T, D]
    blocks: list[nn.Module]  # each [B, T, D] -> [B, T, D]
    head: Head  # [B, T, D] -> [B, T, V]
    width: int  # D, the residual width
    context: int  # longest sequence the position embedding covers
    codec: TokenCodec  # the vocabulary

    @property
    def n_layer(self) -> int:
        return len(self.blocks)

    @torch.no_grad()
    def residual(self, idx: torch.Tensor, k: int) -> torch.Tensor:
        """The stream after ``k`` blocks: ids [B, T] -> [B, T, D]."""
        h = self.embed(idx)
        for block in self.blocks[:k]:
            h = block(h)
        return h


def _frozen(module: nn.Module) -> nn.Module:
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def lm_parts(m: LoadedModel) -> LMParts:
    """Take a loaded GPT apart (on a deep copy: the loaded model is never changed)."""
    from stitchcore.models.archs.gpt import GPT

    codec = codec_of(m)
    model = _frozen(copy.deepcopy(m.model))
    if isinstance(model, GPT):
        c = model.config
        return LMParts(m.ref, "gpt", Embed(model.wte, model.wpe, model.drop), list(model.h),
                       Head(model.ln_f, model.lm_head), c.n_embd, c.block_size, codec)
    root = gpt2_root(model)
    if root is None:
        raise SourceError(f"{m.ref} ({type(model).__name__}) is not a GPT-style model; merge and LM stitching "
                          "take zoo gpt models and Hugging Face GPT-2 family models (gpt2, distilgpt2, local dirs)")
    tr, lm_head = root[1].transformer, root[1].lm_head
    blocks = [HFBlock(b, tr.config) for b in tr.h]
    return LMParts(m.ref, "gpt2", Embed(tr.wte, tr.wpe, tr.drop), blocks, Head(tr.ln_f, lm_head),
                   int(tr.wte.embedding_dim), int(tr.wpe.num_embeddings), codec)


def n_layers(m: LoadedModel) -> int:
    """Number of transformer blocks of a loaded GPT (zoo or HF), without copying it."""

    root = gpt2_root(m.model)
    if root is not None:
        return len(root[1].transformer.h)
    if hasattr(m.model, "h"):
        return len(m.model.h)
    raise SourceError(f"{m.ref} is not a GPT-style model; use a zoo gpt or an hf: GPT-2 family model")


def lm_shape(m: LoadedModel) -> dict[str, int | str]:
    """``{"n_layer", "width", "context", "family", "tokens", "vocab"}`` of a loaded GPT, read without copying it (for
    display; ``tokens`` says what a token is, ``vocab`` is the vocabulary's fingerprint: equal = the same ids)."""

    codec = codec_of(m)
    words = {"tokens": codec.describe(), "vocab": codec.fingerprint}
    root = gpt2_root(m.model)
    if root is not None:
        tr = root[1].transformer
        return {"n_layer": len(tr.h), "width": int(tr.wte.embedding_dim), "context": int(tr.wpe.num_embeddings),
                "family": "gpt2", **words}
    c = getattr(m.model, "config", None)
    if c is None or not hasattr(m.model, "h"):
        raise SourceError(f"{m.ref} is not a GPT-style model; use a zoo gpt or an hf: GPT-2 family model")
    return {"n_layer": c.n_layer, "width": c.n_embd, "context": c.block_size, "family": "gpt", **words}


def cut_name(family: str, k: int) -> str:
    """The list_cuts name of residual position ``k``: ``drop`` / ``h.{k-1}`` (HF: ``hf.transformer.`` prefix)."""
    name = "drop" if k == 0 else f"h.{k - 1}"
    return f"hf.transformer.{name}" if family == "gpt2" else name


def parse_position(text: str | int, n_layer: int) -> int:
    """A residual position from an int or a cut name (``drop``, ``h.K``, ``transformer.h.K`` ...); ASCII digits
    only, at most 9 of them (``²`` or a 5,000-digit number is a CutError, not a ValueError).

    >>> parse_position("h.1", 4), parse_position(3, 4), parse_position("drop", 4)
    (2, 3, 0)
    """
    def digits(t: str) -> bool:
        return t.isascii() and t.isdigit() and len(t) <= 9

    if isinstance(text, bool):
        text = str(text)
    if isinstance(text, int) or (isinstance(text, str) and digits(text.strip().removeprefix("-"))):
        k = int(text)
    else:
        tail = str(text).split("transformer.")[-1]
        if tail == "drop":
            k = 0
        elif tail.startswith("h.") and digits(tail[2:]):
            k = int(tail[2:]) + 1
        else:
            raise CutError(f"no residual cut {shown(text)}; use drop, h.0 .. h.{n_layer - 1} or a position 0..{n_layer}")
    if not 0 <= k <= n_layer:
        raise CutError(f"position {k} is outside 0..{n_layer} (the model has {n_layer} blocks)")
    return k


# ------------------------------------------------------------------------------------ layouts


def _check_range(n_a: int, n_b: int, start: int, end: int) -> None:
    top = min(n_a, n_b)
    if not 0 <= start <= end <= top:
        raise CutError(
            f"block range [{start}, {end}) is not within 0 <= start <= end <= {top} (A has {n_a} blocks, B {n_b}); "
            "the range is half-open: [1, 4) substitutes blocks 1, 2 and 3"
        )


def merge_layout(n_a: int, n_b: int, start: int, end: int, head: str = "a", embed: str = "a") -> list[str]:
    """The parts of the merged model, in order; B's blocks ``start .. end-1`` replace A's (half-open)."""
    _check_range(n_a, n_b, start, end)
    if head not in HEADS or embed not in HEADS:
        raise CutError(f"head and embed must be 'a' or 'b', got head={head!r}, embed={embed!r}")
    e, hd = embed.upper(), head.upper()
    blocks = [f"A.h.{k}" for k in range(start)] + [f"B.h.{k}" for k in range(start, end)]
    blocks += [f"A.h.{k}" for k in range(end, n_a)]
    return [f"{e}.wte", f"{e}.wpe", *blocks, f"{hd}.ln_f", f"{hd}.lm_head"]


def stitch_layout(n_a: int, n_b: int, i: int, j: int, head: str = "b", head_at: int | None = None,
                  adapter: str = "S") -> list[str]:
    """The parts of the stitched model: A.embed, A.h<i, S, B.h[j:] and B's head (or B.h[j:h], A.h[h:], A's head)."""
    if not (0 <= i <= n_a and 0 <= j <= n_b):
        raise CutError(f"stitch positions must be 0 <= i <= {n_a} (A) and 0 <= j <= {n_b} (B), got i={i}, j={j}")
    parts = ["A.wte", "A.wpe", *[f"A.h.{k}" for k in range(i)], adapter]
    if head == "b":
        return [*parts, *[f"B.h.{k}" for k in range(j, n_b)], "B.ln_f", "B.lm_head"]
    h = n_b if head_at is None else head_at
    if not j <= h <= min(n_a, n_b):
        raise CutError(f"head_at={h} must lie in {j}..{min(n_a, n_b)} (after the receiver position j={j})")
    return [*parts, *[f"B.h.{k}" for k in range(j, h)], *[f"A.h.{k}" for k in range(h, n_a)], "A.ln_f", "A.lm_head"]


# ------------------------------------------------------------------------------------ composition


class ComposedLM(nn.Module):
    """ids [B, T] -> logits [B, T, V] through ``embed``, residual ``parts`` in order, then ``head``."""

    def __init__(self, embed: nn.Module, parts: list[nn.Module], head: nn.Module, layout: list[str],
                 context: int) -> None:
        super().__init__()
        self.embed, self.parts, self.head = embed, nn.ModuleList(parts), head
        self.layout = layout  # human names of the parts, e.g. ["A.wte", "A.wpe", "A.h.0", "S", ...]
        self.context = context  # longest input the embedding covers

    def residual(self, idx: torch.Tensor, k: int) -> torch.Tensor:
        """ids [B, T] -> the stream after the first ``k`` parts [B, T, D]."""
        h = self.embed(idx)
        for part in self.parts[:k]:
            h = part(h)
        return h

    def finish(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """Stream after ``k`` parts [B, T, D] -> logits [B, T, V]."""
        for part in self.parts[k:]:
            h = part(h)
        return self.head(h)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.finish(self.embed(idx), 0)


def build_merge(a: LMParts, b: LMParts, start: int, end: int, head: str = "a", embed: str = "a") -> ComposedLM:
    """A with B's blocks ``start .. end-1`` (half-open) in place of its own; no new parameters."""
    check_same_vocab(a.codec, b.codec, "merged")
    if a.width != b.width:
        raise AdapterError(f"merge substitutes blocks without an adapter, so widths must be equal: A has D={a.width}, "
                           f"B has D={b.width}; use mode stitch (an adapter maps D_A -> D_B)")
    layout = merge_layout(a.n_layer, b.n_layer, start, end, head, embed)
    blocks = a.blocks[:start] + b.blocks[start:end] + a.blocks[end:]
    src_e, src_h = (a if embed == "a" else b), (a if head == "a" else b)
    return ComposedLM(src_e.embed, blocks, src_h.head, layout, min(a.context, b.context))


class TokenwiseAdapter(nn.Module):
    """An :class:`~stitchcore.stitching.adapters.Adapter` on vectors, applied to every token: [B, T, D_A] -> [B, T, D_B].

    With ``hidden > 0`` an MLP branch (D_A -> hidden -> GELU -> D_B) is added to the adapter's
    output; its last layer starts at zero, so an "mlp" adapter starts as its (least-squares)
    linear map and training can only add to it.
    """

    def __init__(self, inner: Adapter, hidden: int = 0) -> None:
        super().__init__()
        self.inner = inner  # sender (D_A,) -> receiver (D_B,), layout "vector"
        self.mlp: nn.Sequential | None = None
        if hidden > 0:
            d_a, d_b = inner.sender.shape[0], inner.receiver.shape[0]
            self.mlp = nn.Sequential(nn.Linear(d_a, hidden), nn.GELU(), nn.Linear(hidden, d_b))
            nn.init.zeros_(self.mlp[2].weight)
            nn.init.zeros_(self.mlp[2].bias)

    @property
    def label(self) -> str:
        return f"S({self.inner.spec.kind}{f'+mlp{self.mlp[0].out_features}' if self.mlp is not None else ''})"

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, D = h.shape
        flat = h.reshape(B * T, D)  # (B*T, D_A)
        z = self.inner(flat)  # (B*T, D_B)
        if self.mlp is not None:
            z = z + self.mlp(flat)
        return z.reshape(B, T, -1)  # (B, T, D_B)


def make_token_adapter(spec: AdapterSpec, a: LMParts, i: int, b: LMParts, j: int, hidden: int = 0) -> TokenwiseAdapter:
    """A per-token adapter from A's stream at ``i`` (D_A) to B's at ``j`` (D_B); ``hidden``: MLP branch width."""
    sender = Cut(f"A:{cut_name(a.family, i)}", (a.width,), "vector", i / max(a.n_layer, 1))
    receiver = Cut(f"B:{cut_name(b.family, j)}", (b.width,), "vector", j / max(b.n_layer, 1))
    return TokenwiseAdapter(build_adapter(spec, sender, receiver), hidden)


def build_stitch(a: LMParts, b: LMParts, i: int, j: int, adapter: nn.Module, head: str = "b",
                 head_at: int | None = None) -> ComposedLM:
    """The stitched LM (see the module docstring); ``adapter`` maps [B, T, D_A] -> [B, T, D_B]."""
    check_same_vocab(a.codec, b.codec, "stitched")
    layout = stitch_layout(a.n_layer, b.n_layer, i, j, head, head_at, getattr(adapter, "label", "S"))
    parts = a.blocks[:i] + [adapter]
    if head == "b":
        return ComposedLM(a.embed, parts + b.blocks[j:], b.head, layout, min(a.context, b.context))
    if a.width != b.width:
        raise AdapterError(f"head preservation runs A's head on B's stream, so widths must be equal (A: D={a.width}, "
                           f"B: D={b.width}); use head b")
    h = b.n_layer if head_at is None else head_at
    return ComposedLM(a.embed, parts + b.blocks[j:h] + a.blocks[h:], a.head, layout, min(a.context, b.context))
