"""The one package that imports both Streamlit and stitchcore, by role:

- :mod:`ui.resources`: the process-wide store and job runner, models and datasets loaded for display
  (``st.cache_resource``), page setup, viewer mode, the device line
- :mod:`ui.forms`: model and dataset pickers, the dataset-fits-the-heads check, the Launch button
- :mod:`ui.estimates`: how long a run takes, above its Launch button
- :mod:`ui.runs`: the sidebar job monitor, run links, the live run view and header, progress with Stop
- :mod:`ui.figures`: charts with the house toolbar and CSV, live figures shared across sessions
- :mod:`ui.downloads`: a run's CSV, JSON, bundle and report downloads
- :mod:`ui.errors`: one red line per error (``show_error``), Markdown escaping
- :mod:`ui.nav`: the one table of pages and the page for each run kind

Pages turn widgets into specs and call these helpers (``import ui; ui.get_store()``); they never train.
ui never imports the pages (views/): a view that ui draws is passed in by its caller.  To replace a name
in a test, patch the submodule that uses it (``ui.estimates.estimate_seconds``), not this re-export.
"""

from ui.downloads import bundle_bytes, made_download, run_downloads
from ui.errors import md_text, show_error
from ui.estimates import show_estimate, show_plan_estimate
from ui.figures import CHART_CONFIG, chart, live_figure
from ui.forms import CUSTOM_REF, dataset_fit, launch_button, pick_dataset, pick_model
from ui.nav import PAGE_FOR_KIND, PAGE_TITLES, follow_deep_link
from ui.resources import (
    POLL_SECONDS,
    cuts_of,
    device_label,
    get_runner,
    get_store,
    load_for_display,
    page_setup,
    viewer_mode,
)
from ui.runs import (
    job_monitor,
    live_while_running,
    progress_text,
    progress_with_stop,
    rerun_when_jobs_finish,
    run_header,
    run_link,
    run_view,
    watch_kind,
)

__all__ = [
    "get_store",
    "get_runner",
    "page_setup",
    "load_for_display",
    "cuts_of",
    "pick_model",
    "pick_dataset",
    "dataset_fit",
    "launch_button",
    "show_estimate",
    "show_plan_estimate",
    "rerun_when_jobs_finish",
    "progress_with_stop",
    "progress_text",
    "viewer_mode",
    "device_label",
    "job_monitor",
    "live_while_running",
    "run_link",
    "follow_deep_link",
    "run_view",
    "run_header",
    "watch_kind",
    "run_downloads",
    "made_download",
    "bundle_bytes",
    "chart",
    "live_figure",
    "CHART_CONFIG",
    "CUSTOM_REF",
    "PAGE_FOR_KIND",
    "PAGE_TITLES",
    "show_error",
    "md_text",
    "POLL_SECONDS",
]
