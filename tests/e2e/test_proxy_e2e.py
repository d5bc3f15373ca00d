"""A proxy matrix in a real browser: opened by its link in a fresh context, it shows the held-out R² panel and
"Train these first"; a pair's "Train it on the Stitch page" link opens that pair, its cuts filled in."""

from __future__ import annotations

import pytest

from stitchcore.experiments.matrix.recommend import proxy_spec, recommend
from tests.e2e.conftest import open_app


@pytest.fixture(scope="module")
def proxy_run(e2e_store):
    """The two digit CNNs and their proxy matrix (every cut), in the e2e server's store."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    try:
        refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
                for s in (0, 1)]  # fmt: skip
        return run_experiment("matrix", proxy_spec(refs[0], refs[1]), store).record
    finally:
        store.close()


def test_a_proxy_matrix_link_ranks_the_pairs_and_opens_one_on_stitch(app_url, page, proxy_run):
    open_app(page, f"{app_url}/similarity?run={proxy_run.id}")
    page.locator(".js-plotly-plot", has_text="Held-out R² of each cell's linear fit").first.wait_for(timeout=90_000)
    page.get_by_text("Train these first", exact=True).wait_for()
    top = recommend(proxy_run.summary, top=1)[0]
    first = page.get_by_text(f"{top['sender']} → {top['receiver']}").first  # the markdown's code spans
    first.wait_for()
    assert page.get_by_text("Stitching accuracy").count() == 0  # a proxy matrix scores nothing
    page.get_by_role("link", name="Train it on the Stitch page").first.click()
    page.wait_for_url(lambda url: "/stitch" in url and f"cut_a={top['sender']}" in url, timeout=60_000)
    page.get_by_text("Stitch two models", exact=True).first.wait_for(timeout=60_000)
    assert f"cut_b={top['receiver']}" in page.url
