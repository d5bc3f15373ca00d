"""The one package that imports both Streamlit and stitchcore, by role:

- :mod:`ui.resources`: the process-wide store and job runner, models and datasets loaded for display
  (``st.cache_resource``), page setup, viewer mode, the device line
- :mod:`ui.forms`: model and dataset pickers, the dataset-fits-the-heads check, the Launch button
- :mod:`ui.estimates`: how long a run takes, above its Launch button
- :mod:`ui.runs`: the sidebar job monitor, run links, the live run view and header, progress with Stop
- :mod:`ui.figures`: charts with the house toolbar and CSV, live figures shared across sessions
- :mod:`ui.downloads`: a run's CSV, JSON, bundle and report downloads
- :mod:`ui.reproduce`: "Copy as Python" and "Copy as CLI": the call and the command line that make a run again
- :mod:`ui.errors`: one red line per error (``show_error``)
- :mod:`ui.text`: text from a link, a bundle, a file name or an error shown as text (``plain``, ``code_span``),
  never as Markdown or HTML; figures' markup held to the house tags (``ui.figures.shown_figure``)
- :mod:`ui.nav`: the one table of pages and the page for each run kind
- :mod:`ui.roles`: class mode's teacher and students, asked by every path that writes
- :mod:`ui.classroom`: a lesson step's runs for a class (students' variants held to caps, the presenter's list)
- :mod:`ui.serving`: the address other machines reach this server at (students' links, their QR code)

Pages turn widgets into specs and call these helpers (``import ui; ui.get_store()``); they never train.
ui never imports the pages (views/): a view that ui draws is passed in by its caller.  To replace a name
in a test, patch the submodule that uses it (``ui.estimates.estimate_seconds``), not this re-export.
"""

from ui import roles
from ui.downloads import bundle_bytes, made_download, run_downloads
from ui.errors import show_error
from ui.estimates import show_estimate, show_plan_estimate
from ui.figures import CHART_CONFIG, chart, live_figure, shown_figure
from ui.forms import CUSTOM_REF, dataset_fit, hold_cut_set, launch_button, pick_cut_set, pick_dataset, pick_model
from ui.nav import PAGE_FOR_KIND, PAGE_TITLES, follow_deep_link, page_file
from ui.resources import (
    POLL_SECONDS,
    cuts_of,
    device_label,
    fingerprint_of,
    get_runner,
    get_store,
    load_for_display,
    page_setup,
    server_runner,
    student_view,
    viewer_mode,
    viewer_ref,
)
from ui.runs import (
    Card,
    job_monitor,
    linked_run,
    live_run,
    live_while_running,
    progress_text,
    progress_with_stop,
    rerun_when_jobs_finish,
    run_header,
    run_link,
    run_view,
    watch_kind,
)
from ui.text import code_span, plain, quote

__all__ = [
    "CHART_CONFIG",
    "CUSTOM_REF",
    "PAGE_FOR_KIND",
    "PAGE_TITLES",
    "POLL_SECONDS",
    "Card",
    "bundle_bytes",
    "chart",
    "code_span",
    "cuts_of",
    "dataset_fit",
    "hold_cut_set",
    "device_label",
    "fingerprint_of",
    "follow_deep_link",
    "get_runner",
    "get_store",
    "job_monitor",
    "launch_button",
    "live_figure",
    "linked_run",
    "live_run",
    "live_while_running",
    "load_for_display",
    "made_download",
    "page_file",
    "page_setup",
    "pick_cut_set",
    "pick_dataset",
    "pick_model",
    "plain",
    "progress_text",
    "progress_with_stop",
    "quote",
    "rerun_when_jobs_finish",
    "roles",
    "run_downloads",
    "run_header",
    "run_link",
    "run_view",
    "server_runner",
    "show_error",
    "show_estimate",
    "show_plan_estimate",
    "shown_figure",
    "student_view",
    "viewer_mode",
    "viewer_ref",
    "watch_kind",
]
