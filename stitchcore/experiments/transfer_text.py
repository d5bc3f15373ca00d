"""The ``transfer`` kind on two language models (issue 43): a token property's probe carried from A's residual
stream into B's through a fitted stitch, across tokenizers too.

The property: whether a token's last byte lies **inside a string literal** (between an opening quote, ``'`` or
``"``, and the same quote closing it on one line; :func:`literal_bytes`), a simple property of pydoc's code
examples.  A's probe is fitted on A's own tokens of training windows (its residual stream at ``cut_a``), carried
into B's stream at ``cut_b`` through the token adapter (closed form, fitted on A's stream read at B's tokens:
:mod:`stitchcore.lm.cross`), and read on B's own tokens of held-out windows; beside it a probe fitted on B
(``native``) and A's probe through a random-init adapter.  The score is **balanced accuracy** (the mean of the
two classes' recalls; chance 0.5: string bytes are rare), its intervals resampling the held-out windows (a
window's tokens are not independent).  Steering is for image classes only.
"""

from __future__ import annotations

from typing import Any

import torch

from stitchcore.data.text import load_text
from stitchcore.errors import StitchError
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.lm import FIT_BATCHES, LM_ADAPTER, receiver_block
from stitchcore.lm.cross import cross_pairs, cross_windows
from stitchcore.lm.evaluate import VAL_FRACTION
from stitchcore.lm.parts import LMParts, cut_name, lm_parts, make_token_adapter, parse_position
from stitchcore.measures.intervals import paired_statistic_ci
from stitchcore.measures.transfer import carried_probe, fit_probe, pooled_map
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.fits import fit_adapter

__all__ = ["MAX_PIECES", "PROPERTY", "literal_bytes", "text_features", "text_pairs", "text_transfer"]

PROPERTY = "inside a string literal"
MAX_PIECES = {"train": 512, "test": 256}  # windows of text the probes are fitted on / read on, at most


def literal_bytes(text: str) -> torch.Tensor:
    """bool [n_bytes]: each UTF-8 byte of ``text`` lies inside a string literal (after an opening ``'`` or ``"``
    on its line, up to and including the same quote closing it).

    >>> literal_bytes("x = 'ab' + y").int().tolist()
    [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    """
    inside, out = None, []
    for ch in text:
        out += [inside is not None] * len(ch.encode("utf-8", "surrogatepass"))
        if ch == "\n":
            inside = None
        elif inside is None and ch in "'\"":
            inside = ch
        elif ch == inside:
            inside = None
    return torch.tensor(out, dtype=torch.bool)


def text_pairs(spec: Any, a: LoadedModel, b: LoadedModel) -> list[tuple[int, int]]:
    """(A's position, B's) pairs: the one given, or every position of A with B's at the same relative depth."""
    pa, pb = lm_parts(a), lm_parts(b)
    if spec.cut_a is not None:
        i = parse_position(spec.cut_a, pa.n_layer)
        j = parse_position(spec.cut_b, pb.n_layer) if spec.cut_b is not None else receiver_block(i, pa.n_layer,
                                                                                                   pb.n_layer)
        return [(i, j)]
    return [(i, receiver_block(i, pa.n_layer, pb.n_layer)) for i in range(pa.n_layer + 1)]


def _pieces(text: str, n: int, chars: int, seed: int) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    return [text[s : s + chars] for s in torch.randint(0, len(text) - chars, (n,), generator=g).tolist()]


@torch.no_grad()
def _features(p: LMParts, k: int, pieces: list[str], device: torch.device
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Each token's stream after ``k`` blocks [N, D], its label [N] and its window's index [N] over ``pieces``
    (its own tokens)."""
    feats, labels, windows = [], [], []
    for w, piece in enumerate(pieces):
        ids, spans = p.codec.spans(piece)
        ids, spans = ids[: p.context], spans[: p.context]
        if len(ids) == 0:
            continue
        feats.append(p.residual(ids[None].to(device), k)[0].float().cpu())
        labels.append(literal_bytes(piece)[spans[:, 1] - 1].long())
        windows.append(torch.full((len(ids),), w))
    return torch.cat(feats), torch.cat(labels), torch.cat(windows)


def _by_window(values: torch.Tensor, windows: torch.Tensor, n: int) -> torch.Tensor:
    """Per-token values [N] summed per window -> [n] (the windows are what the intervals resample: a window's
    tokens are not independent of each other)."""
    return torch.zeros(n, dtype=torch.float64).index_add_(0, windows, values.double())


def text_features(a: LoadedModel, b: LoadedModel, pieces: list[str], device: torch.device) -> None:  # noqa: D401
    """A's and B's streams over ``pieces`` at their middle positions (what the estimator times)."""
    pa, pb = lm_parts(a), lm_parts(b)
    _features(pa, pa.n_layer // 2, pieces, device)
    _features(pb, pb.n_layer // 2, pieces, device)


def _balanced(correct: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per token, correct × N / (2 n_class): their mean is the balanced accuracy of two classes."""
    counts = torch.bincount(y, minlength=2).clamp_min(1).double()
    return correct.double() * len(y) / (2 * counts[y])


def text_transfer(spec: Any, ctx: RunContext, la: LoadedModel, lb: LoadedModel) -> dict[str, Any]:
    """Every position pair's probe transfer on text (see the module docstring): the run's summary."""
    a, b = lm_parts(la), lm_parts(lb)
    for p in (a, b):
        if p.codec.spans is None:
            raise StitchError(f"{p.ref}'s tokenizer gives no byte offsets, so its tokens cannot be labelled; use a zoo "
                              "GPT (char or bpe:N) or an HF fast tokenizer")
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(ctx.device)
    name = spec.dataset or la.dataset or "pydoc"
    raw = load_text(name)
    cut = int(len(raw) * (1 - VAL_FRACTION))
    chars, contexts = min(a.context, b.context), (a.context, b.context)
    n = {s: min(getattr(spec, f"max_{s}"), MAX_PIECES[s]) for s in MAX_PIECES}
    pieces = {"train": _pieces(raw[:cut], n["train"], chars, 11), "test": _pieces(raw[cut:], n["test"], chars, 12)}
    fits = [cross_windows(raw[:cut], a.codec, b.codec, 32, chars, contexts, seed=7_919 + k) for k in range(FIT_BATCHES)]
    points = []
    pairs = text_pairs(spec, la, lb)
    for step, (i, j) in enumerate(pairs):
        ctx.progress(0.05 + 0.9 * step / len(pairs), f"A's {cut_name(a.family, i)} -> B's {cut_name(b.family, j)}")
        adapter = make_token_adapter(LM_ADAPTER, a, i, b, j)
        fit_adapter(adapter.inner, cross_pairs(a, b, i, j, fits, "last", ctx.device))
        m, t = pooled_map(adapter.inner.cpu())
        with torch.random.fork_rng():
            torch.manual_seed(spec.seed)
            m_r, t_r = pooled_map(make_token_adapter(AdapterSpec(kind="linear", norm="none", init="random"), a, i, b,
                                                     j).inner)  # fmt: skip
        xa, ya, _ = _features(a, i, pieces["train"], ctx.device)
        xb, yb, _ = _features(b, j, pieces["train"], ctx.device)
        tb, ty, wb = _features(b, j, pieces["test"], ctx.device)
        ta, tya, wa = _features(a, i, pieces["test"], ctx.device)
        nw = len(pieces["test"])
        counts_b, counts_a = _by_window(torch.ones(len(wb)), wb, nw), _by_window(torch.ones(len(wa)), wa, nw)
        if len(set(ya.tolist())) < 2 or len(set(yb.tolist())) < 2:
            raise StitchError(f"the training windows of {name} hold no token {PROPERTY}; use a text with quoted "
                              "strings (pydoc has them)")  # fmt: skip
        probe_a = fit_probe(xa, ya, 2)
        probes = {"transferred": carried_probe(probe_a, m, t, xa), "native": fit_probe(xb, yb, 2),
                  "random_adapter": carried_probe(probe_a, m_r, t_r, xa)}  # fmt: skip
        scores = {side: _by_window(_balanced(pr.predict(tb) == ty, ty), wb, nw) for side, pr in probes.items()}
        point: dict[str, Any] = {"cut_a": cut_name(a.family, i), "cut_b": cut_name(b.family, j),
                                 "depth_a": round(i / max(a.n_layer, 1), 6), "depth_b": round(j / max(b.n_layer, 1), 6),
                                 "chance": 0.5, "tokens_inside": round(float(ty.double().mean()), 6)}  # fmt: skip
        own_a = _by_window(_balanced(probe_a.predict(ta) == tya, tya), wa, nw)
        for side, v, c in (*((side, v, counts_b) for side, v in scores.items()), ("a_probe", own_a, counts_a)):
            lo, hi = paired_statistic_ci(lambda total, count: total / count, v, c, seed=spec.seed)
            point[side], point[f"{side}_ci"] = round(float(v.sum() / c.sum()), 6), [lo, hi]
        point["ratio"] = round(point["transferred"] / max(point["native"], 1e-9), 6)
        point["ratio_ci"] = list(paired_statistic_ci(lambda tr, na: tr / na.clamp_min(1e-9), scores["transferred"],
                                                     scores["native"], seed=spec.seed))  # fmt: skip
        gap = paired_statistic_ci(lambda tr, ra, count: (tr - ra) / count, scores["transferred"],
                                  scores["random_adapter"], counts_b, seed=spec.seed)  # fmt: skip
        point["above_random_ci"] = list(gap)
        point["verdict"] = ("carried: the transferred probe beats the random adapter's" if gap[0] > 0 else
                            "not shown: the transferred probe is no better than the random adapter's")  # fmt: skip
        points.append(point)
        ctx.log(step, {side: point[side] for side in scores})
    return {"points": points, "dataset": name, "property": PROPERTY, "measure": "balanced accuracy",
            "n_train": len(pieces["train"]), "n_test": len(pieces["test"]), "unit": "windows", "classes": 2,
            "chance": 0.5, "tokenizers": {"a": a.codec.describe(), "b": b.codec.describe()},
            "steering": "for image classes only"}  # fmt: skip
