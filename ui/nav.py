"""The app's pages in one table: app.py builds its ``st.navigation`` from :data:`PAGES`, and the page that
shows each run kind (permalinks ``stitch?run=ID``, the job monitor, deep links) comes from the same rows,
so a page's title and URL live in one place."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ui.resources import get_store

__all__ = ["PageEntry", "PAGES", "PAGE_FOR_KIND", "PAGE_TITLES", "page_file", "follow_deep_link"]


@dataclass(frozen=True)
class PageEntry:
    """One page of the app (the arguments of its ``st.Page``) and the run kinds it makes."""

    file: str  # the page's script, relative to the repository root (views/<name>.py)
    title: str  # in the sidebar and in "Open on the <title> page" links
    icon: str
    url_path: str  # /<url_path>; ``views/<url_path>.py`` is its file
    default: bool = False  # the page at / (one only)
    kinds: tuple[str, ...] = ()  # run kinds this page launches and shows at <url_path>?run=ID


PAGES: tuple[PageEntry, ...] = (
    PageEntry("views/home.py", "Home", ":material/home:", "home", default=True),
    PageEntry("views/models.py", "Models", ":material/neurology:", "models", kinds=("zoo",)),
    PageEntry("views/stitch.py", "Stitch", ":material/cable:", "stitch", kinds=("stitch",)),
    PageEntry("views/similarity.py", "Similarity", ":material/grid_on:", "similarity",
              kinds=("matrix", "similarity")),
    PageEntry("views/traits.py", "Traits", ":material/timeline:", "traits", kinds=("sweep",)),
    PageEntry("views/assemble.py", "Assemble", ":material/extension:", "assemble", kinds=("assemble",)),
    PageEntry("views/language.py", "Language models", ":material/translate:", "language",
              kinds=("merge", "lmstitch", "lmdepth")),
    PageEntry("views/transfer.py", "Transfer", ":material/move_up:", "transfer", kinds=("transfer",)),
    PageEntry("views/lessons.py", "Lessons", ":material/school:", "lessons"),
    PageEntry("views/results.py", "Results", ":material/table_chart:", "results"),
    PageEntry("views/settings.py", "Settings", ":material/settings:", "settings"),
)

# url_path of the page that shows a run kind (permalinks, the job monitor, deep links); Results shows any other
PAGE_FOR_KIND: dict[str, str] = {kind: page.url_path for page in PAGES for kind in page.kinds}
PAGE_TITLES: dict[str, str] = {page.url_path: page.title for page in PAGES}  # url_path -> the page's title


def page_file(url_path: str) -> str:
    """The script of the page at ``url_path`` (what ``st.switch_page`` and ``st.page_link`` take)."""
    return next(page.file for page in PAGES if page.url_path == url_path)


def follow_deep_link(current_url_path: str) -> None:
    """Send a permalink that landed on Home to the page it names.

    On a freshly started server Streamlit does not know the pages yet when the
    first browser asks for /stitch?run=ID, so it runs the default page (Home)
    with the query string intact; this finishes the trip.
    """
    params = st.query_params.to_dict()
    if current_url_path != "home" or not params:
        return
    target = None
    if "run" in params:
        rec = get_store().lookup(params["run"])
        target = PAGE_FOR_KIND.get(rec.kind, "results") if rec is not None else "results"
    elif "lesson" in params:
        target = "lessons"
    elif "ref" in params:
        target = "models"
    elif "preset" in params:
        target = "traits"
    elif "a" in params or "b" in params:
        target = "stitch"
    if target is not None:
        st.switch_page(page_file(target), query_params=params)
