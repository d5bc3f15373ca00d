"""Experiments ``merge``, ``lmstitch`` and ``lmdepth``: GPT-style models joined by block substitution
(merge, no new parameters) or through an adapter (stitch), scored by validation loss.

Every run loads A and B, takes them apart on private copies (:func:`stitchcore.lm.parts.lm_parts`),
encodes the corpus with their shared vocabulary, and scores A, B and the joined model C on
the same validation windows.  The loss penalty ``(L_base - L_C) / L_base`` is against the
model whose head C uses (``penalty_base``); negative = C is worse (see :mod:`stitchcore.lm.evaluate`).
Each run also stores a short sample from every model, generated at a fixed seed.  A depth sweep
logs each finished point as the metric series ``penalty:{mode}:{head}`` (step = split), which
:func:`partial_points` reads back while it runs.

The package, bottom first: ``specs`` (the three specs) <- ``_pair`` (the pair setup the three
kinds share) <- ``merge``, ``lmstitch``, ``lmdepth`` (one kind each; each registers itself with
its estimator from ``estimate``).  The lower-level building blocks are :mod:`stitchcore.lm`.
"""

from __future__ import annotations

# Importing the kind modules registers merge, lmstitch and lmdepth.
from stitchcore.experiments.lm import fields, lmdepth, lmstitch, merge  # noqa: F401
from stitchcore.experiments.lm._pair import FIT_BATCHES, LMSetup, receiver_block, setup_pair
from stitchcore.experiments.lm.estimate import estimate_depth, estimate_lm, estimate_lm_stitch, estimate_merge
from stitchcore.experiments.lm.lmdepth import (
    check_depth,
    curve_label,
    depth_unit,
    labelled_points,
    partial_points,
    run_depth,
)
from stitchcore.experiments.lm.lmstitch import check_lm_stitch, run_lm_stitch
from stitchcore.experiments.lm.merge import check_merge, run_merge
from stitchcore.experiments.lm.specs import LM_ADAPTER, MODES, DepthSpec, LMStitchSpec, MergeSpec

__all__ = ["FIT_BATCHES", "LM_ADAPTER", "MODES", "DepthSpec", "LMSetup", "LMStitchSpec", "MergeSpec", "check_depth", "check_lm_stitch",
           "check_merge", "curve_label", "depth_unit", "estimate_depth", "estimate_lm", "estimate_lm_stitch", "estimate_merge",
           "labelled_points", "partial_points", "receiver_block", "run_depth", "run_lm_stitch", "run_merge", "setup_pair"]
