"""StitchLab web app entry point (router only; pages live in pages/)."""

import streamlit as st

st.set_page_config(page_title="StitchLab", page_icon="🧵", layout="wide")


def home() -> None:
    st.title("StitchLab")
    st.write(
        "Model stitching workbench. The web pages are being built; meanwhile use the "
        "command line: `python -m stitchcore --help`."
    )


st.navigation([st.Page(home, title="Home", default=True)]).run()
