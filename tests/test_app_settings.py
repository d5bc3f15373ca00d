"""The Settings page through AppTest: where jobs run.  A cluster that cannot be reached is never saved; a
saved setting is the next server's.  (tests/e2e/test_settings_e2e.py switches a real server to Ray and
runs a matrix there from the browser.)"""

from __future__ import annotations

import json
import time

import ui
from stitchcore.backends import RunOptions
from stitchcore.backends.settings import SETTINGS_FILE
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.jobs import JobRunner
from tests.ray_helpers import free_port, ray_env, ray_nodes_below


def _settings(app):
    at = app.run().switch_page("views/settings.py").run()
    assert not at.exception and not at.error
    return at


def test_an_address_nothing_answers_is_refused_and_not_saved(app):
    at = _settings(app)
    assert "This server" in at.info[0].value
    at.radio(key="settings_backend").set_value("ray")
    at.text_input(key="settings_address").set_value(f"127.0.0.1:{free_port()}")
    at.button[0].click().run()  # Save
    assert at.error and "nothing answers" in at.error[0].value
    assert ui.get_runner().options.backend == "local"
    assert not (ui.get_store().root / SETTINGS_FILE).exists()


def test_a_saved_setting_is_what_the_next_server_on_the_store_starts_with(app):
    at = _settings(app)
    at.number_input(key="settings_retries").set_value(4)
    at.button[0].click().run()  # Save "This server": nothing to connect to
    assert not at.exception and not at.error
    assert any("Saved" in s.value for s in at.success) and "This server" in at.info[0].value
    runner = ui.get_runner()
    assert runner.options.max_retries == 4 and runner.options_for("matrix") == runner.options
    runner.set_options(RunOptions("ray", "10.0.0.5:6379"), save=False)  # (nothing connects until a job runs)
    assert runner.options_for("stitch") is None and runner.options_for("sweep").backend == "ray"  # stitch: local
    assert json.loads((ui.get_store().root / SETTINGS_FILE).read_text())["backend"]["max_retries"] == 4
    other = JobRunner(ui.get_store(), devices=["cpu"])
    try:
        assert other.options == RunOptions(max_retries=4)
    finally:
        other.shutdown()


def test_with_ray_set_the_estimate_says_it_is_this_machines_time(app):
    """Set to Ray, a matrix's estimate is still this machine's time and says the cluster runs its parts
    side by side; a stitch or a char-GPT's training (they run here whatever the setting) says nothing of
    the cluster."""
    import time

    at = app.run()
    ui.get_runner().set_options(RunOptions("ray", "10.0.0.5:6379"), save=False)  # (no job: nothing connects)

    def estimate(page: str) -> str:
        view = at.switch_page(page).run()
        deadline = time.monotonic() + 120
        while not any("About" in c.value for c in view.caption):
            assert time.monotonic() < deadline, [c.value for c in view.caption]
            time.sleep(0.5)
            view.run()
        return next(c.value for c in view.caption if "About" in c.value)

    assert "on this machine; the Ray cluster runs its parts side by side" in estimate("views/similarity.py")
    assert "Ray" not in estimate("views/stitch.py")
    assert "Ray" not in estimate("views/language.py")  # a char-GPT's training is a zoo job


def _wait(condition, what: str, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_a_ray_started_here_stops_when_the_setting_goes_back_to_this_server(app):
    """Switching back to "This server" stops the Ray the jobs started here (idle: at once); one that a job
    still runs on is said to be up, with a Stop button that cancels the job, and stops as the job ends."""
    with ray_env():
        at = _settings(app)
        runner = ui.get_runner()

        def save(backend: str) -> None:
            at.radio(key="settings_backend").set_value(backend)
            at.button[0].click().run()  # Save
            assert not at.exception and not at.error

        save("ray")
        small = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=("fc1",), receivers=("fc2",), max_test=100)
        assert runner.wait(runner.submit("matrix", small).id, timeout=300).state == "done"
        (worker,) = [w for w in runner._workers if w.pid]  # the job's worker process holds the Ray it started
        assert runner.local_ray().up and ray_nodes_below(worker.pid)
        save("local")  # idle: stopped at once
        assert any("Ray started on this server is stopped" in s.value for s in at.success)
        assert not runner.local_ray().up and not ray_nodes_below(worker.pid) and not at.warning

        save("ray")
        long = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", mode="trained", epochs=200, seed=1)
        job = runner.submit("matrix", long)
        _wait(lambda: ray_nodes_below(worker.pid) and runner.get(job.id).state == "running", "the job on Ray")
        save("local")  # a job runs on it: it stays up, and the page says so
        state = runner.local_ray()
        assert state.lingering and [j.id for j in state.busy] == [job.id] and ray_nodes_below(worker.pid)
        assert any("still up" in w.value and "1 job(s) still run on it" in w.value for w in at.warning)
        at.button(key="settings_stop_ray").click().run()
        assert runner.wait(job.id, timeout=120).state == "cancelled"
        _wait(lambda: not runner.local_ray().up and not ray_nodes_below(worker.pid), "Ray stopped after the job")
        at.run()
        assert not at.warning and any("is stopped" in s.value for s in at.success)


def test_a_saved_tracker_logs_each_run_that_finishes_on_the_server(app, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from stitchcore.backends.settings import saved_tracker
    from stitchcore.experiments.stitch import StitchSpec

    at = _settings(app)
    at.text_input(key="settings_log_to").set_value("wandb:somewhere")
    at.button(key="FormSubmitter:tracker-settings-Save tracker").click().run()
    assert at.error and "log to mlflow:DIR or tensorboard:DIR" in at.error[0].value
    assert saved_tracker(ui.get_store().root) is None  # refused: nothing saved
    at.text_input(key="settings_log_to").set_value(f"tensorboard:{tmp_path / 'tb'}")
    at.button(key="FormSubmitter:tracker-settings-Save tracker").click().run()
    assert not at.error and any("logged to tensorboard:" in s.value for s in at.success)
    assert saved_tracker(ui.get_store().root) == f"tensorboard:{tmp_path / 'tb'}"
    runner = JobRunner(ui.get_store(), devices=["cpu"])  # as the app's: the listener the server adds
    runner.add_listener(ui.resources.log_finished_runs(ui.get_store()))
    try:
        spec = StitchSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="block1", cut_b="block1", epochs=1)
        job = runner.submit("stitch", spec)
        assert runner.wait(job.id, timeout=120).state == "done"
    finally:
        runner.shutdown()
    folder = tmp_path / "tb" / job.id
    for _ in range(200):  # logged in a thread of its own, after the job ended
        if (folder / "artifacts" / f"stitchlab-{job.id}.html").is_file():
            break
        time.sleep(0.1)
    events = EventAccumulator(str(folder))
    events.Reload()
    assert "final/accuracy" in events.Tags()["scalars"] and "loss" in events.Tags()["scalars"]
