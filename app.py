"""StitchLab web app: the router (pages live in views/), sidebar job monitor and device.

The folder is not called pages/: with a pages/ folder, Streamlit 1.67 serves a deep link
(/stitch?run=ID) on a freshly started server as the bare page file, skipping this router.
"""

import streamlit as st

import ui

st.set_page_config(page_title="StitchLab", page_icon="🧵", layout="wide")  # pages repeat it (ui.page_setup)

PAGES = [
    st.Page("views/home.py", title="Home", icon=":material/home:", url_path="home", default=True),
    st.Page("views/models.py", title="Models", icon=":material/neurology:", url_path="models"),
    st.Page("views/stitch.py", title="Stitch", icon=":material/cable:", url_path="stitch"),
    st.Page("views/similarity.py", title="Similarity", icon=":material/grid_on:", url_path="similarity"),
    st.Page("views/traits.py", title="Traits", icon=":material/timeline:", url_path="traits"),
    st.Page("views/assemble.py", title="Assemble", icon=":material/extension:", url_path="assemble"),
    st.Page("views/language.py", title="Language models", icon=":material/translate:", url_path="language"),
    st.Page("views/results.py", title="Results", icon=":material/table_chart:", url_path="results"),
    st.Page("views/settings.py", title="Settings", icon=":material/settings:", url_path="settings"),
]

page = st.navigation(PAGES)
ui.follow_deep_link(page.url_path)
with st.sidebar:
    if ui.viewer_mode():
        st.info("Viewer mode: results only, no new jobs.")
    ui.job_monitor()
page.run()
