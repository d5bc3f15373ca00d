"""A run's downloads: metrics CSV, run JSON, and the bundle zip and HTML report, made on click and held by
the session (:func:`made_download` says why)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from stitchcore.errors import StitchError
from stitchcore.jobs import JobSnapshot
from stitchcore.report.figures import metrics_csv
from stitchcore.report.html import report_html
from stitchcore.store.bundle import export_bundle
from stitchcore.store.results import Store
from ui.errors import show_error
from ui.reproduce import show_reproduce
from ui.resources import get_store
from ui.text import plain

__all__ = ["bundle_bytes", "made_download", "run_downloads"]


def bundle_bytes(store: Store, *run_ids: str) -> bytes:
    """The runs as one bundle zip (``runs export --with-models``; without the models when one is gone)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bundle.zip"
        try:
            export_bundle(store, list(run_ids), out, with_models=True)
        except StitchError:  # e.g. a zoo model one used was deleted: the runs alone still travel
            export_bundle(store, list(run_ids), out)
        return out.read_bytes()


def made_download(where: Any, label: str, make: Callable[[], bytes], *, file_name: str, mime: str, key: str,
                  icon: str, help: str, disabled: bool = False) -> None:  # fmt: skip
    """A download whose file takes a while to make (a bundle, a report): ``label`` ("Download bundle") makes
    it on click, then "Save bundle · 84.2 kB" serves the bytes this session now holds (``key`` names them:
    make it say what they hold, e.g. the run ids and when they ended).

    Not Streamlit's deferred download (a callable as ``data``): the file that makes lives only until two
    script runs of *any* session have ended, and every open page's job monitor reruns every 2 s; with ten
    other sessions open, 11 downloads of 20 failed when the browser fetched 0.2 s late (none with none open).
    A file a download button holds stays while the button is drawn."""
    slot = where.empty()
    if key not in st.session_state and slot.button(label, key=f"{key}-make", icon=icon, help=help,
                                                   disabled=disabled):  # fmt: skip
        with st.spinner(f"Making {plain(file_name)} …"):
            try:
                st.session_state[key] = make()
            except Exception as exc:  # e.g. a run deleted meanwhile: one red line, the page goes on
                show_error(exc, f"making {file_name}")
                return
    data = st.session_state.get(key)
    if data is not None:
        size = f"{len(data) / 1e3:,.1f} kB" if len(data) < 1e6 else f"{len(data) / 1e6:,.1f} MB"
        slot.download_button(f"Save {label.removeprefix('Download ')} · {size}", data, file_name=file_name,
                             mime=mime, key=f"{key}-save", icon=":material/download:", type="primary",
                             on_click="ignore", help=f"{plain(file_name)}: {help}")  # fmt: skip


def run_downloads(snap: JobSnapshot, key: str) -> None:
    """A finished run's downloads: its metrics as CSV (``metrics_csv``), the run as JSON, as a bundle zip (with the zoo models
    it uses: ``runs import`` elsewhere) and as an HTML report that opens offline; the last two made on click; then
    the Python call and the command line that make it again (``ui.reproduce``)."""
    csv = metrics_csv(snap.metrics)  # the stored series; an LM sweep's penalties as the figures show them
    payload = {"id": snap.id, "kind": snap.kind, "state": snap.state, "label": snap.label,
               "summary": snap.summary, "error": snap.error, "metrics": snap.metrics}
    c = st.columns(4)
    c[0].download_button("Metrics CSV", csv, file_name=f"{snap.id}-metrics.csv", mime="text/csv",
                         key=f"{key}-csv-{snap.id}", on_click="ignore")
    c[1].download_button("Run JSON", json.dumps(payload, indent=2, default=str), file_name=f"{snap.id}.json",
                         mime="application/json", key=f"{key}-json-{snap.id}", on_click="ignore")
    store = get_store()
    now = store.lookup(snap.id)
    if now is None or now.status in ("queued", "running"):  # e.g. deleted meanwhile: nothing to bundle
        return
    held = f"{key}-{snap.id}-{now.finished}"  # a re-run of the run makes them anew
    made_download(
        c[2], "Download bundle", lambda: bundle_bytes(store, snap.id), file_name=f"stitchlab-{snap.id}.zip",
        mime="application/zip", icon=":material/archive:", key=f"{held}-bundle",
        help="This run with its curves, blobs and the zoo models it uses; import it on Results elsewhere"
             " (or `python -m stitchcore runs import FILE.zip`)",
    )  # fmt: skip
    made_download(
        c[3], "Download report", lambda: report_html(store, [snap.id]).encode(), file_name=f"stitchlab-{snap.id}.html",
        mime="text/html", icon=":material/description:", key=f"{held}-report",
        help="One HTML file that opens offline: the run's facts, numbers and interactive figures"
             " (`python -m stitchcore runs report ID --out FILE.html`)",
    )  # fmt: skip
    show_reproduce(snap)  # the call and the command line that make it again
