"""A lesson in a real browser: a student's link opened in a fresh context shows the step and its result with no
sidebar and only the controls the lesson opens; Next steps through; changing an open control runs it beside
the lesson's own; a link's values outside the open ranges are clamped with a note; the presenter's view has the
steps' states and the students' link."""

from __future__ import annotations

from tests.e2e.conftest import open_app

STEP_1 = "lessons?lesson=two-seeds&step=1"


def _settled(page) -> None:
    """Wait until Streamlit has finished the script run (a finished run reruns the page once)."""
    page.wait_for_timeout(700)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)


def _no_sidebar(page) -> None:
    assert page.locator('[data-testid="stSidebar"]').count() == 0
    assert page.locator('[data-testid="stSidebarNav"]').count() == 0
    assert page.get_by_role("link", name="Stitch", exact=True).count() == 0  # no other page to wander to


def test_a_student_follows_a_lesson_by_link_and_changes_an_open_control(app_url, page):
    open_app(page, f"{app_url}/{STEP_1}")
    page.get_by_text("1. Two networks, two seeds").wait_for()
    page.get_by_text("Test accuracy", exact=True).wait_for(timeout=120_000)  # step 1's model, trained once (or stored)
    _settled(page)
    _no_sidebar(page)
    page.get_by_role("button", name="Next").first.click()
    page.wait_for_url(lambda url: "step=2" in url)
    page.get_by_text("2. Join A's bottom to B's top").wait_for()
    page.get_by_text("Stitched accuracy").first.wait_for(timeout=120_000)
    _settled(page)
    _no_sidebar(page)
    # only what the step opens: one slider (epochs) and one select box (A's cut); nothing else to set or launch
    assert page.locator('[data-testid="stSlider"]').count() == 1
    assert page.locator('[data-testid="stSelectbox"]').count() == 1
    assert page.get_by_text("Learning rate").count() == 0 and page.get_by_role("button", name="Launch").count() == 0
    assert page.get_by_role("button", name="Stop").count() == 0 or page.get_by_role("button", name="Stop").is_disabled()
    page.locator('[data-testid="stSelectbox"]').click()
    page.get_by_role("option", name="block1").click()
    page.get_by_role("button", name="Run with these values").click()
    page.wait_for_url(lambda url: "cut_a=block1" in url and "step=2" in url)
    page.get_by_text("Your run (Cut in A = block1)").wait_for()
    page.get_by_text("The lesson's run", exact=True).first.wait_for()
    page.wait_for_function(  # both results drawn side by side: the lesson's and the student's
        "() => [...document.querySelectorAll('[data-testid=\"stMetricLabel\"]')]"
        ".filter(e => e.innerText.includes('Stitched accuracy')).length >= 2", timeout=120_000)
    page.get_by_role("button", name="Next").first.click()
    page.wait_for_url(lambda url: "step=3" in url and "cut_a" not in url)  # a step's values stay with it
    page.get_by_text("3. Along the whole depth").wait_for()
    _settled(page)  # step 2's buttons stay on the page until step 3's script run has drawn over them
    assert page.get_by_role("button", name="Next").count() == 0  # the last step


def test_a_link_outside_the_open_ranges_is_clamped_with_a_note(app_url, page):
    open_app(page, f"{app_url}/lessons?lesson=two-seeds&step=2&epochs=99&lr=5")
    page.get_by_text("Adapter training epochs 99 is outside 0 to 10: using 10").wait_for()  # the control by its label
    page.get_by_text("lr is not open in this step: ignored").wait_for()
    page.get_by_text("Your run (Adapter training epochs = 10)").wait_for()
    assert page.get_by_text("lr =").count() == 0  # the hidden learning rate was never set


def test_the_presenter_sees_every_step_and_the_students_link(app_url, page):
    open_app(page, f"{app_url}/lessons?lesson=similar-is-not-the-same&step=1&view=presenter")
    page.get_by_role("button", name="Compute all steps").wait_for()
    page.get_by_text("Students' link").first.wait_for()
    assert "/lessons?lesson=similar-is-not-the-same&step=1" in page.locator('[data-testid="stCode"]').first.inner_text()
    assert page.locator('[data-testid="stSidebar"]').count() == 1  # the teacher keeps the app around the lesson
    page.get_by_role("button", name="3. Can one layer do the other's job?").click()
    page.wait_for_url(lambda url: "step=3" in url and "view=presenter" in url)
    page.get_by_text("Stitching accuracy").first.wait_for(timeout=120_000)  # the matrix, CKA beside it
