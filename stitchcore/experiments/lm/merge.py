"""Experiment ``merge``: A with B's blocks ``start .. end-1`` (block substitution, no new parameters),
scored by validation loss against the model whose head it uses."""

from __future__ import annotations

import time
from typing import Any

from stitchcore.errors import AdapterError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments.lm._pair import common_summary, joined_scores, pair_shapes, sample_of, setup_pair
from stitchcore.experiments.lm.estimate import estimate_merge
from stitchcore.experiments.lm.specs import MergeSpec
from stitchcore.lm.evaluate import lm_loss
from stitchcore.lm.parts import build_merge, merge_layout

__all__ = ["check_merge", "run_merge"]


def _merge_end(spec: MergeSpec, n_a: int, n_b: int) -> int:
    """The merge's block range end, checked with its start (CutError when out of range)."""
    end = min(n_a, n_b) if spec.end is None else spec.end
    merge_layout(n_a, n_b, spec.start, end, spec.head, spec.embed)
    return end


def check_merge(spec: MergeSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary, the block range, equal widths (a merge has
    no adapter)."""
    sa, sb = pair_shapes(spec, store)
    _merge_end(spec, sa["n_layer"], sb["n_layer"])
    if sa["width"] != sb["width"]:
        raise AdapterError(f"merge substitutes blocks without an adapter, so widths must be equal: A has "
                           f"D={sa['width']}, B has D={sb['width']}; use a stitch (an adapter maps D_A -> D_B)")


@register_experiment("merge", MergeSpec.from_dict, check=check_merge, estimate=estimate_merge)
def run_merge(spec: MergeSpec, ctx: RunContext) -> dict:
    """A with B's blocks ``start .. end-1``; scores A, B and the merged model."""
    t0 = time.perf_counter()
    s = setup_pair(spec, ctx, lambda a, b: _merge_end(spec, a.n_layer, b.n_layer))
    end = _merge_end(spec, s.a.n_layer, s.b.n_layer)
    merged = build_merge(s.a, s.b, spec.start, end, spec.head, spec.embed)
    ctx.progress(0.5, "scoring the merged model")
    score = lm_loss(merged, s.windows, s.device, ctx.check_cancel)
    out = common_summary(s, spec)
    out["samples"]["merged"] = sample_of(merged, s.a, s.data, spec, s.block, s.device)
    out.update({
        "mode": "merge", "layout": merged.layout, "start": spec.start, "end": end, "head": spec.head,
        "embed": spec.embed, **joined_scores(s, spec.head, score),  # loss, loss_penalty and their 95% intervals
        "penalty_base": spec.head, "params": 0, "seconds": round(time.perf_counter() - t0, 3),
    })
    return out
