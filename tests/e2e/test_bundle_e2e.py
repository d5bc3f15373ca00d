"""A bundle carried between two servers in a real browser (issue 13): on one server, pick a matrix run (with
its controls) and a stitch run on Results and download them as one bundle; on a second server with a fresh
store, import it on Results, then open both runs there by permalink, as a shared link would be, and find the
same numbers (the stitch's cards, the matrix's heat-map CSVs byte for byte)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import download, open_app, serve

SLOW = 120_000


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Path, str, str]:
    """A store with two digit CNNs, a 2 x 2 matrix of them with controls, and one stitch: (root, matrix, stitch)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    root = tmp_path_factory.mktemp("bundle-source") / "store"
    with Store(root) as store:
        a, b = (run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
                for s in (0, 1))  # fmt: skip
        matrix = run_experiment("matrix", MatrixSpec(a, b, senders=("block2", "fc1"), receivers=("block2", "fc2"),
                                                     controls=True, max_test=200), store).record  # fmt: skip
        stitch = run_experiment("stitch", StitchSpec(a, b, "block2", "block2", epochs=1, max_test=200), store).record
    assert matrix.summary.get("controls") and stitch.status == "done"
    return root, matrix.id, stitch.id


def _pick(page, run_id: str) -> None:
    box = page.locator('[data-testid="stMultiSelect"]', has_text="Or pick runs by id / label")
    box.locator("input").fill(run_id[:8])
    page.get_by_role("option", name=run_id[:8]).first.click()
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)


def _download(page, label: str, where: Path) -> Path:
    return download(page, page.get_by_role("button", name=label).first, where, timeout=SLOW)


def _numbers(page, base: str, tmp: Path, matrix: str, stitch: str) -> dict[str, str]:
    """The stitch's metric cards and the matrix's heat-map CSVs, each run opened by its permalink."""
    out: dict[str, str] = {}
    tmp.mkdir(exist_ok=True)
    open_app(page, f"{base}/stitch?run={stitch}")
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=SLOW)
    for card in page.locator('[data-testid="stMetric"]').all():
        label = card.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        if label != "Time":
            out[label] = card.locator('[data-testid="stMetricValue"]').inner_text().strip()
    open_app(page, f"{base}/results?run={matrix}")
    page.get_by_text("· matrix · done").first.wait_for(timeout=SLOW)
    for name in ("CSV: Stitching accuracy", "CSV: Control: random sender (accuracy)",
                 "CSV: Control: noise sender (accuracy)", "CSV: Debiased: trained − noise sender"):
        out[name] = _download(page, name, tmp).read_text(encoding="utf-8")
    return out


def test_a_bundle_carries_a_matrix_and_a_stitch_to_another_server(source, page, tmp_path):
    root, matrix, stitch = source
    with serve(root) as first:
        open_app(page, f"{first}/results")
        _pick(page, matrix)
        _pick(page, stitch)
        page.get_by_text("Compare 2 runs").wait_for(timeout=SLOW)
        page.get_by_role("button", name="Download bundle (2 runs)").click()  # makes the zip, then offers it
        bundle = _download(page, "Save bundle (2 runs)", tmp_path)
        before = _numbers(page, first, tmp_path / "before", matrix, stitch)
    assert bundle.suffix == ".zip" and bundle.stat().st_size > 0

    with serve(tmp_path / "fresh-store") as fresh:
        open_app(page, f"{fresh}/results?run={stitch}")
        page.get_by_text(f"No run '{stitch}' in the store").first.wait_for(timeout=SLOW)  # not there yet
        page.get_by_text("Import bundle").first.click()
        page.locator('[data-testid="stFileUploader"] input[type=file]').set_input_files(str(bundle))
        page.get_by_role("button", name="Import", exact=True).click()
        page.get_by_text("Imported 4 runs").first.wait_for(timeout=SLOW)  # the two, and the two zoo models they use
        after = _numbers(page, fresh, tmp_path / "after", matrix, stitch)
    assert after == before, (before, after)
    assert {"Stitched accuracy", "Model B", "CSV: Stitching accuracy", "CSV: Control: noise sender (accuracy)",
            "CSV: Debiased: trained − noise sender"} <= set(after)
