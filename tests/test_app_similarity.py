"""The Similarity page through AppTest: launch a matrix with controls and CKA, see the heat maps."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

import ui
from tests.conftest import ROOT


def test_launch_matrix_with_controls_and_cka_then_permalink(app):
    at = app.run().switch_page("views/similarity.py").run()
    assert not at.exception and not at.error
    at.checkbox(key="sim_controls").check().run()
    at.button(key="sim_launch").click().run()
    run_id, cka_id = at.query_params["run"], at.query_params["cka"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    cka_id = cka_id[0] if isinstance(cka_id, list) else cka_id
    runner = ui.get_runner()
    assert runner.wait(run_id, timeout=180).state == "done"
    assert runner.wait(cka_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and not at.error
    charts = at.get("plotly_chart")
    assert len(charts) == 5, "accuracy, control, debiased, CKA, CKA baseline"
    assert any("skipped" in e.label for e in at.expander)
    # the permalink in a fresh session shows the same panels and fills the form
    # (AppTest does not follow st.switch_page from the router; the real browser test does)
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update({"run": run_id, "cka": cka_id})
    fresh.run().switch_page("views/similarity.py").run()
    assert not fresh.exception
    assert fresh.checkbox(key="sim_controls").value is True
    assert len(fresh.get("plotly_chart")) == 5
