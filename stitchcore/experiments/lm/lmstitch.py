"""Experiment ``lmstitch``: A's residual stream at position ``cut_a`` -> a trained adapter -> B from
``cut_b``, with B's head or A's (head preservation); the adapter's weights are stored with the run."""

from __future__ import annotations

import time
from typing import Any

from safetensors.torch import save

from stitchcore.errors import AdapterError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.lm._pair import common_summary, pair_shapes, sample_of, setup_pair, stitch_once
from stitchcore.experiments.lm.cross import check_cross, run_cross_stitch
from stitchcore.experiments.lm.estimate import estimate_lm_stitch
from stitchcore.experiments.lm.specs import LMStitchSpec
from stitchcore.lm.parts import TokenwiseAdapter, cut_name, stitch_layout

__all__ = ["check_lm_stitch", "run_lm_stitch"]

ADAPTER_WEIGHTS = "adapter.safetensors"


def check_lm_stitch(spec: LMStitchSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary (or, across tokenizers, what that stitch needs),
    positions i and j (and head_at), equal widths for A's head."""
    sa, sb = pair_shapes(spec, store, across=lambda ca, cb: check_cross(spec, ca, cb))
    j = spec.cut_a if spec.cut_b is None else spec.cut_b
    stitch_layout(sa["n_layer"], sb["n_layer"], spec.cut_a, j, spec.head, spec.head_at)
    if spec.head == "a" and sa["width"] != sb["width"]:
        raise AdapterError(f"head preservation runs A's head on B's stream, so widths must be equal (A: "
                           f"D={sa['width']}, B: D={sb['width']}); use head b")


@register_experiment("lmstitch", LMStitchSpec.from_dict, check=check_lm_stitch, estimate=estimate_lm_stitch)
def run_lm_stitch(spec: LMStitchSpec, ctx: RunContext) -> dict:
    """One LM stitch: train the adapter, score A, B and C, sample all three.  Across tokenizers: the aligned
    stitch and its controls in bits per byte (:func:`~stitchcore.experiments.lm.cross.run_cross_stitch`)."""
    if pair_shapes(spec, ctx.store, across=lambda ca, cb: None)[0]["cross"]:
        return run_cross_stitch(spec, ctx)
    t0 = time.perf_counter()
    j = spec.cut_a if spec.cut_b is None else spec.cut_b
    s = setup_pair(spec, ctx, lambda a, b: stitch_layout(a.n_layer, b.n_layer, spec.cut_a, j, spec.head, spec.head_at))
    model, result = stitch_once(s, spec, ctx, spec.cut_a, j, spec.head, spec.head_at, span=(0.1, 0.95))
    out = common_summary(s, spec)
    out["samples"]["stitched"] = sample_of(model, s.a, s.data, spec, s.block, s.device)
    adapter = next(p for p in model.parts if isinstance(p, TokenwiseAdapter))
    state = {k: v.detach().cpu().contiguous() for k, v in adapter.state_dict().items()}
    ctx.store.put_artifact(ctx.run_id, ADAPTER_WEIGHTS, save(state))
    out.update({
        "mode": "stitch", "layout": model.layout, "cut_a": spec.cut_a, "cut_b": j, "head": spec.head,
        "cut_names": {"a": cut_name(s.a.family, spec.cut_a), "b": cut_name(s.b.family, j)},
        **result, "seconds": round(time.perf_counter() - t0, 3),
    })
    return out
