""""Copy as Python" and "Copy as CLI" under every run's header: the call and the command line that make that
very run again (the same run id), in a notebook or a shell; each code block has Streamlit's copy button."""

from __future__ import annotations

import streamlit as st

from stitchcore.api.reproduce import python_call
from stitchcore.cli.reproduce import command_line
from stitchcore.errors import StitchError
from stitchcore.jobs import JobSnapshot
from stitchcore.store.records import default_store_dir
from ui.resources import get_store
from ui.text import plain

__all__ = ["show_reproduce"]


def show_reproduce(snap: JobSnapshot) -> None:
    """An expander with the Python call and the command line that make ``snap``'s run (its store named when it is
    not the one a notebook or a shell would use by default)."""
    if snap.spec is None:  # a stored spec this version cannot read: nothing to write
        return
    root = get_store().root
    store = None if root.resolve() == default_store_dir().resolve() else str(root)
    with st.expander("Copy as Python or as a command line"):
        st.caption("Either makes this very run again (the same run id), so it comes back from the store at once; "
                   "a notebook needs `pip install .` of this project (or this checkout on its path).")
        for label, make, language in (("Python", _python, "python"), ("Command line", _cli, "bash")):
            try:
                st.code(make(snap, store), language=language, wrap_lines=True)
            except StitchError as exc:
                st.caption(f"{label}: {plain(str(exc))}")


def _python(snap: JobSnapshot, store: str | None) -> str:
    return f"import stitchcore\n\nrun = {python_call(snap.kind, snap.spec, store=store)}"


def _cli(snap: JobSnapshot, store: str | None) -> str:
    return command_line(snap.kind, snap.spec, store=store)
