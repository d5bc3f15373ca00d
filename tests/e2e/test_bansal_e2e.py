"""Issue 17 in a real browser: a similarity run of a new measure and a Bansal et al. preset, each opened by
its link in a fresh browser context, draw their figures and say which way is better."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import open_app


@pytest.fixture(scope="module")
def runs(e2e_store):
    """An RSA similarity run of the two digit CNNs and the label-noise preset, in the e2e server's store."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec
    from stitchcore.experiments.trait_presets import run_preset
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    rsa = run_experiment("similarity", SimilaritySpec(refs[0], refs[1], measure="rsa", max_samples=200), store)
    run_preset("label-noise", store, sweeps=[2, 5, 3, 1, 7])  # the 40-epoch panel (the 100-epoch As: minutes)
    return rsa.record


def test_rsa_run_link_draws_its_heat_maps_and_direction(app_url, page, runs):
    open_app(page, f"{app_url}/similarity?run={runs.id}")
    page.locator(".js-plotly-plot", has_text="RSA (Spearman of RDMs), beyond random-init B").first.wait_for(
        timeout=60_000)  # the calibrated map first
    page.get_by_text("raw values and their baselines").click()  # the switch: the values beside their baselines
    page.locator(".js-plotly-plot", has_text="shuffled inputs (baseline)").first.wait_for(timeout=30_000)
    page.get_by_text("higher = more similar · −1 .. 1", exact=False).first.wait_for(timeout=30_000)
    assert page.locator('[data-testid="stException"]').count() == 0


def test_label_noise_preset_link_draws_its_penalty_panel(app_url, page, runs):
    open_app(page, f"{app_url}/traits?preset=label-noise")
    chart = page.locator(".js-plotly-plot", has_text="Penalty of a noisy-label bottom along the cut").first
    chart.wait_for(timeout=60_000)
    for legend in ("A with 50% noisy labels, 40 epochs -> clean B", "clean A (20 epochs) -> clean B",
                   "random-init A -> clean B"):  # the claim's lines and both dashed baselines
        chart.get_by_text(legend, exact=True).wait_for(timeout=30_000)
    waiting = page.get_by_text("Not run yet", exact=False)  # only the 100-epoch panel's noisy As were not run
    waiting.first.wait_for(timeout=30_000)
    assert waiting.count() == 1 and "100 epochs" in waiting.first.inner_text()
    assert "40 epochs" not in waiting.first.inner_text()
    page.get_by_text("Sweep: clean A (20 epochs) → clean B", exact=False).first.wait_for(timeout=30_000)
    assert page.locator('[data-testid="stException"]').count() == 0
