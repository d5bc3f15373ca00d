"""The measure launched beside a matrix survives every way back to it: a matrix launched on the Similarity page
with a non-default measure, then opened from Results, by Results' "Open on the Similarity page" link and by its
bare permalink, each in a fresh browser context, shows that measure (its spec does not name it)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.store.results import run_id_for
from tests.e2e.conftest import open_app

MEASURE, TITLE = "procrustes", "Procrustes distance"
# Cuts no other browser test launches a matrix over: on the shared server, a matrix launched again beside another
# measure would open from Results with the measure launched nearest it (similarity_beside), not this one.
SENDERS, RECEIVERS = ("block1", "fc1"), ("fc1", "fc2")  # (checked: the launched matrix is over exactly these)


@pytest.fixture(scope="module")
def refs(e2e_store):
    """The two digit CNNs in the e2e server's store (trained here, or already there)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    try:
        return [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
                for s in (0, 1)]  # fmt: skip
    finally:
        store.close()


def _shows_measure(page) -> None:
    """The similarity panel beside the stitching one is the launched measure's; the form's picker says it too
    (on the Similarity page).  Any visible plot counts (the first match in the page's order may be a panel not
    laid out yet); on failure the page's text is printed."""
    plots = page.locator(".js-plotly-plot")
    try:
        plots.filter(has_text="Stitching accuracy").filter(visible=True).first.wait_for(timeout=60_000)
        plots.filter(has_text=TITLE).filter(visible=True).first.wait_for(timeout=180_000)  # queued after the matrix
    except Exception:
        print(f"[e2e] {page.url}: {plots.count()} plots; the page reads:\n{page.inner_text('body')[:4000]}")
        raise
    assert plots.filter(has_text="Linear CKA").count() == 0


def test_matrix_reopened_shows_the_measure_it_was_launched_with(app_url, page, browser, refs):
    open_app(page, f"{app_url}/similarity?a={refs[0]}&b={refs[1]}")
    page.get_by_text("Choose…").click()  # two cuts a side: seconds
    for label, keep in (("Sender cuts of A", SENDERS), ("Receiver cuts of B", RECEIVERS)):
        box = page.locator('[data-testid="stMultiSelect"]', has_text=label).first
        chips = box.locator("[data-tag]")  # one per picked cut, each with its "Remove NAME" button
        chips.first.wait_for()  # drawn with every cut (counted before they are drawn, none would be removed)
        for name in ("block1", "block2", "flatten", "fc1", "fc2"):
            if name not in keep:
                box.get_by_role("button", name=f"Remove {name}", exact=True).click()
                page.wait_for_timeout(400)
        for _ in range(60):  # the box holds the kept cuts and no other (else the matrix is another one)
            if sorted(c.inner_text().strip() for c in chips.all()) == sorted(keep):
                break
            page.wait_for_timeout(500)
        assert sorted(c.inner_text().strip() for c in chips.all()) == sorted(keep), label
    page.locator('[data-testid="stSelectbox"]', has_text="Measure").click()
    page.get_by_role("option", name=TITLE).click()
    page.get_by_text(f"{TITLE}:").first.wait_for()  # the direction caption under the picker
    page.get_by_role("button", name="Launch").click()
    page.get_by_text("Click a cell of the stitching panel").wait_for(timeout=120_000)
    query = parse_qs(urlparse(page.url).query)
    run_id, cka_id = query["run"][0], query["cka"][0]
    spec = MatrixSpec(refs[0], refs[1], senders=SENDERS, receivers=RECEIVERS)
    assert run_id == run_id_for("matrix", spec.to_dict()), "the matrix launched is not over the chosen cuts"
    _shows_measure(page)

    def fresh(url: str):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        pg.set_default_timeout(60_000)
        open_app(pg, url)
        return context, pg

    context, pg = fresh(f"{app_url}/results?run={run_id}")  # from Results
    try:
        link = pg.get_by_role("link", name="Open on the Similarity page")  # the similarity run Results found
        link.first.wait_for(timeout=60_000)
        href = link.get_attribute("href")
        assert href.endswith(f"similarity?run={run_id}&cka={cka_id}"), href
        _shows_measure(pg)
    finally:
        context.close()
    for url in (href, f"{app_url}/similarity?run={run_id}"):  # Results' link, and the bare permalink
        context, pg = fresh(url if url.startswith("http") else f"{app_url}/{url.rsplit('/', 1)[-1]}")
        try:
            _shows_measure(pg)
            picker = pg.locator('[data-testid="stSelectbox"]', has_text="Measure").first
            shown = picker.inner_text() + " ".join(i.input_value() for i in picker.locator("input").all())
            assert TITLE in shown, shown
        finally:
            context.close()
