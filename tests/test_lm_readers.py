"""The readers of the LM experiments' stored results (moved here from the plots: plots only draw)."""

from __future__ import annotations

from stitchcore.experiments.lm import partial_points
from stitchcore.plots import lm as plots_lm


def test_partial_points_reads_the_depth_sweep_series():
    partial = partial_points({"penalty:merge:a": [(0, -0.5), (1, -0.2)], "loss": [(1, 2.0)]})
    assert [(p["label"], p["split"]) for p in partial] == [("merge, head A, embed A", 0), ("merge, head A, embed A", 1)]
    assert [p["loss_penalty"] for p in partial] == [-0.5, -0.2]


def test_partial_points_skips_other_series_and_keeps_every_curve():
    metrics = {"penalty:stitch:b": [(2, 0.1)], "penalty": [(0, 1.0)], "penalty:merge": [(0, 1.0)],
               "stitched:accuracy": [(0, 0.9)], "penalty:merge:a": [(0, -0.3)]}  # fmt: skip
    partial = partial_points(metrics)
    assert sorted((p["mode"], p["head"], p["split"]) for p in partial) == [("merge", "a", 0), ("stitch", "b", 2)]
    assert partial_points({}) == []


def test_partial_points_draw_as_depth_curves():
    fig = plots_lm.penalty_by_depth(partial_points({"penalty:merge:a": [(0, -0.5), (1, -0.2)]}))
    assert [t.name for t in fig.data] == ["merge, head A, embed A"]
    assert not hasattr(plots_lm, "partial_points")  # the plots draw; the experiment reads its own series


def test_depth_points_name_their_embeddings_new_series_and_old_summaries():
    from stitchcore.experiments.lm import labelled_points

    new = partial_points({"penalty:merge:b:b": [(0, 0.0)], "penalty:stitch:b:a": [(1, -0.1)]})
    assert sorted(p["label"] for p in new) == ["merge, head B, embed B", "stitch, head B, embed A"]
    old = labelled_points([{"mode": "merge", "head": "b", "label": "merge, head B", "split": 0, "loss_penalty": -0.2}])
    assert old[0]["label"] == "merge, head B, embed A" and old[0]["embed"] == "a"  # stored before: A's embeddings
