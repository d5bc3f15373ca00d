"""An ``lmdepth`` between two GPTs that do not share a tokenizer (issue 43): at every split ``i`` A's stream is
stitched into B's at the same relative depth (with a shuffled alignment and a random-init A beside it, each
trained the same way), and with ``heatmap`` every (i, j) stitch, all in bits per byte of B's next-token loss on
held-out text (:mod:`~stitchcore.experiments.lm.cross`).  Merges and A's head read one vocabulary's ids, so
across tokenizers those curves are skipped, each with its reason.

Each finished split is logged as ``bpb:{tag}`` (step = split; tag: stitch or a control), which
:func:`cross_depth_points` reads back while the sweep runs.  Called by
:mod:`~stitchcore.experiments.lm.lmdepth` when A's and B's vocabularies differ.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from stitchcore.errors import CutError, StitchError
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.lm._pair import receiver_block
from stitchcore.experiments.lm.cross import CONTROLS, cross_point, cross_setup
from stitchcore.experiments.lm.specs import DepthSpec
from stitchcore.lm.parts import cut_name

__all__ = ["BPB_SERIES", "cross_depth_points", "cross_skipped", "run_cross_depth"]

BPB_SERIES = "bpb"  # each finished split: bpb:stitch, bpb:shuffled_alignment, bpb:random_a (step = split)


def cross_skipped(spec: DepthSpec) -> dict[str, str]:
    """The curves a depth sweep across tokenizers cannot draw, each with why; DepthError-like StitchError when
    nothing is left to run.

    >>> sorted(cross_skipped(DepthSpec(a="x", b="y")))
    ['merge, head a', 'merge, head b', 'stitch, head a']
    """
    skipped = {}
    for mode in spec.modes:
        for head in spec.heads:
            if mode == "merge":
                skipped[f"merge, head {head}"] = "a merge runs B's blocks on A's token ids: one vocabulary only"
            elif head == "a":
                skipped[f"stitch, head {head}"] = "A's head predicts A's tokens: across tokenizers B's head reads"
    if len(skipped) == len(spec.modes) * len(spec.heads) and not spec.heatmap:
        raise StitchError("across tokenizers a depth sweep stitches with B's head: pick mode stitch and head b, "
                          "or the heat map", fix={"modes": ["stitch"], "heads": ["b"]})
    return skipped


def cross_depth_points(metrics: Mapping[str, Sequence[tuple[int, float]]]) -> list[dict[str, Any]]:
    """The splits a cross-tokenizer depth sweep has logged so far (``store.series`` or a job's ``metrics``), as
    ``{"split", "bits_per_byte", "controls": {tag: {"bits_per_byte"}}}`` like the summary's points.

    >>> cross_depth_points({"bpb:stitch": [(0, 3.1)], "bpb:random_a": [(0, 3.9)], "loss": [(1, 2.0)]})
    [{'split': 0, 'bits_per_byte': 3.1, 'controls': {'random_a': {'bits_per_byte': 3.9}}}]
    """
    by_split: dict[int, dict[str, Any]] = {}
    for name, pts in metrics.items():
        head, _, tag = name.partition(":")
        if head != BPB_SERIES or tag not in ("stitch", *CONTROLS):
            continue
        for k, v in pts:
            p = by_split.setdefault(int(k), {"split": int(k), "controls": {}})
            if tag == "stitch":
                p["bits_per_byte"] = v
            else:
                p["controls"][tag] = {"bits_per_byte": v}
    return [{"split": p["split"], "bits_per_byte": p.get("bits_per_byte"), "controls": p["controls"]}
            for _, p in sorted(by_split.items())]


def run_cross_depth(spec: DepthSpec, ctx: RunContext) -> dict[str, Any]:
    """Every split's stitch and controls, then (``heatmap``) every (i, j) stitch; on this machine."""
    t0 = time.perf_counter()
    if ctx.backend().name != "local":
        raise StitchError("across tokenizers a depth sweep runs on this machine (its stitches share the "
                          "tokenized text); leave the backend out", fix={"backend": "local"})
    skipped = cross_skipped(spec)
    s = cross_setup(spec, ctx)
    n_a, n_b = s.a.n_layer, s.b.n_layer
    splits = list(spec.splits) if spec.splits is not None else list(range(n_a + 1))
    if bad := [k for k in splits if not 0 <= k <= n_a]:
        raise CutError(f"splits {bad} are outside 0..{n_a} (A has {n_a} blocks)")
    curve = "stitch, head b" not in skipped and "stitch" in spec.modes and "b" in spec.heads
    cells = [(i, j) for i in range(n_a + 1) for j in range(n_b + 1)] if spec.heatmap else []
    stitches = (3 * len(splits) if curve else 0) + len(cells)
    done, step0, points = 0, 0, []

    def span(n: int) -> tuple[float, float]:
        return 0.05 + 0.9 * done / max(stitches, 1), 0.05 + 0.9 * (done + n) / max(stitches, 1)

    for i in splits if curve else []:
        j = receiver_block(i, n_a, n_b)
        p = cross_point(s, spec, ctx, i, j, controls=True, span=span(3), step0=step0)
        done, step0 = done + 3, step0 + 3 * (max(spec.steps, 1) + 1)
        point = {"split": i, "receiver": j, "depth": round(i / max(n_a, 1), 6), "cut": cut_name(s.a.family, i),
                 **{k: p[k] for k in ("bits_per_byte", "bits_per_byte_ci", "bpb_penalty", "bpb_penalty_ci",
                                      "steps", "start_from", "verdict")},
                 "controls": {t: {k: c[k] for k in ("bits_per_byte", "bits_per_byte_ci", "stitch_minus_control_ci",
                                                    "stitch_better") if k in c} | ({"skipped": c["skipped"]}
                                                                                  if "skipped" in c else {})
                              for t, c in p["controls"].items()}}  # fmt: skip
        points.append(point)
        ctx.log(i, {f"{BPB_SERIES}:stitch": p["bits_per_byte"],
                    **{f"{BPB_SERIES}:{t}": c["bits_per_byte"] for t, c in p["controls"].items()
                       if "bits_per_byte" in c}})  # fmt: skip
    values = [[None] * (n_b + 1) for _ in range(n_a + 1)] if spec.heatmap else None
    values_ci = [[None] * (n_b + 1) for _ in range(n_a + 1)] if spec.heatmap else None
    for i, j in cells:
        p = cross_point(s, spec, ctx, i, j, controls=False, span=span(1), step0=step0)
        done, step0 = done + 1, step0 + max(spec.steps, 1) + 1
        values[i][j], values_ci[i][j] = p["bpb_penalty"], p["bpb_penalty_ci"]
    heat = None if not spec.heatmap else {
        "rows": [cut_name(s.a.family, i) for i in range(n_a + 1)],
        "cols": [cut_name(s.b.family, j) for j in range(n_b + 1)], "values": values, "values_ci": values_ci,
        "head": "b", "unit": "bits per byte above B alone"}  # fmt: skip
    return {"mode": "cross_depth", **s.summary(spec), "points": points, "splits": splits, "skipped": skipped,
            "heatmap": heat, "until": spec.until, "start": spec.start, "seconds": round(time.perf_counter() - t0, 3)}
