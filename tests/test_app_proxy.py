"""The proxy matrix and its ranking in the app: launched from the Similarity page, used on the Assemble page."""

from __future__ import annotations

import ui
from stitchcore.experiments.matrix.recommend import proxy_spec, recommend
from stitchcore.store.results import run_id_for


def _one(value):
    return value[0] if isinstance(value, list) else value


def test_similarity_launches_a_proxy_matrix_and_ranks_its_cells(app):
    at = app.run().switch_page("views/similarity.py").run()
    at.radio(key="sim_mode").set_value("proxy").run()
    assert at.checkbox(key="sim_controls").disabled
    at.checkbox(key="sim_cka").uncheck().run()
    at.button(key="sim_launch").click().run()
    assert not at.exception and not at.error
    run_id = _one(at.query_params["run"])
    assert ui.get_store().lookup(run_id).spec["mode"] == "proxy"
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert at.radio(key="sim_metric").options == ["held-out R² (fit)", "CKA (fit)"]
    assert len(at.get("plotly_chart")) == 1
    assert any(h.value == "Train these first" for h in at.subheader)
    ranked = recommend(ui.get_store().lookup(run_id).summary, top=5)
    lines = [m.value for m in at.markdown if m.value[:3] in {f"{k}. " for k in range(1, 6)}]
    assert lines[0].startswith(f"1. `{ranked[0]['sender']}` → `{ranked[0]['receiver']}`")
    at.radio(key="sim_rank_by").set_value("cka").run()
    by_cka = recommend(ui.get_store().lookup(run_id).summary, by="cka", top=1)[0]
    assert any(m.value.startswith(f"1. `{by_cka['sender']}` → `{by_cka['receiver']}`") for m in at.markdown)


def test_assemble_ranks_the_cut_pairs_and_uses_them(app, trained_store):
    _, refs = trained_store
    at = app
    at.query_params.update({"a": refs[0], "b": refs[1]})
    at.run().switch_page("views/assemble.py").run()
    assert not at.exception and not at.error
    assert any("Train these first" in e.label for e in at.expander)
    at.button(key="asm_rank").click().run()
    run_id = run_id_for("matrix", proxy_spec(refs[0], refs[1]).to_dict())
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"
    at.run()
    top = recommend(ui.get_store().lookup(run_id).summary, top=5)
    assert any(m.value.startswith(f"1. `{top[0]['sender']}`") for m in at.markdown)
    at.button(key="asm_use_ranked").click().run()
    assert not at.exception
    assert set(at.multiselect(key="asm_senders").value) == {c["sender"] for c in top}
    assert set(at.multiselect(key="asm_receivers").value) == {c["receiver"] for c in top}
