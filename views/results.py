"""Results: every stored run as a filterable table; open one, compare several, delete, download, import a bundle.

The permalink target for a run of any kind (``results?run=<id>``).  Widgets ->
store / runner calls -> ``stitchcore.plots``; nothing here trains.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.measures.meaning import explain
from stitchcore.plots import runs as plots
from stitchcore.report.figures import COMPARE_METRICS
from stitchcore.report.html import report_html
from stitchcore.report.runs_table import filter_runs, runs_frame
from stitchcore.report.summary import run_label, summary_row
from stitchcore.store.bundle import import_bundle
from ui import roles
from views import lesson_edit, run_views

ACTIVE = ("queued", "running")  # runs in these states are still owned by a job: not deletable
PICK_KEY = "results-pick"  # the "pick runs by id / label" multiselect
CONFIRM_KEY = "results-confirm-delete"  # + the selected ids: a new selection starts unconfirmed
BUNDLE_KEY = "results-bundle"  # the "Import bundle" file uploader
EMPTY = "—"  # what a table shows where a run has no value (a failed run's accuracy)


def _n(count: int, noun: str = "run") -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


TABLE_COLUMNS = {
    "kind": st.column_config.TextColumn("Kind", width="small"),
    "label": st.column_config.TextColumn("Run (models, cuts)", width="medium"),  # leaves room for the id
    "status": st.column_config.TextColumn("Status", width="small"),
    # help: what each number means, one line from stitchcore/measures/meaning.py
    "accuracy_pct": st.column_config.NumberColumn("Accuracy", format="%.1f%%", help=explain("accuracy")),
    "penalty_pts": st.column_config.NumberColumn("Penalty (pts, higher = worse)", format="%+.1f pts",
                                                 help=explain("penalty")),
    "loss_penalty_pct": st.column_config.NumberColumn("Loss penalty (%, higher = worse)", format="%+.1f %%",
                                                      help=f"Language models. {explain('loss_penalty')}"),
    "created": st.column_config.DatetimeColumn("Created", format="D MMM YYYY, HH:mm"),
    "duration": st.column_config.TextColumn("Duration", help="How long the run took (seconds in the CSV)"),
    "id": st.column_config.TextColumn("Run id", width=150, help="16 characters; results?run=<id> opens it"),
    "error": st.column_config.TextColumn("Error", width="large"),
}


def delete_runs(ids: list[str]) -> None:
    """Button callback: delete the runs, then clear the selection state that named them."""
    if roles.refuse("delete"):
        return
    store, done, failed = ui.get_store(), [], []
    for rid in ids:
        try:
            store.delete_run(rid)
            done.append(rid)
        except StitchError as exc:  # report, keep going with the others
            failed.append(f"{rid}: {exc}")
    st.session_state[PICK_KEY] = [r for r in st.session_state.get(PICK_KEY, []) if r not in done]
    if st.query_params.get("run") in done:
        del st.query_params["run"]
    st.session_state["results-flash"] = (done, failed)


def close_run() -> None:
    st.query_params.pop("run", None)


def import_upload() -> None:
    """Button callback: import the uploaded bundle (checked whole first), then say what happened."""
    upload = st.session_state.get(BUNDLE_KEY)
    if upload is None or roles.refuse("import"):
        return
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(upload.name).name)[:100] or "bundle.zip"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(upload.getvalue())
        try:
            report = import_bundle(ui.get_store(), path)
        except StitchError as exc:
            st.session_state["results-import-flash"] = ("error", str(exc))
            return
    new, skipped = report.imported, report.skipped
    text = f"Imported {_n(len(new))} from {name}" + (f": {', '.join(new)}" if new else "")
    text += f"; {_n(len(skipped))} already here, skipped" if skipped else ""
    st.session_state["results-import-flash"] = ("ok", text)


def import_panel() -> None:
    """The "Import bundle" expander: a zip from "Download bundle" or ``runs export``; not in viewer mode."""
    flash = st.session_state.pop("results-import-flash", None)
    if flash:
        say = st.success if flash[0] == "ok" else st.error
        say(ui.plain(flash[1], ui.errors.MOST_CHARS), icon=":material/upload:")  # a bundle's ids and file name
    with st.expander("Import bundle", icon=":material/upload:"):
        viewer = ui.viewer_mode()
        if viewer:
            st.caption("Viewer mode: bundles can't be imported.")
        st.file_uploader("Bundle (.zip from Download bundle or `python -m stitchcore runs export`)", type=["zip"],
                         key=BUNDLE_KEY, disabled=viewer)
        st.button("Import", icon=":material/upload:", key="results-import", on_click=import_upload,
                  disabled=viewer or st.session_state.get(BUNDLE_KEY) is None)


# ---------------------------------------------------------------------------------------------- page

ui.page_setup("Results")
st.title("Results")
store = ui.get_store()

flash = st.session_state.pop("results-flash", None)
if flash:
    done, failed = flash
    if done:
        st.success(f"Deleted {_n(len(done))}: {ui.plain(', '.join(done))}", icon=":material/delete:")
    for line in failed:
        st.error(f"Could not delete {ui.plain(line)}", icon=":material/error:")
import_panel()

records = store.list_runs()
if store.stale:  # a read-only store whose writer's latest commits cannot be read here
    st.warning(ui.plain(store.stale), icon=":material/sync_problem:")
by_id = {rec.id: rec for rec in records}
linked = st.query_params.get("run")

if not records:
    st.info("No runs in the store yet. Run the classroom demo to train two small models and stitch them.")
    st.page_link(ui.page_file("home"), label="Go to Home and run the classroom demo", icon=":material/home:")
    st.caption(f"Store: {ui.code_span(store.root)}")
    if linked:
        ui.run_view(linked, key="results", cards=run_views.CARDS)
    st.stop()

# -- filters --------------------------------------------------------------------------------------
kinds = sorted({rec.kind for rec in records})
statuses = [s for s in ("done", "running", "queued", "failed", "cancelled", "interrupted")
            if any(rec.status == s for rec in records)]  # fmt: skip
f_kind, f_status, f_text = st.columns([1, 1, 2])
want_kinds = f_kind.multiselect("Kind", kinds, placeholder="all kinds", key="results-kind")
want_status = f_status.multiselect("Status", statuses, placeholder="all statuses", key="results-status")
text = f_text.text_input("Search labels", placeholder="e.g. s1, block2, lstsq", key="results-search")

table = runs_frame(records)
shown = filter_runs(table, kinds=want_kinds, statuses=want_status, text=text)

active = int(table["status"].isin(ACTIVE).sum())
head, refresh = st.columns([5, 1], vertical_alignment="center")
head.caption(
    f"{len(shown)} of {_n(len(table))} · store {ui.code_span(store.root)}"
    + (f" · {active} still running or queued" if active else "")
    + " · select rows to open (one) or compare (several)"
)
refresh.button("Refresh", icon=":material/refresh:", key="results-refresh", width="stretch")

if shown.empty:
    st.caption("No run matches these filters.")
event = st.dataframe(
    shown, column_config=TABLE_COLUMNS, hide_index=True, width="stretch",
    on_select="rerun", selection_mode="multi-row", placeholder=EMPTY,
    column_order=[c for c in TABLE_COLUMNS if (c != "error" or shown["error"].any())
                  and (c != "loss_penalty_pct" or shown[c].notna().any())],  # LM runs only
)  # fmt: skip
picked_rows = [shown["id"][i] for i in event.selection.rows if i < len(shown)]

pick_col, csv_col = st.columns([4, 1])
picked_ids = pick_col.multiselect(
    "Or pick runs by id / label", list(by_id), key=PICK_KEY,
    format_func=lambda rid: f"{rid[:8]} · {run_label(by_id[rid])}" if rid in by_id else rid,
    placeholder="type part of a label or run id",
)  # fmt: skip
csv_col.download_button(
    "Table as CSV", shown.to_csv(index=False), file_name="stitchlab-runs.csv", mime="text/csv",
    icon=":material/download:", key="results-table-csv", on_click="ignore", width="stretch",
    disabled=shown.empty,
)  # fmt: skip
selected = list(dict.fromkeys([*picked_rows, *(r for r in picked_ids if r in by_id)]))

# -- delete ---------------------------------------------------------------------------------------
if selected:
    with st.expander(f"Delete {_n(len(selected), 'selected run')}", icon=":material/delete:"):
        busy = [rid for rid in selected if by_id[rid].status in ACTIVE]
        deletable = [rid for rid in selected if rid not in busy]
        if busy:
            st.warning(
                f"{_n(len(busy), 'selected run')} still running or queued: can't be deleted. Stop them first "
                "(Stop button in the run view), then delete.",
                icon=":material/hourglass_top:",
            )
        if ui.viewer_mode():
            st.caption("Viewer mode: runs can't be deleted.")
        elif deletable:
            listing = (f"- {ui.code_span(run_label(by_id[rid]))} · {ui.code_span(rid)}" for rid in deletable)
            st.markdown("\n".join(listing))
            sure = st.checkbox(
                f"Yes, delete {_n(len(deletable))} with their curves and weights (cannot be undone)",
                key=f"{CONFIRM_KEY}-{'-'.join(sorted(deletable))}",  # another selection must be confirmed anew
            )
            st.button(
                f"Delete {_n(len(deletable))}",
                type="primary",
                disabled=not sure,
                key="results-delete",
                on_click=delete_runs,
                args=(deletable,),
            )

# -- open / compare -------------------------------------------------------------------------------
if len(selected) == 1:
    open_id = selected[0]
    if linked != open_id:
        st.query_params["run"] = open_id  # the URL now shares this run
elif not selected and linked:
    open_id = linked
else:
    open_id = None

if open_id:
    st.divider()
    open_rec = by_id.get(open_id)
    top, page_col, close = st.columns([4, 2, 1], vertical_alignment="center")
    top.caption(f"Permalink: {ui.code_span(f'results?run={open_id}', ui.text.LINK_CHARS)}")
    if open_rec is not None:
        run_views.open_on_page(open_rec, page_col)  # e.g. "Open on the Similarity page" -> similarity?run=ID
    if not selected:  # opened from the URL: closing drops ?run= (a table selection closes by deselecting)
        close.button("Close", key="results-close", on_click=close_run, width="stretch")
    if open_rec is None:
        ui.run_view(open_id, key="results", cards=run_views.CARDS)  # says the run is not in the store
    else:
        run_views.run_panel(open_rec, key="results")
        lesson_edit.add_to_lesson(open_rec, key="results")
elif len(selected) >= 2:
    st.divider()
    st.subheader(f"Compare {len(selected)} runs")
    metric = st.radio(
        "Metric",
        list(COMPARE_METRICS),
        format_func=COMPARE_METRICS.get,
        horizontal=True,
        key="results-metric",
    )
    curves = [(f"{run_label(by_id[rid])} · {rid[:6]}", store.series(rid)) for rid in selected]
    ui.chart(st, plots.compare_curves(curves, metric=metric), key="results-compare",
             file_name=f"compare-{len(selected)}-runs-{metric}.csv")
    side = pd.DataFrame([summary_row(by_id[rid]) for rid in selected]).dropna(axis=1, how="all")
    st.dataframe(side, hide_index=True, width="stretch", placeholder=EMPTY)
    ended = [rid for rid in selected if by_id[rid].status not in ACTIVE]
    if len(ended) < len(selected):
        st.caption(f"{_n(len(selected) - len(ended), 'selected run')} still running or queued: "
                   "not in the bundle or report.")
    left, right, _ = st.columns([1, 1, 2])
    what = "-".join(f"{rid}@{by_id[rid].finished}" for rid in ended)  # a re-run of one makes them anew
    held = f"results-selected-{hashlib.sha1(what.encode()).hexdigest()[:12]}"
    ui.made_download(
        left, f"Download bundle ({_n(len(ended))})", lambda: ui.bundle_bytes(store, *ended),
        file_name=f"stitchlab-{len(ended)}-runs.zip", mime="application/zip", icon=":material/archive:",
        key=f"{held}-bundle", disabled=not ended,
        help="These runs with their curves, blobs and the zoo models they use, in one zip; import it on"
             " Results elsewhere (or `python -m stitchcore runs import FILE.zip`)",
    )  # fmt: skip
    ui.made_download(
        right, f"Download report ({_n(len(ended))})", lambda: report_html(store, ended).encode(),
        file_name=f"stitchlab-{len(ended)}-runs.html", mime="text/html", icon=":material/description:",
        key=f"{held}-report", disabled=not ended,
        help="One HTML file that opens offline: a comparison, then each run's facts, numbers and figures"
             " (`python -m stitchcore runs report ID... --out FILE.html`)",
    )  # fmt: skip
