"""The Assemble page in a real browser: a run's link in a fresh context draws accuracy vs FLOPs, and a click on
a point opens that assembled network on the Stitch page with its cuts and adapter recipe filled in."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.e2e.conftest import open_app


@pytest.fixture(scope="module")
def assembly(e2e_store):
    """A small assembly of two digit CNNs (one recipe, two receivers) in the e2e server's store."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.assemble import AssembleSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    spec = AssembleSpec(refs[0], refs[1], senders=("block1",), receivers=("block2", "fc1"), kinds=("conv3x3_relu",),
                        resamples=("bilinear",), epochs=2, max_train=400, max_test=150)  # fmt: skip
    return run_experiment("assemble", spec, store).record


def test_assembly_link_draws_and_a_click_opens_the_stitch(app_url, page, assembly):
    open_app(page, f"{app_url}/assemble?run={assembly.id}")
    chart = page.locator(".js-plotly-plot", has_text="accuracy vs FLOPs").first
    chart.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot", has_text="Recipes compared").first.wait_for(timeout=30_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    point = chart.locator(".scatterlayer .trace").first.locator("path.point").first  # the first network's marker
    box = point.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.wait_for_timeout(300)  # plotly picks the hovered point, then the click selects it
    page.mouse.click(x, y)
    page.wait_for_url("**/stitch?**", timeout=60_000)
    query = parse_qs(urlparse(page.url).query)
    cells = {(c["sender"], c["receiver"]) for c in assembly.summary["cells"]}
    assert (query["cut_a"][0], query["cut_b"][0]) in cells, page.url
    assert query["kind"] == ["conv3x3_relu"] and query["resample"] == ["bilinear"] and query["init"] == ["random"]
