"""Every bad link a page takes says what is wrong on the page (an error, a warning or a note naming it), never a
traceback, and launches nothing: one table over the pages' URL parameters, each opened in a fresh session (some
on a viewer server, ``STITCHLAB_VIEWER=1``).

A link's value is shown as text: ``[Lesson moved](http://host/phish)`` or ``<img src=...>`` in any parameter is
no link and no image on the page (no Markdown element it reaches reads it as Markdown), and a value of 10,000
characters, a NUL, a newline, ``²`` or a 5,000-digit number is said in one short line."""

from __future__ import annotations

import pytest

import ui
from tests.plain_text_helpers import CODE_SPAN, LINK_OR_IMAGE, markdown_texts

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
NO_RUN = "deadbeefdeadbeef"
EVIL = "[Lesson moved](http://evil.example/phish) ![x](http://evil.example/b.png)"  # a link and a remote image
HTML = "<img src=http://evil.example/b.png><a href=http://evil.example/phish>x</a>"
LONG = "x" * 10_000
HUGE = "9" * 5_000  # int() of it raises ValueError (more than 4,300 digits)
IMAGES = "{images}"  # replaced by a small image folder (train/ and test/, two classes) made for the test
VIEWER = "viewer"  # the row runs on a server in viewer mode (STITCHLAB_VIEWER=1)

# (id, page, query, what the page must say: a substring of its errors, warnings and notes, mode)
URLS = [
    ("stitch-unknown-model", "stitch", {"a": "zoo:cnn-digits-s9", "b": B}, "zoo:cnn-digits-s9 is not in the store", ""),
    ("stitch-scheme-typo", "stitch", {"a": "tim:resnet18", "b": B}, "did you mean timm:", ""),
    ("stitch-cut-not-there", "stitch", {"a": A, "b": B, "cut_a": "blok1"}, "which this model does not have", ""),
    ("stitch-bad-lr", "stitch", {"a": A, "b": B, "lr": "-1"}, "This link asked for values the form cannot use", ""),
    ("stitch-bad-epochs", "stitch", {"a": A, "b": B, "epochs": "many"}, "This link asked for values", ""),
    ("stitch-unknown-run", "stitch", {"run": NO_RUN}, f"No run {NO_RUN!r}", ""),
    ("similarity-unknown-run", "similarity", {"run": NO_RUN}, f"No run {NO_RUN!r}", ""),
    ("similarity-scheme-typo", "similarity", {"a": "tim:x", "b": B}, "did you mean timm:", ""),
    ("similarity-unknown-model", "similarity", {"a": A, "b": "zoo:cnn-digits-s9"}, "is not in the store", ""),
    ("traits-preset-typo", "traits", {"preset": "inheritence"}, "did you mean 'inheritance'", ""),
    ("traits-unknown-run", "traits", {"run": NO_RUN}, "has not been run yet", ""),
    ("traits-bad-seeds", "traits", {"preset": "connectivity", "seeds": "abc"}, "seeds='abc'", ""),
    ("traits-too-many-seeds", "traits", {"preset": "connectivity", "seeds": "50"}, "seeds='50'", ""),
    ("results-unknown-run", "results", {"run": NO_RUN}, f"No run {NO_RUN!r}", ""),
    ("models-scheme-typo", "models", {"ref": "tim:resnet18"}, "did you mean timm:", ""),
    ("assemble-unknown-model", "assemble", {"a": "zoo:cnn-digits-s9", "b": B}, "is not in the store", ""),
    # Markdown and HTML in every page's parameters: said as text
    ("lessons-markdown-name", "lessons", {"lesson": EVIL}, "no lesson", ""),
    ("lessons-markdown-name-viewer", "lessons", {"lesson": EVIL}, "no lesson", VIEWER),
    ("lessons-html-name", "lessons", {"lesson": HTML}, "no lesson", ""),
    ("lessons-html-name-viewer", "lessons", {"lesson": HTML, "step": "2"}, "no lesson", VIEWER),
    ("lessons-markdown-control-viewer", "lessons", {"lesson": "two-seeds", "step": "2", "cut_a": EVIL},
     "is not one this step offers", VIEWER),
    ("lessons-html-control-viewer", "lessons", {"lesson": "two-seeds", "step": "2", "epochs": HTML},
     "is not a number", VIEWER),
    ("stitch-markdown-model", "stitch", {"a": EVIL, "b": B}, "unknown model source", ""),
    ("stitch-markdown-model-viewer", "stitch", {"a": A, "b": EVIL}, "unknown model source", VIEWER),
    ("stitch-html-cut", "stitch", {"a": A, "b": B, "cut_a": HTML}, "which this model does not have", ""),
    ("stitch-markdown-cut", "stitch", {"a": A, "b": B, "cut_b": EVIL}, "which this model does not have", ""),
    ("stitch-markdown-objective", "stitch", {"a": A, "b": B, "objective": EVIL}, "objective=", ""),
    ("stitch-markdown-dataset", "stitch", {"a": A, "b": B, "dataset": EVIL}, "unknown dataset", ""),
    ("stitch-markdown-run", "stitch", {"run": EVIL}, "No run", ""),
    ("similarity-markdown-run", "similarity", {"run": EVIL, "cka": HTML}, "No run", ""),
    ("similarity-markdown-run-viewer", "similarity", {"run": HTML}, "No run", VIEWER),
    ("similarity-markdown-model", "similarity", {"a": EVIL, "b": B}, "unknown model source", ""),
    ("similarity-markdown-dataset", "similarity", {"a": A, "b": B, "dataset": HTML}, "unknown dataset", ""),
    ("traits-markdown-preset", "traits", {"preset": EVIL}, "unknown preset", ""),
    ("traits-markdown-preset-viewer", "traits", {"preset": HTML}, "unknown preset", VIEWER),
    ("traits-markdown-run", "traits", {"run": EVIL}, "has not been run yet", ""),
    ("traits-markdown-seeds", "traits", {"preset": "connectivity", "seeds": EVIL}, "seeds=", ""),
    ("results-markdown-run", "results", {"run": EVIL}, "No run", ""),
    ("results-markdown-run-viewer", "results", {"run": HTML}, "No run", VIEWER),
    ("models-markdown-ref", "models", {"ref": EVIL}, "unknown model source", ""),
    ("models-markdown-ref-viewer", "models", {"ref": HTML}, "unknown model source", VIEWER),
    ("models-markdown-run", "models", {"run": EVIL}, "No run", ""),
    ("assemble-markdown-model", "assemble", {"a": EVIL, "b": B}, "unknown model source", ""),
    ("assemble-markdown-run", "assemble", {"run": HTML}, "No run", ""),
    ("language-markdown-run", "language", {"run": EVIL}, "No run", ""),
    ("language-markdown-run-viewer", "language", {"run": HTML}, "No run", VIEWER),
    # numbers no int() takes, huge numbers, NUL bytes, newlines, 10 KB values: one short line, no traceback
    # (a lesson's step opened on a server that computes queues the step's own run: these open it on a viewer)
    ("lessons-superscript-step-viewer", "lessons", {"lesson": "two-seeds", "step": "²"},
     "This lesson has steps 1 to 3, not '²'", VIEWER),
    ("lessons-huge-step-viewer", "lessons", {"lesson": "two-seeds", "step": HUGE}, "5,000 characters", VIEWER),
    ("lessons-nul-step-viewer", "lessons", {"lesson": "two-seeds", "step": "1\x00"}, "This lesson has steps", VIEWER),
    ("lessons-huge-control-viewer", "lessons", {"lesson": "two-seeds", "step": "2", "epochs": HUGE},
     "From the link: Adapter training epochs", VIEWER),
    ("lessons-long-name", "lessons", {"lesson": LONG}, "no lesson", ""),
    ("stitch-superscript-epochs", "stitch", {"a": A, "b": B, "epochs": "²"}, "epochs='²' is not a number", ""),
    ("stitch-huge-epochs", "stitch", {"a": A, "b": B, "epochs": HUGE}, "5,000 characters", ""),
    ("stitch-infinite-lr", "stitch", {"a": A, "b": B, "lr": "1e999"}, "is not a finite number", ""),
    ("stitch-nan-seed", "stitch", {"a": A, "b": B, "seed": "nan"}, "seed=nan is not a finite number: using 0", ""),
    ("stitch-nul-cut", "stitch", {"a": A, "b": B, "cut_a": "block1\x00"}, "which this model does not have", ""),
    ("stitch-long-run", "stitch", {"run": LONG}, "10,000 characters", ""),
    ("stitch-newline-run", "stitch", {"run": "x\n# Moved\n[here](http://evil.example)"}, "No run", ""),
    ("stitch-imagefolder-huge-size", "stitch", {"a": A, "b": B, "dataset": f"imagefolder:{IMAGES}?size=1000000000"},
     "size=1000000000", ""),
    ("similarity-imagefolder-huge-size", "similarity",
     {"a": A, "b": B, "dataset": f"imagefolder:{IMAGES}?size=1000000000x8"}, "size=1000000000", ""),
    ("traits-superscript-seeds", "traits", {"preset": "connectivity", "seeds": "²"}, "seeds='²'", ""),
    ("traits-huge-seeds", "traits", {"preset": "connectivity", "seeds": HUGE}, "5,000 characters", ""),
    ("results-long-run", "results", {"run": LONG}, "10,000 characters", ""),
    ("results-nul-run", "results", {"run": "dead\x00beef"}, "No run", ""),
    ("models-long-run", "models", {"run": LONG}, "10,000 characters", ""),
    ("assemble-long-run", "assemble", {"run": LONG}, "10,000 characters", ""),
    ("language-nul-run", "language", {"run": "\x00"}, "No run", ""),
]

@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A tiny image folder: train/ and test/, two classes of one 8x8 image each."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    for split in ("train", "test"):
        for cls in ("a", "b"):
            (root / split / cls).mkdir(parents=True)
            Image.new("RGB", (8, 8)).save(root / split / cls / "x.png")
    return root


@pytest.mark.parametrize(("name", "page", "query", "says", "mode"), URLS, ids=[u[0] for u in URLS])
def test_a_bad_link_is_said_on_its_page_and_launches_nothing(app, monkeypatch, images, name, page, query, says,
                                                             mode):
    if mode == VIEWER:
        monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = app.run().switch_page(f"views/{page}.py")
    at.query_params.update({k: v.replace(IMAGES, str(images)) for k, v in query.items()})
    at.run()
    assert not at.exception, at.exception
    notes = [e.value for kind in ("error", "warning", "info") for e in getattr(at, kind)]
    said = " ".join(notes)
    assert says in said, said
    assert all(len(note) < 2_000 for note in notes), [len(n) for n in notes]  # a 10 KB value: its start, its length
    assert not ui.get_runner().list(active_only=True)  # nothing was launched by opening the link
    for text in markdown_texts(at):  # a link's [x](http://...) or <img> is text, never a link or an image
        assert not LINK_OR_IMAGE.search(text), text


def test_the_markdown_check_finds_a_link():
    """The table's check is not blind: a link, an image and raw HTML as Streamlit would render them are found,
    the same text escaped by ui.plain is not."""
    for raw in (EVIL, HTML, "see http://evil.example", "![x](b.png)"):
        assert LINK_OR_IMAGE.search(raw)
        assert not LINK_OR_IMAGE.search(ui.plain(raw))
        assert not LINK_OR_IMAGE.search(CODE_SPAN.sub("", ui.code_span(raw)))
    assert not LINK_OR_IMAGE.search("[the run](results?run=deadbeefdeadbeef)")  # a link within the app
