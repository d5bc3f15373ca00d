"""The specs of the three LM kinds: ``merge`` (:class:`MergeSpec`), ``lmstitch`` (:class:`LMStitchSpec`)
and ``lmdepth`` (:class:`DepthSpec`); the bottom of :mod:`stitchcore.experiments.lm`, importing none of it.

Positions are residual-stream positions (see :mod:`stitchcore.lm.parts`): ``k`` = after ``k``
blocks, 0 = right after the embeddings.  Block ranges are half-open: ``start=1, end=4``
substitutes blocks 1, 2 and 3.

>>> MergeSpec(a="zoo:gpt-pydoc-s0-adamw", b="zoo:gpt-pydoc-s1-adamw", start=2).label()
'merge zoo:gpt-pydoc-s0-adamw <- zoo:gpt-pydoc-s1-adamw blocks [2, end), head a'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from stitchcore.data.tokenize import ALIGNMENTS
from stitchcore.errors import StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_LR,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_WEIGHT_DECAY,
    MAX_WIDTH,
    check_adapter_rank,
    check_count,
    check_rate,
)
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_at_most,
    check_choice,
    check_positive,
    check_seed,
)
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.train import parse_objective

__all__ = ["EMBEDS", "LM_ADAPTER", "MODES", "STARTS", "UNTILS", "DepthSpec", "LMStitchSpec", "MergeSpec", "lm_objective"]


def lm_objective(text: str) -> dict[str, float]:
    """The weights of a language stitch's objective: task, match, kd or a sum; ``final`` (an image classifier's
    final features) is refused in one line.

    >>> lm_objective("task+0.5*match")
    {'task': 1.0, 'match': 0.5}
    """
    weights = parse_objective(text)
    if "final" in weights:
        raise StitchError("a language stitch trains on task, match or kd; final (B's final features before its "
                          "classifier head) is for image stitches", fix={"objective": "task"})  # fmt: skip
    return weights

MODES = ("merge", "stitch")
# How long an adapter trains.  "steps" (the reading of specs written before issue 25, whose dicts lack the key):
# exactly ``steps`` steps.  "converged": until the next-token loss on a held-out part of the TRAIN text
# (lm.train.TUNE_FRACTION, never the validation windows the results report) stops improving by more than
# ``tol`` (relative) over ``patience`` checks ``check_every`` steps apart, at most ``steps`` steps; the best
# checked adapter is kept.
UNTILS = ("converged", "steps")
# Where the adapter starts.  "init" (the old reading): the adapter spec's init.  "best": the better, on the same
# held-out train text, of the adapter's init and the identity where the shapes allow it (D_A == D_B and a kind
# with an identity; the head-A stitch at split L is then A itself).
STARTS = ("best", "init")
# Whose embeddings (wte, wpe) read the input of a depth sweep's merges.  "tied" (default): those of the model
# whose head is used, since GPT heads are tied to wte; "a": always A's (the old reading, dicts without the key).
EMBEDS = ("tied", "a", "b")
MAX_POSITION = 100_000  # a residual position counts blocks: far above any model's depth (checked when loaded)
# What a stored dict without these keys meant (Spec.LEGACY: read back by from_dict, left out of to_dict, and
# today's defaults for a new spec, Spec.new)
_LEGACY_TRAIN: dict[str, Any] = {"until": "steps", "start": "init"}
# Per-token linear map, least-squares start, no BatchNorm (train-mode BN would mix a batch's
# tokens, future positions included).
LM_ADAPTER = AdapterSpec(kind="linear", norm="none", resample="none", init="lstsq")


def _check_positions(**positions: int | None) -> None:
    """Residual positions (None: the default) are whole numbers 0 .. :data:`MAX_POSITION`; whether the models
    are that deep is checked when they are loaded.

    >>> _check_positions(start=2, end=None)
    >>> _check_positions(cut_a=-1)
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: cut_a (--cut-a) must be at least 0 (got -1); a position counts blocks, 0 = after the embeddings
    """
    for name, value in positions.items():
        if value is not None:
            check_count(name, value, 0, MAX_POSITION, "a position counts blocks, 0 = after the embeddings",
                        "no model is that deep")


def _adapter(value: AdapterSpec | dict) -> AdapterSpec:
    return AdapterSpec.from_dict(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class _Eval(Spec):
    """Fields shared by every LM spec (scoring and samples)."""

    text: str | None = None  # corpus (text.load_text); None: A's training corpus, else pydoc
    eval_windows: int = 128  # validation windows of A's context length, the same for A, B and C
    sample_tokens: int = 160  # tokens generated per model for the side-by-side samples (0 = none)
    seed: int = 0  # sampling and adapter-training seed

    def _check_eval(self) -> None:
        check_count("eval_windows", self.eval_windows, 1, MAX_DRAWS, "e.g. 128",
                    "each window is scored for A, B and the joined model")
        if isinstance(self.sample_tokens, (int, float)) and self.sample_tokens < 0:
            raise StitchError(f"sample_tokens must be 0 (no samples) or more, not {self.sample_tokens}")
        check_count("sample_tokens", self.sample_tokens, 0, MAX_TOKENS, "0: no samples")
        check_seed("seed", self.seed)


@dataclass(frozen=True)
class MergeSpec(_Eval):
    """One merge: A with B's blocks ``start .. end-1``; no new parameters."""

    a: str = ""  # ModelRef of the base model A
    b: str = ""  # ModelRef of the donor B
    start: int = 0  # first substituted block
    end: int | None = None  # one past the last substituted block; None = to the last block
    head: str = "a"  # whose ln_f + lm_head: "a" preserves A's head (A.wte, A.wpe, A.ln_f), "b" uses B's
    embed: str = "a"  # whose wte + wpe read the input

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("a merge needs two model refs, a and b")
        check_choice("head", self.head, ("a", "b"))
        check_choice("embed", self.embed, ("a", "b"))
        _check_positions(start=self.start, end=self.end)
        if self.end is not None and self.end < self.start:
            raise StitchError(f"block range [{self.start}, {self.end}) is empty or negative; need 0 <= start <= end")
        self._check_eval()

    def label(self) -> str:
        end = "end" if self.end is None else self.end
        return f"merge {self.a} <- {self.b} blocks [{self.start}, {end}), head {self.head}"


@dataclass(frozen=True)
class _Train:
    """Adapter training fields shared by LM stitches and depth sweeps."""

    adapter: AdapterSpec = field(default_factory=lambda: LM_ADAPTER)
    objective: str = "task"  # task | match | kd | weighted sum "task+0.5*match"
    steps: int = 2000  # until "steps": the optimiser steps; until "converged": the cap (0 = the start adapter only)
    batch_size: int = 32  # windows per step
    lr: float = 1e-3  # AdamW, cosine to 0
    weight_decay: float = 0.0
    mlp_hidden: int = 0  # > 0: the "mlp" adapter, linear map + a zero-initialised GELU MLP branch of this width
    until: str = "converged"  # converged | steps (see UNTILS; a stored dict without it means "steps")
    start: str = "best"  # best | init (see STARTS; a stored dict without it means "init")
    check_every: int = 50  # until "converged": steps between held-out checks
    patience: int = 4  # until "converged": checks without an improvement > tol before stopping
    tol: float = 1e-3  # until "converged": the relative held-out loss improvement that counts

    def _check_train(self) -> None:
        self._check_eval()  # type: ignore[attr-defined]  # every spec with training scores as _Eval does
        object.__setattr__(self, "adapter", _adapter(self.adapter))
        check_choice("until", self.until, UNTILS)
        check_choice("start", self.start, STARTS)
        check_count("check_every", self.check_every, 1, MAX_STEPS, "e.g. 50")
        check_count("patience", self.patience, 1, MAX_DRAWS, "e.g. 4")
        check_at_least("tol", self.tol, 0, "e.g. 1e-3 (a 0.1% better held-out loss)")
        check_at_most("tol", self.tol, 1, "a relative improvement, e.g. 1e-3 (a 0.1% better held-out loss)")
        lm_objective(self.objective)
        if self.adapter.kind == "identity":
            raise StitchError("an identity adapter is a merge; use mode merge")
        check_adapter_rank(self.adapter)
        check_count("steps", self.steps, 0, MAX_STEPS, "0 keeps the start adapter", "each step trains on a batch")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 32")
        check_count("mlp_hidden", self.mlp_hidden, 0, MAX_WIDTH, "0: no MLP branch")
        check_positive("lr", self.lr, "typical values 1e-4 .. 1e-2 (default 1e-3)")
        check_rate("lr", self.lr, MAX_LR, "typical values 1e-4 .. 1e-2 (default 1e-3)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")
        check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "0 turns it off")

    @property
    def converges(self) -> bool:
        """Whether training stops on the held-out train loss (else it runs exactly ``steps`` steps)."""
        return self.until == "converged"

    @property
    def holds_out(self) -> bool:
        """Whether a part of the train text is held out (to stop or to choose the start)."""
        return self.until == "converged" or self.start == "best"

    def _train_dict(self, d: dict) -> dict:
        """``d`` without the stopping rule's settings when training does not stop on them (old ids stay)."""
        if self.until != "converged":
            for key in ("check_every", "patience", "tol"):
                d.pop(key, None)
        return d

    @property
    def adapter_name(self) -> str:
        """linear | lowrank | mlp (as the page and the CLI spell it)."""
        return "mlp" if self.mlp_hidden else self.adapter.kind


@dataclass(frozen=True)
class LMStitchSpec(_Train, _Eval):
    """One LM stitch: A's stream at ``cut_a`` -> adapter -> B from ``cut_b`` (positions)."""

    a: str = ""  # ModelRef of the bottom model A
    b: str = ""  # ModelRef of the top model B
    cut_a: int = 0  # A's residual position i (after i blocks)
    cut_b: int | None = None  # B's position j where B takes over; None = the same as cut_a
    head: str = "b"  # "b": B's head; "a": head-preserving C = A_head(B_{j..h}(S(A_<i)))
    head_at: int | None = None  # head "a": where B's blocks hand back to A's (None = after B's last block)
    # Across tokenizers (A and B tokenize the text differently, stitchcore.lm.cross): each of B's tokens reads
    # A's "last" token inside its bytes, or the "mean" of A's tokens inside them.  Unused when they share one.
    alignment: str = "last"
    LEGACY: ClassVar[dict[str, Any]] = {**_LEGACY_TRAIN, "alignment": "last"}

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("an LM stitch needs two model refs, a and b")
        check_choice("head", self.head, ("a", "b"))
        check_choice("alignment", self.alignment, ALIGNMENTS)
        if self.head == "b" and self.head_at is not None:
            raise StitchError("head_at is for head 'a' (where A's head takes over); leave it out with head 'b'")
        _check_positions(cut_a=self.cut_a, cut_b=self.cut_b, head_at=self.head_at)
        self._check_train()

    def to_dict(self) -> dict:
        return self._train_dict(super().to_dict())

    def label(self) -> str:
        j = self.cut_a if self.cut_b is None else self.cut_b
        return f"lm stitch {self.a}[{self.cut_a}] -> {self.b}[{j}], head {self.head} ({self.adapter_name})"


@dataclass(frozen=True)
class DepthSpec(_Train, _Eval):
    """Penalty over depth: merge and/or stitch at every split, with each head; optional (i, j) heat map.

    Split ``i`` (0 .. L): merge = A's blocks < i, B's blocks >= i; stitch = A's stream at i
    -> adapter -> B from i.  ``head`` "b" uses B's head (base B); "a" keeps A's (base A).
    """

    a: str = ""
    b: str = ""
    modes: tuple[str, ...] = MODES  # which curves: merge, stitch
    heads: tuple[str, ...] = ("a", "b")  # which heads: a (preserved), b
    splits: tuple[int, ...] | None = None  # split positions; None = every one, 0 .. L
    heatmap: bool = False  # also stitch every (i, j) pair with B's head (the heat map)
    embed: str = "tied"  # merges' embeddings: tied (the head's model's) | a | b (see EMBEDS; absent = "a")
    alignment: str = "last"  # across tokenizers (as LMStitchSpec's); unused when A and B share one
    LEGACY: ClassVar[dict[str, Any]] = {**_LEGACY_TRAIN, "embed": "a", "alignment": "last"}

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("a depth sweep needs two model refs, a and b")
        for name, values, choices in (("mode", self.modes, MODES), ("head", self.heads, ("a", "b"))):
            object.__setattr__(self, f"{name}s", tuple(values))
            if not values:
                raise StitchError(f"pick at least one {name}")
            for v in values:
                check_choice(name, v, choices)
        if self.splits is not None:
            _check_positions(**{f"splits[{k}]": v for k, v in enumerate(self.splits)})
            object.__setattr__(self, "splits", tuple(int(s) for s in self.splits))
        check_choice("embed", self.embed, EMBEDS)
        check_choice("alignment", self.alignment, ALIGNMENTS)
        self._check_train()

    def merge_embed(self, head: str) -> str:
        """Whose embeddings a merge with ``head`` reads its input with: ``a`` or ``b``."""
        return head if self.embed == "tied" else self.embed

    def to_dict(self) -> dict:
        return self._train_dict(super().to_dict())

    def label(self) -> str:
        extra = " + heat map" if self.heatmap else ""
        return f"LM depth sweep {self.a} / {self.b} ({', '.join(self.modes)}; heads {', '.join(self.heads)}){extra}"
