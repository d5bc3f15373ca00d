"""The Settings page through AppTest: where jobs run.  A cluster that cannot be reached is never saved;
a Ray started on the server is, and a matrix launched from the Similarity page then runs there."""

from __future__ import annotations

import json

from ray_helpers import RAY_ENV, free_port

import ui
from stitchcore.experiments.jobs import SETTINGS_FILE, JobRunner


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


def test_a_matrix_launched_in_the_browser_runs_on_the_saved_ray(app, monkeypatch):
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)  # the job worker process and the probe inherit them
    at = _settings(app)
    at.radio(key="settings_backend").set_value("ray")
    at.number_input(key="settings_retries").set_value(1)
    at.button[0].click().run()  # Save: probes a Ray started here first
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Saved" in s.value for s in at.success) and any("1 node(s)" in s.value for s in at.success)
    runner = ui.get_runner()
    assert runner.options.backend == "ray" and runner.options.max_retries == 1
    saved = json.loads((ui.get_store().root / SETTINGS_FILE).read_text())["backend"]
    assert saved["backend"] == "ray" and saved["address"] is None
    assert runner.options_for("stitch") is None and runner.options_for("matrix") == runner.options

    sim = app.switch_page("views/similarity.py").run()
    sim.radio(key="sim_cutset").set_value("choose").run()
    sim.multiselect(key="sim_cuts_a").set_value(["block2", "fc1"]).run()
    sim.multiselect(key="sim_cuts_b").set_value(["fc1", "fc2"]).run()
    sim.button(key="sim_launch").click().run()
    run_id = sim.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    snap = runner.wait(run_id, timeout=240)
    assert snap.state == "done", snap.error
    assert snap.summary["backend"]["name"] == "ray" and sum(n["cells"] for n in snap.summary["nodes"].values()) == 4
    sim.run()
    assert not sim.exception and not sim.error
    assert any("Computed on a Ray started on the server: 1 node" in c.value for c in sim.caption)
    # the next server on this store starts with the saved setting
    other = JobRunner(ui.get_store(), devices=["cpu"])
    try:
        assert other.options.backend == "ray" and other.options.max_retries == 1
    finally:
        other.shutdown()
