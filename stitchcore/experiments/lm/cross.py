"""An ``lmstitch`` between two GPTs that do not share a tokenizer (issue 43): A's stream at ``cut_a``, read at B's
tokens through the byte alignment (:mod:`stitchcore.lm.cross`), -> adapter -> B from ``cut_b`` with B's head;
scored in bits per byte of B's next-token loss on held-out text, beside B alone and two controls trained the same
way on the same budget: a **shuffled alignment** (each of B's tokens reads the A tokens of an earlier or the same
B token, drawn at random) and a **random-init A** (A's architecture with untrained weights).  The stitch is
reported as carrying A's information only when it beats both (paired intervals over the windows).

Called by :mod:`~stitchcore.experiments.lm.lmstitch` when A's and B's vocabularies differ.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from stitchcore.data.text import load_text
from stitchcore.errors import StitchError
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.dataset_check import load_pair
from stitchcore.experiments.lm._pair import FIT_BATCHES, NOT_LM_HINT, _best_start, _parts_to
from stitchcore.experiments.lm.specs import DepthSpec, LMStitchSpec, lm_objective
from stitchcore.lm.cross import (
    ByteScore,
    CrossBatch,
    b_alone,
    bits_per_byte,
    bpb_ci,
    bpb_penalty_ci,
    build_cross_stitch,
    cross_batches,
    cross_pairs,
    cross_windows,
    shuffled_alignment,
)
from stitchcore.lm.evaluate import VAL_FRACTION
from stitchcore.lm.parts import LMParts, TokenCodec, cut_name, lm_parts, make_token_adapter
from stitchcore.lm.train import TUNE_FRACTION, TUNE_WINDOWS, Convergence, train_lm_adapter
from stitchcore.models.refs import random_twin
from stitchcore.models.sources import load_model
from stitchcore.stitching.fits import fit_adapter

__all__ = ["ALIGN_WORDS", "CONTROLS", "CONTROL_WORDS", "CURVES", "CrossSetup", "check_cross", "cross_curves",
           "cross_point", "cross_rows", "cross_setup", "is_cross", "run_cross_stitch"]

CONTROLS = ("shuffled_alignment", "random_a")  # drawn beside every cross-tokenizer stitch
CONTROL_WORDS = {"shuffled_alignment": "a shuffled alignment", "random_a": "a random-init A"}
ALIGN_WORDS = {"last": "A's last token inside its bytes", "mean": "the mean of A's tokens inside its bytes"}
CURVES = {"stitch": "loss", **{t: f"loss_{t}" for t in CONTROLS}}  # each adapter's training loss, from step 1


def is_cross(a: TokenCodec, b: TokenCodec) -> bool:
    """Whether A and B tokenize differently (a stitch between them goes through the byte alignment)."""
    return a.fingerprint != b.fingerprint or a.size != b.size


def check_cross(spec: LMStitchSpec | DepthSpec, a: TokenCodec, b: TokenCodec) -> None:
    """What a cross-tokenizer stitch refuses before anything is stored, each in one line with its fix."""
    for role, codec in (("A", a), ("B", b)):
        if codec.spans is None:
            raise StitchError(f"model {role}'s tokenizer ({codec.describe()}) gives no byte offsets, so A's and B's "
                              "tokens cannot be aligned; use a zoo GPT (char or bpe:N) or an HF fast tokenizer")
    if getattr(spec, "head", "b") != "b":
        raise StitchError("across tokenizers the stitch predicts B's next token with B's head; A's head reads "
                          "other tokens", fix={"head": "b"})  # fmt: skip
    if set(lm_objective(spec.objective)) != {"task"}:
        raise StitchError("a cross-tokenizer stitch trains on B's next-token loss (task) only",
                          fix={"objective": "task"})


class _Side:
    """One stitch of the run (the stitch itself or a control): its A, and what it does to every batch."""

    def __init__(self, a: LMParts, shuffle: int | None = None) -> None:
        self.a, self.shuffle = a, shuffle

    def view(self, x: CrossBatch, k: int = 0) -> CrossBatch:
        return x if self.shuffle is None else shuffled_alignment(x, self.shuffle * 7_919 + k)


@dataclass
class CrossSetup:
    """Both models (and A's random twin), the text split in fit / tune / validation characters, the held-out
    windows and B's (and A's) own bits per byte on them: what every stitch of a run shares."""

    a: LMParts
    b: LMParts
    random_a: LMParts | None  # None where A's source draws no random twin
    text: str  # the corpus's name
    fit_text: str  # the training characters the adapters fit and train on
    tune: CrossBatch | None  # held-out training windows (start and stop are chosen there), or None
    evals: CrossBatch  # the validation windows every number is read on
    base: ByteScore  # B alone on ``evals``
    own_a: ByteScore  # A alone, on its own tokens of the same pieces of text
    chars: int  # characters per window

    def windows(self, text: str, n: int, seed: int) -> CrossBatch:
        contexts = (self.a.context, self.b.context)
        return cross_windows(text, self.a.codec, self.b.codec, n, self.chars, contexts, seed=seed)

    def summary(self, spec: LMStitchSpec | DepthSpec) -> dict[str, Any]:
        """What a run's summary says of the setup (models, tokenizers, text, B's and A's bits per byte)."""
        return {
            "cross_tokenizer": True, "alignment": spec.alignment,
            "tokenizers": {"a": self.a.codec.describe(), "b": self.b.codec.describe()},
            "n_layer": {"a": self.a.n_layer, "b": self.b.n_layer}, "width": {"a": self.a.width, "b": self.b.width},
            "text": self.text, "window_chars": self.chars, "eval_windows": len(self.evals),
            "eval_bytes": int(self.evals.target_bytes.sum()), "eval_targets": int((self.evals.targets >= 0).sum()),
            "b_bits_per_byte": self.base["bits_per_byte"], "b_bits_per_byte_ci": bpb_ci(self.base, spec.seed),
            "a_bits_per_byte": self.own_a["bits_per_byte"], "a_bits_per_byte_ci": bpb_ci(self.own_a, spec.seed),
            "penalty_sign": "bpb_penalty = stitched − B alone, in bits per byte; positive = worse than B",
            "samples": {},
        }  # fmt: skip


def cross_setup(spec: LMStitchSpec | DepthSpec, ctx: RunContext) -> CrossSetup:
    """Load and take apart A, B and A's random twin, tokenize the text both ways, score B and A alone."""
    ctx.progress(0.0, "loading models")
    la, lb = load_pair(spec, ctx.store, input_kind="tokens", hint=NOT_LM_HINT)
    a, b = lm_parts(la), lm_parts(lb)
    check_cross(spec, a.codec, b.codec)
    random_a = _random_a(spec, ctx)
    _parts_to(ctx.device, *(p for p in (a, b, random_a) if p is not None))
    name = spec.text or la.dataset or lb.dataset or "pydoc"
    ctx.progress(0.02, f"tokenizing {name} for A ({a.codec.describe()}) and B ({b.codec.describe()})")
    raw = load_text(name)
    cut = int(len(raw) * (1 - VAL_FRACTION))  # the validation characters every LM run reports on
    train_text, val_text = raw[:cut], raw[cut:]
    tune_at = int(len(train_text) * (1 - TUNE_FRACTION))  # held out of training: start and stop are chosen there
    fit_text, tune_text = (train_text[:tune_at], train_text[tune_at:]) if spec.holds_out else (train_text, "")
    chars, contexts = min(a.context, b.context), (a.context, b.context)
    evals = cross_windows(val_text, a.codec, b.codec, spec.eval_windows, chars, contexts, seed=1234)
    tune = cross_windows(tune_text, a.codec, b.codec, TUNE_WINDOWS, chars, contexts, seed=4321) \
        if spec.holds_out else None  # fmt: skip
    base = bits_per_byte(b_alone(b), evals, ctx.device, ctx.check_cancel)
    mirrored = cross_windows(val_text, b.codec, a.codec, spec.eval_windows, chars, contexts[::-1], seed=1234)
    own_a = bits_per_byte(b_alone(a), mirrored, ctx.device, ctx.check_cancel)
    return CrossSetup(a, b, random_a, name, fit_text, tune, evals, base, own_a, chars)


def cross_point(s: CrossSetup, spec: LMStitchSpec | DepthSpec, ctx: RunContext, i: int, j: int,
                controls: bool = True, span: tuple[float, float] = (0.05, 0.95), step0: int = 0) -> dict[str, Any]:
    """The stitch from A's position ``i`` into B's ``j`` (and, with ``controls``, its two controls, each fitted
    and trained the same way): its numbers, each control's and the verdict.  Training losses are logged from
    step ``step0 + 1`` (a depth sweep's stitches one after another)."""
    for role, k, p in (("A", i, s.a), ("B", j, s.b)):
        if not 0 <= k <= p.n_layer:
            raise StitchError(f"position {k} is outside 0..{p.n_layer} ({role} has {p.n_layer} blocks)")
    sides = {"stitch": _Side(s.a)}
    if controls:
        sides["shuffled_alignment"] = _Side(s.a, shuffle=spec.seed + 1)
        if s.random_a is not None:
            sides["random_a"] = _Side(s.random_a)
    results: dict[str, dict[str, Any]] = {}
    scores: dict[str, ByteScore] = {}
    lo, hi = span
    for n, (tag, side) in enumerate(sides.items()):
        part = (lo + (hi - lo) * n / len(sides), lo + (hi - lo) * (n + 1) / len(sides))
        scores[tag], results[tag] = _one(spec, ctx, s, side, i, j, tag, part, step0)
    out = results.pop("stitch")
    if not controls:
        return out
    drawn = {}
    for tag in CONTROLS:
        if tag not in results:
            drawn[tag] = {"skipped": f"{spec.a} has no random-init twin (random weights are drawn for zoo:, timm: "
                                     "and torchvision: models)"}  # fmt: skip
            continue
        gap = bpb_penalty_ci(scores["stitch"], scores[tag], spec.seed)  # stitch - control, paired over the windows
        drawn[tag] = {**results[tag], "stitch_minus_control": round(out["bits_per_byte"]
                                                                    - results[tag]["bits_per_byte"], 6),
                      "stitch_minus_control_ci": gap, "stitch_better": gap[1] < 0}  # fmt: skip
    beaten = [t for t in CONTROLS if drawn[t].get("stitch_better")]
    return {**out, "controls": drawn, "verdict": _verdict(beaten, drawn)}


def run_cross_stitch(spec: LMStitchSpec, ctx: RunContext) -> dict[str, Any]:
    """The stitch and its two controls, each fitted in closed form and trained on the same budget; scored on the
    same held-out windows as B alone."""
    t0 = time.perf_counter()
    s = cross_setup(spec, ctx)
    i, j = spec.cut_a, spec.cut_a if spec.cut_b is None else spec.cut_b
    point = cross_point(s, spec, ctx, i, j)
    return {"mode": "cross", **s.summary(spec), "cut_a": i, "cut_b": j, "head": "b",
            "cut_names": {"a": cut_name(s.a.family, i), "b": cut_name(s.b.family, j)}, **point,
            "seconds": round(time.perf_counter() - t0, 3)}  # fmt: skip


def cross_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The reader of a cross-tokenizer stitch's summary: one row per model scored on the held-out windows
    (``role`` stitched | b | a | a control's tag, ``label``, ``bits_per_byte``, ``ci``), the stitch first; A's own
    is on its own tokens of the same text.

    >>> s = {"bits_per_byte": 2.6, "bits_per_byte_ci": [2.5, 2.7], "b_bits_per_byte": 1.9, "controls":
    ...      {"shuffled_alignment": {"bits_per_byte": 3.6}, "random_a": {"skipped": "no twin"}}}
    >>> [(r["label"], r["bits_per_byte"]) for r in cross_rows(s)]
    [('stitched', 2.6), ('B alone', 1.9), ('a shuffled alignment', 3.6)]
    """
    rows = [{"role": "stitched", "label": "stitched", "bits_per_byte": summary["bits_per_byte"],
             "ci": summary.get("bits_per_byte_ci")},
            {"role": "b", "label": "B alone", "bits_per_byte": summary["b_bits_per_byte"],
             "ci": summary.get("b_bits_per_byte_ci")}]  # fmt: skip
    if "a_bits_per_byte" in summary:
        rows.append({"role": "a", "label": "A alone (its own tokens)", "bits_per_byte": summary["a_bits_per_byte"],
                     "ci": summary.get("a_bits_per_byte_ci")})  # fmt: skip
    for tag, control in (summary.get("controls") or {}).items():
        if "bits_per_byte" in control:
            rows.append({"role": tag, "label": CONTROL_WORDS.get(tag, tag), "bits_per_byte": control["bits_per_byte"],
                         "ci": control.get("bits_per_byte_ci")})  # fmt: skip
    return rows


def cross_curves(series: dict[str, list[tuple[int, float]]]) -> list[tuple[str, dict[str, list]]]:
    """The reader of a cross-tokenizer stitch's stored series: ``[(label, {"loss": points})]``, the stitch's
    adapter first, then each control's (each from its own step 1; what ``plots.runs.compare_curves`` draws)."""
    labels = {"stitch": "stitched", **CONTROL_WORDS}
    return [(labels[tag], {"loss": series[name]}) for tag, name in CURVES.items() if series.get(name)]


def _verdict(beaten: list[str], controls: dict[str, dict]) -> str:
    ran = [t for t in CONTROLS if "skipped" not in controls[t]]
    if ran and len(beaten) == len(ran):
        return "carries A's information: better than " + " and ".join(CONTROL_WORDS[t] for t in ran)
    missing = [CONTROL_WORDS[t] for t in ran if t not in beaten]
    return "not shown: no better than " + " and ".join(missing) if missing else "no control ran"


def _random_a(spec: LMStitchSpec | DepthSpec, ctx: RunContext) -> LMParts | None:
    """A's untrained twin (the random-init control), or None where its source draws none."""
    try:
        ref = random_twin(spec.a, spec.seed)
    except StitchError:
        return None
    return lm_parts(load_model(ref, store=ctx.store))


def _one(spec: LMStitchSpec | DepthSpec, ctx: RunContext, s: CrossSetup, side: _Side, i: int, j: int, tag: str,
         span: tuple[float, float], step0: int = 0) -> tuple[ByteScore, dict[str, Any]]:
    """Fit (closed form) and train one stitch; its score on the held-out windows against B alone."""
    torch.manual_seed(spec.seed)
    a, b, device = side.a, s.b, ctx.device
    adapter = make_token_adapter(spec.adapter, a, i, b, j, spec.mlp_hidden)
    model = build_cross_stitch(a, b, i, j, adapter, spec.alignment)
    residual = None
    if spec.adapter.init in ("lstsq", "procrustes"):
        fits = [side.view(s.windows(s.fit_text, spec.batch_size, 7_919 + k), k) for k in range(FIT_BATCHES)]
        residual = fit_adapter(adapter.inner, cross_pairs(a, b, i, j, fits, spec.alignment, device),
                               method=spec.adapter.init)
    adapter.to(device)
    tuned = side.view(s.tune, 10**6) if s.tune is not None else None

    def held_out() -> float:
        return bits_per_byte(model, tuned, device, ctx.check_cancel)["loss"]

    started = _best_start(adapter, held_out) if spec.start == "best" else spec.adapter.init
    lo, hi = span

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        ctx.progress(lo + (hi - lo) * step / total, f"{tag}: training adapter {i}->{j} step {step}/{total}")
        if step % 5 == 0 or step == total:
            ctx.log(step0 + step, {CURVES[tag]: metrics["loss"]})

    def batches() -> Iterator[tuple[CrossBatch, torch.Tensor]]:  # each step's windows, as the side reads them
        drawn = cross_batches(s.fit_text, a.codec, b.codec, spec.batch_size, s.chars, (a.context, b.context),
                              spec.seed, spec.steps)  # fmt: skip
        for k, (x, _) in enumerate(drawn):
            x = side.view(x, 10**5 + k)
            yield x, x.targets

    until = Convergence(held_out, spec.check_every, spec.patience, spec.tol) if spec.converges and spec.steps else None
    losses = train_lm_adapter(
        model, 0, adapter, None, block_size=0, objective={"task": 1.0}, steps=spec.steps,
        batch_size=spec.batch_size, lr=spec.lr, weight_decay=spec.weight_decay, seed=spec.seed, device=device,
        on_step=on_step, check_cancel=ctx.check_cancel, until=until, batches=batches(),
    )  # fmt: skip
    score = bits_per_byte(model, side.view(s.evals, 10**7), device, ctx.check_cancel)
    out = {"bits_per_byte": score["bits_per_byte"], "bits_per_byte_ci": bpb_ci(score, spec.seed),
           "bpb_penalty": round(score["bits_per_byte"] - s.base["bits_per_byte"], 6),
           "bpb_penalty_ci": bpb_penalty_ci(score, s.base, spec.seed), "loss": score["loss"],
           "accuracy": score["accuracy"], "steps": len(losses), "start_from": started,
           "lstsq_residual": None if residual is None else round(float(residual), 6),
           "params": int(sum(p.numel() for p in adapter.parameters() if p.requires_grad))}  # fmt: skip
    if tag == "stitch":
        out["layout"] = model.layout
    if until is not None:
        out["held_out"] = {"loss": round(until.best, 6), "best_step": until.best_step, "stopped_at": until.stopped_at,
                           "converged": until.converged(spec.steps)}  # fmt: skip
    return score, out
