"""Every number with its uncertainty, by link in a fresh browser: a stitch trained over two seeds with a
validation split shows its test-image intervals (caption and error bars), its spread over seeds and what the
curve watched; a similarity run shows its map calibrated against random-init Bs, then its raw maps."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import open_app


@pytest.fixture(scope="module")
def runs(e2e_store):
    """A stitch (2 seeds, keep best) and a similarity run of two digit CNNs, stored in the e2e server's store."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    stitch = run_experiment("stitch", StitchSpec(refs[0], refs[1], "block2", "block2", epochs=3, seeds=2,
                                                 keep="best"), store).record  # fmt: skip
    sim = run_experiment("similarity", SimilaritySpec(refs[0], refs[1], senders=("block1", "fc2"),
                                                      receivers=("block1", "fc2")), store).record  # fmt: skip
    return stitch, sim


def test_a_stitch_link_shows_its_intervals_seeds_and_validation(app_url, page, runs):
    stitch, _ = runs
    s = stitch.summary
    open_app(page, f"{app_url}/stitch?run={stitch.id}")
    page.get_by_text("95% intervals over the 450 test images").wait_for(timeout=120_000)
    page.get_by_text(f"Across 2 seeds ({s['seeds']['seed'][0]}, {s['seeds']['seed'][1]}").wait_for()
    page.get_by_text("135 training images held out as validation").wait_for()
    page.get_by_text(f"kept the adapter of epoch {s['kept_epoch']}").wait_for()
    bars = page.locator(".js-plotly-plot", has_text="Stitched vs base accuracy").first
    bars.wait_for(timeout=60_000)
    errors = bars.evaluate("el => el.data.filter(t => t.type === 'bar').map(t => t.error_y && t.error_y.array)")
    assert len(errors) == 3 and all(e and e[0] > 0 for e in errors)  # A, B and the stitched model
    per_class = page.locator(".js-plotly-plot", has_text="Per-class accuracy").first
    spans = per_class.evaluate("el => el.data.map(t => t.error_y && t.error_y.array)")
    assert len(spans) == 3 and all(len(a) == 10 for a in spans)  # every class of every model: its own interval
    curve = page.locator(".js-plotly-plot", has_text="validation accuracy").first
    curve.wait_for(timeout=60_000)  # the live curve watched the validation images, not the test images
    if os.environ.get("STITCHLAB_SHOTS"):
        page.screenshot(path=f"{os.environ['STITCHLAB_SHOTS']}/stitch-intervals.png", full_page=True)


def test_a_similarity_link_shows_the_untrained_b_null(app_url, page, runs):
    _, sim = runs
    null = sim.summary["random_null"]
    open_app(page, f"{app_url}/similarity?run={sim.id}")
    page.get_by_text("Untrained Bs (zoo:").wait_for(timeout=120_000)
    page.get_by_text("Against 5 random-init Bs (B's architecture, no training)").first.wait_for()
    chart = page.locator(".js-plotly-plot", has_text="beyond random-init B").first  # the calibrated map first
    chart.wait_for(timeout=60_000)
    z = chart.evaluate("el => el.data.find(t => t.name === 'values').z")
    assert [v for row in z for v in row] == pytest.approx([v for row in null["calibrated"] for v in row], abs=1e-6)
    bar = chart.evaluate("el => el.data.find(t => t.name === 'values').colorbar.title.text")
    assert bar.startswith("sds vs random-init B") and "untrained B" in bar  # the colour bar says which map it is
    page.get_by_text("raw values and their baselines").click()  # the switch: the values beside their nulls
    chart = page.locator(".js-plotly-plot", has_text="A against an untrained B").first
    chart.wait_for(timeout=60_000)
    z = chart.evaluate("el => el.data.find(t => t.name === 'values').z")
    assert [v for row in z for v in row] == pytest.approx([v for row in null["values"] for v in row], abs=1e-6)
    bar = chart.evaluate("el => el.data.find(t => t.name === 'values').colorbar.title.text")
    assert "more similar" in bar  # the colour bar says which way is more similar
    if os.environ.get("STITCHLAB_SHOTS"):
        page.screenshot(path=f"{os.environ['STITCHLAB_SHOTS']}/similarity-untrained.png", full_page=True)
