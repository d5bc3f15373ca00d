"""Home: what stitching is, the one-click classroom demo (with how long it takes here), recent runs."""

import streamlit as st

import ui
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.stitching.adapters import AdapterSpec

DEMO_MODELS = (ZooRecipe(arch="cnn", dataset="digits", seed=0), ZooRecipe(arch="cnn", dataset="digits", seed=1))
DEMO_STITCH = StitchSpec(
    a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="block2", cut_b="block2", adapter=AdapterSpec(init="lstsq")
)
DEMO_PLAN = [*(("zoo", recipe) for recipe in DEMO_MODELS), ("stitch", DEMO_STITCH)]  # queued in this order

DIAGRAM = """
digraph {
  rankdir=LR; node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=11];
  x [label="image", shape=oval, fillcolor="#eeeeee"];
  a1 [label="A: layers ≤ i\\n(frozen)", fillcolor="#cfe3f3"];
  a2 [label="A: rest", fillcolor="#f4f4f4", fontcolor="#aaaaaa", style="rounded,dashed"];
  s [label="adapter S\\n(trained)", fillcolor="#bfe8d9"];
  b1 [label="B: layers ≤ j", fillcolor="#f4f4f4", fontcolor="#aaaaaa", style="rounded,dashed"];
  b2 [label="B: layers > j\\n(frozen)", fillcolor="#f8e3b5"];
  y [label="prediction", shape=oval, fillcolor="#eeeeee"];
  x -> a1 -> s -> b2 -> y; a1 -> a2 [style=dashed, color="#bbbbbb"]; b1 -> b2 [style=dashed, color="#bbbbbb"];
}
"""

ui.page_setup("Home")
st.title("StitchLab")
left, right = st.columns([3, 2])
with left:
    st.markdown(
        "**Model stitching** joins the bottom of one trained network (A, up to layer *i*) to the top of "
        "another (B, from layer *j* on) with a small trainable adapter, keeping both networks frozen. "
        "If the stitched network is nearly as accurate as B, A's layer *i* carries the information B's "
        "layer *j* expects: the *stitching penalty* (B's accuracy minus the stitched accuracy) measures "
        "how compatible the two representations are. Sweeping the cut points maps where two networks "
        "agree and where a trait lives."
    )
    st.markdown(
        "The classroom demo trains two small CNNs on handwritten digits with different random seeds "
        "(or reuses them from the store), joins them in the middle with a linear adapter fitted by least "
        "squares, trains it, and shows the live curve and the result."
    )
    if not ui.viewer_mode():
        ui.show_plan_estimate(DEMO_PLAN)  # the models and stitch not in the store yet
    if st.button("Run the classroom demo", type="primary", disabled=ui.viewer_mode()):
        runner = ui.get_runner()
        try:
            for recipe in DEMO_MODELS:  # one CPU queue runs jobs in order: the models come first
                runner.submit("zoo", recipe)
            job = runner.submit("stitch", DEMO_STITCH)
        except Exception as exc:  # a bug must not kill the page: one line here, the traceback in the log
            ui.show_error(exc, "queueing the classroom demo")
        else:
            st.switch_page(ui.page_file("stitch"), query_params={"run": job.id})
with right:
    st.graphviz_chart(DIAGRAM)

st.subheader("Recent runs")
runs = ui.get_store().list_runs(limit=8)
if not runs:
    st.caption("No runs yet: run the demo, or train a model on the Models page.")
for rec in runs:
    metric = rec.summary.get("accuracy") if rec.summary else None
    name = rec.summary.get("ref") if rec.kind == "zoo" and rec.summary else None  # a trained model: its ref
    text = f"{name or rec.label or rec.kind}" + (f" — {metric:.1%}" if isinstance(metric, float) else "")
    page = ui.page_file("stitch") if rec.kind == "stitch" else ui.page_file("results")
    st.page_link(page, label=ui.plain(f"{rec.status} · {text}"), query_params={"run": rec.id})

ui.rerun_when_jobs_finish(("zoo", "stitch"))  # Recent runs lists what finished
