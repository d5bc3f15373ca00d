"""A transfer run's view: A's probe read on B (carried, fitted on B, through a random adapter) and the ratio along
depth, the steering shifts, one row per cut pair; the numbers come from ``transfer_points``."""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.experiments.transfer import SIDES, transfer_points
from stitchcore.plots import transfer as plots
from stitchcore.store.results import RunRecord

__all__ = ["transfer_view"]


def transfer_view(rec: RunRecord, *, key: str) -> None:
    """The three probe accuracies and the transferred/native ratio per cut pair, the steering shifts, the verdicts."""
    def body(now) -> None:
        if now.state != "done" or not now.summary:
            return
        s, points = now.summary, transfer_points(now.summary)
        if len(points) == 1:
            p, c = points[0], st.columns(4)
            for col, side in zip(c, (*SIDES, "ratio"), strict=True):
                lo, hi = p[f"{side}_ci"]
                shown = f"{p[side]:.3f}" if side == "ratio" else f"{p[side]:.1%}"
                col.metric(side.replace("_", " ").capitalize(), shown, help=f"95% interval [{lo:.3f}, {hi:.3f}] "
                           "over the test images")  # fmt: skip
        left, right = st.columns(2)
        ui.chart(left, plots.transfer_accuracy(points, s["chance"]), key=f"{key}-tacc-{rec.id}",
                 file_name=f"{rec.id}-transfer-accuracy.csv")  # fmt: skip
        ui.chart(right, plots.transfer_ratio(points), key=f"{key}-tratio-{rec.id}", file_name=f"{rec.id}-ratio.csv")
        st.dataframe([{"A → B": f"{p['cut_a']} → {p['cut_b']}", **{side: round(p[side], 4) for side in SIDES},
                       "ratio": round(p["ratio"], 3), **{f"steering {side}": round(p["steering"][side], 4)
                                                          for side in SIDES if "steering" in p}, "verdict": p["verdict"]}
                      for p in points], hide_index=True, width="stretch", key=f"{key}-trows-{rec.id}")  # fmt: skip
        if "property" in s:  # two language models
            st.caption(ui.plain(f"A token property, '{s['property']}', scored as {s['measure']} (chance 50%): probes "
                                f"fitted on {s['n_train']:,} training windows of {s['dataset']}, read on "
                                f"{s['n_test']:,} held-out windows of B's own tokens (A: {s['tokenizers']['a']}, B: "
                                f"{s['tokenizers']['b']}). Steering: {s['steering']}."))
            return
        st.caption(ui.plain(f"Probes fitted on {s['n_train']:,} training images of {s['dataset']}, read on "
                            f"{s['n_test']:,} test images (chance {s['chance']:.1%}). Transferred: A's probe read on B "
                            "through the fitted adapter, nothing fitted on B; native: fitted on B at that cut; random "
                            "adapter: A's probe through a random-init adapter of the same shape. Steering: the rise of "
                            "B's probability of a class when that class's direction (its mean minus the rest's, scaled "
                            "to B's own) is added at B's cut, on test images of the other classes."))

    ui.live_run(rec.id, key, body)
