"""The language-model kinds' fields, declared once (:mod:`stitchcore.params`): ``lmstitch``, ``lmdepth`` and
``merge`` share the adapter's training (``LM_TRAIN``) and the scoring (``LM_EVAL``); the CLI's ``merge`` verb
generates those flags from this declaration (its own flags say which kind a command line makes), and a
lesson's open controls narrow it.

>>> [f.flag for f in LM_EVAL]
['--text', '--eval-windows', '--sample-tokens', '--seed']
"""

from __future__ import annotations

from stitchcore.data.tokenize import ALIGNMENTS
from stitchcore.experiments._bounds import MAX_DRAWS, MAX_STEPS, MAX_TOKENS
from stitchcore.experiments.common_fields import ADAPTER_INIT, ADAPTER_KIND, ADAPTER_RANK, MODEL_A, MODEL_B, SEED
from stitchcore.experiments.lm.specs import (EMBEDS, MODES, STARTS, UNTILS, DepthSpec, LMStitchSpec, MergeSpec,
                                             lm_objective)
from stitchcore.params import Field, declare, names_text, wholes_text, wholes_words

__all__ = ["LM_ADAPTER_KINDS", "LM_EVAL", "LM_TRAIN"]

LM_ADAPTER_KINDS = ("linear", "lowrank")  # per-token kinds (a vector -> vector map); "mlp" is mlp_hidden > 0
LM_TRAIN = (
    ADAPTER_KIND.narrowed(choices=LM_ADAPTER_KINDS), ADAPTER_INIT, ADAPTER_RANK,
    Field("objective", str, suggestions=("task", "match", "kd", "task+0.5*match"), check=lm_objective),
    Field("steps", int, low=0, high=MAX_STEPS),
    Field("until", str, choices=UNTILS),
    Field("start", str, choices=STARTS),
    Field("check_every", int, low=1, high=MAX_STEPS),
    Field("patience", int, low=1, high=1000),
    Field("tol", float, low=0.0, high=1.0, step=1e-4),
    Field("batch_size", int, low=1, high=4096),
    Field("lr", float, low=1e-6, high=1.0, step=1e-4),
    Field("weight_decay", float, low=0.0, high=1.0, step=0.01),
    Field("mlp_hidden", int, low=0, high=65_536),
)  # fmt: skip
LM_EVAL = (
    Field("text", str, role="dataset"),
    Field("eval_windows", int, low=1, high=MAX_DRAWS),
    Field("sample_tokens", int, low=0, high=MAX_TOKENS),
    SEED,
)
_HEADS = ("b", "a")

declare("lmstitch", [
    MODEL_A, MODEL_B,
    Field("cut_a", int, low=0, high=1000),
    Field("cut_b", int, low=0, high=1000),
    Field("head", str, choices=_HEADS),
    Field("head_at", int, low=0, high=1000),
    Field("alignment", str, choices=ALIGNMENTS),
    *LM_TRAIN, *LM_EVAL,
], spec=LMStitchSpec)  # fmt: skip
declare("lmdepth", [
    MODEL_A, MODEL_B,
    Field("modes", tuple, parse=names_text, items=MODES),
    Field("heads", tuple, parse=names_text, items=("a", "b")),
    Field("splits", tuple, parse=wholes_text, write=wholes_words),
    Field("heatmap", bool),
    Field("embed", str, choices=EMBEDS),
    Field("alignment", str, choices=ALIGNMENTS),
    *LM_TRAIN, *LM_EVAL,
], spec=DepthSpec)  # fmt: skip
declare("merge", [
    MODEL_A, MODEL_B,
    Field("start", int, low=0, high=1000),
    Field("end", int, low=0, high=1000),
    Field("head", str, choices=("a", "b")),
    Field("embed", str, choices=("a", "b")),
    *LM_EVAL,
], spec=MergeSpec)  # fmt: skip
