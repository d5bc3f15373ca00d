"""What every page shares: the process-wide store and job runner, models and datasets loaded for display
(each a single ``st.cache_resource``), page setup, viewer mode and the device line."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import streamlit as st

from stitchcore.cuts import Cut, list_cuts
from stitchcore.data import ImageDataset, load_dataset
from stitchcore.device import describe_device, pick_device
from stitchcore.errors import DataError, StitchError
from stitchcore.backends.settings import saved_tracker
from stitchcore.jobs import JobRunner, JobSnapshot
from stitchcore.models.info import weights_fingerprint
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import check_store_ref, dataset_outside
from stitchcore.models.sources import load_model
from stitchcore.report.trackers import log_run
from stitchcore.store.results import Store, resolve_store_dir
from ui import roles

__all__ = [
    "POLL_SECONDS",
    "cuts_of",
    "dataset_for_display",
    "device_label",
    "fingerprint_of",
    "get_runner",
    "get_store",
    "load_for_display",
    "log_finished_runs",
    "page_setup",
    "server_runner",
    "viewer_dataset",
    "viewer_mode",
    "viewer_ref",
]

log = logging.getLogger(__name__)

WARM_ENV = "STITCHLAB_WARM_WORKER"  # "0": start the job worker at the first job, not with the server (tests)
POLL_SECONDS = 2.0  # live views redraw this often while a job runs (each redraw costs every watching browser)


@st.cache_resource(show_spinner=False)
def get_store() -> Store:
    """The results store: $STITCHLAB_STORE, else cache/ (as the CLI)."""
    return Store(resolve_store_dir())


def get_runner() -> JobRunner:
    """The server's job runner (:func:`server_runner`) as this session may use it: in class mode a student's
    session gets a :class:`ui.roles.StudentRunner`, which reads every job and refuses what writes."""
    runner = server_runner()
    if roles.class_mode() and roles.in_session() and not roles.is_teacher():
        return roles.StudentRunner(runner)  # type: ignore[return-value] - the same reading interface
    return runner


@st.cache_resource(show_spinner=False)
def server_runner() -> JobRunner:
    """One runner per server process; every browser session sees the same jobs.  Jobs run in a worker
    process with one core left for the server ($STITCHLAB_JOB_THREADS sets their torch threads), started
    with the runner (the first page view), so the first job does not wait for it ($STITCHLAB_WARM_WORKER=0:
    at the first job)."""
    runner = JobRunner(get_store(), isolation="process", warm=os.environ.get(WARM_ENV, "1") != "0")
    runner.add_listener(log_finished_runs(get_store()))  # to the experiment tracker Settings saved, if any
    return runner


def log_finished_runs(store: Store) -> Callable[[JobSnapshot], None]:
    """A job listener that logs each run that ends done to the tracker the Settings page saved for ``store``
    (``backends.settings.saved_tracker``), in a thread of its own (the listener is called in a job's thread);
    a failure is logged by the server, never raised into a job."""

    def log_one(run_id: str, target: str) -> None:
        try:
            record = store.lookup(run_id)
            if record is not None and record.status == "done":
                log.info("run %s logged to %s", run_id, log_run(record, store, target))
        except Exception:  # noqa: BLE001 - a tracker that is away must not touch the app
            log.exception("logging run %s to %s failed", run_id, target)

    def listener(snap: JobSnapshot) -> None:
        target = saved_tracker(store.root) if snap.state == "done" else None
        if target is not None:
            threading.Thread(target=log_one, args=(snap.id, target), name=f"log-{snap.id}", daemon=True).start()

    return listener


def viewer_ref(ref: str) -> str:
    """``ref`` as given; in viewer mode a RefError unless it names only what the store holds (a ``zoo:`` model,
    an upload under the store: ``models.refs.check_store_ref``), so no page of a viewer loads a server path, a
    hub model or says whether a path exists.  Every model a page loads passes here."""
    if viewer_mode():
        check_store_ref(ref, get_store().root)
    return ref


def viewer_dataset(name: str) -> str:
    """``name`` as given; in viewer mode a DataError for an image folder outside the store (a server path)."""
    if viewer_mode() and dataset_outside(name, get_store().root):
        raise DataError("viewer mode reads only the built-in datasets (digits, ...) and folders in the store: "
                        "pick one of those")  # fmt: skip
    return name


def load_for_display(ref: str) -> LoadedModel:
    """A model loaded for display (cut lists, shapes); shared read-only, never trained (viewer mode: only what
    the store holds, :func:`viewer_ref`)."""
    return _loaded(viewer_ref(ref))


@st.cache_resource(show_spinner=False, max_entries=16)
def _loaded(ref: str) -> LoadedModel:
    return load_model(ref, store=get_store())


def cuts_of(ref: str) -> list[Cut]:
    """The cut points of ``ref`` (see stitchcore.cuts.list_cuts)."""
    return _cuts(viewer_ref(ref))


@st.cache_resource(show_spinner=False, max_entries=16)
def _cuts(ref: str) -> list[Cut]:
    return list_cuts(load_for_display(ref))


@st.cache_resource(show_spinner=False, max_entries=16)
def fingerprint_of(ref: str) -> str:
    """The weights fingerprint of ``ref`` as loaded for display (stitchcore.models.info.weights_fingerprint),
    hashed once per ref, not on every rerun."""
    return weights_fingerprint(load_for_display(ref).model)


def dataset_for_display(name: str) -> ImageDataset:
    """A dataset loaded to check the models' heads against it (shared read-only; viewer mode: no server path)."""
    return _dataset(viewer_dataset(name))


@st.cache_resource(show_spinner=False, max_entries=8)
def _dataset(name: str) -> ImageDataset:
    return load_dataset(name)


def page_setup(title: str) -> None:
    """Every page calls this first: wide layout (set per page: Streamlit 1.67 resets the
    entrypoint's layout when a page runs) and the browser-tab title."""
    st.set_page_config(page_title=f"{title} · StitchLab", page_icon="🧵", layout="wide")


def viewer_mode(*, of_server: bool = False) -> bool:
    """Viewer mode: results are shown, no jobs can be launched (Stop, Re-run and Launch buttons disabled).

    The server's ``STITCHLAB_VIEWER=1``; and, unless ``of_server``, a student's view of a lesson
    (:func:`student_view`), where only the lesson page itself launches what the lesson opens (it asks
    ``of_server=True``): a student cannot stop the run thirty others watch.
    """
    if os.environ.get("STITCHLAB_VIEWER", "").lower() in ("1", "true", "yes"):
        return True
    return not of_server and student_view()


def student_view() -> bool:
    """This page is a lesson followed as a student: ``lessons?lesson=NAME`` without ``view=presenter`` or
    ``view=edit`` (only the lesson page takes ``lesson=``), and in class mode every page of a student's session
    (:mod:`ui.roles`).  app.py then hides the sidebar; the page shows only what the lesson opens."""
    if roles.class_mode() and roles.in_session() and not roles.is_teacher():
        return True
    try:
        params = st.query_params
        return "lesson" in params and params.get("view") not in ("presenter", "edit")
    except Exception:  # noqa: BLE001 - outside a script run (bare mode) there are no query parameters
        return False


def device_label() -> str:
    try:
        return describe_device(pick_device(), threads=get_runner().cpu_threads)
    except StitchError as exc:  # a bad STITCHLAB_DEVICE must not take the app down
        return f"device error: {exc}"
