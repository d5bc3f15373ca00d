from tests.e2e.test_similarity_measure_e2e import refs, test_matrix_reopened_shows_the_measure_it_was_launched_with as body  # noqa: F401


def test_twice(app_url, browser, refs):
    for attempt in range(2):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        try:
            body(app_url, page, browser, refs)
            print("attempt", attempt, "passed")
        finally:
            ctx.close()
