"""Every bad link a page takes says what is wrong on the page (an error, a warning or a note naming it), never a
traceback, and launches nothing: one table over the pages' URL parameters, each opened in a fresh session."""

from __future__ import annotations

import pytest

import ui

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
NO_RUN = "deadbeefdeadbeef"

# (id, page, query, what the page must say: a substring of its errors, warnings and notes)
URLS = [
    ("stitch-unknown-model", "stitch", {"a": "zoo:cnn-digits-s9", "b": B}, "zoo:cnn-digits-s9 is not in the store"),
    ("stitch-scheme-typo", "stitch", {"a": "tim:resnet18", "b": B}, "did you mean timm:"),
    ("stitch-cut-not-there", "stitch", {"a": A, "b": B, "cut_a": "blok1"}, "which this model does not have"),
    ("stitch-bad-lr", "stitch", {"a": A, "b": B, "lr": "-1"}, "This link asked for values the form cannot use"),
    ("stitch-bad-epochs", "stitch", {"a": A, "b": B, "epochs": "many"}, "This link asked for values"),
    ("stitch-unknown-run", "stitch", {"run": NO_RUN}, f"No run {NO_RUN!r}"),
    ("similarity-unknown-run", "similarity", {"run": NO_RUN}, f"No matrix run {NO_RUN!r}"),
    ("similarity-scheme-typo", "similarity", {"a": "tim:x", "b": B}, "did you mean timm:"),
    ("similarity-unknown-model", "similarity", {"a": A, "b": "zoo:cnn-digits-s9"}, "is not in the store"),
    ("traits-preset-typo", "traits", {"preset": "inheritence"}, "did you mean 'inheritance'"),
    ("traits-unknown-run", "traits", {"run": NO_RUN}, "has not been run yet"),
    ("traits-bad-seeds", "traits", {"preset": "connectivity", "seeds": "abc"}, "seeds=abc"),
    ("traits-too-many-seeds", "traits", {"preset": "connectivity", "seeds": "50"}, "seeds=50"),
    ("results-unknown-run", "results", {"run": NO_RUN}, f"No run {NO_RUN!r}"),
    ("models-scheme-typo", "models", {"ref": "tim:resnet18"}, "did you mean timm:"),
    ("assemble-unknown-model", "assemble", {"a": "zoo:cnn-digits-s9", "b": B}, "is not in the store"),
]


@pytest.mark.parametrize(("name", "page", "query", "says"), URLS, ids=[u[0] for u in URLS])
def test_a_bad_link_is_said_on_its_page_and_launches_nothing(app, name, page, query, says):
    at = app.run().switch_page(f"views/{page}.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    said = " ".join(e.value for kind in ("error", "warning", "info") for e in getattr(at, kind))
    assert says in said, said
    assert not ui.get_runner().list(active_only=True)  # nothing was launched by opening the link
