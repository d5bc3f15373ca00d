"""Settings: where this server's jobs run (on the server itself, or as tasks on a Ray cluster), and the experiment
tracker finished runs are logged to."""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.backends import BACKENDS, RunOptions, probe_cluster
from stitchcore.backends.settings import save_tracker, saved_tracker
from stitchcore.errors import StitchError
from stitchcore.experiments import get_experiment, list_experiments
from stitchcore.report.trackers import need_package, parse_target
from ui import roles

ui.page_setup("Settings")
st.title("Settings")

runner = ui.get_runner()
now = runner.options
NAMES = {"local": "This server", "ray": "A Ray cluster"}
WHAT = {"matrix": "matrices", "assemble": "assemblies", "sweep": "trait sweeps", "lmdepth": "LM depth sweeps"}
spread = [k for k in (*WHAT, *list_experiments()) if "ray" in get_experiment(k).backends]
kinds = ", ".join(WHAT.get(k, k) for k in dict.fromkeys(spread))


def now_words(options: RunOptions) -> str:
    if options.backend == "local":
        return f"Now: **{NAMES['local']}**"
    gpus = f" and {options.gpus_per_task:g} GPU" if options.gpus_per_task else ""
    return (f"Now: **{NAMES['ray']}** — {ui.plain(options.describe())}, {options.task_threads} CPU thread(s){gpus} "
            f"per task, {options.max_retries} retries")

st.subheader("Where jobs run")
st.markdown(
    f"{kinds[0].upper()}{kinds[1:]} cut their work into independent tasks (a receiver,"
    " a sender, a position, a depth). On a Ray cluster those tasks run side by side on its machines and GPUs;"
    " this server still keeps every result. Other runs always run on this server. The choice never changes a"
    " result or its link."
)
now_box = st.empty()  # filled at the end: a Save below changes it
now_box.info(now_words(now))

if ui.viewer_mode():
    st.caption("Viewer mode: settings are shown, not changed.")
    st.stop()

with st.form("backend-settings"):
    backend = st.radio("Backend", BACKENDS, index=BACKENDS.index(now.backend), format_func=NAMES.get,
                       horizontal=True, key="settings_backend")  # fmt: skip
    address = st.text_input(
        "Cluster address", value=now.address or "", placeholder="HOST:6379 — empty: start Ray on this server",
        help="The address `ray start --head` printed (HOST:PORT), `auto` for the cluster this machine is part of,"
             " or empty to start Ray here with this server's CPUs.", key="settings_address")  # fmt: skip
    left, mid, right = st.columns(3)
    threads = left.number_input("CPU threads per task", min_value=1, max_value=64, value=now.task_threads,
                                key="settings_threads")  # fmt: skip
    gpus = mid.number_input("GPUs per task", min_value=0.0, max_value=8.0, value=float(now.gpus_per_task), step=0.25,
                            help="0: CPU tasks. 0.25 puts four small-model tasks on one GPU; 1 for ResNet-50-class"
                                 " models.", key="settings_gpus")  # fmt: skip
    retries = right.number_input("Retries after a worker dies", min_value=0, max_value=10, value=now.max_retries,
                                 key="settings_retries")  # fmt: skip
    save_col, test_col, _ = st.columns([1, 1, 4])
    save = save_col.form_submit_button("Save", type="primary")
    test = test_col.form_submit_button("Test connection")

if (save or test) and not roles.refuse("settings"):
    try:
        options = RunOptions(backend, address if backend == "ray" else None, int(threads), float(gpus), int(retries))
        info = None
        if backend == "ray" and (test or options.address):  # an address that does not answer is never saved
            with st.spinner(f"Connecting to {ui.plain(options.describe())} (a few seconds)…"):
                info = probe_cluster(options.address)
            if options.gpus_per_task > info["gpus"]:
                raise StitchError(f"the cluster has {info['gpus']:g} GPU(s); tasks asking {options.gpus_per_task:g}"
                                  " GPU each would never start: set GPUs per task to 0 or add GPU nodes")
    except StitchError as exc:
        ui.show_error(exc)
    else:
        if info is not None:
            st.success(f"Reached {ui.plain(options.describe())}: {len(info['nodes'])} node(s), {info['cpus']:g} CPUs,"
                       f" {info['gpus']:g} GPUs.")
            st.markdown("\n".join(f"- {ui.code_span(n['node'][:12])} on **{ui.plain(n['host'])}**: {n['cpus']:g} CPUs, "
                                  f"{n['gpus']:g} GPUs"
                                  + ("" if n["alive"] else " (not alive)") for n in info["nodes"]))
        elif test:
            st.success("This server runs the jobs itself; there is nothing to connect to.")
        elif backend == "ray":
            st.caption("Ray starts on this server with the first job that uses it (a few seconds); Test connection"
                       " tries it now.")
        if save:
            was_up = runner.local_ray().up
            with st.spinner("Saving…" if not was_up or options.local_ray else "Stopping the Ray on this server…"):
                runner.set_options(options)  # a Ray started here that is no longer used stops (if idle)
            now_box.info(now_words(options))
            st.success(f"Saved. The next {kinds} run on {NAMES[backend][0].lower()}{NAMES[backend][1:]};"
                       " queued jobs keep the setting they were submitted with."
                       + (" The Ray started on this server is stopped (its memory is free again)."
                          if was_up and not runner.local_ray().up else ""))  # fmt: skip


def _stop_ray() -> None:
    """Button callback: cancel the jobs running on the Ray started here; it stops as they end."""
    if roles.refuse("settings"):
        return
    st.session_state["_settings_ray_stopping"] = runner.stop_local_ray(cancel_jobs=True).up


@st.fragment(run_every=2.0 if runner.local_ray().lingering else None)
def ray_left_up() -> None:
    """A Ray started on this server that the setting no longer uses but that a running job still holds: say so,
    with a button that stops it now; redrawn every 2 s while it is up."""
    state = runner.local_ray()
    if not state.lingering:
        if st.session_state.pop("_settings_ray_stopping", None) is not None:
            st.success("The Ray started on this server is stopped (its memory is free again).")
        return
    jobs = ui.plain("; ".join(j.label for j in state.busy))
    st.warning("A Ray started on this server is still up (its processes hold about 2 GB) although the setting no "
               "longer uses it: " + (f"{len(state.busy)} job(s) still run on it ({jobs}). It stops when they end."
                                     if state.busy else "it stops when the job running now ends."))  # fmt: skip
    if st.session_state.get("_settings_ray_stopping") is not None:
        st.caption("Stopping: the jobs on it are cancelled (their finished cells are kept); Ray stops as they end.")
    st.button("Stop it now" + (" (cancels those jobs)" if state.busy else ""), key="settings_stop_ray",
              on_click=_stop_ray, icon=":material/stop_circle:")


ray_left_up()

st.subheader("Experiment tracker")
st.markdown("With a tracker saved here, each run that finishes on this server is also logged to MLflow or "
            "TensorBoard: its spec as parameters, its curves as step metrics, its numbers with their 95% intervals, "
            "its report and figures as artifacts. The same as `--log-to` on the command line and `log_to=` in "
            "Python.")
tracker_now = saved_tracker(ui.get_store().root)
st.info(f"Now: **{ui.plain(tracker_now)}**" if tracker_now else "Now: **not logged** to a tracker")
with st.form("tracker-settings"):
    target = st.text_input("Log finished runs to", value=tracker_now or "", key="settings_log_to",
                           placeholder="mlflow:/path/to/mlruns, mlflow:http://server:5000 or tensorboard:/path/to/tb",
                           help="a folder on this server (made if missing); empty: log nowhere")  # fmt: skip
    save_tracker_now = st.form_submit_button("Save tracker")
if save_tracker_now and not roles.refuse("settings"):
    try:
        chosen = target.strip() or None
        if chosen is not None:
            tracker, _ = parse_target(chosen)
            need_package(tracker)  # a tracker whose package is missing is refused now, not at the first run
        save_tracker(ui.get_store().root, chosen)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.success(f"Saved: runs that finish from now on are logged to {ui.plain(chosen)}." if chosen
                   else "Saved: runs are no longer logged to a tracker.")
